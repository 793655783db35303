"""Benchmark: full scan + evaluate cycles against a broker, beside the floor.

The service's cycle is what ``notifier run`` does on every tick: the collector's scan of the
cluster (ListGroups, DescribeGroups in batches, OffsetFetch in batches of groups where the
broker has v8 (KIP-709), ListOffsets latest and earliest per leader) and the coordinator's
processing of it (window store, every rule, the gate, transitions), i.e.
:meth:`Coordinator.scan_once`. The floor, measured in the same run against the same broker, is
a minimal aiokafka script that only sends the requests a scan cannot do without and decodes the
answers: ListGroups per broker, DescribeGroups in one batch per coordinator (as large as the
broker accepts), OffsetFetch naming exactly the partitions each group committed to (v8 batches
of the collector's size where the broker has v8, else one per group), and one ListOffsets
latest plus one earliest per leader. It runs in a child process, with the cluster's set-up, so
that the peak RSS reported is the service's alone.

Groups are created the cheap way, with one OffsetCommit each (a group with committed offsets and
no members is listed like any other), on topics that hold three records per partition.

    python benchmarks/scan.py                  # embedded broker: 100 groups, 2,000 group-partitions
    python benchmarks/scan.py --full           # embedded: 1,000 groups, 50,000 group-partitions
    python benchmarks/scan.py --kafka          # Apache Kafka: 500 groups on one 100-partition
                                               # topic, 50,000 group-partitions
    python benchmarks/scan.py --kafka --full   # Apache Kafka: 10,000 groups, 10^6 (issue 29)

The service runs as ``notifier run`` does by default, writing the history (``--no-history``:
without). Its peak RSS is this process's alone: the cluster's set-up and the floor run in a
child process and the broker in its own. On Linux it is read at the boundaries of each stage of
every cycle (collect: the requests and the sample table; columns: ScanColumns; step: window
store, rules and transitions; history: handing the table to the writer; between: the rest),
with the peak within each, and printed per stage for the timed cycles; the one cycle traced by
tracemalloc for ``cycle_alloc_peak_mib`` comes after and counts in no RSS figure.

Targets (at the full size): embedded, a cycle in under 5 s and within 2x of the floor; Apache
Kafka, a cycle (scan + evaluate) in at most 10 s, at most 100 requests per cycle and a peak RSS
of at most 1 GiB.
Ends with one JSON line: name, figures, baseline (the floor), targets and whether each is met.
"""

from __future__ import annotations

import argparse
import asyncio
import concurrent.futures
import json
import logging
import multiprocessing
import resource
import statistics
import sys
import tempfile
import time
import tracemalloc
from collections import Counter, defaultdict
from collections.abc import Awaitable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from aiokafka import AIOKafkaProducer, TopicPartition  # noqa: E402
from aiokafka.admin import AIOKafkaAdminClient, NewTopic  # noqa: E402
from aiokafka.client import AIOKafkaClient  # noqa: E402
from aiokafka.errors import KafkaError  # noqa: E402
from aiokafka.protocol.admin import DescribeGroupsRequest_v0, ListGroupsRequest  # noqa: E402
from aiokafka.protocol.api import Request  # noqa: E402
from aiokafka.protocol.commit import OffsetCommitRequest, OffsetFetchRequest  # noqa: E402
from aiokafka.protocol.coordination import FindCoordinatorRequest  # noqa: E402
from aiokafka.protocol.offset import OffsetRequest  # noqa: E402

from notifier.collect.protocol import OffsetFetch  # noqa: E402
from notifier.config import parse_service_config  # noqa: E402
from notifier.embedded import EmbeddedBroker  # noqa: E402
from notifier.embedded.apache_kafka import KAFKA_VERSION, ApacheKafkaBroker  # noqa: E402
from notifier.history import HistoryWriter  # noqa: E402
from notifier.rules import ScanColumns, load_rules  # noqa: E402
from notifier.service import Coordinator, LogSink, make_collector  # noqa: E402

