"""The service against Apache Kafka itself: what a user running Kafka 4 (or 3.9) would see.

One broker per tested release for the whole session (tests/conftest.py); each test keeps to its
own topics and groups, and runs the service as ``notifier run`` does (the coordinator scanning
with the real collector, the Burrow API and /metrics over it) with the bundled rules at demo
timings (a tenth of the waits, a window of six scans). Kafka's own clients play the consumers:
the console consumer, a Java consumer (``group.protocol=consumer`` for KIP-848 groups, classic
with the cooperative-sticky assignor), and aiokafka for eager classic groups.
"""

from __future__ import annotations

import asyncio
import contextlib
import shutil
import subprocess
import threading
import time
import uuid
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient, NewTopic
from aiokafka.coordinator.assignors.range import RangePartitionAssignor
from aiokafka.errors import KafkaError, TopicAlreadyExistsError

from notifier.api.app import create_app
from notifier.collect import ClusterCollector
from notifier.config import parse_service_config
from notifier.demo import default_rules_path, demo_rules
from notifier.embedded.apache_kafka import ApacheKafkaBroker, KafkaUnavailable, kafka_jars
from notifier.rules import RulesConfig, load_rules, with_parameters
from notifier.rules.habits import UNSET_TS
from notifier.service import Coordinator, LogSink
from notifier.types import GroupResult, GroupStatus, Transition, table_to_samples

pytestmark = pytest.mark.kafka

CLUSTER = "apache"
SCAN_S = 1.0
RATE = 10.0
"""Records per second per partition of the steady traffic."""
VALUE = b"v" * 1000
"""Each record's value: the console consumer prints it, so a reader that slows down stops the
consumer within a pipe's worth (64 KiB) of records."""


def _name(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


# --------------------------------------------------------------------------------------------
# Topics, records and commits


async def _create_topic(
    bootstrap: str, topic: str, partitions: int, config: dict[str, str] | None = None
) -> None:
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    await admin.start()
    try:
        await admin.create_topics([NewTopic(topic, partitions, 1, topic_configs=config or {})])
    finally:
        await admin.close()


async def _topic_with_records(bootstrap: str, topic: str, counts: list[int]) -> None:
    """``topic`` with ``len(counts)`` partitions, ``counts[p]`` records in partition p."""
    await _create_topic(bootstrap, topic, len(counts))
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, linger_ms=5)
    await producer.start()
    try:
        for partition, count in enumerate(counts):
            for i in range(count):
                await producer.send(topic, b"r%d" % i, partition=partition)
        await producer.flush()
    finally:
        await producer.stop()


async def _commit(bootstrap: str, group: str, offsets: dict[tuple[str, int], int]) -> None:
    """Commit ``offsets`` for ``group`` as a standalone (``assign()``) consumer does."""
    consumer = AIOKafkaConsumer(
        bootstrap_servers=bootstrap, group_id=group, enable_auto_commit=False
    )
    await consumer.start()
    try:
        consumer.assign([TopicPartition(t, p) for t, p in offsets])
        await consumer.commit({TopicPartition(t, p): o for (t, p), o in offsets.items()})
    finally:
        await consumer.stop()


class Traffic:
    """Steady traffic, :data:`RATE` records per second to every partition of ``topics`` (name:
    partitions); a topic in :attr:`paused` gets none for the while."""

    def __init__(self, bootstrap: str, topics: dict[str, int]) -> None:
        self.bootstrap = bootstrap
        self.topics = topics
        self.paused: set[str] = set()

    async def run(self) -> None:
        producer = AIOKafkaProducer(bootstrap_servers=self.bootstrap, linger_ms=5)
        await producer.start()
        try:
            step = 1 / RATE
            next_at = time.monotonic()
            while True:
                sent = [
                    self._send(producer, topic, partition)
                    for topic, partitions in self.topics.items()
                    if topic not in self.paused
                    for partition in range(partitions)
                ]
                await asyncio.gather(*sent)
                next_at += step
                await asyncio.sleep(max(0.0, next_at - time.monotonic()))
        finally:
            await producer.stop()

    @staticmethod
    async def _send(producer: AIOKafkaProducer, topic: str, partition: int) -> None:
        """One record; while the broker restarts or the topic is re-created it may fail, and
        the traffic goes on (aiokafka asserts when the topic's metadata momentarily lacks the
        partition)."""
        try:
            delivered = await producer.send(topic, VALUE, partition=partition)
            await asyncio.wait_for(delivered, 10)
        except (KafkaError, AssertionError, TimeoutError):
            await asyncio.sleep(0.1)


@contextlib.asynccontextmanager
async def _traffic(bootstrap: str, topics: dict[str, int]) -> AsyncIterator[Traffic]:
    """:class:`Traffic` for as long as the block runs."""
    traffic = Traffic(bootstrap, topics)
    task = asyncio.create_task(traffic.run())
    try:
        yield traffic
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


# --------------------------------------------------------------------------------------------
# Kafka's own Java consumer


