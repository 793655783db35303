"""Counting the Kafka requests of aiokafka clients (``notifier_kafka_requests_total``) against
the embedded broker: what a counted client sends is counted under its role, by API, the
metadata requests that bypass ``AIOKafkaClient.send`` included; a client that is not counted
leaves the figures alone; the collector's scans count as ``scan``."""

from __future__ import annotations

import asyncio
import uuid

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer

from notifier.collect import ClusterCollector
from notifier.collect.requestcount import KafkaRequests, count_requests
from notifier.embedded import EmbeddedBroker

pytestmark = pytest.mark.broker


async def test_a_counted_producer_and_consumer_count_what_they_send_and_no_other_client_does(
    kafka_broker: EmbeddedBroker,
) -> None:
    requests = KafkaRequests()
    topic = f"rc-{uuid.uuid4().hex[:8]}"
    bootstrap = kafka_broker.bootstrap_servers
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap)
    count_requests(producer, "fleet_state", requests)
    uncounted = AIOKafkaProducer(bootstrap_servers=bootstrap)
    await producer.start()
    await uncounted.start()
    try:
        for _ in range(3):
            await producer.send_and_wait(topic, b"x", partition=0)
        await uncounted.send_and_wait(topic, b"y", partition=0)
    finally:
        await producer.stop()
        await uncounted.stop()
    counts = requests.counts()
    assert counts[("fleet_state", "Produce")] == 3, counts
    assert counts[("fleet_state", "Metadata")] >= 1, counts  # the topic's, before producing
    assert counts[("fleet_state", "ApiVersions")] >= 1, counts
    assert {role for role, _ in counts} == {"fleet_state"}

    consumer = AIOKafkaConsumer(topic, bootstrap_servers=bootstrap, auto_offset_reset="earliest")
    count_requests(consumer, "fleet_view", requests)
    await consumer.start()
    try:
        for _ in range(4):  # the three counted records and the uncounted one
            await asyncio.wait_for(consumer.getone(), 30)
        probes = requests.counts().get(("fleet_view", "Metadata"), 0)
        await consumer._client.fetch_all_metadata()  # as the fleet's reachability probe asks
    finally:
        await consumer.stop()
    counts = requests.counts()
    assert counts[("fleet_view", "Fetch")] >= 1, counts
    assert counts[("fleet_view", "Metadata")] == probes + 1, counts
    assert counts[("fleet_state", "Produce")] == 3, "the consumer counts as its own client"


async def test_a_scan_counts_its_requests_as_the_scan_client(kafka_broker: EmbeddedBroker) -> None:
    requests = KafkaRequests()
    collector = ClusterCollector(kafka_broker.bootstrap_servers, requests=requests)
    try:
        first = await collector.scan()
        second = await collector.scan()
    finally:
        await collector.close()
    counts = requests.counts()
    scanned: dict[str, int] = {}
    for result in (first, second):
        for api, n in result.requests.items():
            scanned[api] = scanned.get(api, 0) + n
    # The scans' own figures, plus the handshake of each connection they opened.
    handshakes = first.connections_opened + second.connections_opened
    assert counts == {
        **{("scan", api): n for api, n in scanned.items()},
        ("scan", "ApiVersions"): handshakes,
    }, (counts, scanned)