RECORDS_PER_PARTITION = 3
TARGET_CYCLE_S = 5.0
TARGET_RATIO = 2.0
KAFKA_TARGET_CYCLE_S = 10.0
KAFKA_TARGET_REQUESTS = 100
KAFKA_TARGET_RSS_MIB = 1024
COORDINATOR_LOADING = {14, 15, 16}
"""COORDINATOR_LOAD_IN_PROGRESS, COORDINATOR_NOT_AVAILABLE, NOT_COORDINATOR."""


@dataclass(frozen=True)
class Layout:
    """``groups`` groups, each committed to every partition of one of ``topics`` topics."""

    groups: int
    topics: int
    partitions: int
    """Partitions per topic (= group-partitions per group)."""

    @property
    def group_partitions(self) -> int:
        return self.groups * self.partitions

    def topic(self, index: int) -> str:
        return f"bench-t{index:03d}"

    def group(self, index: int) -> str:
        return f"bench-g{index:05d}"

    def topic_of(self, group_index: int) -> str:
        return self.topic(group_index % self.topics)

    def committed(self, group_index: int, partition: int) -> int:
        """Somewhere from caught up to three records behind: every lag is small and known."""
        return (group_index + partition) % (RECORDS_PER_PARTITION + 1)


# --------------------------------------------------------------------------------------------
# Setting up the cluster


async def _bounded(jobs: Iterable[Awaitable[Any]], limit: int) -> list[Any]:
    gate = asyncio.Semaphore(limit)

    async def one(job: Awaitable[Any]) -> Any:
        async with gate:
            return await job

    return await asyncio.gather(*(one(j) for j in jobs))


async def populate(bootstrap: str, layout: Layout) -> None:
    """Topics, three records per partition (one per batch, for exact log-end offsets on the
    embedded broker), and one OffsetCommit per group."""
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=60_000)
    await admin.start()
    try:
        topics = [NewTopic(layout.topic(t), layout.partitions, 1) for t in range(layout.topics)]
        for start in range(0, len(topics), 10):
            await admin.create_topics(topics[start : start + 10])
    finally:
        await admin.close()

    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, linger_ms=0)
    await producer.start()
    try:
        for _ in range(RECORDS_PER_PARTITION):
            # One record per partition in flight: each becomes its own batch.
            await _bounded(
                (
                    producer.send_and_wait(layout.topic(t), b"x", partition=p)
                    for t in range(layout.topics)
                    for p in range(layout.partitions)
                ),
                limit=2000,
            )
    finally:
        await producer.stop()

    client = AIOKafkaClient(bootstrap_servers=bootstrap, request_timeout_ms=60_000)
    await client.bootstrap()
    try:
        any_node = next(iter(client.cluster.brokers())).nodeId

        async def commit(index: int) -> None:
            group = layout.group(index)
            offsets = [(p, layout.committed(index, p), "") for p in range(layout.partitions)]
            request = OffsetCommitRequest(group, -1, "", -1, [(layout.topic_of(index), offsets)])
            errors: set[int] = set()
            for _ in range(300):
                found = await client.send(any_node, FindCoordinatorRequest(group, 0))
                if found.error_code == 0:
                    response = await client.send(found.coordinator_id, request)
                    errors = {e for _, parts in response.topics for _, e in parts if e}
                    if not errors:
                        return
                else:
                    errors = {found.error_code}
                if errors - COORDINATOR_LOADING:
                    break
                # A fresh broker creates and loads its offsets topic on the first lookups.
                await asyncio.sleep(0.1)
            raise RuntimeError(f"OffsetCommit for {group} failed: error codes {errors}")

        await _bounded((commit(i) for i in range(layout.groups)), limit=32)
    finally:
        await client.close()


# --------------------------------------------------------------------------------------------
# The floor


class _DescribeGroupsV0(Request[DescribeGroupsRequest_v0]):
    """DescribeGroups pinned to v0, whose answer aiokafka decodes right for any batch size."""

    API_KEY = 15

    def __init__(self, groups: list[str]) -> None:
        self._groups = groups

    def build(self, request_struct_class: type[DescribeGroupsRequest_v0]) -> Any:
        return request_struct_class(self._groups)


