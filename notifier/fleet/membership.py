"""This instance's membership of the fleet: which shards it owns, through Kafka's group protocol.

The instances of a fleet join the consumer group ``notifier-fleet.<name>`` subscribed to the
state topic; the partitions the group protocol assigns an instance are the shards it owns. The
consumer is used for membership only: its partitions stay paused, it never reads a record (the
shard state is read by :class:`~notifier.fleet.state.ShardState`) and never commits.

A hand-over runs between two scans (the coordinator's ``handover`` lock), so a scan never sees
half a shard:

- revoked (aiokafka calls it before the partitions are given up): the shards stop being
  scanned, their state is snapshotted to the state topic, their pending notifications get a
  bounded time to be delivered;
- assigned: revoked shards that came back are kept as they are, the others dropped locally;
  each new shard's state is loaded from the state topic; then the scans go on, and
  ``on_new_shards`` hears of the new shards (the coordinator brings its next scan forward:
  :meth:`~notifier.service.sharing.ShareHost.shards_taken_over`).

When the coordination cluster becomes unreachable, aiokafka marks the group coordinator dead
and looks it up again and again; it does not rejoin (so it does not revoke) until a coordinator
answers again. Meanwhile this instance keeps its shards and keeps watching them, says so in the
log, in ``coordination_ok`` and, through them, in ``/readyz`` and ``/metrics``. Some other
instance may take the same shards over only after the cluster is back and has expired this
member; then this instance's own rejoin revokes them here first (duplicates downstream are
harmless: notifications carry stable dedup keys).

Static membership (``group_instance_id``) is not used: a static member does not leave the group
on shutdown, so a SIGTERM would leave its shards unwatched for a whole session timeout instead
of handing them over at once.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Iterable, Mapping
from typing import Any, Protocol

from aiokafka import AIOKafkaConsumer, ConsumerRebalanceListener, TopicPartition
from aiokafka.errors import KafkaError
from aiokafka.protocol.metadata import MetadataRequest

from notifier.collect.requestcount import count_requests
from notifier.config import CoordinationConfig, CoordinationKafka
from notifier.fleet import aiokafka_private
from notifier.fleet.assignor import ShardAssignor
from notifier.fleet.balance import ShardWork
from notifier.fleet.shards import shard_of
from notifier.fleet.statetopic import FETCHER_WAKEUP_MS

log = logging.getLogger(__name__)

POLL_TIMEOUT_MS = 5000
"""How long each idle poll waits; polling keeps aiokafka from leaving the group for a consumer
it would otherwise take for stuck (``max.poll.interval.ms``)."""

PROBE_EVERY_S = 300.0
"""The leader asks for a rebalance of its own (uneven work: see :mod:`notifier.fleet.assignor`)
at most this often: each one pauses every instance's scans for a hand-over."""


class ShardStore(Protocol):
    """What membership needs of the shard state (:class:`notifier.fleet.state.ShardState`)."""

    async def load(self, shard: int) -> Any: ...

    async def load_many(self, shards: list[int]) -> list[Any]: ...

    async def snapshot(self, shard: int) -> Any: ...

    def drop(self, shard: int) -> Any: ...


