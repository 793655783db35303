"""A backtest shows what the live service would have sent: one recorded history, replayed
through the live coordinator, through ``notifier replay`` / ``test-rules`` and through the
backtest's replay engine, gives the same transitions, to the millisecond, finding by finding
(rule, severity, status, message, evidence, labels and rendered annotations); and the backtest
on Spark (``local[2]``, groups in two tasks) finds the same incidents as in one process.

The history has two clusters scanned at their own times, scans that failed (a gap in the
history; the live collector raised), partitions the broker could not answer for (their rows in
those scans marked unavailable, as the collector reports them), a group that appears halfway
and one that vanishes. All three drive the one step in :mod:`notifier.rules.step`; this test
keeps it that way.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pytest
import yaml

from notifier.backtest import GridConfig, ReplayOptions, ReplayOutput, SampleArrays, replay
from notifier.collect import ScanError, ScanResult
from notifier.config import parse_service_config
from notifier.history import HistoryWriter, read_history
from notifier.rules import RulesConfig, parse_rules, replay_table, scans
from notifier.service import Coordinator
from notifier.synth import synthesize
from notifier.types import Transition, available_rows

from .scripted import RecordingSink, ScriptedCollector, scan_result

ROOT = Path(__file__).resolve().parents[1]
INTERVAL_S = 10


def finding_record(finding: Any) -> dict[str, Any]:
    record = finding.to_dict()
    record["severity"] = str(record["severity"])
    return record


def comparable(transitions: list[Transition]) -> list[tuple]:
    """Each transition whole: its change, its result's figures and every finding with its
    labels and annotations. In each cluster's order (clusters are independent: the live
    service and the replays may interleave them differently at equal times)."""
    rows = [
        (
            t.cluster,
            t.group,
            t.previous.value,
            t.current.value,
            t.at,
            t.gone,
            t.reason,
            None
            if t.result is None
            else (
                t.result.status.value,
                t.result.complete,
                t.result.partial,
                t.result.total_lag,
                t.result.max_lag_seconds,
                t.result.group_state,
                t.result.members,
                [(p.topic, p.partition, str(p.status)) for p in t.result.partitions],
            ),
            sorted(
                (finding_record(f) for f in (t.result.findings if t.result else [])),
                key=lambda f: (f["rule"], f["topic"] or "", f["partition"] or -1),
            ),
        )
        for t in transitions
    ]
    return sorted(rows, key=lambda row: row[0])  # stable: each cluster keeps its order


@dataclasses.dataclass(frozen=True)
class Recording:
    """What the live collectors saw, and the history the service wrote of it."""

    table: pa.Table
    """The history: successful scans only; unavailable partitions have rows marked so."""
    failed: Mapping[str, frozenset[int]]
    """Per cluster, the times of scans that failed (nothing in the history)."""
    unavailable: Mapping[tuple[str, int], tuple[tuple[str, int], ...]]
    """Per (cluster, scan time), the partitions that scan could not read."""
    path: Path
    """Where the history is stored."""

    def clusters(self) -> list[str]:
        return sorted(set(self.table.column("cluster").to_pylist()) | set(self.failed))


def _scan_times(table: pa.Table, cluster: str) -> list[int]:
    mine = table.filter(pc.equal(table.column("cluster"), cluster))
    return sorted(set(pc.cast(mine.column("ts"), pa.int64()).to_pylist()))


def _without(table: pa.Table, mask: pa.ChunkedArray) -> pa.Table:
    return table.filter(pc.invert(mask))


def write_history(root: Path, table: pa.Table) -> Path:
    """``table`` as the service's history writer stores it, scan by scan."""
    ts = pc.cast(table.column("ts"), pa.int64())
    with HistoryWriter(root, roll_interval_s=3600, retention_days=0) as writer:
        for scan in scans(table):
            writer.append(
                table.filter(
                    pc.and_(pc.equal(table.column("cluster"), scan.cluster), pc.equal(ts, scan.ts))
                )
            )
    return root