class ConsoleConsumer:
    """``kafka-console-consumer`` in a group, its output read by a thread: as fast as it comes,
    or ``rate`` records per second. It prints every record and polls one at a time
    (``max.poll.records=1``), fetches a few at a time, and auto-commits what it polled every
    second, so a reader that slows down makes a consumer that reads, and commits, that slowly."""

    def __init__(
        self,
        broker: ApacheKafkaBroker,
        topic: str,
        group: str,
        client_id: str,
        *,
        protocol: str = "consumer",
        assignor: str | None = None,
        offset_reset: str = "earliest",
        log_dir: Path,
    ) -> None:
        self.broker = broker
        self.topic, self.group, self.client_id = topic, group, client_id
        self.protocol, self.assignor, self.offset_reset = protocol, assignor, offset_reset
        self.log_path = log_dir / f"{client_id}.log"
        self.rate: float | None = None
        self.read = 0
        self._process: subprocess.Popen[bytes] | None = None
        self._reader: threading.Thread | None = None

    def start(self) -> ConsoleConsumer:
        properties = {
            "group.protocol": self.protocol,
            "client.id": self.client_id,
            "auto.offset.reset": self.offset_reset,
            "auto.commit.interval.ms": "1000",
            "max.poll.records": "1",
            # A few records per partition per fetch: a slow reader moves every partition
            # slowly, rather than one partition's fetched megabyte while the others stand still.
            "max.partition.fetch.bytes": "4096",
        }
        if self.protocol == "classic":
            properties.update({"session.timeout.ms": "6000", "heartbeat.interval.ms": "1000"})
        if self.assignor:
            properties["partition.assignment.strategy"] = self.assignor
        args = ["--bootstrap-server", self.broker.bootstrap_servers]
        args += ["--topic", self.topic, "--group", self.group]
        for key, value in properties.items():
            args += ["--consumer-property", f"{key}={value}"]
        with self.log_path.open("ab") as log:
            self._process = self.broker.tools.popen(
                "console-consumer", *args, stdout=subprocess.PIPE, stderr=log
            )
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()
        return self

    def _read(self) -> None:
        assert self._process is not None and self._process.stdout is not None
        for _ in iter(self._process.stdout.readline, b""):
            self.read += 1
            if self.rate is not None:
                time.sleep(1 / self.rate)

    def stop(self) -> None:
        """SIGTERM, as a deploy stops it: it commits, leaves the group and exits."""
        if self._process is not None and self._process.poll() is None:
            self._process.terminate()
            try:
                self._process.wait(30)
            except subprocess.TimeoutExpired:
                self._process.kill()
                self._process.wait(10)
        if self._reader is not None:
            self._reader.join(10)


class AioMember:
    """A classic-group member written with aiokafka (eager assignment: every rebalance revokes
    every partition), reading everything and auto-committing every second."""

    def __init__(self, bootstrap: str, topic: str, group: str, client_id: str) -> None:
        self.consumer = AIOKafkaConsumer(
            topic,
            bootstrap_servers=bootstrap,
            group_id=group,
            client_id=client_id,
            auto_offset_reset="earliest",
            auto_commit_interval_ms=1000,
            partition_assignment_strategy=(RangePartitionAssignor,),
            session_timeout_ms=6000,
            heartbeat_interval_ms=1000,
        )
        self._task: asyncio.Task[None] | None = None

    async def start(self) -> AioMember:
        await self.consumer.start()
        self._task = asyncio.create_task(self._read())
        return self

    async def _read(self) -> None:
        while True:
            await self.consumer.getmany(timeout_ms=200)

    async def stop(self) -> None:
        """As a deploy stops it: commits, leaves the group."""
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        await self.consumer.stop()


# --------------------------------------------------------------------------------------------
# The service


class RecordingSink(LogSink):
    def __init__(self) -> None:
        super().__init__()
        self.transitions: list[Transition] = []

    def handle(self, transitions: list[Transition], now: int) -> None:
        super().handle(transitions, now)
        self.transitions.extend(transitions)


def _rules(**parameters: Any) -> RulesConfig:
    """The bundled rules at demo timings (waits a tenth as long, a six-scan window)."""
    rules = demo_rules(default_rules_path(), intervals=6, time_scale=0.1)
    return with_parameters(rules, parameters) if parameters else rules


def _bundled_rules() -> RulesConfig:
    """The bundled rules as shipped: what must not page on the benign events of a real
    fleet (a restart that takes a JVM a few seconds is no stop under them)."""
    return load_rules(default_rules_path())


