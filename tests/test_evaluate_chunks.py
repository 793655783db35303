"""The evaluator reads and judges rows a chunk at a time (``Evaluator.chunk_rows``): only a
chunk's windows are decoded at once. What every rule decides must not depend on it: a fleet
corpus with incidents of every kind, scan by scan through one window store, evaluated whole
and in chunks of a few rows (a group's rows always in one chunk, since some rules pool a
group's partitions), gives the same arrays, group results and ``for`` state at every scan, with
the store's rows in their order and shuffled (a group's rows apart: the other chunking path).
The store's evidence, advanced a chunk of rows at a time at each scan
(``evidence.UPDATE_CHUNK_ROWS``), is the same as advanced whole."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import yaml

from notifier.history import read_history
from notifier.rules import Evaluator, RulesConfig, evidence, parse_rules, scans
from notifier.rules.evaluate import group_chunks
from notifier.rules.results import Evaluation
from notifier.rules.state import RULE_STATE_FIELDS
from notifier.rules.step import StoreStep
from notifier.rules.store import WindowStore
from notifier.synth.production import synthesize_fleet

ROOT = Path(__file__).resolve().parents[1]

EXTRA_RULES = """
- {name: lag-partition, kind: lag, threshold: 50, clear_below: 20}
- {name: lag-group, kind: lag, threshold: 200, scope: group, for: 20s}
- {name: gone, kind: consumers_gone}
- {name: storm, kind: rebalance_storm, max_changes: 1}
- {name: storm-lasting, kind: rebalance_storm, max_changes: 1, lasting: 30s, min_lag_seconds: 5s}
- {name: retention-pace, kind: retention, warn_within: 1h}
- {name: seconds, kind: lag_seconds, threshold: 20s, catching_up_within: 5m,
   overrides: [{match: {group: '.*[02468]'}, threshold: 40s}]}
- {name: stuck-any, kind: stuck_rebalance, samples: 2}
"""


def _rules() -> RulesConfig:
    data = yaml.safe_load((ROOT / "rules.yaml").read_text())
    data["burrow"]["enabled"] = True
    data["rules"] += yaml.safe_load(EXTRA_RULES)
    return parse_rules(data, "test rules")


def _same(a: np.ndarray, b: np.ndarray) -> bool:
    a, b = np.asarray(a), np.asarray(b)
    if a.dtype != b.dtype or a.shape != b.shape:
        return False
    if a.dtype.kind == "f":
        return bool(np.all((a == b) | (np.isnan(a) & np.isnan(b))))
    return np.array_equal(a, b)


def _assert_same(chunked: Evaluation, whole: Evaluation) -> None:
    for name in ("rows", "gids", "status", "complete", "burrow_complete", "current_lag",
                 "lag_seconds", "group_ids", "group_status", "group_partial", "group_complete",
                 "group_burrow_complete", "group_total_lag", "group_max_lag_seconds",
                 "usual_wait_ms", "waits_learned"):  # fmt: skip
        assert _same(getattr(chunked, name), getattr(whole, name)), name
    for field in type(whole.burrow).__dataclass_fields__:
        assert _same(getattr(chunked.burrow, field), getattr(whole.burrow, field)), field
    for table in ("row_severity", "group_fired", "detail"):
        got, want = getattr(chunked, table), getattr(whole, table)
        assert got.keys() == want.keys(), table
        for name in want:
            assert _same(got[name], want[name]), (table, name)


def _assert_same_state(chunked: Evaluator, whole: Evaluator) -> None:
    for name, state in whole.state.items():
        for field in RULE_STATE_FIELDS:
            assert _same(getattr(chunked.state[name], field), getattr(state, field)), name


@pytest.fixture(scope="module")
def fleet_history(tmp_path_factory: pytest.TempPathFactory):
    out = tmp_path_factory.mktemp("fleet") / "history"
    synthesize_fleet(out, groups=16, partitions=3, hours=1.0, seed=5, clusters=1)
    return read_history(out)


@pytest.mark.parametrize("shuffled", [False, True], ids=["store-order", "shuffled"])
def test_chunked_evaluation_equals_whole_evaluation(fleet_history, shuffled: bool) -> None:
    rules = _rules()
    store = WindowStore(rules.window, scan_interval_s=10.0)
    step = StoreStep(store)
    whole = Evaluator(rules, store, chunk_rows=10**9)
    chunked = Evaluator(rules, store, chunk_rows=5)
    rng = np.random.default_rng(3)
    fired = 0
    evaluated = 0
    for scan in scans(fleet_history):
        step.advance(scan)
        rows = store.alive_rows()
        if rows.size == 0:
            continue
        if shuffled:
            rows = rng.permutation(rows)
        with np.errstate(all="ignore"):
            want = whole.evaluate(scan.ts, rows)
            got = chunked.evaluate(scan.ts, rows)
        _assert_same(got, want)
        evaluated += 1
        fired += int(np.count_nonzero(want.group_status > 0))
        if len(group_chunks(want.gids, 5)) < 2:
            pytest.fail("the store should need several chunks of 5 rows")
    _assert_same_state(chunked, whole)
    print(f"{evaluated} evaluations, {fired} group-results firing")
    assert evaluated > 300
    assert fired > 0  # the corpus's incidents fired rules, so the comparison judged something


def test_evidence_advanced_in_chunks_equals_evidence_advanced_whole(
    fleet_history, monkeypatch: pytest.MonkeyPatch
) -> None:
    rules = _rules()
    whole, chunked = (WindowStore(rules.window, scan_interval_s=10.0) for _ in range(2))
    steps = {id(whole): StoreStep(whole), id(chunked): StoreStep(chunked)}
    for scan in scans(fleet_history):
        for store, chunk in ((whole, 10**9), (chunked, 4)):
            monkeypatch.setattr(evidence, "UPDATE_CHUNK_ROWS", chunk)
            steps[id(store)].advance(scan)
        rows = whole.rows_in_use
        assert chunked.rows_in_use == rows
        for name in whole.row_column_names:
            assert _same(chunked.column(name)[:rows], whole.column(name)[:rows]), name


def test_group_chunks_keep_each_group_whole() -> None:
    rng = np.random.default_rng(0)
    for _ in range(200):
        sizes = rng.integers(1, 9, size=rng.integers(1, 30))
        gids = np.repeat(rng.permutation(sizes.size), sizes)
        if rng.random() < 0.5:
            gids = rng.permutation(gids)
        size = int(rng.integers(1, 12))
        chunks = group_chunks(gids, size)
        positions = [np.arange(gids.size)[part] for part in chunks]
        joined = np.concatenate(positions)
        assert np.array_equal(np.sort(joined), np.arange(gids.size))  # each position once
        for part in positions:
            assert np.all(np.diff(part) > 0)
            assert part.size <= max(size, int(np.bincount(gids[part]).max()))
        owner = {int(g): i for i, part in enumerate(positions) for g in gids[part]}
        for i, part in enumerate(positions):
            assert all(owner[int(g)] == i for g in gids[part])
