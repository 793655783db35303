"""A partition a scan could not read (no leader) is in the history as the live step saw it: a
row marked unavailable for the window the step kept, which every replay keeps too; a history
written before the ``available`` column existed reads as available throughout."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from notifier.history import HistoryWriter, read_history
from notifier.rules import ClusterPipeline, parse_rules, scans
from notifier.types import SAMPLE_SCHEMA, Sample, samples_to_table

from .scripted import scan_result, service

T0 = 1_700_000_000_000
INTERVAL_MS = 10_000


def scan_samples(ts: int, partitions: tuple[int, ...], offset: int) -> list[Sample]:
    return [
        Sample(ts=ts, cluster="c", group="g", topic="t", partition=p, committed_offset=offset,
               log_end_offset=offset + 5, log_start_offset=0, member_hash=7)
        for p in partitions
    ]  # fmt: skip


async def test_the_history_keeps_the_window_of_a_partition_the_scan_could_not_read(tmp_path):
    rules = parse_rules({"burrow": {"minimum_complete": 1.0}})
    script = [scan_result(scan_samples(T0 + i * INTERVAL_MS, (0, 1), 100 + i), "c",
                          T0 + i * INTERVAL_MS) for i in range(3)]  # fmt: skip
    lost_at = T0 + 3 * INTERVAL_MS
    leaderless = scan_result(scan_samples(lost_at, (0,), 103), "c", lost_at)
    script.append(dataclasses.replace(leaderless, unavailable_partitions=(("t", 1),)))
    coordinator, _ = service(tmp_path / "live", script, rules)
    coordinator.history = HistoryWriter(tmp_path / "history", 3600, 0)
    for _ in script:
        coordinator.clusters["c"].retry_at = 0
        await coordinator.scan_once("c")
    coordinator.history.close()
    live_store = coordinator.clusters["c"].store
    assert live_store.row("c", "g", "t", 1) is not None, "the live step keeps the window"

    table = read_history(tmp_path / "history")
    last = table.filter(pc.equal(pc.cast(table.column("ts"), pa.int64()), lost_at)).to_pylist()
    by_partition = {row["partition"]: row for row in last}
    assert by_partition[0]["available"] is True
    lost = by_partition[1]
    assert lost["available"] is False
    assert lost["log_end_offset"] is None and lost["log_start_offset"] is None
    assert (lost["group"], lost["topic"], lost["committed_offset"]) == ("g", "t", 102)

    replayed = ClusterPipeline(rules, INTERVAL_MS / 1000)
    recorded = list(scans(table))
    assert [s.unavailable for s in recorded] == [(), (), (), (("t", 1),)]
    assert len(recorded[-1]) == 1, "an unavailable row is never ingested as a sample"
    for scan in recorded:
        replayed.step(scan)
    assert replayed.store.row("c", "g", "t", 1) is not None, "the replay keeps it as well"
    assert replayed.store.samples(replayed.store.row("c", "g", "t", 1)) == live_store.samples(
        live_store.row("c", "g", "t", 1)
    )


def test_a_history_written_before_the_column_existed_reads_as_available(tmp_path: Path):
    table = samples_to_table(scan_samples(T0, (0, 1), 100))
    old = table.drop_columns(["available"])
    day = tmp_path / "date=2023-11-14"
    day.mkdir()
    pq.write_table(old, day / "part-old.parquet")
    pq.write_table(samples_to_table(scan_samples(T0 + INTERVAL_MS, (0, 1), 101)),
                   day / "part-new.parquet")  # fmt: skip

    read = read_history(tmp_path)
    assert read.schema.equals(SAMPLE_SCHEMA)
    assert read.num_rows == 4 and pc.all(read.column("available")).as_py()
    assert [s.unavailable for s in scans(read)] == [(), ()]
