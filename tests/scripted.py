"""A scripted stand-in for the collector: returns prepared ScanResults (or raises ScanError).

The real collector is tested against the embedded broker; services built on this one let the
coordinator, API and notification tests be exact about time.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa

from notifier.collect import ScanResult
from notifier.config import parse_service_config
from notifier.rules import RulesConfig, read_samples, scans
from notifier.service import Coordinator, LogSink
from notifier.types import Sample, samples_to_table


class ScriptedCollector:
    """Returns one prepared scan (or raises the prepared exception) per call."""

    def __init__(self, script: list):
        self.script = list(script)

    async def scan(self) -> ScanResult:
        step = self.script.pop(0)
        if isinstance(step, Exception):
            raise step
        return step

    async def close(self) -> None:
        pass


class RecordingSink(LogSink):
    """Keeps what the coordinator hands to the notification pipeline."""

    def __init__(self):
        super().__init__()
        self.transitions: list = []
        self.events: list = []

    def handle(self, transitions, now):
        self.transitions.extend(transitions)

    def cluster_down(self, cluster, now, reason):
        self.events.append(("down", cluster))

    def cluster_up(self, cluster, now):
        self.events.append(("up", cluster))


def scan_result(samples: list[Sample] | pa.Table, cluster: str, ts: int, groups=None) -> ScanResult:
    table = samples if isinstance(samples, pa.Table) else samples_to_table(samples)
    if groups is None:
        groups = {g: "Stable" for g in set(table.column("group").to_pylist())}
    return ScanResult(cluster=cluster, ts=ts, samples=table, requests={"ListGroups": 1},
                      group_states=groups)  # fmt: skip


def service(
    tmp_path: Path,
    script: list,
    rules: RulesConfig,
    cluster: str = "c",
    interval_s: float = 10,
    sink: Any = None,
) -> tuple[Coordinator, Any]:
    """A coordinator over one cluster whose collector follows ``script``."""
    config = parse_service_config(
        {"clusters": [{"name": cluster, "bootstrap_servers": "127.0.0.1:1",
                       "scan_interval": interval_s, "down_after_failures": 2}],
         "history": {"enabled": False}},
        "test",
    )  # fmt: skip
    sink = sink or RecordingSink()
    coord = Coordinator(config, rules, tmp_path, sink,
                        collector_factory=lambda _: ScriptedCollector(script))  # fmt: skip
    for state in coord.clusters.values():
        state.collector = ScriptedCollector(script)
    return coord, sink


async def drive(coord: Coordinator, count: int, cluster: str = "c") -> None:
    """Run ``count`` scans now, ignoring the failure backoff clock (the test drives time)."""
    for _ in range(count):
        coord.clusters[cluster].retry_at = 0
        await coord.scan_once(cluster)


def replayed_service(
    tmp_path: Path,
    history: Path | pa.Table,
    rules: RulesConfig,
    interval_s: float = 10,
    sink: Any = None,
) -> tuple[Coordinator, list]:
    """A coordinator fed every scan of a stored history (e.g. examples/sample-history.csv, or
    a table of samples)."""
    table = history if isinstance(history, pa.Table) else read_samples(history)
    script = []
    cluster = None
    for scan in scans(table):
        cluster = scan.cluster
        ts = scan.ts
        rows = table.filter(pa.compute.equal(table.column("ts").cast(pa.int64()), ts))
        script.append(scan_result(rows, cluster, ts))
    coord, _ = service(tmp_path, script, rules, cluster=cluster, interval_s=interval_s, sink=sink)
    return coord, script
