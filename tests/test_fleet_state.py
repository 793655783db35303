"""Shard state on the fleet's state topic (issue 10), against the embedded Tansu broker: the
topic is created once with a partition per shard, records go to the partition named, and a read
returns the latest record of each key up to where the partition ended when the read began."""

from __future__ import annotations

import logging
import uuid

import pytest
from aiokafka import AIOKafkaProducer

from notifier.collect import client_security
from notifier.config.kafka_security import SecurityConfig
from notifier.fleet.statetopic import (
    StateReader,
    StateTopicError,
    StateWriter,
    ensure_topic,
    read_partition,
)


def _topic(name: str) -> str:
    return f"notifier-fleet.{name}-{uuid.uuid4().hex[:8]}.state"


async def test_ensure_topic_creates_it_once_with_one_partition_per_shard(kafka_broker, caplog):
    topic = _topic("create")
    bootstrap = kafka_broker.bootstrap_servers
    with caplog.at_level(logging.INFO, logger="notifier.fleet.statetopic"):
        assert await ensure_topic(bootstrap, topic, 4) == 4
        assert await ensure_topic(bootstrap, topic, 4) == 4
    created = [r for r in caplog.records if getattr(r, "event", "") == "state_topic_created"]
    assert len(created) == 1 and topic in created[0].getMessage()


async def test_ensure_topic_refuses_a_topic_with_another_partition_count(kafka_broker):
    topic = _topic("shape")
    await ensure_topic(kafka_broker.bootstrap_servers, topic, 3)
    with pytest.raises(StateTopicError, match=rf"topic {topic} has 3 partitions, expected 8"):
        await ensure_topic(kafka_broker.bootstrap_servers, topic, 8)


async def test_records_go_to_their_partition_and_the_latest_per_key_wins(kafka_broker):
    topic = _topic("rw")
    bootstrap = kafka_broker.bootstrap_servers
    await ensure_topic(bootstrap, topic, 4)
    async with StateWriter(bootstrap, topic) as writer:
        await writer.send(2, "snap/prod/billing", b"v1")
        await writer.send_many(
            2,
            [
                ("chg/prod/billing/0", b"c0"),
                ("inc/prod/billing", b"open"),
                ("snap/prod/billing", b"v2"),
                ("chg/prod/billing/1", b"c1"),
            ],
        )
        await writer.send(2, "inc/prod/billing", None)  # the incident closed
        await writer.send(1, "snap/prod/orders", b"other shard")
    found = await read_partition(bootstrap, topic, 2)
    assert [(r.key, r.value) for r in found] == [
        ("chg/prod/billing/0", b"c0"),
        ("snap/prod/billing", b"v2"),
        ("chg/prod/billing/1", b"c1"),
    ]
    assert [(r.key, r.value) for r in await read_partition(bootstrap, topic, 1)] == [
        ("snap/prod/orders", b"other shard")
    ]
    assert await read_partition(bootstrap, topic, 0) == []


async def test_a_read_stops_at_the_end_seen_when_it_began(kafka_broker):
    topic = _topic("end")
    bootstrap = kafka_broker.bootstrap_servers
    await ensure_topic(bootstrap, topic, 1)
    async with StateWriter(bootstrap, topic) as writer, StateReader(bootstrap, topic) as reader:
        await writer.send_many(0, [(f"k{i}", b"x") for i in range(50)])
        first = await reader.read_partition(0)
        await writer.send(0, "later", b"y")
        second = await reader.read_partition(0)
    assert len(first) == 50 and "later" not in {r.key for r in first}
    assert second[-1].key == "later" and len(second) == 51


async def test_records_without_a_readable_key_are_skipped_and_named(kafka_broker, caplog):
    topic = _topic("badkey")
    bootstrap = kafka_broker.bootstrap_servers
    await ensure_topic(bootstrap, topic, 1)
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap)
    await producer.start()
    try:
        await producer.send_and_wait(topic, b"no key", partition=0)
        await producer.send_and_wait(topic, b"bad key", key=b"\xff\xfe", partition=0)
        await producer.send_and_wait(topic, b"fine", key=b"good", partition=0)
    finally:
        await producer.stop()
    with caplog.at_level(logging.WARNING, logger="notifier.fleet.statetopic"):
        found = await read_partition(bootstrap, topic, 0)
    assert [(r.key, r.value) for r in found] == [("good", b"fine")]
    lines = [r.getMessage() for r in caplog.records]
    assert f"topic {topic} partition 0 offset 0: the record has no key; skipped" in lines
    assert any(f"topic {topic} partition 0 offset 1: the record has a key that is not" in m
               for m in lines)  # fmt: skip


def test_state_clients_log_in_as_the_collector_does():
    security = SecurityConfig.model_validate(
        {"protocol": "SASL_PLAINTEXT", "sasl_mechanism": "SCRAM-SHA-512",
         "sasl_username": "fleet", "sasl_password": "s3cret"}
    )  # fmt: skip
    settings = client_security(security)
    assert settings["security_protocol"] == "SASL_PLAINTEXT"
    assert settings["sasl_mechanism"] == "SCRAM-SHA-512"
    assert (settings["sasl_plain_username"], settings["sasl_plain_password"]) == ("fleet", "s3cret")
    assert client_security(SecurityConfig())["security_protocol"] == "PLAINTEXT"