class Floor:
    """The fewest requests a scan needs, sent with aiokafka's client and nothing else."""

    def __init__(self, bootstrap: str, layout: Layout, concurrency: int, fetch_batch: int):
        self.client = AIOKafkaClient(bootstrap_servers=bootstrap, request_timeout_ms=30_000)
        self.layout = layout
        self.concurrency = concurrency
        self.describe_batch = layout.groups
        self.fetch_batch = fetch_batch
        self.requests: Counter[str] = Counter()

    async def start(self) -> None:
        await self.client.bootstrap()
        # The topics' leaders, which a client that subscribes to nothing is not told.
        await self.client.set_topics([self.layout.topic(t) for t in range(self.layout.topics)])
        node = next(iter(self.client.cluster.brokers())).nodeId
        if not await self._has_offset_fetch_v8(node):
            self.fetch_batch = 1
        # Not part of a cycle: the largest DescribeGroups batch the broker answers.
        groups = [self.layout.group(i) for i in range(self.layout.groups)]
        node = next(iter(self.client.cluster.brokers())).nodeId
        while True:
            try:
                await self.client.send(node, _DescribeGroupsV0(groups[: self.describe_batch]))
                return
            except KafkaError:
                if self.describe_batch == 1:
                    raise
                self.describe_batch = (self.describe_batch + 1) // 2

    async def _has_offset_fetch_v8(self, node: int) -> bool:
        conn = await self.client._get_conn(node)
        versions = getattr(conn, "_versions", {}) if conn is not None else {}
        return versions.get(OffsetFetch.API_KEY, (0, 0))[1] >= 8

    async def close(self) -> None:
        await self.client.close()

    async def _send(self, node: int, request: Request[Any], api: str) -> Any:
        self.requests[api] += 1
        return await self.client.send(node, request)

    async def cycle(self) -> int:
        """One scan's worth of requests; returns the number of group-partitions answered."""
        layout = self.layout
        brokers = [b.nodeId for b in self.client.cluster.brokers()]
        listed: dict[str, int] = {}
        for node, response in zip(
            brokers,
            await asyncio.gather(
                *(self._send(n, ListGroupsRequest(), "ListGroups") for n in brokers)
            ),
        ):
            for group, _protocol_type in response.groups:
                listed[group] = node
        by_node: defaultdict[int, list[str]] = defaultdict(list)
        for group, node in listed.items():
            by_node[node].append(group)
        index = {layout.group(i): i for i in range(layout.groups)}

        async def describe(node: int, names: list[str]) -> None:
            await self._send(node, _DescribeGroupsV0(names), "DescribeGroups")

        async def fetch(node: int, names: list[str]) -> int:
            wanted = [
                (g, [(layout.topic_of(index[g]), list(range(layout.partitions)))]) for g in names
            ]
            if len(names) == 1:
                request: Request[Any] = OffsetFetchRequest(*wanted[0])
            else:
                request = OffsetFetch(wanted)
            response = await self._send(node, request, "OffsetFetch")
            if response.API_VERSION >= 8:
                return sum(topic.partition.size for g in response.groups for topic in g[1])
            return sum(len(parts) for _, parts in response.topics)

        batch = self.describe_batch
        describing = [
            describe(node, names[i : i + batch])
            for node, names in by_node.items()
            for i in range(0, len(names), batch)
        ]
        fetching = []
        for node, names in by_node.items():
            mine = [g for g in names if g in index]
            fetching += [
                fetch(node, mine[i : i + self.fetch_batch])
                for i in range(0, len(mine), self.fetch_batch)
            ]
        answered, _ = await asyncio.gather(
            _bounded(fetching, self.concurrency), asyncio.gather(*describing)
        )

        by_leader: defaultdict[int, defaultdict[str, list[int]]] = defaultdict(
            lambda: defaultdict(list)
        )
        for t in range(layout.topics):
            topic = layout.topic(t)
            for p in range(layout.partitions):
                by_leader[self.client.cluster.leader_for_partition(TopicPartition(topic, p))][
                    topic
                ].append(p)

        async def list_offsets(leader: int, timestamp: int) -> None:
            topics = [
                (topic, [(p, timestamp) for p in parts])
                for topic, parts in sorted(by_leader[leader].items())
            ]
            await self._send(leader, OffsetRequest(-1, 0, topics), "ListOffsets")

        await asyncio.gather(*(list_offsets(leader, ts) for leader in by_leader for ts in (-1, -2)))
        return sum(answered)