@dataclass
class Service:
    """The coordinator scanning the broker for the groups named ``prefix...``, and its API."""

    coordinator: Coordinator
    sink: RecordingSink
    seen: dict[str, list[GroupResult]] = field(default_factory=dict)

    def result(self, group: str) -> GroupResult | None:
        evaluation = self.coordinator.clusters[CLUSTER].evaluation
        if evaluation is None:
            return None
        result = evaluation.result(CLUSTER, group)
        return None if result.status is GroupStatus.NOTFOUND else result

    def transitions(self, group: str) -> list[Transition]:
        return [t for t in self.sink.transitions if t.group == group]

    def judged(self, group: str) -> bool:
        """The group is scanned with a window complete enough for any rule to notify."""
        result = self.result(group)
        return result is not None and not result.partial and result.complete >= 1.0

    async def wait_for(self, condition: Callable[[], bool], timeout: float, what: str) -> None:
        deadline = time.monotonic() + timeout
        while not condition():
            assert time.monotonic() < deadline, f"timed out after {timeout:g}s waiting for {what}"
            await asyncio.sleep(0.05)

    async def get(self, path: str) -> httpx.Response:
        transport = httpx.ASGITransport(app=create_app(self.coordinator))
        async with httpx.AsyncClient(transport=transport, base_url="http://notifier") as http:
            return await http.get(path)


@contextlib.asynccontextmanager
async def _service(
    broker: ApacheKafkaBroker,
    prefix: str,
    data_dir: Path,
    rules: RulesConfig | None = None,
    sink: RecordingSink | None = None,
) -> AsyncIterator[Service]:
    config = parse_service_config(
        {
            "clusters": [
                {
                    "name": CLUSTER,
                    "bootstrap_servers": broker.bootstrap_servers,
                    "scan_interval": SCAN_S,
                    "request_timeout": 5,
                    "scan_timeout": 10,
                    "group_allow": [f"^{prefix}"],
                }
            ],
            "data_dir": str(data_dir),
            "history": {"enabled": False},
        },
        "test",
    )
    sink = sink or RecordingSink()
    coordinator = Coordinator(config, rules or _rules(), data_dir, sink)
    await coordinator.start()
    try:
        yield Service(coordinator, sink)
    finally:
        await coordinator.stop()


def _statuses(transitions: list[Transition]) -> list[str]:
    """``ERR:STOP``, ``WARN:WARN``, ...: each transition's status and its findings'."""
    said = []
    for t in transitions:
        findings = sorted({f.status for f in t.result.findings}) if t.result else []
        said.append(f"{t.current}:{','.join(findings)}")
    return said


# --------------------------------------------------------------------------------------------
# The collector's figures are Kafka's figures


async def test_lag_per_partition_equals_kafka_consumer_groups_describe(
    any_apache_kafka: ApacheKafkaBroker,
) -> None:
    broker = any_apache_kafka
    bootstrap = broker.bootstrap_servers
    orders, invoices, group = _name("orders"), _name("invoices"), _name("billing")
    await _topic_with_records(bootstrap, orders, [40, 7, 0, 13])
    await _topic_with_records(bootstrap, invoices, [25, 3])
    committed = {
        (orders, 0): 12,
        (orders, 1): 7,
        (orders, 2): 0,
        (orders, 3): 1,
        (invoices, 0): 25,
        (invoices, 1): 0,
    }
    await _commit(bootstrap, group, committed)

    async with ClusterCollector(
        bootstrap, cluster=CLUSTER, request_timeout_ms=10_000, group_allow=f"^{group}$"
    ) as scan:
        result = await scan.scan()
    kafka_says = broker.describe_lag(group)

    ours = {
        (s.topic, s.partition): s.lag
        for s in table_to_samples(result.samples)
        if s.group == group and s.committed_offset is not None
    }
    assert ours == kafka_says
    assert ours == {
        (orders, 0): 28,
        (orders, 1): 0,
        (orders, 2): 0,
        (orders, 3): 12,
        (invoices, 0): 0,
        (invoices, 1): 3,
    }
    assert result.group_states == {group: "Empty"}
    # ListGroups v5 (Kafka 3.7 and later) types the group: DescribeGroups describes it.
    assert result.group_types == {group: "classic"}
    assert "ConsumerGroupDescribe" not in result.requests


@pytest.mark.skipif(shutil.which("mvn") is None, reason="no `mvn` on the PATH")
def test_a_release_that_does_not_resolve_is_named_with_its_artifact(tmp_path: Path) -> None:
    with pytest.raises(KafkaUnavailable) as failed:
        kafka_jars("4.99.0", cache=tmp_path)
    assert (
        "unresolved artifacts org.apache.kafka:kafka_2.13:jar:4.99.0, "
        "org.apache.kafka:kafka-tools:jar:4.99.0 (command:"
    ) in str(failed.value)
    assert not (tmp_path / "4.99.0").exists()


# --------------------------------------------------------------------------------------------
# A consumer-protocol group (KIP-848): healthy, stopped, falling behind


@dataclass
class ConsumerProtocolStory:
    groups: dict[str, str]
    clients: dict[str, str]
    types: dict[str, str]
    healthy_status: dict[str, Any]
    healthy_lag: dict[str, Any]
    metrics: str
    kafka_describe: str
    transitions: dict[str, list[Transition]]


