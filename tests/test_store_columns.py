"""The window store's columns: declared once, allocated, grown and freed from that declaration."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from notifier.config import WindowSettings
from notifier.rules import ScanColumns, WindowStore
from notifier.rules import evidence as evidence
from notifier.rules.store import TABLE_COLUMN_NAMES, TABLE_COLUMNS, Column

INTERVAL_MS = 10_000


def test_every_declared_column_is_allocated_with_its_type_and_shape():
    store = WindowStore(WindowSettings(intervals=7, lag_time_points=13))
    widths = {"window": 7, "ring": 7, "points": 13}
    for column in (*store.row_columns, *TABLE_COLUMNS):
        array = store.column(column.name)
        rows = store.capacity if column.per_row else store.table_capacity
        width = widths.get(column.shape)
        assert array.shape == ((rows,) if width is None else (rows, width)), column.name
        assert array.dtype == np.dtype(column.dtype), column.name
    assert set(TABLE_COLUMN_NAMES) == {"t_leo", "t_time", "t_count"}
    per_row = {name for name, _, _ in evidence.columns()}
    per_group = {name for name, _, _ in evidence.group_columns()}
    assert per_row | per_group <= set(store.row_column_names)
    assert per_group and not per_row & per_group
    assert set(store.evidence) == per_row | per_group
    assert set(store.group_columns) == per_group
    assert not {"row_group", "row_table", "row_alive"} & set(store.portable_row_columns)


def test_a_column_is_an_array_only_once_a_store_allocates_it():
    class Bare:
        values = Column("row", np.int64, 0)

    assert Bare.values.name == "values"
    try:
        _ = Bare().values
    except AttributeError as exc:
        assert "'values' is not allocated" in str(exc)
    else:
        raise AssertionError("an unallocated column must not read as anything")


def _scan(ts: int, keys: list[tuple[str, int]], offset: int) -> ScanColumns:
    n = len(keys)
    committed = np.arange(n, dtype=np.int64) + offset
    return ScanColumns(
        cluster="c",
        ts=ts,
        group=[g for g, _ in keys],
        topic=["t"] * n,
        partition=np.asarray([p for _, p in keys], dtype=np.int32),
        committed=committed,
        log_end=committed + 5,
        log_start=np.zeros(n, dtype=np.int64),
        state=np.full(n, 3, dtype=np.int8),
        members=np.ones(n, dtype=np.int32),
        member_hash=np.zeros(n, dtype=np.int64),
    )


@settings(max_examples=25, deadline=None)
@given(
    st.lists(st.integers(0, 2_500), min_size=1, max_size=4),
    st.lists(st.integers(0, 40), max_size=3),
)
def test_rows_keep_their_windows_while_the_store_grows_and_frees(new_rows, dropped_groups):
    """However many rows each scan brings (growing the columns past their first allocation),
    every row's window holds exactly what the scans that saw it said, and a freed row reads as
    a new one; a plain dict of what was ingested is the reference."""
    store = WindowStore(WindowSettings(intervals=4, lag_time_points=5), INTERVAL_MS / 1000)
    keys: list[tuple[str, int]] = []
    seen: dict[tuple[str, int], list[tuple[int, int]]] = {}
    for i, extra in enumerate(new_rows):
        start = len(keys)
        keys += [(f"g{(start + k) // 60}", (start + k) % 60) for k in range(extra)]
        ts = 1_000_000 + i * INTERVAL_MS
        if not keys:
            continue
        scan = _scan(ts, keys, offset=100 * i)
        store.ingest_scan(scan)
        for key, committed in zip(keys, scan.committed.tolist()):
            seen.setdefault(key, []).append((ts, committed))
    assert store.capacity <= max(1024, len(keys) + len(keys) // 8)
    gone = [("c", f"g{g}") for g in dropped_groups]
    forgotten = store.remove_groups(gone)
    for key, history in seen.items():
        row = store.row("c", key[0], "t", key[1])
        if ("c", key[0]) in forgotten:
            assert row is None
            continue
        assert row is not None
        window = store.samples(row)
        assert [(s["ts"], s["committed_offset"]) for s in window] == history[-4:]
    freed = store._free_rows
    for column in store.row_columns:
        if column.reset and freed:
            values = store.column(column.name)[np.asarray(freed)]
            expected = np.full_like(values, column.fill)
            assert np.array_equal(values, expected, equal_nan=values.dtype.kind == "f")


def test_a_scan_that_lists_a_group_partition_twice_is_refused_new_or_known():
    store = WindowStore(WindowSettings(intervals=4, lag_time_points=5), INTERVAL_MS / 1000)
    for keys in ([("g", 0), ("g", 0)], [("g", 1)], [("g", 1), ("g", 1)]):
        scan = _scan(1_000_000, keys, offset=0)
        if len(keys) == 1:
            store.ingest_scan(scan)
            continue
        try:
            store.ingest_scan(scan)
        except ValueError as exc:
            assert "lists a group-partition twice" in str(exc)
        else:
            raise AssertionError(f"{keys} must be refused")
    assert store.rows_in_use == 1


def test_a_name_is_held_once_however_many_rows_and_scans_carry_it():
    store = WindowStore(WindowSettings(intervals=4, lag_time_points=5), INTERVAL_MS / 1000)
    for i in range(3):  # every scan brings its own string objects, as a table's to_pylist does
        keys = [("".join(["g", "1"]), p) for p in range(50)] + [("".join(["g", "2"]), 0)]
        store.ingest_scan(_scan(1_000_000 + i * INTERVAL_MS, keys, offset=i))
    names = {(id(store.row_key_of(r)[1]), id(store.row_key_of(r)[2])) for r in store.alive_rows()}
    assert len({group for group, _ in names}) == 2
    assert len({topic for _, topic in names}) == 1
    assert store.rows_in_use == 51


def _members_scan(ts: int, groups: dict[str, tuple[int, int, int]]) -> ScanColumns:
    """A scan of groups given as ``name: (partitions, members, member hash)``."""
    keys = [(g, p) for g, (partitions, _, _) in groups.items() for p in range(partitions)]
    scan = _scan(ts, keys, offset=0)
    scan.members = np.asarray([groups[g][1] for g, _ in keys], dtype=np.int32)
    scan.member_hash = np.asarray([groups[g][2] for g, _ in keys], dtype=np.int64)
    return scan


def test_a_groups_evidence_is_held_once_and_every_partition_reads_it():
    """Runs of member changes are the group's: a group of 40 partitions holds them once, every
    row reads its group's value, a partition added later reads the run already going on, and
    an id handed to a new group after the old one was forgotten starts from nothing."""
    store = WindowStore(WindowSettings(intervals=4, lag_time_points=5), INTERVAL_MS / 1000)
    churn = store.group_columns["e_churn_changes"]
    ts = 1_000_000
    for i, members in enumerate([3, 2, 3, 2, 3]):  # the member set changes at every scan
        partitions = 40 if i < 3 else 41
        store.ingest_scan(
            _members_scan(
                ts + i * INTERVAL_MS, {"busy": (partitions, members, members), "calm": (2, 1, 7)}
            )
        )
    busy = store.rows_of_group("c", "busy")
    calm = store.rows_of_group("c", "calm")
    assert busy.size == 41
    assert store.evidence["e_churn_changes"][busy].tolist() == [4] * 41
    assert store.evidence["e_churn_changes"][calm].tolist() == [0, 0]
    assert int(store.evidence["e_churn_changes"][int(busy[-1])]) == 4
    held = churn.by_group()
    assert held[[store.group_id("c", "busy"), store.group_id("c", "calm")]].tolist() == [4, 0]

    busy_id = store.group_id("c", "busy")
    store.remove_groups([("c", "busy")])
    store.ingest_scan(_members_scan(ts + 5 * INTERVAL_MS, {"new": (3, 1, 5), "calm": (2, 1, 7)}))
    new = store.rows_of_group("c", "new")
    assert store.group_id("c", "new") == busy_id  # the id was reused
    assert store.evidence["e_churn_changes"][new].tolist() == [0, 0, 0]
    assert store.evidence["e_churn_since"][np.asarray(store._free_rows)].tolist() == (
        [evidence.UNSET_TS] * len(store._free_rows)
    )


def test_a_groups_evidence_moves_with_the_group_to_another_store():
    store = WindowStore(WindowSettings(intervals=4, lag_time_points=5), INTERVAL_MS / 1000)
    for i, members in enumerate([3, 2, 3]):
        store.ingest_scan(
            _members_scan(1_000_000 + i * INTERVAL_MS, {"busy": (5, members, members)})
        )
    exported = store.export_group("c", "busy")
    assert exported is not None
    other = WindowStore(WindowSettings(intervals=4, lag_time_points=5), INTERVAL_MS / 1000)
    other.ingest_scan(_members_scan(1_000_000, {"calm": (2, 1, 7)}))
    other.import_group(exported)
    rows = other.rows_of_group("c", "busy")
    assert other.evidence["e_churn_changes"][rows].tolist() == [2] * 5
    assert other.evidence["e_churn_changes"][other.rows_of_group("c", "calm")].tolist() == [0, 0]


def test_a_partition_left_out_of_a_scan_does_not_count_its_groups_member_change_again():
    """A broker restart leaves a partition out of a scan (no leader) while the group's members
    change: when it comes back it still compares with the member set it last saw, but the
    group's change was already counted at the scan before."""
    store = WindowStore(WindowSettings(intervals=4, lag_time_points=5), INTERVAL_MS / 1000)
    ts = 1_000_000
    store.ingest_scan(_members_scan(ts, {"g": (2, 1, 1)}))
    store.ingest_scan(_scan_of(ts + INTERVAL_MS, [("g", 0)], members=2, member_hash=2))
    store.ingest_scan(_members_scan(ts + 2 * INTERVAL_MS, {"g": (2, 2, 2)}))
    rows = store.rows_of_group("c", "g")
    assert store.evidence["e_churn_changes"][rows].tolist() == [1, 1]
    assert store.evidence["e_last_change_ts"][rows].tolist() == [ts + INTERVAL_MS] * 2