# --------------------------------------------------------------------------------------------
# Measuring


def _cpu() -> float:
    return time.process_time()


_STATUS = Path("/proc/self/status")
_CLEAR_REFS = Path("/proc/self/clear_refs")


def _status_mib() -> tuple[float, float]:
    """This process's resident set now and its peak since the last reset (Linux), in MiB."""
    fields = {}
    for line in _STATUS.read_text().splitlines():
        name, _, value = line.partition(":")
        if name in ("VmRSS", "VmHWM"):
            fields[name] = int(value.split()[0]) / 1024
    return fields["VmRSS"], fields["VmHWM"]


class StageMemory:
    """The resident set at the boundaries of a cycle's stages and its peak within each.

    Linux only: the peak is ``VmHWM``, reset at every boundary by writing 5 to
    ``/proc/self/clear_refs``. That reset also resets what ``getrusage`` reports as the peak,
    so the process's peak is kept here: the peak before the first boundary (imports, warm-up)
    and the highest of every stage's since. Stages are the calls wrapped with :meth:`wrap`;
    the time between two of them counts as ``"between"``."""

    def __init__(self) -> None:
        self.process_peak_mib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        self.enabled = _STATUS.exists() and _can_write(_CLEAR_REFS)
        self.peak_mib: dict[str, float] = {}
        self.rise_mib: dict[str, float] = {}
        self.rss_after_mib: dict[str, float] = {}
        self._entered_at = 0.0
        self._wrapped: list[tuple[Any, str, Any]] = []
        if self.enabled:
            self.boundary("before")

    def boundary(self, stage: str) -> None:
        """``stage`` ends here: its peak and the resident set it leaves are recorded."""
        if not self.enabled:
            return
        rss, peak = _status_mib()
        self.process_peak_mib = max(self.process_peak_mib, peak)
        self.peak_mib[stage] = max(self.peak_mib.get(stage, 0.0), peak)
        self.rise_mib[stage] = max(self.rise_mib.get(stage, 0.0), peak - self._entered_at)
        self.rss_after_mib[stage] = rss
        _CLEAR_REFS.write_text("5")
        self._entered_at = rss

    def wrap(self, owner: Any, name: str, stage: str, *, cls: bool = False) -> None:
        """Count calls of ``owner.name`` as ``stage`` (``cls``: a classmethod of ``owner``)."""
        self._wrapped.append((owner, name, vars(owner).get(name)))
        original = getattr(owner, name)
        function = original.__func__ if cls else original
        memory = self

        if asyncio.iscoroutinefunction(function):

            async def timed_async(*args: Any, **kwargs: Any) -> Any:
                memory.boundary("between")
                try:
                    return await function(*args, **kwargs)
                finally:
                    memory.boundary(stage)

            setattr(owner, name, timed_async)
            return

        def timed(*args: Any, **kwargs: Any) -> Any:
            memory.boundary("between")
            try:
                return function(*args, **kwargs)
            finally:
                memory.boundary(stage)

        setattr(owner, name, classmethod(timed) if cls else timed)

    def restart(self) -> float:
        """Stage figures from here on only (the process's peak goes on); returns the peak so
        far (the warm-up's)."""
        peak_so_far = self.process_peak_mib
        self.peak_mib.clear()
        self.rise_mib.clear()
        self.rss_after_mib.clear()
        return peak_so_far

    def unwrap(self) -> None:
        """Every wrapped call as it was."""
        for owner, name, saved in reversed(self._wrapped):
            if saved is None:
                delattr(owner, name)
            else:
                setattr(owner, name, saved)
        self._wrapped.clear()

    def figures(self) -> dict[str, dict[str, float]]:
        return {
            stage: {
                "peak_rss_mib": round(self.peak_mib[stage]),
                "rise_mib": round(self.rise_mib[stage]),
                "rss_after_mib": round(self.rss_after_mib[stage]),
            }
            for stage in self.peak_mib
            if stage != "before"
        }


def _can_write(path: Path) -> bool:
    try:
        path.write_text("5")
    except OSError:
        return False
    return True


