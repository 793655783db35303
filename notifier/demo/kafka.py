"""The Kafka work the scenario scripts share: the scenario's traffic, polling and committing,
members joining a group in turn, and the admin requests (topics, DeleteRecords).

The embedded broker's gaps shape them (docs/architecture.md, "The embedded broker"): producers
send one record per batch, because it reports the log end as the last batch's base offset + 1; a
consumer only sends LeaveGroup after a rebalance (generation > 0), so groups whose members must
leave join them one after the other; DeleteRecords is probed, because not every broker enforces
it.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
import time
from collections.abc import AsyncIterator
from typing import Any

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient, NewTopic, RecordsToDelete
from aiokafka.errors import ConsumerStoppedError, KafkaError

from notifier.demo.story import ScenarioRun, ScriptEnv

log = logging.getLogger(__name__)

PARTITIONS = 2
RATE_PER_TOPIC = 20.0
"""Records per second of a misbehaving scenario's steady traffic (over all partitions)."""
CLIENT_ERRORS = (KafkaError, ConsumerStoppedError, OSError, TimeoutError)


async def _produce(env: ScriptEnv, run: ScenarioRun) -> None:
    """The scenario's traffic, forever: bursts while it behaves, a steady stream while it
    misbehaves (``run.steady``).

    Bursts of random size at random moments leave a consumer that keeps up with a lag that is
    mostly 0 and sometimes not. A steady stream would leave even a perfect consumer a record or
    two behind at most scans, and Burrow's WARN fires on a lag that never decreases: good
    behaviour on steady traffic can look like falling behind. Misbehaviour gets the steady
    stream so that "falling behind" is unambiguous.
    """
    producer = await env.producer()
    rng = random.Random(run.group)
    step = PARTITIONS / RATE_PER_TOPIC  # one record per partition per step
    sent = 0
    task = asyncio.current_task()
    while task is None or not task.cancelling():
        if run.steady:
            started = time.monotonic()
            for partition in range(PARTITIONS):
                await _send(producer, run.topic, b"%d" % sent, partition)
                sent += 1
            await asyncio.sleep(max(0.0, step - (time.monotonic() - started)))
        else:
            for _ in range(rng.randint(4, 30)):
                await _send(producer, run.topic, b"%d" % sent, rng.randrange(PARTITIONS))
                sent += 1
            await asyncio.sleep(rng.uniform(0.3, 1.5))


async def _send(producer: AIOKafkaProducer, topic: str, value: bytes, partition: int) -> None:
    """One record, as its own batch; a failure is logged and the script goes on."""
    try:
        # asyncio.timeout, not wait_for: in Python 3.11 wait_for can swallow a cancellation
        # that arrives as the send completes, and the producer task would never stop.
        async with asyncio.timeout(10):
            await producer.send_and_wait(topic, value, partition=partition)
    except (TimeoutError, KafkaError) as exc:
        log.warning("produce to %s/%d failed: %r", topic, partition, exc)
        await asyncio.sleep(0.5)


@contextlib.asynccontextmanager
async def traffic(env: ScriptEnv, run: ScenarioRun) -> AsyncIterator[None]:
    """The scenario's producer runs for as long as the block does."""
    producing = asyncio.create_task(_produce(env, run))
    try:
        yield
    finally:
        producing.cancel()
        await asyncio.gather(producing, return_exceptions=True)


@contextlib.asynccontextmanager
async def transient_errors(what: str) -> AsyncIterator[None]:
    """Swallow what a consumer in a rebalancing group meets: failed commits, a lost member id,
    and the CancelledError aiokafka raises from ``getmany`` when it drops an assignment
    waiter (only a cancellation of the task itself propagates)."""
    try:
        yield
    except CLIENT_ERRORS as exc:
        log.debug("%s: %r", what, exc)
        await asyncio.sleep(0.1)
    except asyncio.CancelledError:
        task = asyncio.current_task()
        if task is not None and task.cancelling():
            raise
        log.debug("%s: aiokafka cancelled a wait", what)
        await asyncio.sleep(0.1)


