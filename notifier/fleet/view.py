"""The fleet-wide view: what every instance of a fleet publishes so that any instance's API can
answer for every group, and so that silences apply fleet-wide.

One compacted topic, ``<state_topic>.view``, with one partition (every instance reads all of it,
so order across keys is kept and a reader needs one fetch position). Keys:

* ``g/<cluster>/<group>``: the owner's bulletin of a group (what ``/api/groups``, the group
  detail and Burrow's status and lag show, plus when the owner last scanned it); a tombstone
  when the group vanishes from its cluster. It is published when the group's verdict, incident
  or silencing changes, and otherwise every ``refresh_every`` scans, staggered by group, so the
  cost per scan is the changed groups plus ``1/refresh_every`` of the rest.
* ``m/<instance>``: an instance's member record (its shards, its API's address, when it last
  scanned each cluster, when it last said so), every ``member_interval_s``; a tombstone when
  it stops. Bulletins of an instance whose record is missing or older than ``stale_after_s``
  are answered as stale, never as fresh: their owner has gone and the new owner has not
  published yet. The record's scan times are what keeps a bulletin between its refreshes
  fresh: its verdict is re-published the moment it changes, so while its owner scans, the
  verdict is current (its lag figures are as old as the bulletin, and say so).
* ``s/<id>``: a silence made through some instance's API (a tombstone when deleted), applied to
  every instance's notifier. Silences from the config file stay each instance's own config.

Every instance tails the topic from the beginning (``assign()``, no consumer group) into an
in-memory :class:`~notifier.fleet.viewtable.ViewTable`; the records, the table and the answers
for another instance's groups are :mod:`notifier.fleet.viewtable`, this module the process that
publishes and tails them.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import logging
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import orjson
from aiokafka import AIOKafkaConsumer, TopicPartition

from notifier.api.sources import ClusterView, CoordinatorView, NotifierView
from notifier.api.views import (
    ActiveSilences,
    freshness,
    joined_rows,
    open_incidents,
    scan_rows,
)
from notifier.collect.requestcount import count_requests
from notifier.collect.security import client_security
from notifier.config.kafka_security import SecurityConfig
from notifier.fleet.statetopic import CLIENT_ID, FETCHER_WAKEUP_MS, StateWriter, ensure_topic
from notifier.fleet.viewtable import (
    Bulletin,
    MemberRecord,
    RemoteGroup,
    ViewTable,
    build_bulletin,
    group_key,
)
from notifier.notify.silences import Silence

log = logging.getLogger(__name__)

VIEW_PARTITION = 0
STEP_S = 0.005
"""How long one step of working bulletins out may hold the event loop."""
TAIL_WAIT_MS = 2000
"""How long the broker may hold the tail's fetch when nothing new is there: a fetch returns as
soon as a record arrives, so a longer wait costs no latency on Kafka and saves every instance
a fetch request every half second (aiokafka's default) while the view is quiet."""
CATCH_UP_POLL_MS = 500
"""While the view written before the start is read: how long each read may wait before the
reader looks again whether it has reached the end it was told of."""
IDLE_POLL_MS = 30_000
"""Once caught up: a read returns as soon as a record arrives, so a long wait costs no
latency and saves the event loop a wake-up every half second."""
RETRY_FIRST_S = 1.0
RETRY_MAX_S = 30.0
"""Back-off between attempts to join the view when its cluster is unreachable at start-up."""


def view_topic(state_topic: str) -> str:
    """The fleet-wide view's topic for a fleet's state topic."""
    return f"{state_topic}.view"


def _wall_ms() -> int:
    return int(time.time() * 1000)


class Ownership(Protocol):
    """Which groups this instance owns (:class:`notifier.fleet.membership.Membership`, or in
    tests any object with the same attributes)."""

    @property
    def instance(self) -> str: ...

    @property
    def owned(self) -> frozenset[int]: ...

    def owns(self, cluster: str, group: str) -> bool: ...


class FleetSilences(Protocol):
    """The notifier's silence store as the view applies silences made elsewhere
    (:class:`notifier.notify.Notifier`)."""

    def list_silences(self) -> Sequence[Silence]: ...

    def apply_silence(self, silence: Silence) -> bool: ...

    def forget_silence(self, silence_id: str) -> bool: ...


# ---- what an instance publishes of its own groups


def _signature(row: Mapping[str, Any], incident: Any) -> tuple[Any, ...]:
    """What makes a bulletin worth publishing at once: the verdict, the leading finding, the
    incident and the silencing (lag figures are refreshed every few scans instead)."""
    finding = row.get("finding") or {}
    return (
        row["status"],
        tuple(row["rules"]),
        finding.get("rule"),
        finding.get("status"),
        finding.get("topic"),
        finding.get("partition"),
        row["partitions"],
        row["group_state"],
        row["partial"],
        row.get("incident_id"),
        row.get("silenced"),
        tuple(row.get("silence_ids") or ()),
        None if incident is None else (incident.status, incident.silenced),
    )


def _stagger(cluster: str, group: str, every: int) -> int:
    digest = hashlib.blake2b(f"{cluster}\0{group}".encode(), digest_size=4).digest()
    return int.from_bytes(digest, "big") % every


@dataclass(slots=True)
class _Published:
    """What this instance last published of one cluster's groups."""

    evaluation: object = None
    scans: int = 0
    sent: dict[str, tuple[Any, ...]] = field(default_factory=dict)
    """Signature of each group's last bulletin, by group."""


class FleetView:
    """Publishes this instance's part of the view and tails the whole of it.

    ``security``: the coordination cluster's login (as the collector makes it). ``api_url``
    is where this instance's API answers (shown by ``/api/fleet``, used by the others to ask
    for what only the owner of a group has). ``background_start``: :meth:`start` returns at
    once and joins the view in the background, retrying until the coordination cluster
    answers (``notifier run`` watches its shards meanwhile; :attr:`available` says when the
    view can answer for the others' groups)."""

    def __init__(
        self,
        bootstrap_servers: str | Sequence[str],
        topic: str,
        ownership: Ownership,
        coordinator: CoordinatorView,
        notifier: NotifierView | None = None,
        *,
        api_url: str | None = None,
        clock: Callable[[], int] = _wall_ms,
        security: SecurityConfig | None = None,
        refresh_every: int = 6,
        member_interval_s: float = 3.0,
        stale_after_s: float = 30.0,
        poll_interval_s: float = 1.0,
        background_start: bool = False,
    ) -> None:
        if refresh_every < 1:
            raise ValueError(f"refresh_every: expected >= 1, got {refresh_every}")
        self.bootstrap_servers = bootstrap_servers
        self.topic = topic
        self.ownership = ownership
        self.coordinator = coordinator
        self.notifier = notifier
        self.api_url = api_url
        self.clock = clock
        self.security = security
        self.refresh_every = refresh_every
        self.member_interval_s = member_interval_s
        self.stale_after_ms = int(stale_after_s * 1000)
        self.poll_interval_s = poll_interval_s
        self.table = ViewTable(on_unreadable=self._bad_record)
        self.bad_records = 0
        self.background_start = background_start
        self._writer: StateWriter | None = None
        """Made on the running loop, as aiokafka wants (see :meth:`start`)."""
        self._consumer: AIOKafkaConsumer | None = None
        self._published: dict[str, _Published] = {}
        self._joined_key: tuple[object, tuple[str, ...], frozenset[int]] | None = None
        self._outgoing: asyncio.Queue[tuple[str, bytes | None]] = asyncio.Queue()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._tasks: list[asyncio.Task[None]] = []
        self._caught_up = asyncio.Event()
        self._member_sent_at = 0.0
        self._member_shards: frozenset[int] | None = None
        self._publishing = asyncio.Lock()
        """One pass over the groups at a time (a pass gives way to the loop between steps)."""
        self._available = False
        self.unavailable_reason: str | None = "not started"

    @property
    def _producer(self) -> StateWriter:
        assert self._writer is not None, "FleetView.start() first"
        return self._writer

    # ---- the API's side (see notifier.api.sources.FleetSource)

    @property
    def available(self) -> bool:
        """Whether the view has been read (so it can answer for the others' groups)."""
        return self._available

    def incident_owner(self, incident_id: str) -> tuple[str, str | None] | None:
        """The instance whose bulletin carries the open incident ``incident_id`` (not this
        one), with its API's base URL; None when no other instance's bulletin has it."""
        for bulletin in self.table.bulletins():
            incident = bulletin.incident
            if incident is None or incident.get("id") != incident_id:
                continue
            if bulletin.instance == self.instance or self.owns(bulletin.cluster, bulletin.group):
                return None
            record = self.table.members.get(bulletin.instance)
            return bulletin.instance, None if record is None else record.api
        return None

    def other_members(self) -> list[tuple[str, str | None]]:
        """Every other instance the view has a member record of, with its API's base URL."""
        return [
            (r.instance, r.api)
            for r in sorted(self.table.members.values(), key=lambda r: r.instance)
            if r.instance != self.instance
        ]

    @property
    def instance(self) -> str:
        return self.ownership.instance

    @property
    def owned(self) -> frozenset[int]:
        return self.ownership.owned

    def owns(self, cluster: str, group: str) -> bool:
        return self.ownership.owns(cluster, group)

    def remote_group(self, cluster: str, group: str, now: int) -> RemoteGroup | None:
        """A group this instance does not own, from the view (None: the view has none)."""
        if self.owns(cluster, group):
            return None
        bulletin = self.table.bulletin(cluster, group)
        return None if bulletin is None else self._remote(bulletin, now)

    def remote_groups(self, cluster: str, now: int) -> list[RemoteGroup]:
        """Every group of ``cluster`` this instance does not own that the view has, by name."""
        return [
            self._remote(b, now)
            for b in self.table.bulletins(cluster)
            if not self.owns(cluster, b.group)
        ]

    def owner_api(self, cluster: str, group: str) -> tuple[str, str | None] | None:
        if self.owns(cluster, group):
            return None
        bulletin = self.table.bulletin(cluster, group)
        if bulletin is None:
            return None
        record = self.table.members.get(bulletin.instance)
        return bulletin.instance, None if record is None else record.api

    def _remote(self, bulletin: Bulletin, now: int) -> RemoteGroup:
        owner = self.table.members.get(bulletin.instance)
        if bulletin.instance == self.instance:
            owner = None  # ours no longer: the new owner has not published it yet
        return RemoteGroup(bulletin, owner, now, self.stale_after_ms, self.refresh_every)

    def fleet(self, now: int) -> dict[str, Any]:
        """``/api/fleet``: every instance with its shards, its API and when it was last seen."""
        counts: dict[str, int] = {}
        for bulletin in self.table.bulletins():
            counts[bulletin.instance] = counts.get(bulletin.instance, 0) + 1
        instances = [
            {
                "instance": r.instance,
                "shards": list(r.shards),
                "api": r.api,
                "last_seen": r.seen_at,
                "age_seconds": round(max(0, now - r.seen_at) / 1000, 1),
                "stale": now - r.seen_at > self.stale_after_ms,
                "groups": counts.get(r.instance, 0),
            }
            for r in sorted(self.table.members.values(), key=lambda r: r.instance)
        ]
        return {"instance": self.instance, "topic": self.topic, "instances": instances}

    def publish_silence(self, silence: Any) -> None:
        """Publish a silence made through this instance's API (callable from any thread)."""
        self._enqueue(f"s/{silence.id}", orjson.dumps(silence.to_dict()))

    def retract_silence(self, silence_id: str) -> None:
        """Publish a silence's deletion (callable from any thread)."""
        self._enqueue(f"s/{silence_id}", None)

    def _enqueue(self, key: str, value: bytes | None) -> None:
        if self._loop is None:
            raise RuntimeError("the fleet view is not started")
        self._loop.call_soon_threadsafe(self._outgoing.put_nowait, (key, value))

    # ---- running

    async def start(self) -> None:
        """Create the topic if missing, start publishing and tailing; returns once the view
        written before the start has been read (with ``background_start``: at once, the view
        is joined by a background task that retries until it succeeds)."""
        self._loop = asyncio.get_running_loop()
        if self.background_start:
            self.unavailable_reason = "joining the fleet view"
            self._tasks = [asyncio.create_task(self._join_retrying(), name="fleet-view-join")]
            return
        await self._join()

    async def _join_retrying(self) -> None:
        delay = RETRY_FIRST_S
        failures = 0
        while True:
            try:
                await self._join()
                if failures:
                    log.info(
                        "joined the fleet view after %d failed attempts",
                        failures,
                        extra={"event": "fleet_view_joined", "attempts": failures + 1},
                    )
                return
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                failures += 1
                self.unavailable_reason = f"its cluster did not answer: {exc!r}"
                await self._close_clients()
                # Logged at the first failure and then at each doubling, not every attempt.
                if failures & (failures - 1) == 0:
                    log.warning(
                        "the fleet view cannot be joined yet; retrying in the background "
                        "(this instance answers for its own groups meanwhile)",
                        extra={"event": "fleet_view_unavailable", "attempts": failures,
                               "error": repr(exc), "retry_in_s": delay},
                    )  # fmt: skip
                await asyncio.sleep(delay)
                delay = min(RETRY_MAX_S, delay * 2)

    async def _close_clients(self) -> None:
        writer, self._writer = self._writer, None
        consumer, self._consumer = self._consumer, None
        if writer is not None:
            with contextlib.suppress(Exception):
                await writer.stop()
        if consumer is not None:
            with contextlib.suppress(Exception):
                await consumer.stop()

    async def _join(self) -> None:
        before = len(self._tasks)
        try:
            await self._open()
        except BaseException:
            # What this attempt started goes with it (the next one reads from the start).
            started, self._tasks = self._tasks[before:], self._tasks[:before]
            for task in started:
                task.cancel()
            for task in started:
                with contextlib.suppress(Exception, asyncio.CancelledError):
                    await task
            raise

    async def _open(self) -> None:
        self._caught_up = asyncio.Event()
        await ensure_topic(self.bootstrap_servers, self.topic, 1, security=self.security,
                           counted_as="fleet_view")  # fmt: skip
        self._writer = StateWriter(self.bootstrap_servers, self.topic, security=self.security,
                                   counted_as="fleet_view")  # fmt: skip
        await self._writer.start()
        consumer = AIOKafkaConsumer(
            bootstrap_servers=self.bootstrap_servers,
            group_id=None,
            enable_auto_commit=False,
            auto_offset_reset="earliest",
            client_id=CLIENT_ID,
            fetch_max_wait_ms=TAIL_WAIT_MS,
            # Its own fetch ending wakes the tail; the periodic look-over is idle CPU.
            consumer_timeout_ms=FETCHER_WAKEUP_MS,
            **client_security(self.security or SecurityConfig()),
        )
        count_requests(consumer, "fleet_view")
        await consumer.start()
        self._consumer = consumer
        tp = TopicPartition(self.topic, VIEW_PARTITION)
        consumer.assign([tp])
        await consumer.seek_to_beginning(tp)
        end = (await consumer.end_offsets([tp]))[tp]
        tail = asyncio.create_task(self._tail(consumer, tp, end), name="fleet-view-tail")
        self._tasks.append(tail)
        await self._caught_up.wait()
        await self._share_local_silences()
        await self.publish_member()
        self._tasks.append(asyncio.create_task(self._send_outgoing(), name="fleet-view-send"))
        self._tasks.append(asyncio.create_task(self._publish_loop(), name="fleet-view-publish"))
        self._available = True
        self.unavailable_reason = None

    async def stop(self) -> None:
        """Stop; the member record is withdrawn, so others answer this instance's groups as
        stale until their new owners publish them. A second call does nothing."""
        if self._loop is None:
            return
        self._loop = None
        tasks, self._tasks = self._tasks, []
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        if self._available:
            with contextlib.suppress(Exception):
                await self._producer.send(VIEW_PARTITION, f"m/{self.instance}", None)
        self._available = False
        self.unavailable_reason = "stopped"
        await self._close_clients()

    async def _tail(self, consumer: AIOKafkaConsumer, tp: TopicPartition, end: int) -> None:
        if end <= 0:
            self._caught_up.set()
        while True:
            try:
                wait_ms = IDLE_POLL_MS if self._caught_up.is_set() else CATCH_UP_POLL_MS
                batch = await consumer.getmany(tp, timeout_ms=wait_ms)
            except asyncio.CancelledError:
                raise
            except Exception:  # the consumer reconnects by itself; keep the table as it is
                log.exception("reading the fleet view failed", extra={"event": "fleet_view_read"})
                await asyncio.sleep(1.0)
                continue
            for record in batch.get(tp, []):
                self._apply(record.key.decode() if record.key else "", record.value)
            if not self._caught_up.is_set() and await consumer.position(tp) >= end:
                self._caught_up.set()

    def _apply(self, key: str, value: bytes | None) -> None:
        try:
            self.table.apply(key, value)
        except (ValueError, KeyError, TypeError) as exc:
            self._bad_record(key, exc)
            return
        if key.startswith("s/"):
            self._apply_silence(key[2:], value)

    def _bad_record(self, key: str, exc: Exception) -> None:
        self.bad_records += 1
        log.warning(
            "unreadable record in the fleet view; skipped",
            extra={"event": "fleet_view_bad_record", "key": key, "error": str(exc)},
        )

    def _apply_silence(self, silence_id: str, value: bytes | None) -> None:
        silences = self._silences()
        if silences is None:
            return
        if value is None:
            silences.forget_silence(silence_id)
            return
        try:
            silence = Silence.from_dict(orjson.loads(value))
        except (ValueError, KeyError, TypeError) as exc:
            self.bad_records += 1
            log.warning(
                "unreadable silence in the fleet view; skipped",
                extra={"event": "fleet_view_bad_silence", "silence": silence_id, "error": str(exc)},
            )
            return
        if silence.source != "config":
            silences.apply_silence(silence)

    def _silences(self) -> FleetSilences | None:
        notifier = self.notifier
        if notifier is None or not hasattr(notifier, "apply_silence"):
            return None
        return notifier  # type: ignore[return-value]

    async def _share_local_silences(self) -> None:
        """API silences this instance made before it joined the view (say, while it ran
        alone) and that have not ended: published, so the fleet has them too."""
        silences = self._silences()
        if silences is None:
            return
        now = self.clock()
        records = [
            (f"s/{s.id}", orjson.dumps(s.to_dict()))
            for s in silences.list_silences()
            if s.source == "api" and s.ends_at > now and s.id not in self.table.silences
        ]
        if records:
            await self._producer.send_many(VIEW_PARTITION, records)

    async def _send_outgoing(self) -> None:
        while True:
            key, value = await self._outgoing.get()
            records = [(key, value)]
            while not self._outgoing.empty():
                records.append(self._outgoing.get_nowait())
            try:
                await self._producer.send_many(VIEW_PARTITION, records)
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception(
                    "publishing silences to the fleet view failed; retrying",
                    extra={"event": "fleet_view_publish_failed"},
                )
                for record in records:
                    self._outgoing.put_nowait(record)
                await asyncio.sleep(1.0)

    async def _publish_loop(self) -> None:
        while True:
            try:
                if time.monotonic() - self._member_sent_at >= self.member_interval_s or (
                    self._member_shards != self.ownership.owned
                ):
                    await self.publish_member()
                await self.publish_groups()
            except asyncio.CancelledError:
                raise
            except Exception:  # the next round tries again
                log.exception(
                    "publishing to the fleet view failed",
                    extra={"event": "fleet_view_publish_failed"},
                )
            await asyncio.sleep(self.poll_interval_s)

    async def publish_member(self) -> None:
        """This instance's member record, now."""
        shards = self.ownership.owned
        scanned = {
            name: state.metrics.last_success_ms
            for name, state in self.coordinator.clusters.items()
            if state.metrics.last_success_ms is not None
        }
        record = MemberRecord(
            self.instance, tuple(sorted(shards)), self.api_url, self.clock(), scanned
        )
        await self._producer.send(VIEW_PARTITION, f"m/{self.instance}", record.encode())
        self.table.members[self.instance] = record  # known here at once, not a poll later
        self._member_sent_at = time.monotonic()
        self._member_shards = shards

    async def publish_groups(self) -> int:
        """Bulletins of this instance's groups that changed (or are due for a refresh) since
        the last call, and tombstones of its groups that vanished; returns how many records
        were published."""
        async with self._publishing:
            return await self._publish_groups()

    async def _publish_groups(self) -> int:
        incidents = open_incidents(self.notifier)
        silences = ActiveSilences(self.notifier)
        joined_key = (incidents, silences.key, self.ownership.owned)
        rejoin = joined_key != self._joined_key
        sent = 0
        for name, state in self.coordinator.clusters.items():
            published = self._published.setdefault(name, _Published())
            new_scan = state.evaluation is not published.evaluation
            if not (new_scan or rejoin) or state.evaluation is None:
                continue
            records = await self._cluster_records(
                name, state, published, new_scan, incidents, silences
            )
            if records is None:
                return sent  # a scan landed meanwhile: the next round starts on it
            if records:
                await self._producer.send_many(VIEW_PARTITION, records)
                sent += len(records)
        self._joined_key = joined_key
        return sent

    async def _cluster_records(
        self,
        name: str,
        state: ClusterView,
        published: _Published,
        new_scan: bool,
        incidents: Mapping[tuple[str, str], Any],
        silences: ActiveSilences,
    ) -> list[tuple[str, bytes | None]] | None:
        evaluation = state.evaluation
        scans = published.scans + 1 if new_scan else published.scans
        now = self.clock()
        stale = freshness(state, now).stale
        records: list[tuple[str, bytes | None]] = []
        seen: set[str] = set()
        started = time.perf_counter()
        rows: Iterator[Any] = iter(scan_rows(state, name, stale))
        for scan_row in rows:
            group = scan_row[0]["group"]
            seen.add(group)
            if not self.owns(name, group):
                published.sent.pop(group, None)  # moved away: its new owner publishes it
                continue
            [(row, incident)] = joined_rows(name, [scan_row], incidents, silences)
            signature = _signature(row, incident)
            due = (
                new_scan
                and (scans + _stagger(name, group, self.refresh_every)) % (self.refresh_every) == 0
            )
            if published.sent.get(group) != signature or due:
                bulletin = build_bulletin(state, name, row, incident, self.instance, now)
                records.append((group_key(name, group), bulletin.encode()))
                published.sent[group] = signature
            if time.perf_counter() - started >= STEP_S:
                await asyncio.sleep(0)  # give way to requests and scans
                if state.evaluation is not evaluation:
                    return None
                started = time.perf_counter()
        for group in list(published.sent):
            if group in seen:
                continue
            del published.sent[group]
            if self.owns(name, group):  # still ours, gone from the cluster
                records.append((group_key(name, group), None))
        published.evaluation = evaluation
        published.scans = scans
        return records

    async def caught_up(self) -> None:
        """Wait until the view written before the start has been read."""
        await self._caught_up.wait()


__all__ = ["FleetSilences", "FleetView", "Ownership", "view_topic"]
