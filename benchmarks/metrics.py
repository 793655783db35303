"""Benchmark: one Prometheus scrape of ``/metrics`` over a large fleet, both exporters' families on.

The fleet is the size ``benchmarks/scan.py --full`` builds on the embedded broker (1,000 groups of
50 partitions: 50,000 group-partitions), fed here as scripted scans through the real
coordinator (window store, every rule, the gate), so the scrape reads exactly what a running
service holds; every partition is assigned to a member, so Kafka Lag Exporter's series carry
real member labels. Measured through the app over ASGI, as Prometheus would ask:

* the first scrape after a scan (the cluster's group and partition lines are rendered),
* a repeated scrape before the next scan (they are reused),

each with its size and series count. The baseline, measured in the same run, is
prometheus_client's own ``generate_latest`` writing the same samples from metric families.

    python benchmarks/metrics.py          # 100 groups x 20 partitions
    python benchmarks/metrics.py --full   # 1,000 groups x 50 partitions

Target (at the full size): a scrape after a scan within 1 s on this 2-core machine.
Ends with one JSON line: name, figures, baseline, targets and whether each is met.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import httpx  # noqa: E402
import pyarrow as pa  # noqa: E402
from prometheus_client import CollectorRegistry, generate_latest  # noqa: E402
from prometheus_client.core import GaugeMetricFamily  # noqa: E402
from prometheus_client.parser import text_string_to_metric_families  # noqa: E402

from notifier.api import create_app  # noqa: E402
from notifier.collect import ScanResult  # noqa: E402
from notifier.config import parse_service_config  # noqa: E402
from notifier.rules import load_rules  # noqa: E402
from notifier.service import Coordinator, LogSink  # noqa: E402
from notifier.types import SAMPLE_SCHEMA, GroupMember  # noqa: E402

TARGET_SCRAPE_S = 1.0
T0 = 1_800_000_000_000


class Scripted:
    def __init__(self, scans: list[ScanResult]):
        self.scans = scans

    async def scan(self) -> ScanResult:
        return self.scans.pop(0)

    async def close(self) -> None:
        pass


def fleet_scan(groups: int, partitions: int, i: int) -> ScanResult:
    ts = T0 + i * 10_000
    names = [f"service-{g:04d}-consumer" for g in range(groups)]
    rows = groups * partitions
    group_col = [n for n in names for _ in range(partitions)]
    topic_col = [f"events-{g:04d}" for g in range(groups) for _ in range(partitions)]
    part_col = [p for _ in range(groups) for p in range(partitions)]
    leo = [1_000_000 + 100 * i + 7 * p for p in part_col]
    committed = [e - (p * 13) % 500 for e, p in zip(leo, part_col, strict=True)]
    table = pa.table(
        {
            "ts": pa.array([ts] * rows, pa.int64()),
            "cluster": ["prod"] * rows,
            "group": group_col,
            "topic": topic_col,
            "partition": pa.array(part_col, pa.int32()),
            "committed_offset": pa.array(committed, pa.int64()),
            "log_end_offset": pa.array(leo, pa.int64()),
            "log_start_offset": pa.array([0] * rows, pa.int64()),
            "group_state": ["Stable"] * rows,
            "members": pa.array([4] * rows, pa.int32()),
            "member_hash": pa.array([17] * rows, pa.int64()),
            "available": pa.array([True] * rows, pa.bool_()),
        }
    ).cast(SAMPLE_SCHEMA)
    owners: dict[str, dict[tuple[str, int], GroupMember]] = {}
    for g, t, p in zip(group_col, topic_col, part_col, strict=True):
        owners.setdefault(g, {})[(t, p)] = GroupMember(
            f"{g}-client-{p % 4}-5a1c9e", f"{g}-client", f"10.1.{p % 4}.{hash(g) % 250}"
        )
    return ScanResult(
        cluster="prod",
        ts=ts,
        samples=table,
        requests={"ListGroups": 1},
        group_states=dict.fromkeys(names, "Stable"),
        group_members=dict.fromkeys(names, 4),
        owners=owners,
    )


def baseline(text: str) -> float:
    """prometheus_client writing the same samples from metric families."""
    parsed = list(text_string_to_metric_families(text))

    class Replay:
        def collect(self):
            for family in parsed:
                labels = sorted({k for s in family.samples for k in s.labels})
                out = GaugeMetricFamily(family.name, family.documentation, labels=labels)
                for s in family.samples:
                    out.add_metric([s.labels.get(k, "") for k in labels], s.value)
                yield out

    registry = CollectorRegistry(auto_describe=False)
    registry.register(Replay())
    started = time.perf_counter()
    generate_latest(registry)
    return time.perf_counter() - started


async def run(groups: int, partitions: int, scans: int) -> dict:
    config = parse_service_config(
        {"clusters": [{"name": "prod", "bootstrap_servers": "127.0.0.1:1"}],
         "history": {"enabled": False}}, "bench"
    )  # fmt: skip
    script = [fleet_scan(groups, partitions, i) for i in range(scans)]
    with tempfile.TemporaryDirectory() as data:
        coord = Coordinator(config, load_rules(ROOT / "rules.yaml"), Path(data), LogSink(),
                            collector_factory=lambda _: Scripted(script))  # fmt: skip
        coord.clusters["prod"].collector = Scripted(script)
        app = create_app(coord, clock=lambda: T0 + (scans - 1) * 10_000 + 5_000)
        transport = httpx.ASGITransport(app=app)
        first, again = [], []
        async with httpx.AsyncClient(transport=transport, base_url="http://bench") as http:
            for _ in range(scans):
                await coord.scan_once("prod")
                started = time.perf_counter()
                response = await http.get("/metrics")
                first.append(time.perf_counter() - started)
                started = time.perf_counter()
                await http.get("/metrics")
                again.append(time.perf_counter() - started)
        text = response.text
    series = sum(1 for line in text.splitlines() if line and not line.startswith("#"))
    return {
        "group_partitions": groups * partitions,
        "series": series,
        "bytes": len(response.content),
        "scrape_after_scan_s": round(statistics.median(first[1:] or first), 3),
        "scrape_again_s": round(statistics.median(again), 3),
        "baseline_generate_latest_s": round(baseline(text), 3),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--full", action="store_true", help="1,000 groups x 50 partitions")
    args = parser.parse_args()
    groups, partitions = (1000, 50) if args.full else (100, 20)
    figures = asyncio.run(run(groups, partitions, scans=4))
    for key, value in figures.items():
        print(f"{key:>28}: {value:,}" if isinstance(value, int) else f"{key:>28}: {value}")
    met = figures["scrape_after_scan_s"] <= TARGET_SCRAPE_S
    print(json.dumps({
        "name": "metrics_scrape", "figures": figures,
        "baseline": {"generate_latest_s": figures["baseline_generate_latest_s"]},
        "targets": {"scrape_after_scan_s": TARGET_SCRAPE_S},
        "met": {"scrape_after_scan_s": met},
    }))  # fmt: skip


if __name__ == "__main__":
    main()
