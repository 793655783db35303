"""The aiokafka internals the fleet relies on (:mod:`notifier.fleet.aiokafka_private`), checked
against the installed aiokafka: an upgrade that renames or drops one fails here, naming it and
the version, before a fleet's rebalance or shutdown would."""

from __future__ import annotations

import uuid

import aiokafka
import pytest
from aiokafka import AIOKafkaConsumer

from notifier.fleet import aiokafka_private
from notifier.fleet.aiokafka_private import AiokafkaChangedError


@pytest.fixture
async def consumer(kafka_broker):
    """A started group consumer, as the fleet's membership has one (not subscribed: no join)."""
    started = AIOKafkaConsumer(
        bootstrap_servers=kafka_broker.bootstrap_servers,
        group_id=f"aiokafka-private-{uuid.uuid4().hex[:8]}",
        enable_auto_commit=False,
    )
    await started.start()
    try:
        yield started
    finally:
        await started.stop()


async def test_the_installed_aiokafka_has_every_internal_the_fleet_uses(consumer):
    aiokafka_private.check(consumer)  # raises AiokafkaChangedError naming what is missing
    generation, member_id = aiokafka_private.member(consumer) or (None, None)
    assert isinstance(generation, int) and isinstance(member_id, str)
    assert generation == -1 and member_id == "", "no generation before the member joins"
    client = aiokafka_private.client(consumer)
    assert client.cluster.brokers(), "the consumer's own client knows the cluster"
    assert await client.fetch_all_metadata() is not None


async def test_a_missing_internal_fails_naming_the_attribute_and_the_version(consumer, monkeypatch):
    version = aiokafka.__version__
    # What an aiokafka that renamed a method of its group coordinator looks like.
    monkeypatch.delattr(type(consumer._coordinator), "request_rejoin")
    with pytest.raises(AiokafkaChangedError) as caught:
        aiokafka_private.check(consumer)
    message = str(caught.value)
    assert f"aiokafka {version}" in message
    assert "AIOKafkaConsumer._coordinator has no attribute 'request_rejoin'" in message
    assert "notifier/fleet/aiokafka_private.py" in message
    with pytest.raises(AiokafkaChangedError, match="'request_rejoin'"):
        aiokafka_private.request_rejoin(consumer)

    # ... and one that renamed the consumer's client.
    monkeypatch.delattr(consumer, "_client")
    with pytest.raises(AiokafkaChangedError, match=r"AIOKafkaConsumer has no attribute '_client'"):
        aiokafka_private.client(consumer)