def _scan_of(ts: int, keys: list[tuple[str, int]], members: int, member_hash: int) -> ScanColumns:
    scan = _scan(ts, keys, offset=0)
    scan.members = np.full(len(keys), members, dtype=np.int32)
    scan.member_hash = np.full(len(keys), member_hash, dtype=np.int64)
    return scan


def test_a_groups_evidence_restored_from_rows_that_differ_takes_its_oldest_rows():
    """A checkpoint or hand-over from a store that held the evidence per row carries a value
    per partition, which may differ (a partition added later had its own run): the group
    takes its oldest partition's, whichever order the rows come in."""
    store = WindowStore(WindowSettings(intervals=4, lag_time_points=5), INTERVAL_MS / 1000)
    store.ingest_scan(_members_scan(1_000_000, {"g": (1, 1, 1)}))
    store.ingest_scan(_members_scan(1_000_000 + INTERVAL_MS, {"g": (3, 1, 1)}))
    rows = store.rows_of_group("c", "g")
    oldest = int(rows[np.argmin(store.row_epoch[rows])])
    values = np.where(rows == oldest, 7, 2)
    for order in (np.arange(3), np.arange(3)[::-1]):
        store.column("e_churn_changes")[rows[order]] = values[order]
        assert store.evidence["e_churn_changes"][rows].tolist() == [7, 7, 7]
