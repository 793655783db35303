"""The window store's narrow columns (notifier/rules/narrow.py) hold exactly what int64 columns
held: the store driven through the same random scans as a plain int64 store (the store as it
was before, kept here as a reference) ends with the same windows, rings, LEO tables and
evidence, and evaluates to the same findings, for every input: offsets near 2^63, resets to 0
on huge partitions, jumps past 2^31, NULLs, idle gaps longer than 24 days of milliseconds and
clocks that go backwards; and with a dictionary of scan times too small for them (its codes
collected and its rows spilled), int8 members past 127 and whole-ms floats that are not."""

from __future__ import annotations

import dataclasses
import json
import math
import shutil
from pathlib import Path

import numpy as np
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from notifier.config import WindowSettings
from notifier.rules import ClusterPipeline, Evaluator, ScanColumns, WindowStore, load_rules
from notifier.rules import store as store_module
from notifier.rules.kinds.progress import SPELL_ABRUPT
from notifier.rules.narrow import Bases, Dictionary, NarrowColumn, WholeFloat
from notifier.rules.store import TABLE_COLUMN_NAMES, Column
from notifier.service import checkpoint

from .checkpoints import make_old_layout

RULES = load_rules(Path(__file__).resolve().parents[1] / "rules.yaml")
FIXTURES = Path(__file__).resolve().parent / "checkpoints"
KEYS = [("g1", "t", 0), ("g1", "t", 1), ("g2", "t", 0), ("g2", "u", 0)]
I64_MAX = 2**63 - 1


class PlainStore(WindowStore):
    """The reference: every column a plain numpy array of its declared dtype (int64 offsets
    and times), as the store held them before narrow columns."""

    def _alloc(self, columns: tuple[Column, ...], kept: int, capacity: int) -> None:
        plain = tuple(dataclasses.replace(c, narrow=None) for c in columns)
        super()._alloc(plain, kept, capacity)


offsets = st.one_of(
    st.integers(0, 1000),
    st.integers(2**31 - 3, 2**31 + 3),
    st.integers(2**32, 2**62),
    st.integers(I64_MAX - 2**20, I64_MAX),
    st.just(0),
    st.just(-1),
    st.integers(-(2**63), -(2**63) + 2**20),
    st.integers(-(2**63), -2),
)
steps = st.one_of(
    st.integers(1, 30_000),
    st.integers(2**31 - 5, 2**31 + 5),
    st.integers(2**32, 2**45),
    st.integers(-20_000, 0),
)
scan_rows = st.lists(
    st.tuples(st.integers(0, len(KEYS) - 1), offsets, offsets, offsets, st.integers(0, 5),
              st.integers(0, 70_000), st.integers(0, 3)),
    min_size=0, max_size=len(KEYS),
)  # fmt: skip


def _scan(ts: int, rows: list[tuple]) -> ScanColumns:
    chosen = {}
    for key, committed, leo, log_start, state, members, member_hash in rows:
        chosen[key] = (committed, leo, log_start, state, members, member_hash)
    keys = sorted(chosen)
    values = [chosen[k] for k in keys]
    return ScanColumns(
        cluster="c",
        ts=ts,
        group=[KEYS[k][0] for k in keys],
        topic=[KEYS[k][1] for k in keys],
        partition=np.asarray([KEYS[k][2] for k in keys], dtype=np.int32),
        committed=np.asarray([v[0] for v in values], dtype=np.int64),
        log_end=np.asarray([v[1] for v in values], dtype=np.int64),
        log_start=np.asarray([v[2] for v in values], dtype=np.int64),
        state=np.asarray([v[3] for v in values], dtype=np.int8),
        members=np.asarray([v[4] for v in values], dtype=np.int32),
        member_hash=np.asarray([v[5] for v in values], dtype=np.int64),
    )


def _same(a: np.ndarray, b: np.ndarray) -> bool:
    a, b = np.asarray(a), np.asarray(b)
    if a.dtype.kind == "f":
        return a.shape == b.shape and bool(np.all((a == b) | (np.isnan(a) & np.isnan(b))))
    return np.array_equal(a, b)


def _assert_same_store(narrow: WindowStore, plain: WindowStore) -> None:
    rows, tables = narrow.rows_in_use, len(narrow.table_keys())
    assert rows == plain.rows_in_use
    for name in narrow.row_column_names:
        got, want = narrow.column(name)[:rows], plain.column(name)[:rows]
        assert got.dtype == want.dtype, name
        assert _same(got, want), name
    for name in TABLE_COLUMN_NAMES:
        assert _same(getattr(narrow, name)[:tables], getattr(plain, name)[:tables]), name
    for name in ("latest_committed", "latest_leo", "latest_log_start", "latest_members"):
        assert _same(getattr(narrow, name)[:rows], getattr(plain, name)[:rows]), name
    for row in narrow.alive_rows().tolist():
        assert narrow.ring(row) == plain.ring(row)
        assert narrow.samples(row) == plain.samples(row)
        assert narrow.leo_table(row) == plain.leo_table(row)