async def measure_service(
    bootstrap: str, layout: Layout, cycles: int, data_dir: Path, history: bool
) -> dict:
    """Coordinator.scan_once, back to back: scan, store, evaluate, transitions, and (as
    ``notifier run`` does by default) the history. The resident set is read at each stage's
    boundaries (:class:`StageMemory`) during every cycle, warm-up included; the one cycle
    traced by tracemalloc comes after and counts in none of the memory figures."""
    config = parse_service_config(
        {
            "clusters": [
                {
                    "name": "bench",
                    "bootstrap_servers": bootstrap,
                    "request_timeout": 30,
                    "scan_timeout": 120,
                    "group_allow": ["^bench-"],
                }
            ],
            "history": {"enabled": history},
        },
        "benchmark",
    )
    coordinator = Coordinator(config, load_rules(ROOT / "rules.yaml"), data_dir, LogSink())
    state = coordinator.clusters["bench"]
    state.collector = make_collector(state.config)
    if config.history.enabled:  # as Coordinator.start opens it
        coordinator.history = HistoryWriter(
            data_dir / "history", config.history.roll_interval, config.history.retention_days
        )
    memory = StageMemory()
    memory.wrap(state.collector, "scan", "collect")
    memory.wrap(ScanColumns, "from_table", "columns", cls=True)
    memory.wrap(state.pipeline, "step", "step")
    if coordinator.history is not None:
        memory.wrap(coordinator.history, "append", "history")
    try:
        for _ in range(2):  # warm-up: metadata, learned batch sizes, store rows
            await coordinator.scan_once("bench")
            memory.boundary("between")
        warm_up_peak = memory.restart()
        seconds, cpu, requests, scan_s, evaluate_s = [], [], [], [], []
        for _ in range(cycles):
            state.retry_at = 0.0
            started, cpu_started = time.perf_counter(), _cpu()
            await coordinator.scan_once("bench")
            seconds.append(time.perf_counter() - started)
            cpu.append(_cpu() - cpu_started)
            requests.append(dict(state.metrics.last_requests))
            scan_s.append(state.metrics.last_duration_s)
            evaluate_s.append(state.metrics.last_evaluate_s)
            memory.boundary("between")
        if state.metrics.failures:
            raise RuntimeError(f"{state.metrics.failures} scans failed: {state.metrics.last_error}")
        rows = state.store.rows_in_use
        rss_between_cycles = memory.rss_after_mib.get("between")
        peak_rss = max(memory.process_peak_mib, _peak_so_far())
        if coordinator.history is not None:
            # Its last scan written out (it counts in the figures above) before the traced cycle.
            await asyncio.to_thread(coordinator.history.flush)
            memory.boundary("between")
            peak_rss = max(memory.process_peak_mib, _peak_so_far())
        figures = memory.figures()
        memory.unwrap()
        tracemalloc.start()
        await coordinator.scan_once("bench")
        _, traced_peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
    finally:
        memory.unwrap()
        await state.collector.close()
        if coordinator.history is not None:
            await asyncio.to_thread(coordinator.history.close)
    return {
        "seconds_per_cycle": round(statistics.median(seconds), 3),
        "seconds_min": round(min(seconds), 3),
        "scan_s": round(statistics.median(scan_s), 3),
        "evaluate_s": round(statistics.median(evaluate_s), 3),
        "cpu_s_per_cycle": round(statistics.median(cpu), 3),
        "requests_per_cycle": sum(requests[-1].values()),
        "requests": requests[-1],
        "requests_constant": all(r == requests[0] for r in requests),
        "windows": rows,
        "history": coordinator.history is not None,
        "peak_rss_mib": round(peak_rss),
        "warm_up_peak_rss_mib": round(warm_up_peak),
        "rss_between_cycles_mib": None if rss_between_cycles is None else round(rss_between_cycles),
        "stages": figures,
        "cycle_alloc_peak_mib": round(traced_peak / 2**20, 1),
    }


def _peak_so_far() -> float:
    """The peak since the last reset of ``VmHWM`` (Linux), else the process's."""
    if _STATUS.exists():
        return _status_mib()[1]
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


