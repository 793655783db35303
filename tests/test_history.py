"""The history store: writer round trip, layout, retention, failure handling, reader errors."""

from __future__ import annotations

import collections
import os
import random
import signal
import subprocess
import sys
import threading
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from notifier.history import (
    HistoryEmptyError,
    HistoryError,
    HistoryNotFoundError,
    HistorySchemaError,
    HistoryWriteError,
    HistoryWriter,
    IncidentsError,
    history_files,
    load_incidents,
    read_history,
    validate_schema,
    write_parquet_atomic,
)
from notifier.history import writer as history
from notifier.types import SAMPLE_SCHEMA, Sample, samples_to_table, table_to_samples

ROOT = Path(__file__).resolve().parents[1]
DAY_MS = 86_400_000
# 2026-11-20 23:59:50 UTC: scans ten seconds apart cross midnight after the first one.
T0 = int(datetime(2026, 11, 20, 23, 59, 50, tzinfo=UTC).timestamp() * 1000)


def scan(ts: int, group: str = "orders", partitions: int = 3, offset: int = 100) -> pa.Table:
    """One scan's rows, the way the collector hands them to the writer."""
    return samples_to_table(
        [
            Sample(
                ts=ts,
                cluster="prod",
                group=group,
                topic="orders.v1",
                partition=p,
                committed_offset=None if p == 2 else offset + p,
                log_end_offset=offset + 10 + p,
                log_start_offset=offset - 50,
                group_state="Stable",
                members=2,
                member_hash=-(2**62) + p,
            )
            for p in range(partitions)
        ]
    )


def rows(table: pa.Table) -> list[Sample]:
    return sorted(table_to_samples(table), key=lambda s: (s.ts, s.group, s.partition))


# --------------------------------------------------------------------------------------------
# Writer


def test_round_trip_partitioned_by_utc_date(tmp_path: Path) -> None:
    tables = [scan(T0 + i * 10_000, offset=100 + i) for i in range(4)]
    with HistoryWriter(tmp_path, roll_interval_s=3600, retention_days=0) as writer:
        for table in tables:
            writer.append(table)
        writer.flush()
        assert writer.rows_written == 12 and writer.files_written == 2
        assert writer.queued_rows == 0 and writer.errors == 0

    files = history_files(tmp_path)
    assert [f.parent.name for f in files] == ["date=2026-11-20", "date=2026-11-21"]
    for file in files:
        assert file.name.startswith("part-") and file.suffix == ".parquet"
        day = file.parent.name.removeprefix("date=")
        stamps = pq.read_table(file).column("ts").to_pylist()
        assert {s.date().isoformat() for s in stamps} == {day}
        # The files hold exactly the sample columns: the date lives in the directory name.
        assert pq.read_schema(file).remove_metadata().equals(SAMPLE_SCHEMA)
    assert not [p for p in tmp_path.rglob("*") if p.name.startswith(".")]  # no temp files left

    back = read_history(tmp_path)
    assert back.schema.equals(SAMPLE_SCHEMA)
    assert rows(back) == rows(pa.concat_tables(tables))
    assert back.column("committed_offset").null_count == 4  # unknown lag stays unknown


def test_rolls_one_file_per_partition_per_interval(tmp_path: Path) -> None:
    writer = HistoryWriter(tmp_path, roll_interval_s=0.05, retention_days=0)
    try:
        writer.append(scan(T0 + 20_000))
        deadline = time.monotonic() + 5
        while writer.files_written < 1 and time.monotonic() < deadline:
            time.sleep(0.01)
        assert writer.files_written == 1  # rolled without a flush
        writer.append(scan(T0 + 30_000))
        writer.flush()
    finally:
        writer.close()
    files = history_files(tmp_path)
    assert len(files) == 2 and len({f.parent for f in files}) == 1
    assert read_history(tmp_path).num_rows == 6