@pytest.fixture(scope="module")
def consumer_protocol_story(
    apache_kafka: ApacheKafkaBroker, tmp_path_factory: pytest.TempPathFactory
) -> ConsumerProtocolStory:
    """Three consumer-protocol groups of one console consumer each, on steady traffic, watched
    until every window is complete; then one is stopped and one slows to a fifth of what
    arrives, until the service has said something about both."""
    tmp = tmp_path_factory.mktemp("consumer-protocol")
    prefix = _name("cp")
    names = ("healthy", "stopped", "lagging")
    groups = {n: f"{prefix}-{n}" for n in names}
    clients = {n: f"{n}-client" for n in names}

    async def story() -> ConsumerProtocolStory:
        bootstrap = apache_kafka.bootstrap_servers
        for group in groups.values():
            await _create_topic(bootstrap, group, 2)
        consumers = {
            n: ConsoleConsumer(apache_kafka, groups[n], groups[n], clients[n], log_dir=tmp)
            for n in names
        }
        async with _traffic(bootstrap, {g: 2 for g in groups.values()}):
            for consumer in consumers.values():
                consumer.start()
            try:
                async with _service(apache_kafka, prefix, tmp / "data") as service:

                    def settled() -> bool:
                        results = [service.result(g) for g in groups.values()]
                        return all(
                            service.judged(g)
                            and r is not None
                            and r.members == 1
                            and r.burrow_complete >= 1.0
                            for g, r in zip(groups.values(), results)
                        )

                    await service.wait_for(settled, 90, "three judged, settled groups")
                    healthy = groups["healthy"]
                    status = await service.get(f"/v3/kafka/{CLUSTER}/consumer/{healthy}/status")
                    lag = await service.get(f"/v3/kafka/{CLUSTER}/consumer/{healthy}/lag")
                    metrics = (await service.get("/metrics")).text
                    describe = apache_kafka.consumer_groups("--describe", "--group", healthy)
                    async with ClusterCollector(bootstrap, cluster=CLUSTER) as collector:
                        types = dict((await collector.scan()).group_types)

                    await asyncio.to_thread(consumers["stopped"].stop)
                    consumers["lagging"].rate = RATE * 2 / 5

                    def told() -> bool:
                        stopped = service.transitions(groups["stopped"])
                        lagging = service.transitions(groups["lagging"])
                        return any(t.current is GroupStatus.ERR for t in stopped) and any(
                            t.current is not GroupStatus.OK for t in lagging
                        )

                    await service.wait_for(told, 90, "the stopped and the lagging group's alerts")
                    await asyncio.sleep(3 * SCAN_S)  # the healthy group keeps being judged
                    return ConsumerProtocolStory(
                        groups=groups,
                        clients=clients,
                        types=types,
                        healthy_status=status.json(),
                        healthy_lag=lag.json(),
                        metrics=metrics,
                        kafka_describe=describe,
                        transitions={n: service.transitions(groups[n]) for n in names},
                    )
            finally:
                for consumer in consumers.values():
                    await asyncio.to_thread(consumer.stop)

    return asyncio.run(story())


def test_a_healthy_consumer_protocol_group_is_ok_with_no_alert(consumer_protocol_story):
    story = consumer_protocol_story
    assert story.transitions["healthy"] == []
    status = story.healthy_status["status"]
    assert (status["status"], status["complete"]) == ("OK", 1.0)
    assert {story.types[g] for g in story.groups.values()} == {"consumer"}


def test_a_stopped_consumer_protocol_group_is_err_stop(consumer_protocol_story):
    transitions = consumer_protocol_story.transitions["stopped"]
    assert transitions, "no alert for the stopped group"
    first = transitions[0]
    assert first.current is GroupStatus.ERR, _statuses(transitions)
    assert first.result is not None
    assert {f.status for f in first.result.findings} == {"STOP"}, _statuses(transitions)
    assert first.result.members == 0 and first.result.group_state == "Empty"


def test_a_consumer_protocol_group_falling_behind_is_warn(consumer_protocol_story):
    transitions = consumer_protocol_story.transitions["lagging"]
    assert transitions, "no alert for the lagging group"
    first = transitions[0]
    assert first.current is GroupStatus.WARN, _statuses(transitions)
    assert first.result is not None
    assert {f.rule for f in first.result.findings} == {"falling-behind"}
    assert first.result.members == 1


def test_consumer_protocol_members_owner_and_client_id_are_filled(consumer_protocol_story):
    story = consumer_protocol_story
    healthy, client = story.groups["healthy"], story.clients["healthy"]
    partitions = story.healthy_lag["status"]["partitions"]
    assert len(partitions) == 2
    assert {(p["owner"], p["client_id"]) for p in partitions} == {("127.0.0.1", client)}
    # Kafka's own view of the same member: its id, host and client id.
    (row,) = {
        tuple(line.split()[6:9])
        for line in story.kafka_describe.splitlines()
        if line.startswith(healthy)
    }
    member_id, host, client_id = row
    assert (host, client_id) == ("/127.0.0.1", client)
    lines = [
        line
        for line in story.metrics.splitlines()
        if line.startswith("kafka_consumergroup_group_lag{") and f'group="{healthy}"' in line
    ]
    assert len(lines) == 2
    for line in lines:
        assert 'member_host="127.0.0.1"' in line
        assert f'consumer_id="{member_id}"' in line
        assert f'client_id="{client}"' in line