class Membership:
    """Joins the fleet's group and keeps :attr:`owned` up to date (see the module's doc).

    ``handover`` is held while shards change hands (the coordinator holds it around each scan);
    ``drain(timeout)`` waits for pending notifications to be delivered (the notifier's
    ``wait_delivered``); ``ensure_topic()`` creates the state topic if it is missing;
    ``on_new_shards(shards)`` is told of the shards an assignment brought, once their state
    is loaded and the hand-over lock released; ``work()`` is each shard's work as this
    instance knows it (the coordinator's
    :meth:`~notifier.fleet.share.FleetShare.shard_work`), which the fleet's leader
    balances."""

    def __init__(
        self,
        config: CoordinationConfig,
        kafka: CoordinationKafka,
        state: ShardStore,
        *,
        handover: asyncio.Lock,
        ensure_topic: Callable[[], Awaitable[Any]],
        drain: Callable[[float], Awaitable[Any]] | None = None,
        security: dict[str, Any] | None = None,
        instance: str | None = None,
        on_new_shards: Callable[[frozenset[int]], Any] | None = None,
        work: Callable[[], Mapping[int, ShardWork] | None] | None = None,
    ) -> None:
        self.config = config
        self.kafka = kafka
        self.state = state
        self.instance = instance or config.instance_name()
        self.partitions = config.partitions
        self.owned: frozenset[int] = frozenset()
        self.coordination_ok = True
        self.unreachable_since: float | None = None
        """Wall-clock time (s) the coordination cluster became unreachable; None while up."""
        self.handovers = 0
        """Assignments this instance has taken since it started (each a hand-over)."""
        self._handover = handover
        self._ensure_topic = ensure_topic
        self._drain = drain
        self._on_new_shards = on_new_shards
        self._security = security or {}
        self._consumer: AIOKafkaConsumer | None = None
        self._tasks: list[asyncio.Task[None]] = []
        self._assigned_once = asyncio.Event()
        self._suspended: frozenset[int] = frozenset()
        """Revoked shards kept in memory, not scanned, until the assignment that follows."""
        self._holding = False
        """Whether this membership holds the hand-over lock (from a revoke to its assignment)."""
        self._watchdog: asyncio.Task[None] | None = None
        self._members: list[str] | None = None
        self.assignor = ShardAssignor(
            config.topic, config.partitions, lambda: self.owned | self._suspended, work
        )
        self._next_probe = 0.0

    # ---------------------------------------------------------------- reading

    def owns(self, cluster: str, group: str) -> bool:
        """Whether ``group`` of ``cluster`` belongs to a shard this instance owns now."""
        return shard_of(cluster, group, self.partitions) in self.owned

    def shard_of(self, cluster: str, group: str) -> int:
        return shard_of(cluster, group, self.partitions)

    def members(self) -> list[str]:
        """The fleet's members as far as this instance knows: itself, and those the fleet view
        reported through :meth:`set_members`."""
        return sorted(set(self._members or []) | {self.instance})

    def set_members(self, members: Iterable[str]) -> None:
        self._members = list(members)

    def readiness(self) -> dict[str, Any]:
        """The ``fleet`` part of ``/readyz``."""
        if self.coordination_ok or self.unreachable_since is None:
            coordination = "ok"
        else:
            since = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(self.unreachable_since))
            coordination = f"unreachable since {since}"
        return {
            "instance": self.instance,
            "shards": sorted(self.owned),
            "partitions": self.partitions,
            "coordination": coordination,
            "assignments": self.handovers,
        }

    # ---------------------------------------------------------------- lifecycle

    async def start(self) -> None:
        """Create the state topic if missing, then join the group; the shards come with the
        first assignment, in the background (:meth:`wait_assigned`)."""
        await self._ensure_topic()
        kafka = self.kafka
        session_ms = round(self.config.session_timeout * 1000)
        self._consumer = AIOKafkaConsumer(
            bootstrap_servers=kafka.bootstrap_servers,
            client_id=f"{kafka.client_id}-{self.instance}",
            group_id=self.config.group_id,
            enable_auto_commit=False,
            # Shards balanced by their work, and only those that must move do: the others stay
            # where their state is warm.
            partition_assignment_strategy=(self.assignor,),
            auto_offset_reset="latest",
            consumer_timeout_ms=FETCHER_WAKEUP_MS,
            session_timeout_ms=session_ms,
            heartbeat_interval_ms=round(self.config.heartbeat_interval * 1000),
            # Revoking flushes state and waits for deliveries (bounded by the session timeout):
            # the broker must wait that long for the member to rejoin.
            rebalance_timeout_ms=2 * session_ms,
            # A JoinGroup may wait the whole rebalance timeout for the other members.
            request_timeout_ms=max(round(kafka.request_timeout * 1000), 2 * session_ms + 5000),
            **self._security,
        )
        count_requests(self._consumer, "fleet_membership")
        await self._consumer.start()
        aiokafka_private.check(self._consumer)  # an aiokafka that changed fails here, clearly
        self._consumer.subscribe([self.config.topic], listener=_Listener(self))
        self._tasks = [
            asyncio.create_task(self._poll(), name="fleet-poll"),
            asyncio.create_task(self._watch_coordination(), name="fleet-coordination"),
        ]
        log.info("joining the fleet", extra={"event": "fleet_joining", "fleet": self.config.name,
                                            "instance": self.instance,
                                            "group_id": self.config.group_id,
                                            "state_topic": self.config.topic})  # fmt: skip

    async def wait_assigned(self, timeout: float | None = None) -> bool:
        """Wait for the first assignment (tests, start-up)."""
        try:
            await asyncio.wait_for(self._assigned_once.wait(), timeout)
        except TimeoutError:
            return False
        return True

    async def stop(self) -> None:
        """Flush every shard (snapshot, pending deliveries), drop them, then leave the group
        (LeaveGroup), so the others take the shards over at once from the flushed state."""
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        self._tasks = []
        self._cancel_watchdog()
        await self._revoke(self.owned)
        self._cancel_watchdog()
        await self._settle(frozenset())
        consumer, self._consumer = self._consumer, None
        if consumer is not None:
            generation, member_id = aiokafka_private.member(consumer) or (-1, "")
            skipped_leave = generation == 0 and member_id
            try:
                await consumer.stop()
            except asyncio.CancelledError:
                # aiokafka re-raises its own fetch task's cancellation when its cluster is
                # gone; only a cancellation of this task itself goes on.
                current = asyncio.current_task()
                if current is not None and current.cancelling():
                    raise
            except KafkaError as exc:
                log.warning("leaving the fleet failed: %s", exc,
                            extra={"event": "fleet_leave_failed", "error": str(exc)})  # fmt: skip
            if skipped_leave:
                await self._leave(member_id)
        log.info("left the fleet", extra={"event": "fleet_left", "instance": self.instance})

    async def _leave(self, member_id: str) -> None:
        """LeaveGroup for a member of generation 0: aiokafka sends it only for generations
        above 0, though 0 is a valid one (only -1 means none), and without it the others wait
        a whole session timeout for the shards this instance just flushed."""
        from aiokafka.client import AIOKafkaClient, CoordinationType
        from aiokafka.protocol.group import LeaveGroupRequest

        client = AIOKafkaClient(
            bootstrap_servers=self.kafka.bootstrap_servers,
            client_id=f"{self.kafka.client_id}-{self.instance}",
            request_timeout_ms=round(self.kafka.request_timeout * 1000),
            **self._security,
        )
        count_requests(client, "fleet_membership")
        try:
            async with asyncio.timeout(self.kafka.request_timeout):
                await client.bootstrap()
                node = await client.coordinator_lookup(CoordinationType.GROUP, self.config.group_id)
                await client.send(node, LeaveGroupRequest(self.config.group_id, member_id))
        except (KafkaError, TimeoutError, OSError) as exc:
            log.warning("LeaveGroup failed; the others take the shards over after the session "
                        "timeout", extra={"event": "fleet_leave_failed",
                                          "error": str(exc)})  # fmt: skip
        finally:
            await client.close()

    # ---------------------------------------------------------------- hand-over
    #
    # aiokafka's assignors are eager: every rebalance revokes every shard of every member, and
    # most come back to the member that had them. So a revoke stops scanning and flushes the
    # shards (their next owner may be another instance) but keeps them in memory, "suspended";
    # the assignment that follows keeps the ones that came back as they are, drops the others
    # and loads the new ones. The hand-over lock is held from the revoke to that assignment:
    # a scan in between would take the suspended groups for vanished and resolve them.

    async def _revoke(self, shards: frozenset[int]) -> None:
        shards = shards & self.owned
        if not shards:
            return
        started = time.monotonic()
        if not self._holding:
            await self._handover.acquire()  # the scan under way ends first
            self._holding = True
        self.owned = self.owned - shards
        self._suspended = self._suspended | shards
        # Until the new generation's assignment, the old one is no basis for a probe (and a
        # rejoin asked for mid-join may cost a second rebalance).
        self.assignor.led = None
        await self._flush(shards)
        if self._drain is not None:
            try:
                await self._drain(self.config.session_timeout / 2)
            except Exception as exc:
                log.warning("pending notifications not drained before hand-over: %s", exc,
                            extra={"event": "fleet_drain_failed"})  # fmt: skip
        self._cancel_watchdog()
        self._watchdog = asyncio.create_task(self._await_assignment(), name="fleet-watchdog")
        flush_s = round(time.monotonic() - started, 3)
        log.info("shards revoked", extra={"event": "fleet_revoked", "instance": self.instance,
                                          "shards": sorted(shards),
                                          "flush_s": flush_s})  # fmt: skip

    async def _flush(self, shards: frozenset[int]) -> None:
        """Snapshot ``shards`` to the state topic, all within one session timeout (a
        coordination cluster that does not answer cannot hold a hand-over or a shutdown)."""
        if not shards:
            return
        if not self.coordination_ok and not await self._reachable():
            log.error("coordination cluster unreachable: shard state not flushed",
                      extra={"event": "fleet_snapshot_skipped",
                             "shards": sorted(shards)})  # fmt: skip
            return
        shard = None
        try:
            async with asyncio.timeout(self.config.session_timeout):
                for shard in sorted(shards):
                    await self.state.snapshot(shard)
        except Exception as exc:
            log.error("shard state not flushed before hand-over",
                      extra={"event": "fleet_snapshot_failed", "shard": shard,
                             "error": str(exc) or type(exc).__name__})  # fmt: skip

    async def _assigned(self, partitions: Iterable[TopicPartition]) -> None:
        shards = frozenset(tp.partition for tp in partitions if tp.topic == self.config.topic)
        consumer = self._consumer
        if consumer is not None and shards:
            consumer.pause(*[TopicPartition(self.config.topic, p) for p in shards])
        self._cancel_watchdog()
        started = time.monotonic()
        kept, new, groups = await self._settle(shards)
        self.handovers += 1
        self._assigned_once.set()
        if new and self._on_new_shards is not None:
            self._on_new_shards(new)
        load_s = round(time.monotonic() - started, 3)
        log.info("shards assigned", extra={"event": "fleet_assigned", "instance": self.instance,
                                           "owned": sorted(self.owned), "kept": sorted(kept),
                                           "loaded": sorted(new), "loaded_groups": groups,
                                           "load_s": load_s})  # fmt: skip

    async def _settle(self, shards: frozenset[int]) -> tuple[frozenset[int], frozenset[int], int]:
        """Own exactly ``shards``: keep those held here (suspended, or still owned when an
        outage kept them), flush and drop the others, load the rest; then let the scans go
        on. Returns (kept, loaded, groups loaded)."""
        if not self._holding:
            await self._handover.acquire()
            self._holding = True
        loaded_groups = 0
        try:
            held = self._suspended | self.owned
            kept, new = held & shards, shards - held
            # Owned, not suspended: kept through an outage, and not flushed yet.
            await self._flush(self.owned - shards)
            for shard in sorted(held - shards):
                self.state.drop(shard)
            self._suspended = frozenset()
            self.owned = kept
            loaded_groups = await self._load(sorted(new))
            self.owned = shards
        finally:
            self._holding = False
            self._handover.release()
        return kept, new, loaded_groups

    async def _load(self, shards: list[int]) -> int:
        """Load ``shards`` together (what it costs scales with their records, not their
        number); when that fails, one by one, so that one shard's trouble costs only its own
        state. Returns the number of groups loaded."""
        if not shards:
            return 0
        try:
            reports = await self.state.load_many(shards)
            return sum(int(getattr(r, "groups", 0) or 0) for r in reports)
        except Exception as exc:
            log.warning("loading %d shards together failed (%s); loading them one by one",
                        len(shards), str(exc) or type(exc).__name__,
                        extra={"event": "fleet_shards_load_retry"})  # fmt: skip
        groups = 0
        for shard in shards:
            try:
                report = await self.state.load(shard)
                groups += int(getattr(report, "groups", 0) or 0)
            except Exception as exc:
                # Watching without the old state beats not watching: the windows refill.
                log.error("shard state not loaded; watching its groups from scratch",
                          extra={"event": "fleet_shard_load_failed", "shard": shard,
                                 "error": str(exc) or type(exc).__name__})  # fmt: skip
        return groups

    async def _await_assignment(self) -> None:
        """A revoke without the assignment that should follow it (the coordination cluster
        went away mid-rebalance): after the rebalance's time is up, take the suspended shards
        back while coordination is unreachable (nobody else can have been given them by a
        group that cannot meet), else let them go."""
        await asyncio.sleep(2 * self.config.session_timeout)
        suspended = self._suspended
        if not suspended:
            return
        if await self._reachable():
            log.warning("no assignment after revoke; shards let go",
                        extra={"event": "fleet_assignment_missing",
                               "shards": sorted(suspended)})  # fmt: skip
            await self._settle(self.owned)
        else:
            log.error("coordination cluster unreachable mid-rebalance: keeping the revoked "
                      "shards and watching them until it is back",
                      extra={"event": "fleet_shards_kept",
                             "shards": sorted(suspended)})  # fmt: skip
            await self._settle(self.owned | suspended)

    def _cancel_watchdog(self) -> None:
        watchdog, self._watchdog = self._watchdog, None
        if watchdog is not None and watchdog is not asyncio.current_task():
            watchdog.cancel()

    # ---------------------------------------------------------------- background

    async def _poll(self) -> None:
        """Poll (nothing: every partition is paused) so aiokafka sees a live consumer, and
        surface the errors the group protocol hands to the user."""
        assert self._consumer is not None
        while True:
            try:
                await self._consumer.getmany(timeout_ms=POLL_TIMEOUT_MS)
            except asyncio.CancelledError:
                raise
            except KafkaError as exc:
                log.warning("fleet membership: %s", exc,
                            extra={"event": "fleet_group_error", "error": str(exc)})  # fmt: skip
                await asyncio.sleep(POLL_TIMEOUT_MS / 1000)

    async def _watch_coordination(self) -> None:
        """Every heartbeat interval: can the coordination cluster be reached? The shards stay
        either way; what changes is what this instance says."""
        assert self._consumer is not None
        interval = self.config.heartbeat_interval
        failing_since: float | None = None
        while True:
            await asyncio.sleep(interval)
            reachable = await self._reachable()
            now = time.time()
            if reachable:
                failing_since = None
                if not self.coordination_ok:
                    down_for = now - (self.unreachable_since or now)
                    self.coordination_ok, self.unreachable_since = True, None
                    log.warning(
                        "coordination cluster reachable again; fleet membership resumes",
                        extra={"event": "fleet_coordination_up", "instance": self.instance,
                               "shards": sorted(self.owned),
                               "unreachable_s": round(down_for, 1)},
                    )  # fmt: skip
                    # The scans of the outage were not published: a snapshot carries them to
                    # whoever takes these shards next.
                    async with self._handover:
                        await self._flush(self.owned)
                self._probe_balance()
                continue
            failing_since = failing_since or now
            # One missed probe is noise; a heartbeat interval of them is an outage.
            if self.coordination_ok and now - failing_since >= interval:
                self.coordination_ok, self.unreachable_since = False, failing_since
                log.error(
                    "coordination cluster unreachable: keeping the current shards and watching "
                    "them until it is back",
                    extra={"event": "fleet_coordination_down", "instance": self.instance,
                           "shards": sorted(self.owned),
                           "bootstrap_servers": self.kafka.bootstrap_servers},
                )  # fmt: skip

    def rebalance_due(self) -> tuple[float, float] | None:
        """As the leader, when the shards' work calls for a rebalance and one may be asked for
        now: the imbalance now and after (see :meth:`ShardAssignor.worth_rebalancing`)."""
        if time.monotonic() < self._next_probe:
            return None
        return self.assignor.worth_rebalancing()

    def _probe_balance(self) -> None:
        """As the leader: ask for a rebalance when the work the shards hold has turned out
        uneven (see :mod:`notifier.fleet.assignor`), at most every :data:`PROBE_EVERY_S`."""
        consumer = self._consumer
        verdict = self.rebalance_due()
        if consumer is None or verdict is None:
            return
        self._next_probe = time.monotonic() + PROBE_EVERY_S
        log.info("asking the fleet to rebalance: the shards' work is uneven",
                 extra={"event": "fleet_rebalance_requested", "instance": self.instance,
                        "imbalance": round(verdict[0], 3),
                        "imbalance_after": round(verdict[1], 3)})  # fmt: skip
        aiokafka_private.request_rejoin(consumer)

    async def _reachable(self) -> bool:
        """One metadata request for the state topic alone: a request for every topic is
        answered with the whole cluster's layout, which costs a large cluster's every instance
        CPU each heartbeat interval for an answer it does not read."""
        assert self._consumer is not None
        client = aiokafka_private.client(self._consumer)
        request = MetadataRequest([self.config.topic], allow_auto_topic_creation=False)
        try:
            async with asyncio.timeout(self.config.heartbeat_interval):
                node = client.get_random_node()
                if node is None:  # no broker known yet: ask the bootstrap servers
                    await client.fetch_all_metadata()
                else:
                    await client.send(node, request)
        except (KafkaError, TimeoutError, OSError):
            return False
        return True


class _Listener(ConsumerRebalanceListener):
    def __init__(self, membership: Membership) -> None:
        self.membership = membership

    async def on_partitions_revoked(self, revoked: Any) -> None:
        shards = frozenset(tp.partition for tp in revoked)
        await self.membership._revoke(shards)

    async def on_partitions_assigned(self, assigned: Any) -> None:
        await self.membership._assigned(assigned)
