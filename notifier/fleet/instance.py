"""One ``notifier run`` process as an instance of a fleet: its membership, wired to its
coordinator (which scans only the owned shards and publishes each scan's changes) and to its
notifier (whose pending notifications a hand-over waits for).

It is one of the coordinator's companions: started before the first scan, stopped after the
last one, before the notifier, so a SIGTERM flushes every shard, waits (bounded) for the
deliveries and leaves the group, and the other instances take the shards over at once.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable
from typing import TYPE_CHECKING, Any

from notifier.collect.security import client_security
from notifier.config import ServiceConfig
from notifier.fleet.membership import Membership, ShardStore
from notifier.fleet.statetopic import ensure_topic
from notifier.service.coordinator import Coordinator, ShardPublisher

if TYPE_CHECKING:
    from notifier.fleet.state import ShardState

log = logging.getLogger(__name__)


class FleetInstance:
    """Membership plus the wiring ``notifier run`` needs (see the module's doc)."""

    def __init__(
        self,
        service: ServiceConfig,
        coordinator: Coordinator,
        notifier: Any,
        shard_state: ShardState | None = None,
        *,
        instance: str | None = None,
    ) -> None:
        config = service.coordination
        kafka = service.coordination_kafka()
        if config is None or kafka is None:
            raise ValueError("the service config has no coordination: section")
        self.config = config
        self.kafka = kafka
        self.coordinator = coordinator
        self.notifier = notifier
        self.instance = instance or config.instance_name()
        self._shard_state = shard_state
        self._membership: Membership | None = None

    @property
    def membership(self) -> Membership:
        assert self._membership is not None, "FleetInstance.start() first"
        return self._membership

    @property
    def shard_state(self) -> ShardState:
        assert self._shard_state is not None, "FleetInstance.start() first"
        return self._shard_state

    async def _ensure_topic(self) -> int:
        kafka = self.kafka
        return await ensure_topic(
            kafka.bootstrap_servers,
            self.config.topic,
            self.config.partitions,
            security=kafka.security,
            client_id=kafka.client_id,
            request_timeout_ms=max(30_000, round(kafka.request_timeout * 1000)),
        )

    async def start(self) -> None:
        """Create the state topic if missing, open the shard state's clients, join. (The
        Kafka clients are made here: aiokafka wants them made on the running loop.)"""
        await self._ensure_topic()
        config, kafka, coordinator = self.config, self.kafka, self.coordinator
        if self._shard_state is None:
            from notifier.fleet.state import ShardState

            self._shard_state = ShardState(
                kafka.bootstrap_servers,
                config.topic,
                coordinator,
                self.notifier,
                security=kafka.security,
                client_id=kafka.client_id,
            )
        shard_state = self._shard_state
        store: ShardStore = shard_state
        publisher: ShardPublisher = shard_state
        drain = None if self.notifier is None else self.notifier.wait_delivered
        self._membership = Membership(
            config,
            kafka,
            store,
            handover=coordinator.handover,
            ensure_topic=self._ensure_topic,
            drain=drain,
            security=client_security(kafka.security),
            instance=self.instance,
        )
        coordinator.join_fleet(self._membership, publisher, self.notifier)
        await shard_state.start()
        await self._membership.start()

    async def stop(self) -> None:
        """Flush and leave (see :meth:`Membership.stop`), then close the shard state."""
        try:
            if self._membership is not None:
                await self._membership.stop()
        finally:
            if self._shard_state is not None:
                await _closing(self._shard_state.stop(), "shard state")


async def _closing(stop: Awaitable[Any], what: str) -> None:
    """Await a client's ``stop()``. aiokafka's consumer, stopped while its cluster is gone,
    re-raises the cancellation of its own fetch task: that is not this task being cancelled,
    and must not cut the rest of the shutdown short."""
    try:
        await stop
    except asyncio.CancelledError:
        task = asyncio.current_task()
        if task is not None and task.cancelling():
            raise
        log.warning("%s closed while its cluster was unreachable", what,
                    extra={"event": "fleet_close_interrupted"})  # fmt: skip