# --------------------------------------------------------------------------------------------
# Retention overtakes a slow consumer


async def test_retention_overtaking_a_slow_consumer_is_warn_then_err(
    apache_kafka: ApacheKafkaBroker, tmp_path: Path
) -> None:
    """Records older than 10 s are deleted (``retention.ms``, half-second segments); the
    consumer reads half as fast as records arrive, so the log's start catches up with it. It
    has ``auto.offset.reset=none``, as a consumer that must not skip records does: once they
    are gone it stops with an error instead of jumping ahead."""
    bootstrap = apache_kafka.bootstrap_servers
    prefix = _name("ret")
    topic = group = f"{prefix}-slow"
    await _create_topic(bootstrap, topic, 1, {"segment.ms": "500", "retention.ms": "10000"})
    await _commit(bootstrap, group, {(topic, 0): 0})
    # The WARN band is 30% of the retained range rather than the default 10%: retention deletes
    # whole segments, once a second, and a narrower band could be crossed between two scans.
    rules = _rules(**{"rules.retention-risk.warn_fraction": 0.3})
    consumer = ConsoleConsumer(
        apache_kafka, topic, group, "slow-client", offset_reset="none", log_dir=tmp_path
    )
    consumer.rate = RATE / 2
    said: list[tuple[str, int | None, int | None]] = []
    """Each change of the retention rule's finding: its status, the committed offset and the
    log's start."""
    async with _traffic(bootstrap, {topic: 1}):
        consumer.start()
        try:
            # On a busy machine the JVM can take many seconds to join: the group is rightly
            # paged as stopped meanwhile. The story this test tells begins once it reads.
            deadline = time.monotonic() + 120
            while consumer.read == 0:
                assert time.monotonic() < deadline, "the console consumer never read a record"
                await asyncio.sleep(0.1)
            async with _service(apache_kafka, prefix, tmp_path / "data", rules) as service:

                def lost() -> bool:
                    result = service.result(group)
                    if result is None or not result.partitions or not service.judged(group):
                        return False  # what a user could be told, once the gate is open
                    statuses = {f.status for f in result.findings if f.rule == "retention-risk"}
                    status = "ERR" if "ERR" in statuses else ",".join(sorted(statuses))
                    if not said or said[-1][0] != status:
                        p = result.partitions[0]
                        said.append((status, p.committed_offset, p.log_start_offset))
                    return status == "ERR"

                await service.wait_for(lost, 120, "the retention rule's ERR")
                await service.wait_for(
                    lambda: any(t.current is GroupStatus.ERR for t in service.transitions(group)),
                    10,
                    "the ERR notified",
                )
                transitions = service.transitions(group)
        finally:
            await asyncio.to_thread(consumer.stop)

    warned = [i for i, (status, _, _) in enumerate(said) if status == "WARN"]
    assert warned, said
    _, committed, log_start = said[warned[-1]]
    assert committed is not None and log_start is not None and committed >= log_start > 0, said
    assert said[-1][0] == "ERR" and warned[-1] == len(said) - 2, said
    _, committed, log_start = said[-1]
    assert committed is not None and log_start is not None and committed < log_start, said
    erred = next(t for t in transitions if t.current is GroupStatus.ERR)
    assert erred.result is not None
    assert any(f.rule == "retention-risk" and f.severity == "err" for f in erred.result.findings), (
        _statuses(transitions)
    )


# --------------------------------------------------------------------------------------------
# Benign events on caught-up groups: an offsets reset, a topic re-created, a broker restart


async def _recreate_topic(bootstrap: str, topic: str, partitions: int) -> None:
    """Delete ``topic`` and create it again under the same name (offsets start from 0)."""
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    await admin.start()
    try:
        await admin.delete_topics([topic])
        deadline = time.monotonic() + 30
        while True:
            try:
                await admin.create_topics([NewTopic(topic, partitions, 1)])
                return
            except TopicAlreadyExistsError:  # deletion still under way
                assert time.monotonic() < deadline, f"{topic} was never deleted"
                await asyncio.sleep(0.2)
    finally:
        await admin.close()


@dataclass
class BenignStory:
    groups: dict[str, str]
    transitions: dict[str, list[Transition]]
    reset_to: dict[tuple[str, int], int | None]
    cluster_events: list[str]
    restart_s: float
    events: dict[str, int] = field(default_factory=dict)


class EventSink(RecordingSink):
    def __init__(self) -> None:
        super().__init__()
        self.events: list[str] = []

    def cluster_down(self, cluster: str, now: int, reason: str) -> None:
        self.events.append("down")

    def cluster_up(self, cluster: str, now: int) -> None:
        self.events.append("up")


