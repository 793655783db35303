"""One ``notifier run`` process as an instance of a fleet: its membership, wired to its
coordinator through the service's one seam (:class:`~notifier.fleet.share.FleetShare`: the
coordinator scans only the owned shards and publishes each scan's changes) and to its notifier
(whose pending notifications a hand-over waits for).

It is one of the coordinator's companions: started before the first scan, stopped after the
last one, before the notifier, so a SIGTERM flushes every shard, waits (bounded) for the
deliveries and leaves the group, and the other instances take the shards over at once.

A coordination cluster that cannot be reached at start-up does not stop the process (which an
orchestrator would restart again and again): the instance starts owning no shard, says so
(``/readyz``, ``notifier_fleet_coordination_up`` 0, one error line) and keeps trying to join
in the background, from 1 s between attempts up to 30 s; once it joins, shards come as usual.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable
from typing import TYPE_CHECKING, Any

from notifier.collect.security import client_security
from notifier.config import ServiceConfig
from notifier.fleet.balance import ShardWork
from notifier.fleet.membership import Membership, ShardStore
from notifier.fleet.share import FleetShare, ScanPublisher
from notifier.fleet.statetopic import ensure_topic
from notifier.service.sharing import ShareHost

if TYPE_CHECKING:
    from notifier.fleet.state import ShardState

log = logging.getLogger(__name__)

JOIN_RETRY_FIRST_S = 1.0
JOIN_RETRY_MAX_S = 30.0


class FleetInstance:
    """Membership plus the wiring ``notifier run`` needs (see the module's doc)."""

    def __init__(
        self,
        service: ServiceConfig,
        coordinator: ShareHost,
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
        self._own_shard_state = shard_state is None
        self._membership: Membership | None = None
        self._joined = False
        self._joining: asyncio.Task[None] | None = None
        self._share: FleetShare | None = None
        self._handover = asyncio.Lock()
        """Held by the coordinator around each scan and by each hand-over of shards (one lock
        for every membership this instance makes)."""

    @property
    def membership(self) -> Membership:
        assert self._membership is not None, "FleetInstance.start() first"
        return self._membership

    @property
    def owned(self) -> frozenset[int]:
        """The shards owned now (none before :meth:`start`): the fleet view, made before the
        membership is, asks this instance rather than the membership."""
        return frozenset() if self._membership is None else self._membership.owned

    def owns(self, cluster: str, group: str) -> bool:
        return self._membership is not None and self._membership.owns(cluster, group)

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

    def _build(self) -> None:
        """Fresh shard-state and membership objects, wired to the coordinator (no I/O)."""
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
        publisher: ScanPublisher = shard_state
        drain = None if self.notifier is None else self.notifier.wait_delivered
        self._membership = Membership(
            config,
            kafka,
            store,
            handover=self._handover,
            ensure_topic=self._ensure_topic,
            drain=drain,
            security=client_security(kafka.security),
            instance=self.instance,
            on_new_shards=coordinator.shards_taken_over,
            work=self._shard_work,
        )
        if self._share is None:
            self._share = FleetShare(
                coordinator, self._membership, publisher, self.notifier, handover=self._handover
            )
            coordinator.join_fleet(self._share)
        self._share.shards, self._share.publisher = self._membership, publisher

    def _shard_work(self) -> dict[int, ShardWork] | None:
        return None if self._share is None else self._share.shard_work()

    async def _connect(self) -> None:
        """Create the state topic if missing, open the shard state's clients, join; on a
        failure, close what was opened so that the next attempt starts clean."""
        try:
            await self._ensure_topic()
            await self.shard_state.start()
            await self.membership.start()
        except BaseException:
            if self._own_shard_state and self._shard_state is not None:
                await _closing(self._shard_state.stop(), "shard state", quiet=True)
                self._shard_state = None
            raise
        self._joined = True

    async def start(self) -> None:
        """Join the fleet (see the module's doc); when the coordination cluster cannot be
        reached, start owning nothing and keep trying in the background. (The Kafka clients
        are made here: aiokafka wants them made on the running loop.)"""
        self._build()
        try:
            await self._connect()
        except Exception as exc:  # whatever kept it from reaching the cluster
            if not self._own_shard_state:
                raise  # a caller's own shard state cannot be made again
            membership = self.membership
            membership.coordination_ok = False
            membership.unreachable_since = time.time()
            log.error(
                "the coordination cluster %s cannot be reached (%s): watching no group until "
                "this instance joins the fleet; trying again in the background",
                ",".join(self.kafka.bootstrap_servers), exc,
                extra={"event": "fleet_join_failed", "instance": self.instance,
                       "error": str(exc)},
            )  # fmt: skip
            self._joining = asyncio.create_task(self._keep_joining(), name="fleet-join")

    async def _keep_joining(self) -> None:
        delay, attempt, began = JOIN_RETRY_FIRST_S, 0, time.monotonic()
        while True:
            await asyncio.sleep(delay)
            attempt += 1
            unreachable_since = self.membership.unreachable_since
            self._build()
            self.membership.coordination_ok = False
            self.membership.unreachable_since = unreachable_since
            try:
                await self._connect()
            except Exception as exc:
                if attempt & (attempt - 1) == 0:  # the 1st, 2nd, 4th, 8th ... failure
                    log.warning(
                        "the coordination cluster still cannot be reached after %d attempts "
                        "(%s); trying again", attempt, exc,
                        extra={"event": "fleet_join_retry", "instance": self.instance,
                               "attempt": attempt, "error": str(exc)},
                    )  # fmt: skip
                delay = min(JOIN_RETRY_MAX_S, delay * 2)
                continue
            self.membership.coordination_ok = True
            self.membership.unreachable_since = None
            log.warning(
                "joined the fleet %.0f s after start-up (%d attempts)",
                time.monotonic() - began, attempt + 1,
                extra={"event": "fleet_joined_late", "instance": self.instance,
                       "attempts": attempt + 1},
            )  # fmt: skip
            return

    async def stop(self) -> None:
        """Flush and leave (see :meth:`Membership.stop`), then close the shard state."""
        if self._joining is not None:
            self._joining.cancel()
            await asyncio.gather(self._joining, return_exceptions=True)
            self._joining = None
        if not self._joined:
            return  # never joined: nothing to flush or leave, no client left open
        try:
            if self._membership is not None:
                await self._membership.stop()
        finally:
            if self._shard_state is not None:
                await _closing(self._shard_state.stop(), "shard state")


async def _closing(stop: Awaitable[Any], what: str, *, quiet: bool = False) -> None:
    """Await a client's ``stop()``. aiokafka's consumer, stopped while its cluster is gone,
    re-raises the cancellation of its own fetch task: that is not this task being cancelled,
    and must not cut the rest of the shutdown short. ``quiet``: closing what a failed attempt
    to join opened, whose errors the attempt's own log line already tells."""
    try:
        await stop
    except asyncio.CancelledError:
        task = asyncio.current_task()
        if task is not None and task.cancelling():
            raise
        log.log(logging.DEBUG if quiet else logging.WARNING,
                "%s closed while its cluster was unreachable", what,
                extra={"event": "fleet_close_interrupted"})  # fmt: skip
    except Exception as exc:
        if not quiet:
            raise
        log.debug("%s closed with an error: %s", what, exc)
