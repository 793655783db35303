"""The collector against a real Kafka-protocol broker (Tansu), plus its pure helpers.

Tansu quirks these tests work with (see notifier/collect/ and notifier/embedded/broker.py):
ListOffsets "latest" returns the last batch's base offset + 1, so records are produced one per
batch; ListGroups lists a group only once it has committed; a group's first generation is 0,
which keeps aiokafka from sending LeaveGroup, so the Empty test forces a rebalance first.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import struct
import time
import uuid
from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Callable

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient, NewTopic
from aiokafka.coordinator.protocol import (
    ConsumerProtocolMemberAssignment,
    ConsumerProtocolMemberMetadata,
)

from notifier.collect import (
    ClusterCollector,
    ClusterUnreachableError,
    Group,
    ScanError,
    ScanResult,
    build_samples,
    decode_member,
    member_hash,
    normalize_group_state,
)
from notifier.embedded import BrokerError, EmbeddedBroker
from notifier.types import SAMPLE_SCHEMA, Sample, table_to_samples

FAST_GROUP = {"session_timeout_ms": 2000, "heartbeat_interval_ms": 300}


def _name(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


async def _create_topic(bootstrap: str, topic: str, partitions: int) -> None:
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    await admin.start()
    try:
        await admin.create_topics([NewTopic(topic, partitions, 1)])
    finally:
        await admin.close()


async def _produce(bootstrap: str, topic: str, counts: list[int]) -> None:
    """Create ``topic`` with ``len(counts)`` partitions and write counts[p] records to each.

    One record per batch: Tansu reports the log-end offset as the last batch's base + 1.
    """
    await _create_topic(bootstrap, topic, len(counts))
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap)
    await producer.start()
    try:
        for partition, count in enumerate(counts):
            for i in range(count):
                await producer.send_and_wait(topic, b"r%d" % i, partition=partition)
    finally:
        await producer.stop()


async def _commit(bootstrap: str, group: str, offsets: dict[tuple[str, int], int]) -> None:
    """Commit offsets for ``group`` without joining it (a member-less, "simple" group)."""
    consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, group_id=group)
    await consumer.start()
    try:
        consumer.assign([TopicPartition(t, p) for t, p in offsets])
        await consumer.commit({TopicPartition(t, p): o for (t, p), o in offsets.items()})
    finally:
        await consumer.stop()


async def _join(bootstrap: str, group: str, topic: str, members: int) -> list[AIOKafkaConsumer]:
    """Start ``members`` subscribed consumers and wait until every one has partitions."""
    consumers = []
    for _ in range(members):
        consumer = AIOKafkaConsumer(
            topic,
            bootstrap_servers=bootstrap,
            group_id=group,
            enable_auto_commit=False,
            auto_offset_reset="earliest",
            **FAST_GROUP,
        )
        await consumer.start()
        consumers.append(consumer)
    deadline = time.monotonic() + 20
    while not all(c.assignment() for c in consumers):
        assert time.monotonic() < deadline, "consumers never got their partitions"
        await asyncio.gather(*(c.getmany(timeout_ms=50) for c in consumers))
    return consumers


async def _commit_as_members(
    consumers: list[AIOKafkaConsumer], offsets: dict[tuple[str, int], int]
) -> None:
    for consumer in consumers:
        owned = {
            TopicPartition(t, p): o
            for (t, p), o in offsets.items()
            if TopicPartition(t, p) in consumer.assignment()
        }
        if owned:
            await consumer.commit(owned)


def _rows(result: ScanResult, group: str) -> dict[tuple[str, int], Sample]:
    return {(s.topic, s.partition): s for s in table_to_samples(result.samples) if s.group == group}


@pytest.fixture
async def collector_for(
    kafka_broker: EmbeddedBroker,
) -> AsyncIterator[Callable[..., ClusterCollector]]:
    made: list[ClusterCollector] = []

    def make(**kwargs: object) -> ClusterCollector:
        kwargs.setdefault("bootstrap_servers", kafka_broker.bootstrap_servers)
        kwargs.setdefault("cluster", "test")
        kwargs.setdefault("request_timeout_ms", 5000)
        collector = ClusterCollector(**kwargs)  # type: ignore[arg-type]
        made.append(collector)
        return collector

    yield make
    for collector in made:
        await collector.close()


def _offset_fetch_topic_counts(version: int, body: bytes) -> list[int]:
    """The number of topics each group of an OffsetFetch request names (-1: all partitions).

    Up to v7 a request holds one group (int16-length strings, int32 counts); from v8 on
    (KIP-709) many, in the flexible encoding: unsigned-varint lengths plus one, and a
    tagged-field section after the header and every structure."""
    at = 0

    def uvarint() -> int:
        nonlocal at
        value = shift = 0
        while True:
            byte = body[at]
            at += 1
            value |= (byte & 0x7F) << shift
            if not byte & 0x80:
                return value
            shift += 7

    def skip_tags() -> None:
        nonlocal at
        for _ in range(uvarint()):
            uvarint()  # the tag
            size = uvarint()
            at += size

    if version < 8:
        (group_len,) = struct.unpack(">h", body[:2])
        (count,) = struct.unpack(">i", body[2 + group_len : 6 + group_len])
        return [count]
    skip_tags()  # the request header's
    counts = []
    for _ in range(uvarint() - 1):
        size = uvarint() - 1  # the group id's
        at += size
        topics = uvarint() - 1
        counts.append(topics)
        for _ in range(max(topics, 0)):
            size = uvarint() - 1  # the topic name's
            at += size
            partitions = uvarint() - 1
            at += 4 * partitions
            skip_tags()
        skip_tags()
    return counts


class FaultyProxy:
    """A TCP proxy in front of a broker that misbehaves the way some brokers do.

    The broker advertises the proxy's port, so every client connection goes through it. It
    drops the connection on DescribeGroups naming more than ``max_describe_groups`` groups, on
    OffsetFetch naming more than ``max_offset_fetch_groups`` groups and, if asked, on
    OffsetFetch with a null topic list ("all partitions"); with ``blackhole`` set
    it swallows requests and never answers (new connections are still accepted). With
    ``hold_api`` set to an API key, a request of that API waits (``held`` is set) until
    ``release`` is: a scan caught half way.
    """

    def __init__(
        self,
        max_describe_groups: int | None = None,
        drop_offset_fetch_all: bool = False,
        max_offset_fetch_groups: int | None = None,
    ) -> None:
        self.max_describe_groups = max_describe_groups
        self.drop_offset_fetch_all = drop_offset_fetch_all
        self.max_offset_fetch_groups = max_offset_fetch_groups
        self.blackhole = False
        self.hold_api: int | None = None
        self.held = asyncio.Event()
        self.release = asyncio.Event()
        self.upstream_port = 0
        self.port = 0
        self.dropped: Counter[str] = Counter()
        self._server: asyncio.Server | None = None
        self._writers: set[asyncio.StreamWriter] = set()

    async def start(self) -> int:
        self._server = await asyncio.start_server(self._handle, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]
        return self.port

    async def close(self) -> None:
        assert self._server is not None
        self._server.close()
        for writer in list(self._writers):
            writer.close()
        await self._server.wait_closed()

    def _drop(self, body: bytes) -> str | None:
        api_key, _version, _correlation, client_len = struct.unpack(">hhih", body[:10])
        offset = 10 + max(client_len, 0)
        if api_key == 15 and self.max_describe_groups is not None:
            (count,) = struct.unpack(">i", body[offset : offset + 4])
            if count > self.max_describe_groups:
                return "DescribeGroups"
        if api_key == 9:
            wanted = _offset_fetch_topic_counts(_version, body[offset:])
            if self.drop_offset_fetch_all and any(count < 0 for count in wanted):
                return "OffsetFetch"
            limit = self.max_offset_fetch_groups
            if limit is not None and len(wanted) > limit:
                return "OffsetFetch"
        return None

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._writers.add(writer)
        up_reader, up_writer = await asyncio.open_connection("127.0.0.1", self.upstream_port)
        self._writers.add(up_writer)

        async def to_broker() -> None:
            while True:
                head = await reader.readexactly(4)
                body = await reader.readexactly(struct.unpack(">i", head)[0])
                if self.blackhole:
                    continue
                if struct.unpack(">h", body[:2])[0] == self.hold_api:
                    self.held.set()
                    await self.release.wait()
                dropped = self._drop(body)
                if dropped:
                    self.dropped[dropped] += 1
                    return
                up_writer.write(head + body)
                await up_writer.drain()

        async def to_client() -> None:
            while data := await up_reader.read(65536):
                writer.write(data)
                await writer.drain()

        tasks = [asyncio.create_task(to_broker()), asyncio.create_task(to_client())]
        with contextlib.suppress(Exception):
            await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
        for task in tasks:
            task.cancel()
        for w in (writer, up_writer):
            w.close()
            self._writers.discard(w)


@pytest.fixture
async def proxied(
    broker_factory: Callable[..., EmbeddedBroker],
) -> AsyncIterator[Callable[..., Awaitable[tuple[FaultyProxy, EmbeddedBroker]]]]:
    proxies: list[FaultyProxy] = []

    async def make(**kwargs: object) -> tuple[FaultyProxy, EmbeddedBroker]:
        proxy = FaultyProxy(**kwargs)  # type: ignore[arg-type]
        port = await proxy.start()
        broker = broker_factory(advertised_port=port)
        proxy.upstream_port = broker.port
        proxies.append(proxy)
        return proxy, broker

    yield make
    for proxy in proxies:
        await proxy.close()


# --------------------------------------------------------------------------------------------
# Against the broker


@pytest.mark.broker
async def test_live_group_offsets_lag_state_and_members(kafka_broker, collector_for):
    bootstrap = kafka_broker.bootstrap_servers
    topic, group = _name("orders"), _name("live")
    await _produce(bootstrap, topic, [5, 3, 0, 2])
    consumers = await _join(bootstrap, group, topic, members=1)
    try:
        await _commit_as_members(consumers, {(topic, 0): 5, (topic, 1): 1, (topic, 3): 0})
        collector = collector_for(group_allow=f"^{group}$")
        before = time.time() * 1000
        result = await collector.scan()
        after = time.time() * 1000
    finally:
        for consumer in consumers:
            await consumer.stop()

    assert result.samples.schema == SAMPLE_SCHEMA
    assert result.group_states == {group: "Stable"}
    rows = _rows(result, group)
    # Partition 2 has no commit: it has a row (with a null offset) only where the broker
    # reports member assignments, which Tansu does not.
    unassigned = rows.pop((topic, 2), None)
    assert unassigned is None or unassigned.committed_offset is None
    assert {tp: (r.committed_offset, r.log_end_offset, r.lag) for tp, r in rows.items()} == {
        (topic, 0): (5, 5, 0),
        (topic, 1): (1, 3, 2),
        (topic, 3): (0, 2, 2),
    }
    for row in rows.values():
        assert row.log_start_offset == 0
        assert (row.group_state, row.members, row.cluster) == ("Stable", 1, "test")
        assert row.member_hash != 0 and row.member_hash == rows[(topic, 0)].member_hash
        assert row.ts == result.ts
    assert before <= result.ts <= after


@pytest.mark.broker
async def test_group_whose_consumers_closed_is_empty_with_offsets_kept(kafka_broker, collector_for):
    bootstrap = kafka_broker.bootstrap_servers
    topic, group = _name("audit"), _name("closing")
    await _produce(bootstrap, topic, [4, 4])
    # Two members force a rebalance (generation >= 1); aiokafka only leaves a generation > 0.
    consumers = await _join(bootstrap, group, topic, members=2)
    collector = collector_for(group_allow=f"^{group}$")
    try:
        await _commit_as_members(consumers, {(topic, 0): 4, (topic, 1): 1})
        live = await collector.scan()
        assert live.group_states == {group: "Stable"}
        assert {r.members for r in _rows(live, group).values()} == {2}
    finally:
        for consumer in consumers:
            await consumer.stop()

    deadline = time.monotonic() + 10
    while (result := await collector.scan()).group_states[group] != "Empty":
        assert time.monotonic() < deadline, result.group_states
        await asyncio.sleep(0.2)
    rows = _rows(result, group)
    assert {tp: r.committed_offset for tp, r in rows.items()} == {(topic, 0): 4, (topic, 1): 1}
    assert {(r.members, r.member_hash, r.group_state) for r in rows.values()} == {(0, 0, "Empty")}
    assert rows[(topic, 1)].lag == 3


@pytest.mark.broker
async def test_commit_for_some_partitions_only(kafka_broker, collector_for):
    bootstrap = kafka_broker.bootstrap_servers
    topic, group = _name("partial"), _name("partial")
    await _produce(bootstrap, topic, [3, 3, 3, 3])
    await _commit(bootstrap, group, {(topic, 0): 2, (topic, 2): 3})

    result = await collector_for(group_allow=f"^{group}$").scan()

    rows = _rows(result, group)
    assert sorted(rows) == [(topic, 0), (topic, 2)]
    assert (rows[(topic, 0)].committed_offset, rows[(topic, 0)].lag) == (2, 1)
    assert (rows[(topic, 2)].committed_offset, rows[(topic, 2)].lag) == (3, 0)
    assert {r.members for r in rows.values()} == {0}


@pytest.mark.broker
async def test_allow_and_deny_regexes(kafka_broker, collector_for):
    bootstrap = kafka_broker.bootstrap_servers
    prefix = _name("rx")
    topic = f"{prefix}-t"
    await _produce(bootstrap, topic, [1])
    for suffix in ("orders-a", "orders-b", "payments"):
        await _commit(bootstrap, f"{prefix}-{suffix}", {(topic, 0): 1})

    collector = collector_for(group_allow=[f"^{prefix}-orders"], group_deny=r"-b$")
    result = await collector.scan()

    assert set(result.group_states) == {f"{prefix}-orders-a"}
    assert set(result.samples.column("group").to_pylist()) == {f"{prefix}-orders-a"}
    assert not collector.matches(f"{prefix}-payments")


@pytest.mark.broker
async def test_requests_per_scan_do_not_grow_with_partitions(kafka_broker, collector_for):
    bootstrap = kafka_broker.bootstrap_servers
    counts: dict[int, list[ScanResult]] = {}
    for partitions in (4, 32):
        topic, group = _name(f"p{partitions}"), _name(f"p{partitions}")
        await _produce(bootstrap, topic, [1] * partitions)
        await _commit(bootstrap, group, {(topic, p): 1 for p in range(partitions)})
        collector = collector_for(group_allow=f"^{group}$")
        counts[partitions] = [await collector.scan() for _ in range(3)]
        assert counts[partitions][-1].samples.num_rows == partitions

    small, large = counts[4][-1], counts[32][-1]
    assert small.requests == large.requests
    assert counts[4][1].requests == small.requests and counts[32][1].requests == large.requests
    # One broker: one ListGroups, one DescribeGroups batch, one OffsetFetch for the group, and
    # ListOffsets latest + earliest for the leader; metadata is cached.
    assert large.requests == {
        "ListGroups": 1,
        "DescribeGroups": 1,
        "OffsetFetch": 1,
        "ListOffsets": 2,
    }
    assert large.connections_opened == 0


@pytest.mark.broker
async def test_many_groups_are_described_in_batches(kafka_broker, collector_for):
    bootstrap = kafka_broker.bootstrap_servers
    prefix = _name("many")
    topic = f"{prefix}-t"
    await _produce(bootstrap, topic, [2])
    groups = [f"{prefix}-{i:02d}" for i in range(10)]
    for i, group in enumerate(groups):
        await _commit(bootstrap, group, {(topic, 0): i % 3})

    collector = collector_for(
        group_allow=f"^{prefix}-", describe_batch_size=4, offset_fetch_batch_size=4
    )
    await collector.scan()
    result = await collector.scan()

    assert result.requests["DescribeGroups"] == 3
    assert result.requests["OffsetFetch"] == 3  # OffsetFetch v8 (KIP-709): many groups at once
    assert collector.describe_batch_size == 4
    assert collector.offset_fetch_batch_size == 4
    assert {g: _rows(result, g)[(topic, 0)].committed_offset for g in groups} == {
        g: i % 3 for i, g in enumerate(groups)
    }


@pytest.mark.broker
async def test_describe_batch_is_split_and_the_working_size_remembered(proxied):
    proxy, broker = await proxied(max_describe_groups=2)
    bootstrap = broker.bootstrap_servers
    topic = _name("split")
    await _produce(bootstrap, topic, [3])
    groups = [_name(f"split{i}") for i in range(7)]
    for group in groups:
        await _commit(bootstrap, group, {(topic, 0): 2})

    async with ClusterCollector(bootstrap, request_timeout_ms=5000) as collector:
        first = await collector.scan()
        assert proxy.dropped["DescribeGroups"] >= 2
        assert collector.describe_batch_size == 2
        dropped = proxy.dropped["DescribeGroups"]
        second = await collector.scan()

    assert proxy.dropped["DescribeGroups"] == dropped
    for result in (first, second):
        assert set(result.group_states) == set(groups)
        assert result.samples.num_rows == 7
    assert second.requests["DescribeGroups"] == 4  # ceil(7 / 2)
    assert second.connections_opened == 0


@pytest.mark.broker
async def test_offset_fetch_batch_is_split_and_the_working_size_remembered(proxied):
    proxy, broker = await proxied(max_offset_fetch_groups=2)
    bootstrap = broker.bootstrap_servers
    topic = _name("fsplit")
    await _produce(bootstrap, topic, [9])
    groups = [_name(f"fsplit{i}") for i in range(7)]
    for i, group in enumerate(groups):
        await _commit(bootstrap, group, {(topic, 0): i + 1})

    async with ClusterCollector(bootstrap, request_timeout_ms=5000) as collector:
        first = await collector.scan()
        assert proxy.dropped["OffsetFetch"] >= 2
        assert collector.offset_fetch_batch_size == 2
        dropped = proxy.dropped["OffsetFetch"]
        second = await collector.scan()

    assert proxy.dropped["OffsetFetch"] == dropped
    for result in (first, second):
        assert {g: _rows(result, g)[(topic, 0)].committed_offset for g in groups} == {
            g: i + 1 for i, g in enumerate(groups)
        }
    assert second.requests["OffsetFetch"] == 4  # ceil(7 / 2)
    assert second.connections_opened == 0


@pytest.mark.broker
async def test_the_offset_fetch_fallback_is_one_info_line_not_an_error(
    proxied, collector_for, caplog
):
    # Some brokers break the connection on an all-partitions OffsetFetch (the embedded one
    # does before v8): learning that is routine, not an error with a traceback.
    _proxy, broker = await proxied(drop_offset_fetch_all=True)
    caplog.set_level(logging.INFO)
    topic, group = _name("quiet"), _name("quiet")
    await _produce(broker.bootstrap_servers, topic, [2])
    await _commit(broker.bootstrap_servers, group, {(topic, 0): 1})
    collector = collector_for(
        bootstrap_servers=broker.bootstrap_servers, group_allow=[f"^{group}$"]
    )
    caplog.clear()
    result = await collector.scan()
    await collector.scan()

    assert collector.offset_fetch_all_partitions is False
    assert _rows(result, group)[(topic, 0)].committed_offset == 1
    assert [r for r in caplog.records if r.levelno >= logging.WARNING] == []
    said = [r for r in caplog.records if "OffsetFetch" in r.getMessage()]
    assert [(r.levelname, r.name) for r in said] == [("INFO", "notifier.collect")]
    assert said[0].getMessage() == (
        "cluster test: the broker does not answer OffsetFetch for all partitions of a group; "
        "naming the partitions instead"
    )


@pytest.mark.broker
async def test_offset_fetch_falls_back_to_named_partitions(proxied):
    proxy, broker = await proxied(drop_offset_fetch_all=True)
    bootstrap = broker.bootstrap_servers
    old_topic, group = _name("old"), _name("fallback")
    await _produce(bootstrap, old_topic, [2, 2])
    await _commit(bootstrap, group, {(old_topic, 1): 1})

    async with ClusterCollector(
        bootstrap, request_timeout_ms=5000, metadata_max_age_ms=300
    ) as collector:
        first = await collector.scan()
        assert collector.offset_fetch_all_partitions is False
        assert proxy.dropped["OffsetFetch"] == 1
        assert {tp: r.committed_offset for tp, r in _rows(first, group).items()} == {
            (old_topic, 1): 1
        }
        second = await collector.scan()
        assert second.requests["OffsetFetch"] == 1  # no second probe

        # A new group on a topic created after the metadata was read is found at once ...
        new_topic, new_group = _name("new"), _name("newgroup")
        await _produce(bootstrap, new_topic, [5])
        await _commit(bootstrap, new_group, {(new_topic, 0): 4})
        third = await collector.scan()
        assert _rows(third, new_group)[(new_topic, 0)].committed_offset == 4

        # ... and a known group's commits to another new topic once the metadata ages out.
        other_topic = _name("other")
        await _produce(bootstrap, other_topic, [3])
        await _commit(bootstrap, group, {(other_topic, 0): 3})
        await asyncio.sleep(0.4)
        fourth = await collector.scan()
        assert set(_rows(fourth, group)) == {(old_topic, 1), (other_topic, 0)}
    assert proxy.dropped["OffsetFetch"] == 1


@pytest.mark.broker
async def test_stopped_broker_is_a_scan_error_and_its_return_is_picked_up(broker_factory):
    broker = broker_factory()
    bootstrap = broker.bootstrap_servers
    topic, group = _name("restart"), _name("restart")
    await _produce(bootstrap, topic, [2])
    await _commit(bootstrap, group, {(topic, 0): 1})

    # The topic is created anew after the restart: a metadata age below the time between
    # scans lets the next scan know its leader (otherwise it shows within 5 s).
    async with ClusterCollector(
        bootstrap, request_timeout_ms=2000, metadata_max_age_ms=1
    ) as collector:
        assert (await collector.scan()).samples.num_rows == 1
        await broker.astop()
        started = time.monotonic()
        with pytest.raises(ClusterUnreachableError, match="failed"):
            await collector.scan()
        assert time.monotonic() - started < 3

        await broker.astart()  # same port, empty: Tansu keeps everything in memory
        assert (await collector.scan()).samples.num_rows == 0
        await _produce(bootstrap, topic, [3])
        await _commit(bootstrap, group, {(topic, 0): 3})
        rows = _rows(await collector.scan(), group)
    assert (rows[(topic, 0)].committed_offset, rows[(topic, 0)].log_end_offset) == (3, 3)


@pytest.mark.broker
async def test_unresponsive_broker_is_bounded_by_the_timeouts(proxied):
    proxy, broker = await proxied()
    bootstrap = broker.bootstrap_servers
    topic = _name("hang")
    await _produce(bootstrap, topic, [1])
    await _commit(bootstrap, _name("hang"), {(topic, 0): 1})

    async with (
        ClusterCollector(bootstrap, request_timeout_ms=1000) as by_request,
        ClusterCollector(bootstrap, request_timeout_ms=10_000, scan_timeout_ms=1000) as by_scan,
    ):
        await by_request.scan()
        await by_scan.scan()
        proxy.blackhole = True
        started = time.monotonic()
        with pytest.raises(ScanError, match="no answer within 1s"):
            await by_request.scan()
        assert time.monotonic() - started < 2.5
        started = time.monotonic()
        with pytest.raises(ScanError, match="timed out after 1s"):
            await by_scan.scan()
        assert time.monotonic() - started < 2.5


@pytest.mark.broker
async def test_a_failed_scan_says_whether_the_cluster_answered_before_it_failed(proxied):
    proxy, broker = await proxied()
    bootstrap = broker.bootstrap_servers
    topic = _name("answered")
    await _produce(bootstrap, topic, [1])
    await _commit(bootstrap, _name("answered"), {(topic, 0): 1})
    async with ClusterCollector(
        bootstrap, request_timeout_ms=1000, scan_timeout_ms=1000
    ) as collector:
        await collector.scan()
        proxy.hold_api = 15  # DescribeGroups: the cluster answers ListGroups, then stalls
        with pytest.raises(ScanError) as struggling:
            await collector.scan()
        assert not isinstance(struggling.value, ClusterUnreachableError)  # it backs off

        proxy.hold_api = None
        proxy.release.set()
        await broker.astop()
        with pytest.raises(ClusterUnreachableError):  # tried again at the next tick
            await collector.scan()


@pytest.mark.broker
def test_broker_restart_keeps_the_port(broker_factory):
    broker = broker_factory()
    port, pid = broker.port, broker.pid
    broker.restart()
    assert (broker.port, broker.running) == (port, True)
    assert broker.pid != pid
    assert broker.bootstrap_servers == f"127.0.0.1:{port}"
    assert "tansu" in broker.log_path.read_text()


def test_broker_error_names_a_missing_binary(tmp_path):
    missing = tmp_path / "no-such-tansu"
    with pytest.raises(BrokerError, match=str(missing)):
        EmbeddedBroker(binary=missing, log_dir=tmp_path).start()


# --------------------------------------------------------------------------------------------
# Pure helpers


def test_member_hash_is_stable_signed_64_bit_and_zero_without_members():
    assert member_hash([]) == 0
    assert member_hash(["b", "a"]) == member_hash(["a", "b"])
    assert member_hash(["a"]) != member_hash(["a", "b"])
    assert -(2**63) <= member_hash(["consumer-1-4f2c"]) < 2**63
    # the same in every process (no salted hash()): pinned values
    assert member_hash(["a", "b"]) == -17643764250920285
    assert member_hash(["consumer-1"]) == 2178106912107862298


def test_unknown_group_states_become_unknown():
    assert normalize_group_state("PreparingRebalance") == "PreparingRebalance"
    assert normalize_group_state("Assigning") == "Unknown"
    assert normalize_group_state(None) == "Unknown"


def test_assigned_partition_without_commit_has_null_committed_offset():
    assignment = ConsumerProtocolMemberAssignment(0, [("t", [0, 1])], b"").encode()
    metadata = ConsumerProtocolMemberMetadata(0, ["t", "u"], b"").encode()
    assigned, subscribed = decode_member("consumer", metadata, assignment)
    assert assigned == {("t", 0), ("t", 1)} and subscribed == {"t", "u"}
    assert decode_member("connect", metadata, assignment) == (set(), set())
    assert decode_member("consumer", b"\x00", b"\x01") == (set(), set())

    group = Group("g", "Stable", "consumer", ["m1"], assigned, subscribed)
    table = build_samples(
        ts=1000,
        cluster="c",
        groups={"g": group},
        commits={"g": {("t", 0): 7, ("gone", 0): 1}},
        log_end={("t", 0): 9, ("t", 1): 4},
        log_start={("t", 0): 2, ("t", 1): None},
    )
    assert table.schema == SAMPLE_SCHEMA
    assert table_to_samples(table) == [
        Sample(1000, "c", "g", "t", 0, 7, 9, 2, "Stable", 1, member_hash(["m1"])),
        Sample(1000, "c", "g", "t", 1, None, 4, None, "Stable", 1, member_hash(["m1"])),
    ]


def test_collector_rejects_bad_settings():
    with pytest.raises(ValueError, match="security_protocol"):
        ClusterCollector("localhost:9092", security_protocol="TLS")
    with pytest.raises(ValueError, match="sasl_username"):
        ClusterCollector("localhost:9092", security_protocol="SASL_PLAINTEXT")
    with pytest.raises(ValueError, match="sasl_mechanism"):
        ClusterCollector(
            "localhost:9092",
            security_protocol="SASL_PLAINTEXT",
            sasl_mechanism="NTLM",
            sasl_username="u",
            sasl_password="p",
        )
    collector = ClusterCollector(
        "localhost:9092",
        security_protocol="SASL_SSL",
        sasl_mechanism="SCRAM-SHA-512",
        sasl_username="u",
        sasl_password="p",
    )
    assert collector.cluster == "default"