@pytest.fixture(scope="module")
def benign_story(
    apache_kafka: ApacheKafkaBroker, tmp_path_factory: pytest.TempPathFactory
) -> BenignStory:
    """Four caught-up groups on steady traffic under the bundled rules: one has its offsets
    reset to the log end while its consumer is down, one has its topic deleted and created
    again; then the broker restarts under all four."""
    tmp = tmp_path_factory.mktemp("benign")
    prefix = _name("benign")
    groups = {n: f"{prefix}-{n}" for n in ("reset", "recreated", "consumer", "classic")}
    partitions = 2

    async def story() -> BenignStory:
        bootstrap = apache_kafka.bootstrap_servers
        for group in groups.values():
            await _create_topic(bootstrap, group, partitions)
        console = {
            n: ConsoleConsumer(apache_kafka, groups[n], groups[n], f"{n}-client", log_dir=tmp)
            for n in ("reset", "recreated", "consumer")
        }
        classic = AioMember(bootstrap, groups["classic"], groups["classic"], "classic-client")
        sink = EventSink()
        async with _traffic(bootstrap, {g: partitions for g in groups.values()}) as traffic:
            for consumer in console.values():
                consumer.start()
            await classic.start()
            try:
                async with _service(
                    apache_kafka, prefix, tmp / "data", _bundled_rules(), sink
                ) as service:
                    state = service.coordinator.clusters[CLUSTER]

                    def caught_up() -> bool:
                        for group in groups.values():
                            r = service.result(group)
                            if r is None or not service.judged(group) or r.members != 1:
                                return False
                            if r.total_lag > 2 * RATE * partitions:
                                return False
                        return True

                    async def caught_up_for_a_window() -> None:
                        await service.wait_for(caught_up, 90, "every group caught up")
                        scans = state.metrics.scans
                        window = service.coordinator.rules.window.intervals
                        await service.wait_for(
                            lambda: state.metrics.scans >= scans + window, 60, "a window"
                        )

                    await caught_up_for_a_window()

                    def reset() -> dict[tuple[str, int], int | None]:
                        group = groups["reset"]
                        console["reset"].stop()
                        apache_kafka.consumer_groups(
                            "--reset-offsets", "--to-latest", "--execute",
                            "--group", group, "--topic", group,
                        )  # fmt: skip
                        reset_to = apache_kafka.describe_lag(group)
                        console["reset"] = ConsoleConsumer(
                            apache_kafka, group, group, "reset-client", log_dir=tmp
                        ).start()
                        return reset_to

                    async def recreate() -> None:
                        topic = groups["recreated"]
                        traffic.paused.add(topic)
                        await _recreate_topic(bootstrap, topic, partitions)
                        traffic.paused.discard(topic)

                    events = {"reset/recreate": int(time.time() * 1000)}
                    reset_to, _ = await asyncio.gather(asyncio.to_thread(reset), recreate())
                    await caught_up_for_a_window()

                    started = time.monotonic()
                    events["restart"] = int(time.time() * 1000)
                    await apache_kafka.arestart()
                    restart_s = time.monotonic() - started
                    await caught_up_for_a_window()
                    return BenignStory(
                        groups=groups,
                        transitions={n: service.transitions(g) for n, g in groups.items()},
                        reset_to=reset_to,
                        cluster_events=list(sink.events),
                        restart_s=restart_s,
                        events=events,
                    )
            finally:
                for consumer in console.values():
                    await asyncio.to_thread(consumer.stop)
                await classic.stop()

    return asyncio.run(story())


def test_an_offsets_reset_of_a_caught_up_group_is_no_alert(benign_story):
    assert benign_story.reset_to, "kafka-consumer-groups reset nothing"
    assert benign_story.transitions["reset"] == [], _told(benign_story)


def _told(story: BenignStory) -> dict[str, list[tuple[int, str, list[str]]]]:
    """What the service said about each group (when, the status, the findings), and when
    the events happened, for a failure's message."""
    return {
        **{k: [(v, "event", [])] for k, v in story.events.items()},
        **{
            name: [
                (t.at, t.current, [f"{f.rule}:{f.status}" for f in t.result.findings])
                for t in transitions
                if t.result is not None
            ]
            for name, transitions in story.transitions.items()
        },
    }


def test_a_topic_deleted_and_created_again_is_no_alert(benign_story):
    assert benign_story.transitions["recreated"] == [], _told(benign_story)


def test_a_broker_restart_under_caught_up_groups_is_no_group_alert(benign_story):
    assert benign_story.transitions == {name: [] for name in benign_story.groups}, _told(
        benign_story
    )
    assert benign_story.restart_s < 60
    assert benign_story.cluster_events[-1:] == ["up"] or benign_story.cluster_events == []


# --------------------------------------------------------------------------------------------
# Rolling restarts of classic groups: eager (aiokafka, range) and cooperative-sticky (Java)


@dataclass
class RollingStory:
    groups: dict[str, str]
    transitions: dict[str, list[Transition]]
    seen: dict[str, set[tuple[str, int, frozenset[str]]]]
    """Per group, every (state, members, client ids owning partitions) a scan showed."""


