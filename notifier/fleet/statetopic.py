"""The fleet's state topic on Kafka: making sure it exists, writing keyed records to one
partition (a shard), and reading a partition back to where it ended when the read began.

The topic is meant to be compacted (``cleanup.policy=compact``): records are keyed so that the
latest record per key is all a new owner needs, and a record with no value (a tombstone) removes
its key. A broker that refuses the setting gets a plain topic (one log line says so); readers
apply "latest per key wins" themselves, so the result is the same, only the topic grows.

Clients log in as the collector does (:func:`notifier.collect.security.client_security`), and
count their requests as ``counted_as`` in ``notifier_kafka_requests_total``
(:mod:`notifier.collect.requestcount`): the shard state's by default, the fleet view's for its
own topic.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient, NewTopic

from notifier.collect.requestcount import count_requests
from notifier.collect.security import client_security
from notifier.config.kafka_security import SecurityConfig
from notifier.fleet import aiokafka_private
from notifier.types import KafkaClientRole

log = logging.getLogger("notifier.fleet.statetopic")

FETCHER_WAKEUP_MS = 2000
"""aiokafka's fetcher looks over its partitions every ``consumer_timeout_ms`` (200 ms by
default) even when nothing happened; for a consumer that never fetches (its partitions stay
paused) those wake-ups were most of what an idle instance spent. Assignments, resumes and
finished fetches wake the fetcher at once whatever this is."""

CLIENT_ID = "notifier-fleet"

BATCH_BYTES = 512 * 1024
"""The largest record batch a writer builds (a record larger than this goes alone)."""

_TOPIC_ALREADY_EXISTS = 36
# Brokers refuse a topic config they do not know or allow with one of these.
_CONFIG_ERRORS = (40, 42, 44)


class StateTopicError(Exception):
    """The state topic cannot be created, has the wrong shape, or cannot be read."""


@dataclass(frozen=True)
class StateRecord:
    """The latest record of one key in a partition (``value`` None never appears: a tombstone
    removes its key from a read)."""

    key: str
    value: bytes
    offset: int


def _servers(bootstrap_servers: str | Sequence[str]) -> list[str]:
    if isinstance(bootstrap_servers, str):
        return [s.strip() for s in bootstrap_servers.split(",") if s.strip()]
    return list(bootstrap_servers)


def _settings(security: SecurityConfig | None, client_id: str) -> dict[str, Any]:
    return {"client_id": client_id, **client_security(security or SecurityConfig())}


async def ensure_topic(
    bootstrap_servers: str | Sequence[str],
    topic: str,
    partitions: int,
    *,
    security: SecurityConfig | None = None,
    compact: bool = True,
    client_id: str = CLIENT_ID,
    request_timeout_ms: int = 30_000,
    counted_as: KafkaClientRole = "fleet_state",
) -> int:
    """Create ``topic`` with ``partitions`` partitions when it does not exist (compacted when
    ``compact`` and the broker accepts it). Returns its partition count; StateTopicError when it
    cannot be created or exists with another partition count (the shards would not match)."""
    if partitions < 1:
        raise ValueError("partitions must be at least 1")
    admin = AIOKafkaAdminClient(
        bootstrap_servers=_servers(bootstrap_servers),
        request_timeout_ms=request_timeout_ms,
        **_settings(security, client_id),
    )
    count_requests(admin, counted_as)
    await admin.start()
    try:
        # list_topics asks for all topics: a metadata request naming the topic would let a
        # broker with auto-creation make it with its default partition count.
        if topic not in await admin.list_topics():
            await _create(admin, topic, partitions, compact)
        found = await _partition_count(admin, topic)
    finally:
        await admin.close()
    if found != partitions:
        raise StateTopicError(
            f"topic {topic} has {found} partitions, expected {partitions} (one per shard): "
            f"delete it or set the partition count to {found}"
        )
    return found


async def _create(admin: AIOKafkaAdminClient, topic: str, partitions: int, compact: bool) -> None:
    configs = {"cleanup.policy": "compact"} if compact else {}
    code, message = await _create_once(admin, topic, partitions, configs)
    if code in _CONFIG_ERRORS and configs:
        log.warning(
            "the broker refused cleanup.policy=compact for topic %s (%s); created it without "
            "compaction: readers keep the latest record per key themselves, the topic grows",
            topic,
            message or f"error {code}",
            extra={"event": "state_topic_not_compacted", "topic": topic},
        )
        code, message = await _create_once(admin, topic, partitions, {})
    if code not in (0, _TOPIC_ALREADY_EXISTS):  # another instance may have just created it
        raise StateTopicError(f"cannot create topic {topic}: {message or f'error {code}'}")
    if code == 0:
        log.info(
            "created topic %s with %d partitions",
            topic,
            partitions,
            extra={"event": "state_topic_created", "topic": topic},
        )


async def _create_once(
    admin: AIOKafkaAdminClient, topic: str, partitions: int, configs: dict[str, str]
) -> tuple[int, str | None]:
    answer = await admin.create_topics([NewTopic(topic, partitions, 1, topic_configs=configs)])
    for name, code, *rest in answer.topic_errors:
        if name == topic:
            return int(code), (rest[0] if rest else None)
    raise StateTopicError(f"the broker's answer to creating topic {topic} does not name it")


async def _partition_count(admin: AIOKafkaAdminClient, topic: str) -> int:
    # A new topic's metadata can lag its creation by a moment on a real cluster.
    deadline = time.monotonic() + 30.0
    while True:
        for found in await admin.describe_topics([topic]):
            if found["topic"] == topic and found["error_code"] == 0 and found["partitions"]:
                return len(found["partitions"])
        if time.monotonic() > deadline:
            raise StateTopicError(f"topic {topic} shows no partitions in the cluster's metadata")
        await asyncio.sleep(0.2)


class StateWriter:
    """A producer of keyed records to explicit partitions of one topic (acks from all
    in-sync replicas: state that was acknowledged survives the broker the leader was on)."""

    def __init__(
        self,
        bootstrap_servers: str | Sequence[str],
        topic: str,
        *,
        security: SecurityConfig | None = None,
        client_id: str = CLIENT_ID,
        max_request_size: int = 1_048_576,
        compression_type: str | None = None,
        counted_as: KafkaClientRole = "fleet_state",
    ) -> None:
        self.topic = topic
        self._producer = AIOKafkaProducer(
            bootstrap_servers=_servers(bootstrap_servers),
            acks="all",
            linger_ms=5,
            max_request_size=max_request_size,
            # One batch per partition per request: with aiokafka's 16 KiB default, a scan's
            # records (a shard's changes, a flush of bulletins) went out a request or two each.
            # Half a MiB stays well inside a broker's default message.max.bytes (1 MiB + 12).
            max_batch_size=min(max_request_size, BATCH_BYTES),
            compression_type=compression_type,
            **_settings(security, client_id),
        )
        count_requests(self._producer, counted_as)

    async def start(self) -> None:
        await self._producer.start()

    async def stop(self) -> None:
        await self._producer.stop()

    async def __aenter__(self) -> StateWriter:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    async def send(self, partition: int, key: str, value: bytes | None) -> int:
        """Write one record (None: a tombstone) and wait for it to be acknowledged; its
        offset."""
        found = await self._producer.send_and_wait(
            self.topic, value, key=key.encode(), partition=partition
        )
        return int(found.offset)

    async def send_many(self, partition: int, records: Iterable[tuple[str, bytes | None]]) -> int:
        """Write records in order, batched, and wait until all are acknowledged; how many."""
        pending = [
            await self._producer.send(self.topic, value, key=key.encode(), partition=partition)
            for key, value in records
        ]
        if pending:
            await asyncio.gather(*pending)
        return len(pending)


class StateReader:
    """Reads partitions of one topic from the start, without a consumer group (``assign``):
    one read at a time per reader, each of any number of partitions."""

    def __init__(
        self,
        bootstrap_servers: str | Sequence[str],
        topic: str,
        *,
        security: SecurityConfig | None = None,
        client_id: str = CLIENT_ID,
        timeout: float = 60.0,
        fetch_max_wait_ms: int = 50,
        counted_as: KafkaClientRole = "fleet_state",
    ) -> None:
        self.topic = topic
        self._timeout = timeout
        self._lock = asyncio.Lock()
        self._consumer = AIOKafkaConsumer(
            bootstrap_servers=_servers(bootstrap_servers),
            group_id=None,
            enable_auto_commit=False,
            auto_offset_reset="earliest",
            # A read stops at an end offset it knows, so a fetch never has to wait for records
            # to arrive; the wait only delays requests queued behind it on the connection.
            fetch_max_wait_ms=fetch_max_wait_ms,
            # Between reads it has no partitions, and would still look every 200 ms.
            consumer_timeout_ms=FETCHER_WAKEUP_MS,
            **_settings(security, client_id),
        )
        count_requests(self._consumer, counted_as)

    async def start(self) -> None:
        await self._consumer.start()

    async def stop(self) -> None:
        """Close the reader; a broker that is gone does not make this raise."""
        try:
            await self._consumer.stop()
        except asyncio.CancelledError:
            task = asyncio.current_task()
            if task is not None and task.cancelling():
                raise  # our caller is being cancelled: that must go on
            # aiokafka cancels its fetcher's requests in flight and awaits them, which re-raises
            # their CancelledError when the broker went away mid-request; the consumer is
            # closed by then but for its client, whose connections are closed here.
            log.debug(
                "topic %s: a fetch in flight was cancelled while the reader stopped",
                self.topic,
                extra={"event": "state_reader_stop_cancelled", "topic": self.topic},
            )
            await aiokafka_private.client(self._consumer).close()

    async def __aenter__(self) -> StateReader:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    async def read_partition(self, partition: int) -> list[StateRecord]:
        """The latest record of each key of ``partition``, read at least up to its end offset
        when the read began, in the order they were written; keys whose latest record is a
        tombstone are left out. Records without a readable key are skipped with a log line."""
        return (await self.read_partitions([partition]))[partition]

    async def read_partitions(self, partitions: Iterable[int]) -> dict[int, list[StateRecord]]:
        """:meth:`read_partition` of several partitions at once: one offsets request for all
        of them, and the ones with records fetched together."""
        wanted = sorted(set(partitions))
        async with self._lock:
            try:
                return await self._read(wanted)
            finally:
                # Nothing assigned between reads: the consumer's background fetches would
                # otherwise hold up the next read's offsets requests on the same connection.
                self._consumer.assign([])

    async def _read(self, partitions: list[int]) -> dict[int, list[StateRecord]]:
        consumer = self._consumer
        tps = [TopicPartition(self.topic, p) for p in partitions]
        consumer.assign([])
        ends, starts = await asyncio.gather(
            consumer.end_offsets(tps), consumer.beginning_offsets(tps)
        )
        latest: dict[int, dict[str, StateRecord]] = {p: {} for p in partitions}
        ends = {tp: end for tp, end in ends.items() if end > starts[tp]}
        if not ends:
            return {p: [] for p in partitions}
        consumer.assign(list(ends))
        for tp in ends:
            consumer.seek(tp, starts[tp])
        deadline = time.monotonic() + self._timeout
        pending = set(ends)
        while pending:
            if time.monotonic() > deadline:
                behind = [
                    f"partition {tp.partition} at offset {await consumer.position(tp)} of "
                    f"{ends[tp]}"
                    for tp in sorted(pending)
                ]
                raise StateTopicError(
                    f"topic {self.topic}: read only up to {', '.join(behind)} "
                    f"in {self._timeout:.0f}s"
                )
            batch = await consumer.getmany(*pending, timeout_ms=500)
            # Every fetched record counts, also past the end: a fetch returns only records the
            # broker has committed (newer state, never a torn write), and some brokers report
            # the end of a partition as one past the first record of its last batch.
            for tp, records in batch.items():
                found = latest[tp.partition]
                for record in records:
                    key = self._key(record.key, tp.partition, record.offset)
                    if key is None:
                        continue
                    found.pop(key, None)  # re-inserted last: the order is that of the writes
                    if record.value is not None:
                        found[key] = StateRecord(key, record.value, record.offset)
            for tp in list(pending):
                if await consumer.position(tp) >= ends[tp]:
                    pending.discard(tp)
                    consumer.pause(tp)
        return {p: list(found.values()) for p, found in latest.items()}

    def _key(self, raw: bytes | None, partition: int, offset: int) -> str | None:
        problem = "has no key"
        if raw is not None:
            try:
                return raw.decode()
            except UnicodeDecodeError:
                problem = f"has a key that is not UTF-8 ({raw[:32]!r})"
        log.warning(
            "topic %s partition %d offset %d: the record %s; skipped",
            self.topic,
            partition,
            offset,
            problem,
            extra={"event": "state_record_skipped", "topic": self.topic},
        )
        return None


async def read_partition(
    bootstrap_servers: str | Sequence[str],
    topic: str,
    partition: int,
    *,
    security: SecurityConfig | None = None,
    client_id: str = CLIENT_ID,
    timeout: float = 60.0,
) -> list[StateRecord]:
    """:meth:`StateReader.read_partition` with a reader of its own."""
    async with StateReader(
        bootstrap_servers, topic, security=security, client_id=client_id, timeout=timeout
    ) as reader:
        return await reader.read_partition(partition)
