"""The Kafka plumbing the fleet-wide view needs: create a compacted topic if it is missing, and
write keyed records to an explicit partition.

The shard-state side (:mod:`notifier.fleet.statetopic`, branch ``fleetstate``) offers the same
two things; :mod:`notifier.fleet.view` imports them from here until that lands, and the swap is
its one import line.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import Any

from aiokafka import AIOKafkaProducer
from aiokafka.admin import AIOKafkaAdminClient, NewTopic

log = logging.getLogger(__name__)

_ALREADY_EXISTS = 36


class TopicError(Exception):
    """The topic could not be created (the message names it and the broker's error)."""


async def ensure_topic(
    bootstrap_servers: str | Sequence[str],
    topic: str,
    partitions: int,
    compact: bool = True,
    client_kwargs: Mapping[str, Any] | None = None,
) -> None:
    """Create ``topic`` with ``partitions`` unless it exists; ``cleanup.policy=compact`` where
    the broker accepts it, else a plain topic (said once in the log: the latest value per key
    is then only kept by retention, which a long-lived fleet outgrows)."""
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap_servers, **dict(client_kwargs or {}))
    await admin.start()
    try:
        configs = {"cleanup.policy": "compact"} if compact else {}
        code, message = await _create(admin, topic, partitions, configs)
        if code not in (0, _ALREADY_EXISTS) and configs:
            log.warning(
                "the broker refused a compacted topic; created it without compaction",
                extra={"event": "topic_not_compacted", "topic": topic, "error": message},
            )
            code, message = await _create(admin, topic, partitions, {})
        if code not in (0, _ALREADY_EXISTS):
            raise TopicError(f"cannot create topic {topic!r}: error {code} {message or ''}")
    finally:
        await admin.close()


async def _create(
    admin: AIOKafkaAdminClient, topic: str, partitions: int, configs: dict[str, str]
) -> tuple[int, str | None]:
    response = await admin.create_topics([NewTopic(topic, partitions, 1, topic_configs=configs)])
    for error in response.topic_errors:
        if error[0] == topic:
            return int(error[1]), (str(error[2]) if len(error) > 2 and error[2] else None)
    return 0, None


class KeyedProducer:
    """Writes ``key → value`` records (value None: a tombstone) to one partition, in order."""

    def __init__(
        self,
        bootstrap_servers: str | Sequence[str],
        client_kwargs: Mapping[str, Any] | None = None,
    ) -> None:
        self._producer = AIOKafkaProducer(
            bootstrap_servers=bootstrap_servers,
            acks="all",
            enable_idempotence=False,
            linger_ms=5,
            **dict(client_kwargs or {}),
        )

    async def start(self) -> None:
        await self._producer.start()

    async def stop(self) -> None:
        await self._producer.stop()

    async def send(self, topic: str, partition: int, key: str, value: bytes | None) -> None:
        """Send and wait until the broker has it (what is published is what others read)."""
        await self._producer.send_and_wait(topic, value, key=key.encode(), partition=partition)

    async def send_many(
        self, topic: str, partition: int, records: Sequence[tuple[str, bytes | None]]
    ) -> None:
        """Send a batch, then wait for all of it (one round trip per batch, not per record)."""
        futures = [
            await self._producer.send(topic, value, key=key.encode(), partition=partition)
            for key, value in records
        ]
        for future in futures:
            await future