def _assert_same_evaluation(narrow: Evaluator, plain: Evaluator, now: int) -> None:
    if narrow.store.alive_rows().size == 0:
        return
    with np.errstate(all="ignore"):
        got, want = narrow.evaluate(now), plain.evaluate(now)
    for name in ("rows", "status", "complete", "burrow_complete", "current_lag", "lag_seconds",
                 "group_status", "group_partial", "group_total_lag", "group_max_lag_seconds",
                 "usual_wait_ms"):  # fmt: skip
        assert _same(getattr(got, name), getattr(want, name)), name
    for name in got.row_severity:
        assert _same(got.row_severity[name], want.row_severity[name]), name
    for name in got.group_fired:
        assert _same(got.group_fired[name], want.group_fired[name]), name
    for name in ("status", "stopped", "rewind_index", "stalled", "lag_not_decreasing"):
        assert _same(getattr(got.burrow, name), getattr(want.burrow, name)), name


def _store_with_time_codes(settings_: WindowSettings, time_codes: int | None) -> WindowStore:
    """A narrow store whose dictionary of scan times has ``time_codes`` codes (None: all 65,536
    of its uint16; a few: it runs out, collects the codes no row holds any more, and spills
    the rows whose times still find none)."""
    original = store_module.Dictionary

    def small(code: object) -> Dictionary:
        return original(code, size=time_codes)

    store_module.Dictionary = small  # type: ignore[assignment,misc]
    try:
        return WindowStore(settings_, 10.0)
    finally:
        store_module.Dictionary = original  # type: ignore[misc]


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    start=st.integers(0, 2**42),
    scans=st.lists(st.tuples(steps, scan_rows), min_size=1, max_size=16),
    commits=st.lists(
        st.tuples(st.integers(0, len(KEYS) - 1), offsets, st.integers(-(2**40), 2**42)),
        max_size=4,
    ),
    forget=st.lists(st.integers(0, 5), max_size=2),
    time_codes=st.sampled_from([None, 6, 12]),
)
# falling_behind read its run's start after writing it: a view in the plain store, a copy in
# the narrow one, so a spell began in one and not the other.
@example(start=0, scans=[(1, [(0, 0, 0, 0, 0, 0, 0)]), (1, [(0, -(2**63) + 2**20, 0, 0, 0, 0, 0)])],
         commits=[], forget=[], time_codes=None)  # fmt: skip
def test_narrow_store_holds_and_evaluates_exactly_what_int64_columns_held(
    start, scans, commits, forget, time_codes
):
    settings_ = WindowSettings(intervals=4, lag_time_points=5)
    narrow, plain = _store_with_time_codes(settings_, time_codes), PlainStore(settings_, 10.0)
    judge_narrow, judge_plain = Evaluator(RULES, narrow), Evaluator(RULES, plain)
    ts = start
    with np.errstate(over="ignore", invalid="ignore"):
        for i, (step, rows) in enumerate(scans):
            ts += step
            scan = _scan(ts, rows)
            got, want = narrow.ingest_scan(scan), plain.ingest_scan(scan)
            assert np.array_equal(got, want)
            assert narrow.leo_resets == plain.leo_resets
            if i in forget:
                alive = narrow.alive_rows()[:1]
                narrow.remove_rows(alive.tolist())
                plain.remove_rows(alive.tolist())
            _assert_same_evaluation(judge_narrow, judge_plain, ts)
        # Commits replayed out of order (Burrow's insertion into the ring).
        for key, offset, order in commits:
            row = narrow.row("c", *KEYS[key])
            if row is None:
                continue
            for store in (narrow, plain):
                store.add_commits(np.asarray([row]), np.asarray([offset]), np.asarray([order]),
                                  np.asarray([order]), np.asarray([offset]))  # fmt: skip
        _assert_same_store(narrow, plain)
        _assert_same_evaluation(judge_narrow, judge_plain, ts)
        expired_narrow, expired_plain = narrow.expire(ts), plain.expire(ts)
        assert expired_narrow == expired_plain
        _assert_same_store(narrow, plain)