async def measure_floor(
    bootstrap: str, layout: Layout, cycles: int, concurrency: int, fetch_batch: int
) -> dict:
    floor = Floor(bootstrap, layout, concurrency, fetch_batch)
    await floor.start()
    try:
        answered = await floor.cycle()  # warm-up: connections
        seconds, cpu, requests = [], [], []
        for _ in range(cycles):
            floor.requests.clear()
            started, cpu_started = time.perf_counter(), _cpu()
            answered = await floor.cycle()
            seconds.append(time.perf_counter() - started)
            cpu.append(_cpu() - cpu_started)
            requests.append(dict(floor.requests))
    finally:
        await floor.close()
    return {
        "name": "minimal aiokafka script (bare minimum requests)",
        "seconds_per_cycle": round(statistics.median(seconds), 3),
        "seconds_min": round(min(seconds), 3),
        "cpu_s_per_cycle": round(statistics.median(cpu), 3),
        "requests_per_cycle": sum(requests[-1].values()),
        "requests": requests[-1],
        "describe_batch": floor.describe_batch,
        "offset_fetch_batch": floor.fetch_batch,
        "group_partitions_answered": answered,
    }


def set_up_and_measure_floor(
    bootstrap: str, layout: Layout, cycles: int, concurrency: int, fetch_batch: int
) -> tuple[dict, float]:
    """In a child process: the cluster's groups, then the floor's cycles."""

    async def both() -> tuple[dict, float]:
        started = time.perf_counter()
        await populate(bootstrap, layout)
        setup_s = time.perf_counter() - started
        print(
            f"set up {layout.groups:,} groups, {layout.group_partitions:,} group-partitions "
            f"on {layout.topics} topics x {layout.partitions} partitions in {setup_s:.1f} s",
            flush=True,
        )
        return await measure_floor(bootstrap, layout, cycles, concurrency, fetch_batch), setup_s

    logging.getLogger("aiokafka").setLevel(logging.CRITICAL)
    return asyncio.run(both())