@pytest.fixture(scope="module")
def rolling_story(
    apache_kafka: ApacheKafkaBroker, tmp_path_factory: pytest.TempPathFactory
) -> RollingStory:
    """Two classic groups of three members on six partitions each, restarted one member at a
    time (stop, start a new one, wait until the group has three members again), both at once,
    under the bundled rules."""
    tmp = tmp_path_factory.mktemp("rolling")
    prefix = _name("roll")
    groups = {"eager": f"{prefix}-eager", "cooperative": f"{prefix}-cooperative"}
    partitions, size = 6, 3

    async def story() -> RollingStory:
        bootstrap = apache_kafka.bootstrap_servers
        for group in groups.values():
            await _create_topic(bootstrap, group, partitions)
        seen: dict[str, set[tuple[str, int, frozenset[str]]]] = {g: set() for g in groups}
        eager_group, cooperative_group = groups["eager"], groups["cooperative"]

        def aio(i: int) -> AioMember:
            return AioMember(bootstrap, eager_group, eager_group, f"eager-{i}")

        def java(i: int) -> ConsoleConsumer:
            return ConsoleConsumer(
                apache_kafka, cooperative_group, cooperative_group, f"cooperative-{i}",
                protocol="classic",
                assignor="org.apache.kafka.clients.consumer.CooperativeStickyAssignor",
                log_dir=tmp,
            )  # fmt: skip

        eager = [await aio(i).start() for i in range(size)]
        cooperative = [java(i).start() for i in range(size)]
        try:
            async with contextlib.AsyncExitStack() as stack:
                await stack.enter_async_context(
                    _traffic(bootstrap, {g: partitions for g in groups.values()})
                )
                # The service starts once every JVM has joined and read (on a busy machine the
                # last can take many seconds).
                deadline = time.monotonic() + 120
                while not all(consumer.read for consumer in cooperative):
                    assert time.monotonic() < deadline, "a console consumer never read"
                    await asyncio.sleep(0.1)
                service = await stack.enter_async_context(
                    _service(apache_kafka, prefix, tmp / "data", _bundled_rules())
                )
                state = service.coordinator.clusters[CLUSTER]

                def look() -> None:
                    for name, group in groups.items():
                        r = service.result(group)
                        if r is not None:
                            owners = state.owners.get(group, {})
                            clients = frozenset(m.client_id for m in owners.values())
                            seen[name].add((r.group_state, r.members, clients))

                def settled(name: str, clients: set[str]) -> bool:
                    look()
                    r = service.result(groups[name])
                    owners = state.owners.get(groups[name], {})
                    return (
                        r is not None
                        and service.judged(groups[name])
                        and r.group_state == "Stable"
                        and r.members == size
                        and len(owners) == partitions
                        and {m.client_id for m in owners.values()} == clients
                    )

                async def roll_eager() -> None:
                    for i in range(size):
                        await eager[i].stop()
                        eager[i] = await aio(size + i).start()
                        clients = {f"eager-{size + j}" for j in range(i + 1)}
                        clients |= {f"eager-{j}" for j in range(i + 1, size)}
                        await service.wait_for(
                            lambda c=clients: settled("eager", c), 90, f"eager step {i}"
                        )

                async def roll_cooperative() -> None:
                    for i in range(size):
                        await asyncio.to_thread(cooperative[i].stop)
                        cooperative[i] = java(size + i).start()
                        clients = {f"cooperative-{size + j}" for j in range(i + 1)}
                        clients |= {f"cooperative-{j}" for j in range(i + 1, size)}
                        await service.wait_for(
                            lambda c=clients: settled("cooperative", c), 90, f"cooperative {i}"
                        )

                def at_rest(name: str, clients: set[str]) -> bool:
                    """Settled, and its last member change (a member joining late, or
                    briefly out) is more than churn_gap ago: a group that grew by a member
                    and is restarted member by member within churn_gap makes the changes
                    of a member that keeps crashing (2 -> 3 -> 2 -> 3 ...), a storm by its
                    sequence. This story is a deploy of a settled group."""
                    gid = state.store.group_id(CLUSTER, groups[name])
                    churn = state.store.evidence["e_churn_since"]
                    return (
                        settled(name, clients)
                        and gid is not None
                        and churn.by_group()[gid] == UNSET_TS
                    )

                first = {f"eager-{i}" for i in range(size)}
                await service.wait_for(lambda: at_rest("eager", first), 200, "eager at rest")
                first = {f"cooperative-{i}" for i in range(size)}
                await service.wait_for(
                    lambda: at_rest("cooperative", first), 200, "cooperative at rest"
                )
                await asyncio.gather(roll_eager(), roll_cooperative())
                scans = state.metrics.scans
                await service.wait_for(
                    lambda: state.metrics.scans >= scans + 5, 30, "five scans more"
                )
                return RollingStory(
                    groups=groups,
                    transitions={n: service.transitions(g) for n, g in groups.items()},
                    seen=seen,
                )
        finally:
            for member in eager:
                await member.stop()
            for consumer in cooperative:
                await asyncio.to_thread(consumer.stop)

    return asyncio.run(story())