@settings(max_examples=200, deadline=None)
@given(
    base_values=st.lists(offsets, min_size=1, max_size=3),
    writes=st.lists(
        st.tuples(st.integers(0, 2), st.lists(offsets, min_size=3, max_size=3)), max_size=12
    ),
    pushes=st.lists(st.tuples(st.integers(0, 2), offsets), max_size=12),
)
def test_a_narrow_column_reads_back_every_int64_written(base_values, writes, pushes):
    bases = Bases()
    window = NarrowColumn("w", 3, -1, bases=bases)
    single = NarrowColumn("s", None, -(2**62), bases=bases)
    small = NarrowColumn("m", 3, 0, dtype=np.int32, code=np.int16)
    for column in (window, single, small):
        column.resize(3)
    bases.resize(3)
    reference = np.full((3, 3), -1, dtype=np.int64)
    reference_single = np.full(3, -(2**62), dtype=np.int64)
    for row, values in writes:
        window[row] = values
        reference[row] = values
        single[row] = values[0]
        reference_single[row] = values[0]
    for row, value in pushes:
        window.push(np.asarray([row]), value)
        reference[row, :-1] = reference[row, 1:].copy()
        reference[row, -1] = value
    assert np.array_equal(window[:3], reference)
    assert np.array_equal(window[np.arange(3), -1], reference[:, -1])
    assert np.array_equal(single[:3], reference_single)
    for row in range(3):
        assert int(window[row, 0]) == int(reference[row, 0])
    members = np.asarray([[0, 1, 2**15 - 1], [2**15, -(2**15), 2**31 - 1], [7, 0, -1]])
    small[:3] = members
    read = small[:3]
    assert read.dtype == np.int32 and np.array_equal(read, members)
    assert math.isfinite(float(window.nbytes))


times = st.one_of(
    st.integers(1_800_000_000_000, 1_800_000_000_000 + 8), st.just(0), st.just(-1), offsets
)
whole_ms = st.one_of(
    st.integers(-(2**31), 2**31).map(float),
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from([0.0, -0.0, 0.5, 2.0**53, -(2.0**63), float("nan")]),
)


