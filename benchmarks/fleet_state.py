"""Benchmark: what shard state costs a fleet instance (issue 10), against the embedded broker.

One cluster of ``--groups`` groups x ``--partitions`` partitions (default 1,000 x 50 = 50,000
group-partitions, each group reading its own topic) is scanned ``--scans`` times through the
service's own pipeline (synthetic scans, the default rules), then published to a state topic of
32 shards the way ``notifier run`` publishes after every scan:

* the first publish (a snapshot of every group),
* the publishes after it (a change record per group, the scan's samples and rule state, and
  the snapshots due: each group's every ``snapshot_every`` = 10 scans, spread over the cycle),
* a snapshot of every shard (what revoking all shards costs),
* loading every shard into a fresh coordinator (what taking all of them over costs),
* an assignment of 8 shards of which 4 are empty (``--assign-groups`` groups in each of the
  others) into a fresh coordinator, shard by shard as the fleet's membership loads them and
  all together (:meth:`ShardState.load_many`).

Each is timed end to end (encoding, producing, the broker's acknowledgements) and one publish
also with the producer left out (the CPU the scan loop pays). Bytes are record keys and values
as produced (values are deflated). Ends with one JSON line.

    python benchmarks/fleet_state.py
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from notifier.config import parse_service_config  # noqa: E402
from notifier.embedded import EmbeddedBroker  # noqa: E402
from notifier.fleet.state import ShardState  # noqa: E402
from notifier.fleet.statetopic import ensure_topic  # noqa: E402
from notifier.rules import ScanColumns, load_rules  # noqa: E402
from notifier.service import Coordinator, LogSink  # noqa: E402
from notifier.types import GROUP_STATE_CODE  # noqa: E402

SHARDS = 32
INTERVAL_MS = 10_000


def shard_of(cluster: str, group: str, partitions: int) -> int:
    """The fleet's shard function (notifier/fleet/shards.py on the fleet branch)."""
    digest = hashlib.blake2b(f"{cluster}\0{group}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big") % partitions


def coordinator(bootstrap: str, data_dir: Path) -> Coordinator:
    service = parse_service_config(
        {
            "clusters": [{"name": "bench", "bootstrap_servers": bootstrap}],
            "data_dir": str(data_dir),
            "history": {"enabled": False},
        },
        "bench",
    )
    return Coordinator(service, load_rules(ROOT / "rules.yaml"), data_dir, LogSink())


def scan(groups: int, partitions: int, i: int, rng: np.random.Generator) -> ScanColumns:
    n = groups * partitions
    leo = 1_000_000 + (i + 1) * 500 + np.arange(n, dtype=np.int64)
    return ScanColumns(
        cluster="bench",
        ts=1_800_000_000_000 + i * INTERVAL_MS,
        group=[f"group-{g}" for g in range(groups) for _ in range(partitions)],
        topic=[f"topic-{g}" for g in range(groups) for _ in range(partitions)],
        partition=np.tile(np.arange(partitions, dtype=np.int32), groups),
        committed=leo - rng.integers(0, 400, size=n),
        log_end=leo,
        log_start=leo - 100_000,
        state=np.full(n, GROUP_STATE_CODE["Stable"], dtype=np.int8),
        members=np.full(n, 3, dtype=np.int32),
        member_hash=np.full(n, 7, dtype=np.int64),
    )


async def assign_8_shards_4_empty(
    bootstrap: str, a: Coordinator, tmp: Path, by_shard: dict[int, list[str]], per_shard: int
) -> dict[str, Any]:
    """Taking over 8 shards, 4 of them empty: what a hand-over waits for besides the data."""
    topic = "notifier-fleet.bench-assign.state"
    await ensure_topic(bootstrap, topic, 8)
    names = [g for shard in sorted(by_shard) for g in by_shard[shard]]
    placed = {s: names[s * per_shard : (s + 1) * per_shard] for s in range(4)}
    async with ShardState(bootstrap, topic, a, snapshot_every=10) as shards:
        await shards.publish_scan("bench", placed)
    figures: dict[str, Any] = {}
    for name, together in (("assign_8_shards_4_empty_s", False), ("load_many_8_4_empty_s", True)):
        fresh = coordinator(bootstrap, tmp / f"assign-{together}")
        async with ShardState(bootstrap, topic, fresh, snapshot_every=10) as shards:
            started = time.perf_counter()
            if together:
                loaded = await shards.load_many(range(8))
            else:
                loaded = [await shards.load(shard) for shard in range(8)]
            figures[name] = round(time.perf_counter() - started, 3)
        if sum(r.groups for r in loaded) != 4 * per_shard:
            raise AssertionError(f"{name}: loaded {[r.groups for r in loaded]} groups per shard")
    figures["assign_groups_per_shard"] = per_shard
    return figures


