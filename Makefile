# Two commands a new user runs first (see README): `make demo` and `make test`.
# Each bootstraps its own virtualenv in .venv from pyproject.toml: the demo installs the package
# alone, the tests add the test extra (which builds gssapi against the system's Kerberos), after
# tests/setup-system.sh has installed the system programs the tests need.

PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
DEMO_STAMP := $(VENV)/.installed-demo
TEST_STAMP := $(VENV)/.installed-test
# The tests run in two processes (pytest-xdist): most of their time is spent waiting on brokers,
# scans and subprocesses, not computing. tests/xdist_groups.py keeps the tests of each shared
# broker, of Spark and of each module on one process, and hands the long modules out first.
TEST_WORKERS ?= 2

.PHONY: demo replay test system-deps lint wheel-check bench bench-full clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip

$(DEMO_STAMP): pyproject.toml | $(BIN)/python
	$(BIN)/pip install --quiet -e .
	touch $(DEMO_STAMP)

$(TEST_STAMP): pyproject.toml | $(BIN)/python system-deps
	$(BIN)/pip install --quiet -e '.[test]'
	touch $(TEST_STAMP)

# As root on Debian it apt-installs what is missing (Kerberos, promtool, Chromium, Java, Maven);
# elsewhere it says what to install. Only looks when everything is there.
system-deps:
	bash tests/setup-system.sh

demo: $(DEMO_STAMP)
	$(BIN)/notifier demo --duration 120 --local-receivers --data-dir data/demo

replay: $(DEMO_STAMP)
	$(BIN)/notifier replay --history examples/sample-history.csv --rules rules.yaml

test: system-deps $(TEST_STAMP)
	$(BIN)/ruff check notifier tests benchmarks examples
	$(BIN)/mypy
	$(BIN)/notifier check rules.yaml
	$(BIN)/notifier test-rules examples/*.test.yaml
	$(BIN)/pytest -q -n $(TEST_WORKERS) --dist loadgroup --no-loadscope-reorder

lint: $(TEST_STAMP)
	$(BIN)/ruff check notifier tests benchmarks examples
	$(BIN)/mypy
	$(BIN)/ruff format --check notifier tests benchmarks examples

# Build the wheel, install it into a fresh virtualenv outside the tree, run it from an empty dir.
wheel-check:
	PYTHON=$(PYTHON) bash .ci/wheel-check

bench: $(TEST_STAMP)
	for b in evaluate scan notify api backtest alert_quality fleet vs_burrow faults; do $(BIN)/python benchmarks/$$b.py || exit 1; done

bench-full: $(TEST_STAMP)
	for b in evaluate scan notify api backtest alert_quality fleet vs_burrow faults; do $(BIN)/python benchmarks/$$b.py --full || exit 1; done

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache .hypothesis