@pytest.mark.parametrize("assignment", ["eager", "cooperative"])
def test_a_rolling_restart_of_a_classic_group_pages_nobody(rolling_story, assignment):
    transitions = rolling_story.transitions[assignment]
    assert transitions == [], [
        (t.at, f.rule, f.message, f.evidence)
        for t in transitions
        for f in (t.result.findings if t.result else [])
    ]
    seen = rolling_story.seen[assignment]
    # The service watched the restart: six member ids came and went, each owning partitions.
    clients = set().union(*(owners for _, _, owners in seen))
    assert clients == {f"{assignment}-{i}" for i in range(6)}


# --------------------------------------------------------------------------------------------
# Share groups (KIP-932)


async def test_a_share_groups_lag_is_read_with_describe_share_group_offsets(
    apache_kafka: ApacheKafkaBroker, tmp_path: Path
) -> None:
    """Kafka 4.4 has share groups on by default (``share.version`` 2, GA since 4.2). The
    service reads a share group with ShareGroupDescribe and DescribeShareGroupOffsets: its
    share-partition start offsets stand for commits, so its lag is the records it has not
    finished with, as ``kafka-share-groups --describe --offsets`` shows them, and the rules
    judge it like a consumer group."""
    bootstrap = apache_kafka.bootstrap_servers
    prefix = _name("share")
    topic = group = f"{prefix}-work"
    await _create_topic(bootstrap, topic, 1)
    # A share group starts at the log end by default (share.auto.offset.reset=latest), fixed
    # only when a member first fetches, which can come after "Stable": records produced in
    # between would be skipped. From the earliest offset, the member reads all ten whenever
    # it starts.
    await asyncio.to_thread(
        apache_kafka.tools.run, "configs", "--bootstrap-server", bootstrap, "--alter",
        "--entity-type", "groups", "--entity-name", group,
        "--add-config", "share.auto.offset.reset=earliest",
    )  # fmt: skip
    with (tmp_path / "share.out").open("wb") as out, (tmp_path / "share.log").open("ab") as log:
        share_consumer = apache_kafka.tools.popen(
            "console-share-consumer", "--bootstrap-server", bootstrap,
            "--topic", topic, "--group", group, stdout=out, stderr=log,
        )  # fmt: skip
    try:
        deadline = time.monotonic() + 90
        describe = ("share-groups", "--bootstrap-server", bootstrap, "--describe", "--state",
                    "--group", group)  # fmt: skip
        while (
            "Stable"
            not in (await asyncio.to_thread(apache_kafka.tools.run, *describe, check=False)).stdout
        ):
            assert time.monotonic() < deadline, "the share consumer never joined"
            await asyncio.sleep(0.5)
        await _produce_to(bootstrap, topic, 10)
        while (tmp_path / "share.out").read_bytes().count(b"\n") < 10:
            assert time.monotonic() < deadline, "the share consumer never read the records"
            await asyncio.sleep(0.2)
    finally:
        share_consumer.terminate()
        share_consumer.wait(30)
    await _produce_to(bootstrap, topic, 5)  # nobody reads these: a backlog of 5

    async with _service(apache_kafka, prefix, tmp_path / "data") as service:
        state = service.coordinator.clusters[CLUSTER]

        def lag_of_five() -> bool:
            result = service.result(group)
            return result is not None and result.total_lag == 5

        await service.wait_for(lag_of_five, 90, "the share group's lag")
        summary = (await service.get("/api/groups")).json()
        lag = (await service.get(f"/v3/kafka/{CLUSTER}/consumer/{group}/lag")).json()
        metrics = (await service.get("/metrics")).text
        described = await asyncio.to_thread(
            apache_kafka.tools.run, "share-groups", "--bootstrap-server", bootstrap,
            "--describe", "--offsets", "--group", group,
        )  # fmt: skip

    # The broker's own view: lag 5 (its start offset may still say 0: the 10 records after it
    # are acknowledged, which only the lag counts).
    row = next(line.split() for line in described.stdout.splitlines() if topic in line)
    assert row[:3] == [group, topic, "0"] and row[-1] == "5", row
    result = service.result(group)
    assert result is not None
    (partition,) = result.partitions
    assert (partition.committed_offset, partition.log_end_offset) == (10, 15)
    assert group not in state.not_evaluated
    (cluster,) = [c for c in summary["clusters"] if c["cluster"] == CLUSTER]
    assert all(entry["group"] != group for entry in cluster["not_evaluated"])
    assert lag["status"]["totallag"] == 5
    assert f'kafka_consumergroup_lag{{cluster="{CLUSTER}",consumergroup="{group}",' in metrics
    assert f'burrow_kafka_consumer_lag_total{{cluster="{CLUSTER}",consumer_group="{group}"}} 5' \
        in metrics  # fmt: skip


async def _produce_to(bootstrap: str, topic: str, count: int) -> None:
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, linger_ms=5)
    await producer.start()
    try:
        for i in range(count):
            await producer.send(topic, b"s%d" % i, partition=0)
        await producer.flush()
    finally:
        await producer.stop()
