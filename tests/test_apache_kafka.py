"""The collector against Apache Kafka itself, compared with Kafka's own tools.

One broker per tested release for the whole session (tests/conftest.py); each test keeps to its
own topics and groups.
"""

from __future__ import annotations

import uuid

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient, NewTopic

from notifier.collect import ClusterCollector
from notifier.demo.apache_kafka import ApacheKafkaBroker
from notifier.types import table_to_samples

pytestmark = pytest.mark.kafka


def _name(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


async def _topic_with_records(bootstrap: str, topic: str, counts: list[int]) -> None:
    """``topic`` with ``len(counts)`` partitions, ``counts[p]`` records in partition p."""
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    await admin.start()
    try:
        await admin.create_topics([NewTopic(topic, len(counts), 1)])
    finally:
        await admin.close()
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

    async with ClusterCollector(bootstrap, cluster="apache", request_timeout_ms=10_000) as scan:
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
    assert result.group_states[group] == "Empty"