@settings(max_examples=300, deadline=None)
@given(
    size=st.integers(2, 9),
    writes=st.lists(
        st.tuples(st.integers(0, 2), st.lists(times, min_size=3, max_size=3)), max_size=12
    ),
    pushes=st.lists(st.tuples(st.lists(st.integers(0, 2), max_size=3, unique=True), times),
                    max_size=12),
    slots=st.lists(st.tuples(st.integers(0, 2), st.integers(-3, 2), times), max_size=6),
    members=st.lists(st.tuples(st.integers(0, 2), st.integers(-(2**31), 2**31 - 1)),
                     max_size=8),
    floats=st.lists(st.tuples(st.integers(0, 2), whole_ms), max_size=8),
)  # fmt: skip
def test_dictionary_int8_and_whole_float_columns_read_back_every_value_written(
    size, writes, pushes, slots, members, floats
):
    """The same writes to a plain array and to each narrow column: the scan-time dictionary
    (a few codes: collected, re-used and run out of), int8 codes, whole floats."""
    dictionary = Dictionary(np.uint8, size=size + 2)
    window = NarrowColumn("w", 3, -1, dictionary=dictionary)
    single = NarrowColumn("s", None, -(2**62), dictionary=dictionary)
    small = NarrowColumn("m", 3, 0, dtype=np.int32, code=np.int8)
    whole = NarrowColumn("f", None, 0.0, dtype=WholeFloat)
    for column in (window, single, small, whole):
        column.resize(3)
    reference = np.full((3, 3), -1, dtype=np.int64)
    reference_single = np.full(3, -(2**62), dtype=np.int64)
    reference_small = np.zeros((3, 3), dtype=np.int32)
    reference_whole = np.zeros(3)
    for row, values in writes:
        window[row] = values
        reference[row] = values
        single[np.asarray([row])] = values[1]
        reference_single[row] = values[1]
    for rows, value in pushes:
        window.push(np.asarray(rows, dtype=np.int64), value)
        for row in rows:
            reference[row, :-1] = reference[row, 1:].copy()
            reference[row, -1] = value
    for row, slot, value in slots:
        window[np.asarray([row]), slot] = value
        reference[row, slot] = value
    assert np.array_equal(window[:3], reference)
    assert np.array_equal(window[np.arange(3), -1], reference[:, -1])
    assert np.array_equal(single[:3], reference_single)
    for row, value in members:
        small[np.asarray([row]), -1] = value
        reference_small[row, -1] = value
        small.push(np.asarray([row]), value // 2)
        reference_small[row, :-1] = reference_small[row, 1:].copy()
        reference_small[row, -1] = value // 2
    read = small[:3]
    assert read.dtype == np.int32 and np.array_equal(read, reference_small)
    for row, value in floats:
        whole[np.asarray([row])] = np.asarray([value])
        reference_whole[row] = value
    got = whole[:3]
    assert got.dtype == np.float64
    # Bit for bit: NaN, and -0.0 apart from 0.0.
    assert got.tobytes() == reference_whole.tobytes()


def test_a_dictionary_frees_the_codes_no_row_holds_and_spills_what_finds_none():
    dictionary = Dictionary(np.uint8, size=5)  # 4 codes: the fill's and 3 times
    column = NarrowColumn("t", 2, -1, dictionary=dictionary)
    column.resize(3)
    column[0] = [10, 20]
    column[1] = [20, 30]
    assert not column.spilled
    column[2] = [40, 50]  # two more: no code left for 40 or 50 until 10 or 30 is let go
    assert list(column.spilled) == [2]
    column[0] = [20, 20]
    column[1] = [20, 20]
    column[2] = [40, 50]  # 10 and 30 are collected, 40 and 50 take their codes
    assert not column.spilled
    assert column[:3].tolist() == [[20, 20], [20, 20], [40, 50]]
    assert column.nbytes == 3 * 2


def test_a_difference_that_wraps_around_int64_is_never_taken_for_a_small_code():
    bases = Bases()
    column = NarrowColumn("c", 2, -1, bases=bases)
    column.resize(1)
    bases.resize(1)
    column[0] = [-(2**63), -(2**63) + 1]  # the row's base moves down there
    column.push(np.asarray([0]), I64_MAX)  # 2^64 - 1 above it: wraps to -1 in int64
    assert column[0].tolist() == [-(2**63) + 1, I64_MAX]
    column[0, 0] = I64_MAX - 5
    assert column[0].tolist() == [I64_MAX - 5, I64_MAX]
    column[np.asarray([0]), -1] = -(2**63)
    assert column[0].tolist() == [I64_MAX - 5, -(2**63)]


def _read_back_text(pipeline, now: int, evidence: set[str] | None = None) -> str:
    """What the pipeline reads back, as the fixture's text; ``evidence``: only these columns
    (those the old layout's kinds kept), after checking every other one is still at its fill."""
    read = make_old_layout.read_back(pipeline, now)
    if evidence is not None:
        fills = {c.name: c.fill for c in pipeline.store.row_columns}
        fills |= {c.name: c.fill for c in pipeline.store.group_columns.values()}
        for row in read["rows"].values():
            newer = {k: v for k, v in row["evidence"].items() if k not in evidence}
            assert all(v == fills[k] for k, v in newer.items()), newer
            row["evidence"] = {k: v for k, v in row["evidence"].items() if k in evidence}
    return json.dumps(read | {"now": now}, indent=1, sort_keys=True) + "\n"


def _as_held(text: str, store: WindowStore) -> str:
    """The fixture's text with each evidence value as today's store holds it: rates and usual
    waits were float64 when it was written, float32 since."""
    fixture = json.loads(text)
    single = {name for name, c in store.evidence.items() if c.dtype == np.float32}
    for row in fixture["rows"].values():
        for name in single & set(row["evidence"]):
            row["evidence"][name] = float(np.float32(row["evidence"][name]))
        # Whether a spell began abruptly is a bit of e_memberless_how since.
        abrupt = row["evidence"].pop("e_memberless_abrupt")
        row["evidence"]["e_memberless_how"] = SPELL_ABRUPT if abrupt else 0
    return json.dumps(fixture, indent=1, sort_keys=True) + "\n"


def test_a_checkpoint_of_the_int64_layout_restores_and_the_narrow_layout_round_trips(tmp_path):
    """tests/checkpoints/old-layout.checkpoint was written by the store before narrow columns
    (tests/checkpoints/make_old_layout.py, run on main at b44ae27), with what it read back."""
    expected = _as_held(
        (FIXTURES / "old-layout.json").read_text(), ClusterPipeline(RULES, 10.0).store
    )
    now = json.loads(expected)["now"]
    # Kinds registered since keep evidence the old checkpoint has no column for: it restores
    # at its fill, and the columns the old store had must read back the same.
    kept = {k for row in json.loads(expected)["rows"].values() for k in row["evidence"]}
    old = tmp_path / "old.checkpoint"
    shutil.copy(FIXTURES / "old-layout.checkpoint", old)
    restored = ClusterPipeline(RULES, 10.0)
    assert checkpoint.load(old, restored.store, restored.evaluator, restored.tracker)
    assert _read_back_text(restored, now, kept) == expected
    # Written again in today's layout, it restores to the same.
    again = tmp_path / "new.checkpoint"
    checkpoint.save(again, restored.store, restored.evaluator, restored.tracker)
    second = ClusterPipeline(RULES, 10.0)
    assert checkpoint.load(again, second.store, second.evaluator, second.tracker)
    assert _read_back_text(second, now, kept) == expected
    _assert_same_store(second.store, restored.store)
    # And both go on with the next scans as the old store would have.
    for pipeline in (restored, second):
        pipeline.step(make_old_layout.scans()[0])
    _assert_same_store(second.store, restored.store)