async def poll_and_commit(
    consumer: AIOKafkaConsumer,
    committed: dict[TopicPartition, int],
    per_partition: int | None = None,
) -> None:
    """One poll (one per partition with ``per_partition``, so a slow consumer still moves on
    every partition); commit what it returned."""
    if per_partition is None:
        batches = [await consumer.getmany(timeout_ms=200)]
    else:
        batches = [
            await consumer.getmany(tp, timeout_ms=50, max_records=per_partition)
            for tp in sorted(consumer.assignment())
        ]
    offsets = {
        tp: records[-1].offset + 1 for batch in batches for tp, records in batch.items() if records
    }
    if offsets:
        await consumer.commit(offsets)
        committed.update(offsets)


async def consume_once(
    consumer: AIOKafkaConsumer,
    committed: dict[TopicPartition, int],
    per_partition: int | None = None,
) -> None:
    """:func:`poll_and_commit`, riding out rebalances."""
    async with transient_errors("consume"):
        await poll_and_commit(consumer, committed, per_partition)


async def keep_up_until(
    consumer: AIOKafkaConsumer, committed: dict[TopicPartition, int], deadline: float
) -> None:
    """Behave: consume everything and commit after every poll, until ``deadline``."""
    while time.monotonic() < deadline:
        await consume_once(consumer, committed)


async def join_in_turn(
    env: ScriptEnv, run: ScenarioRun, members: int, **overrides: Any
) -> list[AIOKafkaConsumer]:
    """Start ``members`` consumers one after the other, each once the previous one owns
    partitions, each consuming from the start. Joining in turn makes the group rebalance, so
    its generation is above 0 and a member that leaves sends LeaveGroup."""
    consumers: list[AIOKafkaConsumer] = []
    committed: dict[TopicPartition, int] = {}
    for _ in range(members):
        consumer = await env.consumer(run, **overrides)
        consumers.append(consumer)
        deadline = time.monotonic() + 30
        while not consumer.assignment():
            if time.monotonic() > deadline:
                raise RuntimeError(f"{run.group}: a member got no partitions within 30 s")
            await asyncio.gather(*(consume_once(c, committed) for c in consumers))
    return consumers


async def delete_records_supported(bootstrap: str, topic: str) -> bool:
    """Ask the broker to delete nothing (records before offset 0): refused or a dropped
    connection means it cannot enforce retention for the demo."""
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=5000)
    # A topic just created has no leader for a moment (NOT_LEADER_OR_FOLLOWER on a real
    # broker): a retriable error says "not yet", not "never".
    deadline = time.monotonic() + 20
    try:
        await admin.start()
        while True:
            try:
                await asyncio.wait_for(
                    admin.delete_records(
                        {TopicPartition(topic, 0): RecordsToDelete(0)}, timeout_ms=5000
                    ),
                    10,
                )
                return True
            except KafkaError as exc:
                if not exc.retriable or time.monotonic() > deadline:
                    raise
                await asyncio.sleep(0.5)
    except (*CLIENT_ERRORS, NotImplementedError) as exc:
        log.info("DeleteRecords probe failed: %r", exc)
        return False
    finally:
        with contextlib.suppress(Exception):
            await admin.close()


async def delete_old_records(env: ScriptEnv, consumer: AIOKafkaConsumer, keep: int) -> None:
    """Retention, fast-forwarded: keep only the newest ``keep`` records of each partition."""
    admin = AIOKafkaAdminClient(bootstrap_servers=env.bootstrap)
    await admin.start()
    try:
        while True:
            await asyncio.sleep(env.settings.scan_interval)
            ends = await consumer.end_offsets(list(consumer.assignment()))
            doomed = {tp: RecordsToDelete(end - keep) for tp, end in ends.items() if end > keep}
            if doomed:
                await admin.delete_records(doomed)
    finally:
        await admin.close()


async def create_topics(bootstrap: str, topics: list[str]) -> None:
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    await admin.start()
    try:
        await admin.create_topics([NewTopic(t, PARTITIONS, 1) for t in topics])
    finally:
        await admin.close()
