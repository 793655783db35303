# Two commands a new user runs first (see README): `make demo` and `make test`.
# Each bootstraps its own virtualenv in .venv from pyproject.toml.

PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: demo replay test lint wheel-check bench bench-full clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[test]'
	touch $(STAMP)

demo: $(STAMP)
	$(BIN)/notifier demo --duration 120 --local-receivers --data-dir data/demo

replay: $(STAMP)
	$(BIN)/notifier replay --history examples/sample-history.csv --rules rules.yaml

test: $(STAMP)
	$(BIN)/ruff check notifier tests benchmarks examples
	$(BIN)/mypy
	$(BIN)/notifier check rules.yaml
	$(BIN)/notifier test-rules examples/*.test.yaml
	$(BIN)/pytest -q

lint: $(STAMP)
	$(BIN)/ruff check notifier tests benchmarks examples
	$(BIN)/mypy
	$(BIN)/ruff format --check notifier tests benchmarks examples

# Build the wheel, install it into a fresh virtualenv outside the tree, run it from an empty dir.
wheel-check:
	PYTHON=$(PYTHON) bash .ci/wheel-check

bench: $(STAMP)
	for b in evaluate scan notify api backtest alert_quality fleet; do $(BIN)/python benchmarks/$$b.py || exit 1; done

bench-full: $(STAMP)
	for b in evaluate scan notify api backtest alert_quality fleet; do $(BIN)/python benchmarks/$$b.py --full || exit 1; done

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache .hypothesis