@dataclasses.dataclass(frozen=True)
class Edited:
    """A synthetic history with groups appearing and vanishing and failed scans."""

    table: pa.Table
    first: str
    """The cluster with the group that vanishes and the one that appears."""
    vanishing: str
    failed: Mapping[str, frozenset[int]]


def edited_history(root: Path, rules: RulesConfig) -> Edited:
    """Two hours of a small fleet on two clusters with labelled faults, then: a group of the
    first cluster deleted while it alerts, one that first appears a third of the way in, and
    three scans in a row of the second cluster failed."""
    out = root / "synthesized"
    synthesize(out, groups=10, partitions=2, hours=2, seed=11, interval_s=INTERVAL_S, clusters=2)
    table = read_history(out)
    ts = pc.cast(table.column("ts"), pa.int64())
    first, second = sorted(set(table.column("cluster").to_pylist()))
    assert _scan_times(table, first) != _scan_times(table, second), "own scan times"

    def of(cluster: str) -> list[str]:
        mine = table.filter(pc.equal(table.column("cluster"), cluster))
        return sorted(set(mine.column("group").to_pylist()))

    start, end = pc.min(ts).as_py(), pc.max(ts).as_py()
    # The group that vanishes has an alert open then (its transition says it is gone): the
    # first of the first cluster's groups to go out of OK, deleted from the next scan on.
    opened = next(
        t for t in replay_transitions(table, rules) if t.cluster == first and t.current != "OK"
    )
    vanishing, vanishes_after = opened.group, opened.at
    appearing = next(g for g in of(first) if g != vanishing)
    in_first = pc.equal(table.column("cluster"), first)
    table = _without(
        table,
        pc.and_(
            in_first,
            pc.or_(
                pc.and_(pc.equal(table.column("group"), vanishing), pc.greater(ts, vanishes_after)),
                pc.and_(
                    pc.equal(table.column("group"), appearing),
                    pc.less(ts, start + (end - start) // 3),
                ),
            ),
        ),
    )

    times = _scan_times(table, second)
    failed = frozenset(times[len(times) // 2 : len(times) // 2 + 3])
    ts = pc.cast(table.column("ts"), pa.int64())
    in_second = pc.equal(table.column("cluster"), second)
    table = _without(table, pc.and_(in_second, pc.is_in(ts, pa.array(sorted(failed)))))

    return Edited(table, first, vanishing, {second: failed})


def recorded(root: Path, edited: Edited, rules: RulesConfig, unavailable: bool) -> Recording:
    """The edited history as the service would have written it (through the history writer
    and reader), and (``unavailable``) with a partition unavailable for three scans."""
    table, lost = edited.table, {}
    if unavailable:
        table, lost = _partition_unavailable(edited, rules)
    return Recording(read_history(write_history(root, table)), edited.failed, lost, root)


def _partition_unavailable(
    edited: Edited, rules: RulesConfig
) -> tuple[pa.Table, dict[tuple[str, int], tuple[tuple[str, int], ...]]]:
    """Partition 1 of a group that changes status later is unavailable for the three scans
    before the change (a broker that leads it is down): the collector reports its rows of those
    scans as unavailable (log offsets unknown), and the history records them so."""
    table, first, vanishing = edited.table, edited.first, edited.vanishing
    times = _scan_times(table, first)
    changes = next(
        t
        for t in replay_transitions(table, rules)
        if t.cluster == first and t.group != vanishing and t.at > times[10]
    )
    ts = pc.cast(table.column("ts"), pa.int64())
    lost = pc.and_(
        pc.and_(pc.equal(table.column("cluster"), first), pc.equal(table.column("partition"), 1)),
        pc.equal(table.column("group"), changes.group),
    )
    topic = table.filter(lost).column("topic")[0].as_py()
    before = [at for at in times if at < changes.at][-3:]
    unavailable = {(first, at): ((topic, 1),) for at in before}
    unreadable = pc.and_(lost, pc.is_in(ts, pa.array(before)))
    for name in ("log_end_offset", "log_start_offset"):
        column = table.column(name)
        table = table.set_column(
            table.schema.get_field_index(name),
            table.schema.field(name),
            pc.if_else(unreadable, pa.scalar(None, column.type), column),
        )
    table = table.set_column(
        table.schema.get_field_index("available"),
        table.schema.field("available"),
        pc.invert(unreadable),
    )
    return table, unavailable


@pytest.fixture(scope="module")
def edited(tmp_path_factory, rules: RulesConfig) -> Edited:
    return edited_history(tmp_path_factory.mktemp("equivalence"), rules)


@pytest.fixture(scope="module")
def recording(tmp_path_factory, edited: Edited, rules: RulesConfig) -> Recording:
    return recorded(tmp_path_factory.mktemp("history"), edited, rules, unavailable=False)


@pytest.fixture(scope="module")
def rules() -> RulesConfig:
    """The shipped rules, each with labels to carry (routes match them)."""
    data = yaml.safe_load((ROOT / "rules.yaml").read_text())
    for rule in data["rules"]:
        rule["labels"] = {**rule.get("labels", {}), "team": "data", "rule_kind": rule["kind"]}
    return parse_rules(data, "rules.yaml (labelled)")


async def live_transitions(tmp_path: Path, recording: Recording, rules: RulesConfig) -> list:
    """The coordinator over both clusters, each scan in time order: what the history has,
    with its unavailable partitions, and the failed scans raising as the collector does."""
    table = recording.table
    scripts: dict[str, list[ScanResult | Exception]] = {c: [] for c in recording.clusters()}
    order: list[tuple[int, str]] = []
    for scan in scans(table):
        order.append((scan.ts, scan.cluster))
    for cluster, times in recording.failed.items():
        order.extend((at, cluster) for at in times)
    for at, cluster in sorted(order):
        if at in recording.failed.get(cluster, ()):
            scripts[cluster].append(ScanError(f"{cluster}: the broker did not answer"))
            continue
        rows = table.filter(
            pc.and_(
                pc.equal(table.column("cluster"), cluster),
                pc.equal(pc.cast(table.column("ts"), pa.int64()), at),
            )
        )
        # As the collector reports it: the unavailable partitions beside the samples.
        result = scan_result(available_rows(rows), cluster, at)
        lost = recording.unavailable.get((cluster, at), ())
        scripts[cluster].append(dataclasses.replace(result, unavailable_partitions=lost))
    config = parse_service_config(
        {
            "clusters": [
                {"name": c, "bootstrap_servers": "127.0.0.1:1", "scan_interval": INTERVAL_S,
                 "down_after_failures": 2}
                for c in scripts
            ],
            "history": {"enabled": False},
        },
        "test",
    )  # fmt: skip
    sink = RecordingSink()
    coordinator = Coordinator(config, rules, tmp_path, sink)
    for name, state in coordinator.clusters.items():
        state.collector = ScriptedCollector(scripts[name])
    for _, cluster in sorted(order):
        coordinator.clusters[cluster].retry_at = 0  # the test drives time
        await coordinator.scan_once(cluster)
    assert [c for kind, c in sink.events if kind == "down"] == list(recording.failed)
    return sink.transitions


def replay_transitions(table: pa.Table, rules: RulesConfig) -> list:
    seen: list[Transition] = []
    replay_table(table, rules, INTERVAL_S, on_transitions=seen.extend)
    return seen


def backtest(table: pa.Table, rules: RulesConfig) -> tuple[list[Transition], ReplayOutput]:
    """The backtest's replay in this process: its transitions and what it found."""
    seen: list[Transition] = []
    output = replay(
        SampleArrays.from_arrow(table),
        [GridConfig(config_id=0, parameters={}, rules=rules)],
        ReplayOptions(scan_interval_s=INTERVAL_S),
        on_transitions=lambda _config, transitions: seen.extend(transitions),
    )
    return seen, output


def backtest_transitions(table: pa.Table, rules: RulesConfig) -> list:
    return backtest(table, rules)[0]


@pytest.fixture(scope="module")
def backtested(recording: Recording, rules: RulesConfig) -> tuple[list[Transition], ReplayOutput]:
    return backtest(recording.table, rules)


async def test_live_replay_and_backtest_send_the_same_transitions(
    tmp_path, recording, rules, backtested
):
    live = comparable(await live_transitions(tmp_path, recording, rules))
    assert live, "the history should make the rules fire"
    assert any(gone for *_, gone, _, _, _ in live), "the deleted group should resolve as gone"
    assert {row[0] for row in live} == set(recording.clusters()), "both clusters transition"
    labelled = [f for *_, findings in live for f in findings]
    assert labelled and all(f["labels"].get("team") == "data" for f in labelled)
    assert any(f["annotations"] for f in labelled), "annotations are rendered and compared"
    assert comparable(replay_transitions(recording.table, rules)) == live
    assert comparable(backtested[0]) == live


async def test_a_partition_unavailable_for_a_while_is_replayed_as_the_service_saw_it(
    tmp_path, edited, rules
):
    recording = recorded(tmp_path / "history", edited, rules, unavailable=True)
    live = comparable(await live_transitions(tmp_path / "live", recording, rules))
    assert comparable(replay_transitions(recording.table, rules)) == live
    assert comparable(backtest_transitions(recording.table, rules)) == live


@pytest.mark.spark
def test_the_backtest_on_spark_finds_what_the_single_process_replay_finds(
    spark, recording, rules, backtested
):
    """The replay above, cut into two Spark tasks by group: the same incidents (opened and
    closed at the same times, as recovered or gone) and the same notifications."""
    from notifier.backtest.job import _scan_calendar
    from notifier.backtest.spark import TaskPlan, read_history_spark, spark_replay, spark_scans

    path = recording.path
    configs = [GridConfig(config_id=0, parameters={}, rules=rules)]
    options = ReplayOptions(scan_interval_s=INTERVAL_S)
    local = backtested[1]
    frame = read_history_spark(spark, str(path))
    calendar = _scan_calendar(spark_scans(frame, str(path)))
    distributed = spark_replay(
        spark, frame, configs, options, calendar, TaskPlan(2, [[0]]), "group", str(path)
    )
    assert len(local.incidents) > 5 and (local.incidents["close_reason"] == "gone").any()
    pd.testing.assert_frame_equal(distributed.incidents, local.incidents)
    pd.testing.assert_frame_equal(distributed.counters, local.counters)
    pd.testing.assert_frame_equal(distributed.groups, local.groups)


@pytest.mark.spark
def test_the_backtest_on_spark_keeps_an_unavailable_partition_as_the_single_process_replay(
    spark, tmp_path, edited, rules
):
    """Spark reads the rows marked unavailable and hands them to its tasks: the same incidents
    and notifications as the replay in one process."""
    from notifier.backtest.job import _scan_calendar
    from notifier.backtest.spark import TaskPlan, read_history_spark, spark_replay, spark_scans

    recording = recorded(tmp_path / "history", edited, rules, unavailable=True)
    configs = [GridConfig(config_id=0, parameters={}, rules=rules)]
    options = ReplayOptions(scan_interval_s=INTERVAL_S)
    local = backtest(recording.table, rules)[1]
    frame = read_history_spark(spark, str(recording.path))
    assert frame.where("NOT available").count() == 3
    calendar = _scan_calendar(spark_scans(frame, str(recording.path)))
    distributed = spark_replay(
        spark, frame, configs, options, calendar, TaskPlan(2, [[0]]), "group", str(recording.path)
    )
    pd.testing.assert_frame_equal(distributed.incidents, local.incidents)
    pd.testing.assert_frame_equal(distributed.counters, local.counters)
    pd.testing.assert_frame_equal(distributed.groups, local.groups)