async def run(groups: int, partitions: int, scans: int, assign_groups: int) -> dict[str, Any]:
    rng = np.random.default_rng(1)
    with tempfile.TemporaryDirectory() as tmp, EmbeddedBroker() as broker:
        bootstrap = broker.bootstrap_servers
        topic = "notifier-fleet.bench.state"
        await ensure_topic(bootstrap, topic, SHARDS)
        a = coordinator(bootstrap, Path(tmp) / "a")
        state = a.clusters["bench"]
        by_shard: dict[int, list[str]] = {}
        for g in range(groups):
            name = f"group-{g}"
            by_shard.setdefault(shard_of("bench", name, SHARDS), []).append(name)
        figures: dict[str, Any] = {"groups": groups, "group_partitions": groups * partitions}
        async with ShardState(bootstrap, topic, a, snapshot_every=10) as shards:
            steady = []
            for i in range(scans):
                state.pipeline.step(scan(groups, partitions, i, rng))
                report = await shards.publish_scan("bench", by_shard)
                if i == 0:
                    figures["first_publish_s"] = round(report.seconds, 3)
                    figures["first_publish_bytes"] = report.bytes
                else:
                    steady.append(report)
            figures["publish_mean_s"] = round(np.mean([r.seconds for r in steady]), 3)
            figures["publish_max_s"] = round(max(r.seconds for r in steady), 3)
            figures["publish_mean_bytes"] = round(np.mean([r.bytes for r in steady]))
            figures["publish_mean_snapshots"] = round(np.mean([r.snapshots for r in steady]), 1)
            # The same steady-state publish without the producer: the scan loop's CPU.
            sent = shards._writer.send_many

            async def nothing(shard: int, records: list[Any]) -> int:
                return len(records)

            shards._writer.send_many = nothing  # type: ignore[method-assign]
            state.pipeline.step(scan(groups, partitions, scans, rng))
            started = time.perf_counter()
            await shards.publish_scan("bench", by_shard)
            figures["publish_without_producer_s"] = round(time.perf_counter() - started, 3)
            shards._writer.send_many = sent  # type: ignore[method-assign]
            state.pipeline.step(scan(groups, partitions, scans + 1, rng))
            await shards.publish_scan("bench", by_shard)

            started = time.perf_counter()
            snapshot_bytes = 0
            for shard in sorted(by_shard):
                snapshot_bytes += (await shards.snapshot(shard)).bytes
            figures["snapshot_all_s"] = round(time.perf_counter() - started, 3)
            figures["snapshot_all_bytes"] = snapshot_bytes

        b = coordinator(bootstrap, Path(tmp) / "b")
        async with ShardState(bootstrap, topic, b, snapshot_every=10) as shards:
            started = time.perf_counter()
            loaded = [await shards.load(shard) for shard in sorted(by_shard)]
            figures["load_all_s"] = round(time.perf_counter() - started, 3)
            figures["load_records"] = sum(r.records for r in loaded)
            figures["loaded_groups"] = sum(r.groups for r in loaded)
        same = all(
            np.array_equal(
                a.clusters["bench"].store.export_group("bench", g).columns["s_committed"],  # type: ignore[union-attr]
                b.clusters["bench"].store.export_group("bench", g).columns["s_committed"],  # type: ignore[union-attr]
            )
            for g in (f"group-{i}" for i in range(0, groups, max(1, groups // 20)))
        )
        figures["loaded_windows_equal"] = same
        figures |= await assign_8_shards_4_empty(bootstrap, a, Path(tmp), by_shard, assign_groups)
        return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--groups", type=int, default=1000)
    parser.add_argument("--partitions", type=int, default=50)
    parser.add_argument("--scans", type=int, default=12)
    parser.add_argument("--assign-groups", type=int, default=5)
    args = parser.parse_args()
    figures = asyncio.run(run(args.groups, args.partitions, args.scans, args.assign_groups))
    for name, value in figures.items():
        print(f"{name:>24}: {value}")
    print(json.dumps({"name": "fleet_state", "figures": figures}))


if __name__ == "__main__":
    main()