async def run(
    layout: Layout, cycles: int, concurrency: int, fetch_batch: int, kafka: bool, history: bool
) -> tuple[dict, dict, float]:
    with tempfile.TemporaryDirectory(prefix="notifier-bench-") as tmp:
        broker: EmbeddedBroker | ApacheKafkaBroker
        if kafka:
            (Path(tmp) / "kafka").mkdir()
            broker = ApacheKafkaBroker(KAFKA_VERSION, data_dir=Path(tmp) / "kafka", heap="2g")
            await asyncio.to_thread(broker.start)
            print(f"Apache Kafka {KAFKA_VERSION} started in {broker.started_in_s:.1f} s")
        else:
            broker = EmbeddedBroker(log_dir=Path(tmp) / "broker")
            await broker.astart()
        try:
            spawn = multiprocessing.get_context("spawn")
            with concurrent.futures.ProcessPoolExecutor(1, mp_context=spawn) as child:
                floor, setup_s = await asyncio.get_running_loop().run_in_executor(
                    child,
                    set_up_and_measure_floor,
                    broker.bootstrap_servers,
                    layout,
                    cycles,
                    concurrency,
                    fetch_batch,
                )
            service = await measure_service(
                broker.bootstrap_servers, layout, cycles, Path(tmp) / "data", history
            )
        finally:
            if isinstance(broker, ApacheKafkaBroker):
                await asyncio.to_thread(broker.close)
            else:
                await broker.astop()
    return service, floor, setup_s


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--full",
        action="store_true",
        help="the issue's size: embedded 1,000 groups x 50 partitions; --kafka 10,000 x 100",
    )
    parser.add_argument(
        "--kafka",
        action="store_true",
        help=f"on Apache Kafka {KAFKA_VERSION} (Java and Maven needed), groups on one topic",
    )
    parser.add_argument("--cycles", type=int, default=10, help="timed cycles of each (default 10)")
    parser.add_argument(
        "--no-history",
        action="store_true",
        help="without the history (notifier run writes it by default; the figures before "
        "this option existed were taken without it)",
    )
    args = parser.parse_args()
    # The collector's one-time probe of "OffsetFetch for all partitions" breaks a connection on
    # brokers without it, on purpose; aiokafka logs a traceback for that. Keep the output to the
    # collector's own one-line account of it.
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    logging.getLogger("aiokafka").setLevel(logging.CRITICAL)
    if args.kafka:
        layout = Layout(10_000, 1, 100) if args.full else Layout(500, 1, 100)
    else:
        layout = Layout(1000, 50, 50) if args.full else Layout(100, 10, 20)
    concurrency, fetch_batch = collector_defaults()
    service, floor, setup_s = asyncio.run(
        run(layout, args.cycles, concurrency, fetch_batch, args.kafka, not args.no_history)
    )

    ratio = service["seconds_per_cycle"] / floor["seconds_per_cycle"]
    peak_mib = service["peak_rss_mib"]
    print(
        f"service: {service['seconds_per_cycle']:.3f} s/cycle (scan {service['scan_s']:.3f} s, "
        f"evaluate {service['evaluate_s']:.3f} s), {service['requests_per_cycle']} requests "
        f"{service['requests']}, {service['cpu_s_per_cycle']:.3f} s CPU, "
        f"{service['windows']:,} windows, {service['cycle_alloc_peak_mib']} MiB allocated at "
        f"peak in a cycle, process peak RSS {peak_mib:.0f} MiB "
        f"({service['warm_up_peak_rss_mib']} MiB in the two warm-up cycles, "
        f"{service['rss_between_cycles_mib']} MiB between cycles), history "
        f"{'on' if service['history'] else 'off'}; in the timed cycles:"
    )
    for stage, figures in service["stages"].items():
        print(
            f"  {stage:8s} peak RSS {figures['peak_rss_mib']:6,} MiB, up to "
            f"{figures['rise_mib']:+5,} MiB within it, {figures['rss_after_mib']:6,} MiB after"
        )
    print(
        f"floor:   {floor['seconds_per_cycle']:.3f} s/cycle, {floor['requests_per_cycle']} "
        f"requests {floor['requests']}, {floor['cpu_s_per_cycle']:.3f} s CPU "
        f"(DescribeGroups batch {floor['describe_batch']}, OffsetFetch batch "
        f"{floor['offset_fetch_batch']}, {concurrency} at once)"
    )
    print(f"ratio to the floor: {ratio:.2f}x")
    targets: dict[str, float]
    if args.kafka:
        targets = {
            "seconds_per_cycle": KAFKA_TARGET_CYCLE_S,
            "requests_per_cycle": KAFKA_TARGET_REQUESTS,
            "peak_rss_mib": KAFKA_TARGET_RSS_MIB,
        }
        met = {
            "seconds_per_cycle": service["seconds_per_cycle"] <= KAFKA_TARGET_CYCLE_S,
            "requests_per_cycle": service["requests_per_cycle"] <= KAFKA_TARGET_REQUESTS,
            "peak_rss_mib": peak_mib <= KAFKA_TARGET_RSS_MIB,
        }
    else:
        targets = {"seconds_per_cycle": TARGET_CYCLE_S, "ratio_to_floor": TARGET_RATIO}
        met = {
            "seconds_per_cycle": service["seconds_per_cycle"] < TARGET_CYCLE_S,
            "ratio_to_floor": ratio <= TARGET_RATIO,
        }
    met |= {"requests_constant": service["requests_constant"], "at_full_size": args.full}
    print(
        json.dumps(
            {
                "name": "scan",
                "broker": f"Apache Kafka {KAFKA_VERSION}" if args.kafka else "embedded (Tansu)",
                "groups": layout.groups,
                "group_partitions": layout.group_partitions,
                "topics": layout.topics,
                "partitions_per_topic": layout.partitions,
                "cycles": args.cycles,
                "setup_s": round(setup_s, 1),
                **service,
                "peak_rss_mib": round(peak_mib),
                "ratio_to_floor": round(ratio, 2),
                "baseline": floor,
                "targets": targets,
                "met": met,
            }
        )
    )


def collector_defaults() -> tuple[int, int]:
    """The collector's OffsetFetch concurrency and batch size as ``notifier run`` configures
    them; the floor gets the same, so the comparison is of requests and overhead, not of
    parallelism."""
    config = parse_service_config({"clusters": [{"name": "c", "bootstrap_servers": "h:1"}]}, "-")
    cluster = config.clusters[0]
    return cluster.offset_fetch_concurrency, cluster.offset_fetch_batch_size


if __name__ == "__main__":
    main()