def test_append_does_not_wait_for_a_slow_write(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    writing = threading.Event()
    release = threading.Event()
    real = history.write_parquet_atomic

    def slow_write(path: Path, write: Any) -> None:
        writing.set()
        release.wait(5)
        real(path, write)

    monkeypatch.setattr(history, "write_parquet_atomic", slow_write)
    writer = HistoryWriter(tmp_path, roll_interval_s=0.01, retention_days=0)
    try:
        writer.append(scan(T0 + 20_000))
        assert writing.wait(5)  # the writer thread is now stuck in a write
        began = time.perf_counter()
        for i in range(200):
            writer.append(scan(T0 + 30_000 + i * 10_000))
        assert time.perf_counter() - began < 0.5
        release.set()
        writer.flush()
    finally:
        release.set()
        writer.close()
    assert read_history(tmp_path).num_rows == 201 * 3


def test_failed_write_is_counted_and_retried_without_loss(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    real = history.write_parquet_atomic
    failures = {"left": 2}

    def flaky(path: Path, write: Any) -> None:
        if failures["left"]:
            failures["left"] -= 1
            raise OSError("disk full")
        real(path, write)

    monkeypatch.setattr(history, "write_parquet_atomic", flaky)
    writer = HistoryWriter(tmp_path, roll_interval_s=3600, retention_days=0, retry_s=0.01)
    try:
        writer.append(scan(T0 + 20_000))
        with pytest.raises(HistoryWriteError, match="disk full"):
            writer.flush()
        assert writer.errors == 1
        assert isinstance(writer.last_error, OSError)
        assert writer.queued_rows == 3  # still queued
        writer.append(scan(T0 + 30_000))
        with pytest.raises(HistoryWriteError):
            writer.flush()
        writer.flush()  # the disk is back
        assert writer.errors == 2 and writer.queued_rows == 0
    finally:
        writer.close()
    back = read_history(tmp_path)
    assert back.num_rows == 6  # nothing lost, nothing written twice
    assert (
        sorted(back.column("ts").cast(pa.int64()).to_pylist())
        == [T0 + 20_000] * 3 + [T0 + 30_000] * 3
    )


def test_writer_retries_on_its_own(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    real = history.write_parquet_atomic
    failures = {"left": 1}

    def flaky(path: Path, write: Any) -> None:
        if failures["left"]:
            failures["left"] -= 1
            raise OSError("transient")
        real(path, write)

    monkeypatch.setattr(history, "write_parquet_atomic", flaky)
    with HistoryWriter(tmp_path, roll_interval_s=0.01, retention_days=0, retry_s=0.02) as writer:
        writer.append(scan(T0 + 20_000))
        deadline = time.monotonic() + 5
        while writer.files_written == 0 and time.monotonic() < deadline:
            time.sleep(0.01)
        assert writer.errors == 1 and writer.files_written == 1


def test_queue_bound_drops_oldest_and_counts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken(path: Path, write: Any) -> None:
        raise OSError("read-only file system")

    monkeypatch.setattr(history, "write_parquet_atomic", broken)
    writer = HistoryWriter(tmp_path, roll_interval_s=3600, retention_days=0, max_queued_rows=6)
    for i in range(4):
        writer.append(scan(T0 + 20_000 + i * 10_000))
    with pytest.raises(HistoryWriteError):
        writer.flush()
    assert writer.dropped_rows == 6 and writer.queued_rows == 6
    with pytest.raises(HistoryWriteError):
        writer.close()
    assert writer.errors >= 2


def test_rolls_early_when_the_queue_is_large(tmp_path: Path) -> None:
    with HistoryWriter(tmp_path, roll_interval_s=3600, retention_days=0, max_queued_rows=5) as w:
        w.append(scan(T0 + 20_000))
        w.append(scan(T0 + 30_000))
        deadline = time.monotonic() + 5
        while w.files_written == 0 and time.monotonic() < deadline:
            time.sleep(0.01)
        assert w.files_written == 1 and w.dropped_rows == 0


def test_a_scan_of_roll_rows_is_written_without_waiting_for_the_interval(tmp_path: Path) -> None:
    with HistoryWriter(tmp_path, roll_interval_s=3600, retention_days=0, roll_rows=3) as w:
        w.append(scan(T0 + 20_000))
        deadline = time.monotonic() + 5
        while w.files_written == 0 and time.monotonic() < deadline:
            time.sleep(0.01)
        assert w.files_written == 1 and w.rows_written == 3 and w.queued_rows == 0


def test_a_roll_due_at_once_that_fails_waits_in_the_journal(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken(path: Path, write: Any) -> None:
        raise OSError("disk full")

    real = history.write_parquet_atomic
    monkeypatch.setattr(history, "write_parquet_atomic", broken)
    crashed = HistoryWriter(
        tmp_path, roll_interval_s=3600, retention_days=0, roll_rows=3, retry_s=3600
    )
    crashed.append(scan(T0 + 20_000))
    with pytest.raises(HistoryWriteError):
        crashed.flush()  # not written: in memory and, for a crash, in the journal
    monkeypatch.setattr(history, "write_parquet_atomic", real)

    restarted = HistoryWriter(tmp_path, roll_interval_s=3600, retention_days=0)
    restarted.close()
    assert restarted.recovered_rows == 3
    assert rows(read_history(tmp_path)) == rows(scan(T0 + 20_000))


def test_close_flushes_and_refuses_more(tmp_path: Path) -> None:
    writer = HistoryWriter(tmp_path, roll_interval_s=3600, retention_days=0)
    writer.flush()  # nothing queued: no file, no error
    writer.append(scan(T0 + 20_000))
    writer.close()
    writer.close()  # idempotent
    assert read_history(tmp_path).num_rows == 3
    with pytest.raises(HistoryError, match="closed"):
        writer.append(scan(T0 + 30_000))


# A service process writing history, one scan every `pause` seconds, printing each scan's index
# once append() returned: what `notifier run` does, without Kafka. Killed with SIGKILL.
SCANNING_PROCESS = """
import sys, time
from notifier.history import HistoryWriter
from notifier.types import Sample, samples_to_table

root, first, pause = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
writer = HistoryWriter(root, roll_interval_s=300, retention_days=0)
print("started", flush=True)
for i in range(first, first + 100_000):
    writer.append(samples_to_table([
        Sample(ts={t0} + i * 10_000, cluster="prod", group="orders", topic="orders.v1",
               partition=p, committed_offset=i, log_end_offset=i + 5, members=1)
        for p in range(3)
    ]))
    print(i, flush=True)
    time.sleep(pause)
"""


def scanning_process(root: Path, first: int, pause: float) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-c", SCANNING_PROCESS.format(t0=T0), str(root), str(first), str(pause)],
        stdout=subprocess.PIPE, text=True, cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)},
    )  # fmt: skip


def scans_in(root: Path) -> list[int]:
    """The scan indexes in the history, one per row (so a duplicate shows twice)."""
    table = read_history(root)
    return sorted(table.column("committed_offset").to_pylist())


def journaled_scans(root: Path) -> set[int]:
    """The scan indexes the writer's journals hold on disk now (a batch being written at the
    end of one is not counted)."""
    found: set[int] = set()
    for journal in root.glob(".journal-*.arrows"):
        try:
            with pa.ipc.open_stream(pa.memory_map(str(journal))) as reader:
                for batch in reader:
                    found.update(batch.column("committed_offset").to_pylist())
        except (pa.ArrowInvalid, OSError):
            pass  # cut mid-write: what was read before the cut stands
    return found


def test_a_kill_minus_9_before_the_roll_loses_no_scan(tmp_path: Path) -> None:
    # roll_interval is 5 minutes: before, everything since the last roll died with the process.
    process = scanning_process(tmp_path, 0, 0.05)
    assert process.stdout is not None
    appended = [line.strip() for line, _ in zip(process.stdout, range(11), strict=False)]
    # append() only queues: wait until the writer thread has journaled the ten scans.
    deadline = time.monotonic() + 30
    while not set(range(10)) <= journaled_scans(tmp_path):
        assert time.monotonic() < deadline, "the writer did not journal ten scans in 30 s"
        time.sleep(0.01)
    process.send_signal(signal.SIGKILL)
    process.wait(10)
    assert appended[0] == "started"
    done = [int(i) for i in appended[1:]]

    HistoryWriter(tmp_path, roll_interval_s=300, retention_days=0).close()  # the restart

    recovered = collections.Counter(scans_in(tmp_path))
    assert set(done) <= set(recovered)
    assert set(recovered.values()) == {3}  # every partition of a scan, none twice
    assert not [p for p in tmp_path.rglob("*") if p.name.startswith(".")]  # journal gone


def test_twenty_kills_at_random_moments_lose_only_the_scan_in_flight(tmp_path: Path) -> None:
    rng = random.Random(15)
    next_scan = 0
    durable: list[int] = []  # scans whose append() returned well before the kill
    for _ in range(20):
        process = scanning_process(tmp_path, next_scan, 0.01)
        assert process.stdout is not None
        assert process.stdout.readline().strip() == "started"  # recovery has run
        killed_at = time.monotonic() + rng.uniform(0.05, 0.4)
        seen: list[tuple[int, float]] = []
        while time.monotonic() < killed_at:
            seen.append((int(process.stdout.readline()), time.monotonic()))
        process.send_signal(signal.SIGKILL)
        process.wait(10)
        durable += [i for i, at in seen if at < killed_at - 0.1]
        # The process ran ahead of this loop on a busy machine: what it printed but was not
        # read yet counts too. The next process starts two on from the last index printed, as
        # a restarted service scans anew: one more scan may have been appended unprinted.
        printed = [int(line) for line in process.stdout.read().split()]
        last = max([i for i, _ in seen] + printed, default=next_scan - 2)
        next_scan = last + 2
    HistoryWriter(tmp_path, roll_interval_s=300, retention_days=0).close()

    recovered = scans_in(tmp_path)
    counts = collections.Counter(recovered)
    assert set(durable) <= set(counts), sorted(set(durable) - set(counts))[:10]
    assert set(counts.values()) == {3}  # three partitions a scan; no scan written twice
    print(f"{len(counts)} scans kept across 20 kills, {len(durable)} required, 0 duplicated")


def test_a_crash_after_a_partly_written_roll_writes_no_row_twice(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    real = history.write_parquet_atomic

    def second_day_fails(path: Path, write: Any) -> None:
        if "2026-11-21" in str(path):
            raise OSError("disk full")
        real(path, write)

    monkeypatch.setattr(history, "write_parquet_atomic", second_day_fails)
    crashed = HistoryWriter(tmp_path, roll_interval_s=3600, retention_days=0, retry_s=3600)
    crashed.append(scan(T0))  # 2026-11-20
    crashed.append(scan(T0 + 20_000))  # 2026-11-21
    with pytest.raises(HistoryWriteError):
        crashed.flush()  # the first day is in place, the second only in memory and journal
    monkeypatch.setattr(history, "write_parquet_atomic", real)

    restarted = HistoryWriter(tmp_path, roll_interval_s=3600, retention_days=0)
    restarted.close()
    assert restarted.recovered_rows == 3
    assert rows(read_history(tmp_path)) == rows(pa.concat_tables([scan(T0), scan(T0 + 20_000)]))


def test_a_journal_torn_mid_write_keeps_the_scans_before_the_tear(tmp_path: Path) -> None:
    writer = HistoryWriter(tmp_path, roll_interval_s=3600, retention_days=0)
    for i in range(3):
        writer.append(scan(T0 + 20_000 + i * 10_000, offset=100 + i))
    deadline = time.monotonic() + 5
    while writer.journaled_rows < 9 and time.monotonic() < deadline:
        time.sleep(0.01)
    (journal,) = [p for p in tmp_path.iterdir() if p.name.startswith(".journal-")]
    torn = tmp_path / "torn"
    torn.mkdir()
    data = journal.read_bytes()
    (torn / journal.name).write_bytes(data[: len(data) - 40])  # the last scan half written
    writer.close()

    assert history.recover_journals(torn) == 6
    assert read_history(torn).num_rows == 6
    assert not [p for p in torn.iterdir() if p.name.startswith(".")]


def test_append_conforms_compatible_tables_and_rejects_others(tmp_path: Path) -> None:
    loose = scan(T0 + 20_000)
    loose = loose.set_column(4, "partition", loose.column("partition").cast(pa.int64()))
    with HistoryWriter(tmp_path, roll_interval_s=3600, retention_days=0) as writer:
        writer.append(loose)
        writer.append(loose.slice(0, 0))  # empty scans are ignored
        with pytest.raises(HistorySchemaError, match="members"):
            writer.append(loose.drop_columns(["members"]))
    assert read_history(tmp_path).num_rows == 3


def test_prune_removes_partitions_older_than_retention(tmp_path: Path) -> None:
    for day in ("2026-11-01", "2026-11-06", "2026-11-07", "2026-11-21"):
        (tmp_path / f"date={day}").mkdir()
        (tmp_path / f"date={day}" / "part-1-x.parquet").write_bytes(b"")
    (tmp_path / "incidents.csv").write_text("kept\n")
    writer = HistoryWriter(tmp_path, retention_days=14)
    try:
        removed = writer.prune(datetime(2026, 11, 21, 10, 0, tzinfo=UTC))
    finally:
        writer.close()
    assert sorted(p.name for p in removed) == ["date=2026-11-01", "date=2026-11-06"]
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "date=2026-11-07",
        "date=2026-11-21",
        "incidents.csv",
    ]


def test_writer_prunes_after_each_roll(tmp_path: Path) -> None:
    old = tmp_path / "date=2020-01-01"
    old.mkdir(parents=True)
    now_ms = int(time.time() * 1000)
    with HistoryWriter(tmp_path, roll_interval_s=3600, retention_days=2) as writer:
        writer.append(scan(now_ms))
    assert not old.exists()
    assert read_history(tmp_path).num_rows == 3


def test_atomic_write_shows_whole_files_only(tmp_path: Path) -> None:
    target = tmp_path / "date=2026-11-21" / "part-1-a.parquet"
    seen_while_writing: list[list[Path]] = []

    def write(handle: Any) -> None:
        seen_while_writing.append(history_files(tmp_path))
        pq.write_table(scan(T0 + 20_000), handle)

    write_parquet_atomic(target, write)
    assert seen_while_writing == [[]]
    assert history_files(tmp_path) == [target]

    def broken(handle: Any) -> None:
        handle.write(b"PAR1 half a file")
        raise OSError("interrupted")

    with pytest.raises(OSError):
        write_parquet_atomic(target.with_name("part-2-b.parquet"), broken)
    assert sorted(p.name for p in target.parent.iterdir()) == [target.name]


# --------------------------------------------------------------------------------------------
# Reader


@pytest.fixture
def stored(tmp_path: Path) -> Path:
    with HistoryWriter(tmp_path / "h", roll_interval_s=3600, retention_days=0) as writer:
        for i in range(6):
            writer.append(scan(T0 + i * 10_000, group="orders", offset=100 + i))
            writer.append(scan(T0 + i * 10_000, group="orders-replay", offset=500 + i))
            writer.append(scan(T0 + i * 10_000, group="billing", offset=900 + i))
    (tmp_path / "h" / "incidents.csv").write_text("cluster,group,start,end\n")  # not history
    return tmp_path / "h"


def test_read_filters_time_range_half_open(stored: Path) -> None:
    start = datetime.fromtimestamp((T0 + 10_000) / 1000, tz=UTC)
    table = read_history(stored, start=start, end=T0 + 30_000)
    stamps = sorted(set(table.column("ts").cast(pa.int64()).to_pylist()))
    assert stamps == [T0 + 10_000, T0 + 20_000]
    # ISO strings and naive datetimes are taken as UTC.
    naive_end = datetime(2026, 11, 21, 0, 0, 10)
    naive = read_history(str(stored), start="2026-11-20T23:59:55", end=naive_end)
    assert set(naive.column("ts").cast(pa.int64()).to_pylist()) == {T0 + 10_000}
    later = read_history(stored, start="2026-11-21T00:00:00Z")
    assert min(later.column("ts").cast(pa.int64()).to_pylist()) == T0 + 10_000
    with pytest.raises(HistoryError, match="empty time range"):
        read_history(stored, start=T0 + 10_000, end=T0)


def test_read_filters_groups_by_regex_and_sorts_by_time(stored: Path) -> None:
    table = read_history(stored, groups="^orders")
    assert set(table.column("group").to_pylist()) == {"orders", "orders-replay"}
    assert set(read_history(stored, groups="^orders$").column("group").to_pylist()) == {"orders"}
    stamps = table.column("ts").cast(pa.int64()).to_pylist()
    assert stamps == sorted(stamps)
    with pytest.raises(HistoryError, match="invalid group regex"):
        read_history(stored, groups="(")


def test_read_single_file(stored: Path) -> None:
    file = history_files(stored)[0]
    assert read_history(file).num_rows == 9


def test_missing_path_is_named(tmp_path: Path) -> None:
    with pytest.raises(HistoryNotFoundError, match=str(tmp_path / "nope")):
        read_history(tmp_path / "nope")


def test_no_rows_in_range_names_the_range(stored: Path) -> None:
    with pytest.raises(HistoryEmptyError) as caught:
        read_history(stored, start="2027-01-01T00:00:00Z", end="2027-01-02T00:00:00Z")
    message = str(caught.value)
    assert str(stored) in message
    assert "2027-01-01T00:00:00.000+00:00" in message and "2027-01-02T00:00:00.000+00:00" in message
    with pytest.raises(HistoryEmptyError, match="matching 'nobody'"):
        read_history(stored, groups="nobody")
    (stored.parent / "empty").mkdir()
    with pytest.raises(HistoryEmptyError, match="no rows at all"):
        read_history(stored.parent / "empty")


def test_validate_schema_lists_every_problem() -> None:
    fields = [f for f in SAMPLE_SCHEMA if f.name not in ("members", "member_hash")]
    fields = [pa.field("partition", pa.string()) if f.name == "partition" else f for f in fields]
    fields = [pa.field("ts", pa.int64()) if f.name == "ts" else f for f in fields]
    with pytest.raises(HistorySchemaError) as caught:
        validate_schema(pa.schema(fields), "/data/history/part-1.parquet")
    message = str(caught.value)
    assert "/data/history/part-1.parquet" in message
    assert "members" in message and "member_hash" in message
    assert "partition (expected int32, found string)" in message
    assert "ts (expected timestamp[ms, tz=UTC], found int64)" in message
    validate_schema(SAMPLE_SCHEMA, "ok")


def test_compatible_types_are_read_as_the_sample_schema(tmp_path: Path) -> None:
    base = scan(T0 + 20_000)
    loose = pa.table(
        {
            "ts": base.column("ts").cast(pa.timestamp("us", tz="Europe/Paris")),
            "cluster": base.column("cluster").dictionary_encode(),
            "group": base.column("group").cast(pa.large_string()),
            "topic": base.column("topic"),
            "partition": base.column("partition").cast(pa.int64()),
            "committed_offset": base.column("committed_offset"),
            "log_end_offset": base.column("log_end_offset").cast(pa.int32()),
            "log_start_offset": pa.nulls(3, pa.null()),
            "group_state": base.column("group_state"),
            "members": base.column("members").cast(pa.int64()),
            "member_hash": base.column("member_hash"),
            "extra": pa.array([1, 2, 3]),
        }
    )
    day = tmp_path / "date=2026-11-21"
    day.mkdir()
    pq.write_table(loose, day / "part-1-old.parquet")
    pq.write_table(base, day / "part-2-new.parquet")
    table = read_history(tmp_path)
    assert table.schema.equals(SAMPLE_SCHEMA)
    assert table.num_rows == 6
    assert table.column("log_start_offset").null_count == 3


def test_mistyped_file_is_named(tmp_path: Path) -> None:
    day = tmp_path / "date=2026-11-21"
    day.mkdir()
    pq.write_table(scan(T0 + 20_000), day / "part-1-good.parquet")
    bad = scan(T0 + 30_000).drop_columns(["member_hash"])
    bad = bad.set_column(4, "partition", bad.column("partition").cast(pa.string()))
    pq.write_table(bad, day / "part-2-bad.parquet")
    with pytest.raises(HistorySchemaError) as caught:
        read_history(tmp_path)
    message = str(caught.value)
    assert "part-2-bad.parquet" in message
    assert "member_hash" in message and "partition (expected int32, found string)" in message


def test_nulls_in_required_columns_are_refused(tmp_path: Path) -> None:
    table = scan(T0 + 20_000)
    fields = [pa.field(f.name, f.type, nullable=True) for f in SAMPLE_SCHEMA]
    loose = pa.Table.from_arrays(
        [*table.columns[:6], pa.array([1, None, 3], pa.int64()), *table.columns[7:]],
        schema=pa.schema(fields),
    )
    pq.write_table(loose, tmp_path / "flat.parquet")
    with pytest.raises(HistorySchemaError, match="log_end_offset has 1 null"):
        read_history(tmp_path)


# --------------------------------------------------------------------------------------------
# Labelled incidents


def test_load_incidents_csv(tmp_path: Path) -> None:
    file = tmp_path / "incidents.csv"
    file.write_text(
        "cluster,group,start,end,kind\n"
        "prod,orders,2026-11-21T10:00:00Z,2026-11-21T10:30:00.500Z,stalled\n"
        "prod,billing,2026-11-21 11:00:00,2026-11-21T13:00:00+02:00,\n"
    )
    frame = load_incidents(file)
    assert list(frame.columns) == ["cluster", "group", "start", "end", "kind"]
    assert str(frame["start"].dtype) == "datetime64[ms, UTC]"
    assert frame.loc[0, "end"] == pd.Timestamp("2026-11-21T10:30:00.500Z")
    assert frame.loc[1, "start"] == pd.Timestamp("2026-11-21T11:00:00Z")  # naive is UTC
    assert frame.loc[1, "end"] == pd.Timestamp("2026-11-21T11:00:00Z")
    assert frame["kind"].tolist() == ["stalled", ""]


def test_load_incidents_parquet_without_kind_and_epoch_ms(tmp_path: Path) -> None:
    file = tmp_path / "labels.parquet"
    pd.DataFrame(
        {"cluster": ["prod"], "group": ["orders"], "start": [T0], "end": [T0 + 60_000]}
    ).to_parquet(file)
    frame = load_incidents(file)
    assert frame.loc[0, "start"] == pd.Timestamp(T0, unit="ms", tz="UTC")
    assert frame.loc[0, "kind"] == ""


def test_load_incidents_errors_name_file_and_problem(tmp_path: Path) -> None:
    with pytest.raises(HistoryNotFoundError, match=r"missing\.csv"):
        load_incidents(tmp_path / "missing.csv")

    no_end = tmp_path / "no_end.csv"
    no_end.write_text("cluster,group,start\nprod,orders,2026-11-21T10:00:00Z\n")
    with pytest.raises(IncidentsError, match=r"no_end\.csv lacks column\(s\) end"):
        load_incidents(no_end)

    bad = tmp_path / "bad.csv"
    bad.write_text(
        "cluster,group,start,end\n"
        "prod,orders,2026-11-21T10:00:00Z,2026-11-21T10:05:00Z\n"
        "prod,orders,yesterday,2026-11-21T10:05:00Z\n"
    )
    with pytest.raises(IncidentsError, match=r"bad\.csv, row 2: start 'yesterday'"):
        load_incidents(bad)

    backwards = tmp_path / "backwards.csv"
    backwards.write_text(
        "cluster,group,start,end\nprod,orders,2026-11-21T10:05:00Z,2026-11-21T10:00:00Z\n"
    )
    with pytest.raises(IncidentsError, match=r"backwards\.csv, row 1: end .* before start"):
        load_incidents(backwards)

    blank = tmp_path / "blank.csv"
    blank.write_text("cluster,group,start,end\nprod,,2026-11-21T10:00:00Z,2026-11-21T10:05:00Z\n")
    with pytest.raises(IncidentsError, match=r"blank\.csv, row 1: group is empty"):
        load_incidents(blank)

    empty = tmp_path / "empty.csv"
    empty.write_text("")
    with pytest.raises(IncidentsError, match="empty"):
        load_incidents(empty)


def test_old_partitions_are_skipped_by_range(stored: Path) -> None:
    # A range inside one day never opens the other day's files (a corrupt one proves it).
    (stored / "date=2020-01-01").mkdir()
    (stored / "date=2020-01-01" / "part-0-corrupt.parquet").write_bytes(b"not parquet")
    table = read_history(stored, start=T0 + 10_000, end=T0 + 10_000 + DAY_MS // 2)
    assert table.num_rows == 5 * 9
