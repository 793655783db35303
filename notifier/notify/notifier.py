"""The notification service: the planning core, the outbox and the delivery workers together.

:class:`Notifier` is what the coordinator and the API talk to. It feeds the
:class:`~notifier.notify.dispatcher.Dispatcher`, persists what the core changes and plans in
SQLite (:mod:`notifier.notify.outbox`), runs the flush timer and hands new rows to the
:class:`~notifier.notify.delivery.Deliverer`. :func:`build_channels` and
:func:`channel_policies` turn the config's receivers into channels and their delivery policies.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import math
import random
from collections import Counter
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType
from typing import Any

from notifier.config import ChannelEntry, NotifyConfig
from notifier.notify.channels import (
    Channel,
    Delivery,
    MessageRef,
    TemplateProblem,
    Templates,
    channel_kind,
)
from notifier.notify.codec import (
    incident_from_dict,
    incident_to_dict,
    result_from_dict,
    result_to_dict,
)
from notifier.notify.delivery import Deliverer, log_event, wall_ms
from notifier.notify.dispatcher import Dispatcher
from notifier.notify.outbox import RETRY_S, LogEntry, NotifyStore, OutboxEntry, OutboxRow
from notifier.notify.policy import ChannelPolicy, RetryPolicy, default_policy
from notifier.notify.silences import Silence, SilenceError, SilenceLimitError, make_silence
from notifier.types import Event, GroupStatus, Incident, Notification, Transition

log = logging.getLogger("notifier.notify")


def _channel_name(receiver: str, kind: str, index: int, count: int) -> str:
    return f"{receiver}/{kind}" if count == 1 else f"{receiver}/{kind}#{index}"


def _channel_names(config: NotifyConfig) -> dict[str, list[tuple[str, ChannelEntry]]]:
    out: dict[str, list[tuple[str, ChannelEntry]]] = {}
    for receiver, entries in config.receivers.items():
        kinds = Counter(entry.kind for entry in entries)
        seen: Counter[str] = Counter()
        named = []
        for entry in entries:
            kind = entry.kind
            named.append((_channel_name(receiver, kind, seen[kind], kinds[kind]), entry))
            seen[kind] += 1
        out[receiver] = named
    return out


def build_channels(
    config: NotifyConfig, templates: Templates | None = None
) -> dict[str, list[Channel]]:
    """receiver name → its channels (named ``receiver/kind``, ``receiver/kind#i`` if repeated),
    each built by its registered kind, sharing one :class:`Templates` (``config.templates``
    overrides the shipped ones)."""
    templates = templates or Templates(config.templates)
    return {
        receiver: [
            channel_kind(entry.kind).build(entry.config, name, templates) for name, entry in named
        ]
        for receiver, named in _channel_names(config).items()
    }


def channel_policies(
    config: NotifyConfig, channels: Mapping[str, Sequence[Channel]]
) -> dict[str, ChannelPolicy]:
    """Per channel name: the configured rate and concurrency over the receiver's defaults
    (the bucket stays the default one, so channels hitting one limit share it)."""
    by_name = {ch.name: ch for chs in channels.values() for ch in chs}
    out: dict[str, ChannelPolicy] = {}
    for named in _channel_names(config).values():
        for name, entry in named:
            channel = by_name.get(name)
            if channel is None:
                continue
            base = default_policy(channel)
            c = entry.config
            out[name] = ChannelPolicy(
                rate=c.rate, concurrency=c.concurrency or base.concurrency, bucket=base.bucket
            )
    return out


def check_templates(
    config: NotifyConfig,
    templates: Templates | None = None,
    channels: Mapping[str, Sequence[Channel]] | None = None,
) -> list[TemplateProblem]:
    """Render every template with sample data, and the templates channels render with a
    context of their own (a webhook's body template, with ``payload``) as they are sent: what
    ``notifier check --config`` and ``notifier run`` report. Nothing is sent, so unresolved
    secrets in ``config`` do no harm."""
    templates = templates or Templates(config.templates)
    if channels is None:
        channels = build_channels(config, templates)
    every = [ch for chs in channels.values() for ch in chs]
    own = {name for channel in every for name in channel.own_templates()}
    problems = templates.render_check(exclude=own)
    seen = {p.template for p in problems}
    for channel in every:
        for problem in channel.check():
            if problem.template not in seen:
                problems.append(problem)
                seen.add(problem.template)
    return problems


@dataclass(slots=True)
class _SendHook:
    """Keeps the message refs a delivery leaves (a Slack bot's posts), so follow-ups find the
    original."""

    store: NotifyStore

    def __call__(self, channel: Channel, row: OutboxRow, delivery: Delivery) -> None:
        self.store.save_message_refs(channel.name, channel.refs_to_keep(delivery))


class Notifier:
    """The notification service as the coordinator sees it.

    ``handle`` / ``cluster_down`` / ``cluster_up`` feed the core and persist what changed at
    once; a flush task turns due groups into outbox rows (committed with the log entries that
    planned them) and hands them to the :class:`~notifier.notify.delivery.Deliverer`. A
    restart on the same database resumes pending rows and neither re-plans what was sent nor
    forgets what was open.

    Call it from the event loop's thread (one SQLite connection, no locks). It owns its
    channels (built from the config unless given) and closes them on :meth:`stop`.
    """

    def __init__(
        self,
        config: NotifyConfig,
        db_path: str | Path,
        *,
        channels: Mapping[str, Sequence[Channel]] | None = None,
        policies: Mapping[str, ChannelPolicy] | None = None,
        templates: Templates | None = None,
        clock: Callable[[], int] = wall_ms,
        rng: random.Random | None = None,
    ) -> None:
        self.config = config
        self.clock = clock
        self.templates = templates or Templates(config.templates)
        self.store = NotifyStore(db_path)
        self.core = Dispatcher.from_config(config)
        now = clock()
        for data in self.store.load_silences():
            try:
                silence = Silence.from_dict(data)
            except (ValueError, KeyError) as exc:
                # Stored by a version with looser limits: starting matters more than keeping it.
                log_event(logging.ERROR, "silence_dropped", silence=data.get("id"),
                          error=str(exc), matchers=data.get("matchers"))  # fmt: skip
                self.store.delete_silence(str(data.get("id")))
                continue
            self.core.add_silence(silence, now)
        incidents, entries = self.store.load_live()
        self.core.restore(incidents, entries, now)
        self.channels: dict[str, list[Channel]] = (
            {k: list(v) for k, v in channels.items()}
            if channels is not None
            else build_channels(config, self.templates)
        )
        self._rng = rng
        self.deliverer = self._deliverer(config, self.channels, policies)
        self._wake = asyncio.Event()
        self._ticker: asyncio.Task[None] | None = None
        self._last_prune = 0
        self._closed = False
        self._swapping = False
        """A reload is swapping the channels: nothing is planned until it is done."""
        self._changes = 0
        """Bumped by whatever may change which incidents are open or silenced."""
        self._open: tuple[int, float, Mapping[tuple[str, str], Incident]] | None = None
        self.on_logged: Callable[[list[tuple[str, str]]], None] | None = None
        """Called with the (cluster, group) of each incident whose notification log changed
        (something was planned for it), once that is committed: a fleet publishes it then,
        so that the group's next owner does not send it again."""

    def _deliverer(
        self,
        config: NotifyConfig,
        channels: Mapping[str, Sequence[Channel]],
        policies: Mapping[str, ChannelPolicy] | None = None,
    ) -> Deliverer:
        by_name: dict[str, Channel] = {}
        for chs in channels.values():
            for channel in chs:
                if channel.name in by_name and by_name[channel.name] is not channel:
                    raise ValueError(f"two channels are named {channel.name!r}")
                by_name[channel.name] = channel
                channel.use_message_store(self._message_lookup(channel.name))
        if policies is None:
            policies = channel_policies(config, channels)
        d = config.delivery
        return Deliverer(
            self.store,
            by_name,
            policies=policies,
            retry=RetryPolicy(
                initial=d.retry_initial, cap=d.retry_max, give_up_after=d.give_up_after
            ),
            clock=self.clock,
            rng=self._rng,
            on_result=_SendHook(self.store),
        )

    async def reconfigure(self, config: NotifyConfig) -> None:
        """Take a reloaded notify section (validated, its templates checked): receivers and
        their channels, routes, config silences, inhibit rules, templates, delivery settings.

        Sends in flight finish on the old channels and are recorded; rows still waiting
        (retries, rate limits) stay in the outbox and go out through the new channels of the
        same name, or fail as "channel no longer configured" when their receiver or channel is
        gone. Incidents, the notification log and API silences are kept, so nothing is sent
        twice and nothing open is forgotten."""
        templates = Templates(config.templates)
        channels = build_channels(config, templates)
        self._swapping = True
        try:
            old_deliverer, old_channels = self.deliverer, self.channels
            await old_deliverer.stop(self.config.delivery.stop_timeout)
            self.config, self.templates, self.channels = config, templates, channels
            self.deliverer = self._deliverer(config, channels)
            self.deliverer.metrics = old_deliverer.metrics
            self.deliverer.metrics.pending.clear()
            self.core.reconfigure(config, self.clock())
            self._changes += 1  # config silences and inhibitions may have changed
            self._persist()
            if not self._closed:
                await self.deliverer.start(self.store.pending())
        finally:
            self._swapping = False
            self._wake.set()
        for chs in old_channels.values():
            for channel in chs:
                await channel.aclose()

    def _message_lookup(self, name: str) -> Callable[[Incident], MessageRef | None]:
        def lookup(incident: Incident) -> MessageRef | None:
            return self.store.message_ref(name, incident.id)

        return lookup

    # ---- lifecycle

    async def start(self) -> None:
        """Resume pending outbox rows and start the flush timer and the delivery workers."""
        await self.deliverer.start(self.store.pending())
        self._ticker = asyncio.create_task(self._run(), name="notifier-flush")

    async def stop(self) -> None:
        """Flush what is due, let sends in flight finish, persist everything, close."""
        if self._closed:
            return
        self._closed = True
        if self._ticker is not None:
            self._ticker.cancel()
            await asyncio.gather(self._ticker, return_exceptions=True)
            self._ticker = None
        await self.deliverer.stop(self.config.delivery.stop_timeout)
        self._persist()
        for channels in self.channels.values():
            for channel in channels:
                await channel.aclose()
        self.store.close()

    async def __aenter__(self) -> Notifier:
        await self.start()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.stop()

    async def _run(self) -> None:
        while True:
            self._wake.clear()
            now = self.clock()
            try:
                self.store.retry()
                self.flush_due(now)
                if now - self._last_prune > 3_600_000:
                    self._last_prune = now
                    self._housekeeping(now)
            except Exception:  # keep the timer alive; the next round retries
                log.exception("notification flush failed")
            due = self.core.next_due()
            delay = 60.0 if due is None else min(60.0, max(0.0, (due - self.clock()) / 1000))
            if self.store.failing:
                delay = min(delay, RETRY_S)  # what the disk refused is tried again
            # asyncio.timeout, not wait_for: in Python 3.11 wait_for can swallow the
            # cancellation stop() sends if the wake-up comes at the same moment.
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(delay):
                    await self._wake.wait()

    def _housekeeping(self, now: int) -> None:
        """Forget finished outbox rows, closed incidents and API silences past retention."""
        before = now - round(self.config.delivery.outbox_retention * 1000)
        self._changes += 1
        self.store.prune(before)
        for silence in list(self.core.silences.values()):
            if silence.source == "api" and silence.ends_at < before:
                self.core.delete_silence(silence.id, now)
                self.store.delete_silence(silence.id)

    # ---- inputs (the coordinator's interface)

    def handle(self, transitions: Sequence[Transition], now: int | None = None) -> None:
        """Take gated transitions (in order); incidents are persisted before this returns."""
        if not transitions:
            return
        self.core.handle(transitions, self.clock() if now is None else now)
        self._changes += 1
        self._persist()
        self._wake.set()

    def cluster_down(self, cluster: str, now: int | None = None, reason: str = "") -> None:
        self.core.cluster_down(cluster, self.clock() if now is None else now, reason)
        self._changes += 1
        self._persist()
        self._wake.set()

    def cluster_up(self, cluster: str, now: int | None = None) -> None:
        self.core.cluster_up(cluster, self.clock() if now is None else now)
        self._changes += 1
        self._persist()
        self._wake.set()

    def cluster_removed(self, cluster: str, now: int | None = None) -> None:
        """The cluster left the config while down: its alert resolves, saying so."""
        now = self.clock() if now is None else now
        self.core.cluster_up(cluster, now, reason="cluster removed from the config")
        self._changes += 1
        self._persist()
        self._wake.set()

    def flush_due(self, now: int | None = None) -> list[Notification]:
        """Plan what is due at ``now``, write it to the outbox (with the log entries, in one
        transaction) and hand it to the workers. The flush task calls this."""
        if self._swapping:
            return []  # planned once the new channels are in place (reconfigure wakes us)
        now = self.clock() if now is None else now
        planned = self.core.plan(now)
        entries = []
        for item in planned:
            notification = item.notification
            channels = self.channels.get(notification.receiver, [])
            if not channels:
                log_event(
                    logging.ERROR,
                    "notification_failed",
                    receiver=notification.receiver,
                    notification=notification.id,
                    error="receiver has no channels",
                )
            entries += [OutboxEntry(notification, ch.name, item.lane) for ch in channels]
        rows = self._persist(entries)
        if rows:
            self.deliverer.submit(rows)
        return [item.notification for item in planned]

    def _persist(self, entries: Sequence[OutboxEntry] = ()) -> list[OutboxRow]:
        changes = self.core.take_changes()
        if not (changes.incidents or changes.log or changes.forget or entries):
            return []
        rows = self.store.save(changes.incidents, changes.log, changes.forget, entries)
        if changes.log and self.on_logged is not None:
            found = (self.core.incident(e.incident_id) for e in changes.log)
            self.on_logged(sorted({(i.cluster, i.group) for i in found if i is not None}))
        return rows

    # ---- views and silences (the API's interface)

    def incidents(self, open_only: bool = True, limit: int = 1000) -> list[Incident]:
        """Open incidents (with ``silenced`` as of now), or the history, newest first."""
        if open_only:
            return self.core.incidents(self.clock(), open_only=True)
        live = {i.id: i for i in self.core.incidents(self.clock(), open_only=False)}
        stored = self.store.incidents(limit=limit)
        return [live.get(i.id, i) for i in stored]

    def waiting(self, incident_id: str) -> list[dict[str, Any]]:
        """What each route that took a live incident waits for before it notifies it, and
        until when (:meth:`Dispatcher.waiting`)."""
        return self.core.waiting(incident_id, self.clock())

    def open_incidents(self) -> Mapping[tuple[str, str], Incident]:
        """Open incidents by (cluster, group), ``silenced`` as of now: the same mapping (read
        only) until a transition, a cluster going down or up, a silence added, deleted,
        starting or ending changes it, so that readers (the API, per request) can key their
        own caches on it."""
        now = self.clock()
        cached = self._open
        if cached is None or cached[0] != self._changes or now >= cached[1]:
            by_group = {(i.cluster, i.group): i for i in self.core.incidents(now, open_only=True)}
            next_change = min(
                (
                    t
                    for s in self.core.silences.values()
                    for t in (s.starts_at, s.ends_at)
                    if t > now
                ),
                default=math.inf,
            )
            cached = self._open = (self._changes, next_change, MappingProxyType(by_group))
        return cached[2]

    def add_silence(
        self,
        matchers: Any,
        *,
        ends_at: int,
        starts_at: int | None = None,
        author: str,
        comment: str,
    ) -> Silence:
        """Create a silence (raises :class:`SilenceError` naming each bad field, and
        :class:`SilenceLimitError` when ``notify.silence_limits.max_silences`` are active or
        pending already)."""
        now = self.clock()
        limits = self.config.silence_limits
        silence = make_silence(
            matchers,
            ends_at=ends_at,
            starts_at=starts_at,
            author=author,
            comment=comment,
            now=now,
            limits=limits,
        )
        held = sum(
            1
            for s in self.core.silences.values()
            if s.source != "config" and s.state(now) != "expired"
        )
        if held >= limits.max_silences:
            raise SilenceLimitError([(
                "silences",
                f"{held} silences are active or pending, the most allowed "
                "(notify.silence_limits.max_silences): expire one first",
            )])  # fmt: skip
        self.store.save_silence(silence.id, silence.to_dict())
        self.core.add_silence(silence, self.clock())
        self._changes += 1
        return silence

    def list_silences(self, *, include_expired: bool = True) -> list[Silence]:
        now = self.clock()
        silences = sorted(self.core.silences.values(), key=lambda s: (s.starts_at, s.id))
        return [s for s in silences if include_expired or s.state(now) != "expired"]

    def expire_silence(self, silence_id: str) -> Silence:
        """End an API silence now. Its record stays, listed as expired until the outbox's
        retention, as Alertmanager keeps an expired silence; a config silence must be removed
        from the config. Raises :class:`SilenceError` naming the reason."""
        silence = self.core.silences.get(silence_id)
        if silence is None:
            raise SilenceError([("id", f"no silence {silence_id!r}")])
        if silence.source == "config":
            raise SilenceError([("id", "defined in the config file; remove it there")])
        now = self.clock()
        if silence.state(now) == "expired":
            raise SilenceError([("id", f"silence {silence_id} has already expired")])
        ended = dataclasses.replace(silence, starts_at=min(silence.starts_at, now), ends_at=now)
        self.store.save_silence(ended.id, ended.to_dict())
        self.core.add_silence(ended, now)
        self._changes += 1
        self._wake.set()
        return ended

    def apply_silence(self, silence: Silence) -> bool:
        """Install a silence made through another instance of the fleet (the fleet-wide view):
        idempotent, False when it is known already as it is. A config silence with the same id
        stays: the config file is this instance's own."""
        current = self.core.silences.get(silence.id)
        if current is not None and (current.source == "config" or current == silence):
            return False
        self.store.save_silence(silence.id, silence.to_dict())
        self.core.add_silence(silence, self.clock())
        self._changes += 1
        self._wake.set()
        return True

    def forget_silence(self, silence_id: str) -> bool:
        """Remove a silence deleted through another instance of the fleet: idempotent, False
        when there is no such API silence here."""
        current = self.core.silences.get(silence_id)
        if current is None or current.source == "config":
            return False
        self.core.delete_silence(silence_id, self.clock())
        self.store.delete_silence(silence_id)
        self._changes += 1
        self._wake.set()
        return True

    def config_problems(self, config: NotifyConfig) -> list[str]:
        """What would stop ``config`` from being run (a reload's check): each template that
        fails to render, as ``name:line: message``."""
        return [str(problem) for problem in check_templates(config)]

    def check(self) -> list[TemplateProblem]:
        """Render every template with sample data (and each webhook's body template)."""
        return check_templates(self.config, self.templates, self.channels)

    def open_statuses(self, cluster: str) -> dict[str, GroupStatus]:
        """The status of each open incident of ``cluster`` by group: what the coordinator
        resumes from after a restart (these were committed with every transition, while its
        checkpoint may be older)."""
        return {g: i.status for (c, g), i in self.core.book.open.items() if c == cluster}

    # ---- groups moving to another instance (fleet)

    def export_incident(self, cluster: str, group: str) -> dict[str, Any] | None:
        """The group's open incident, its latest result and its notification log as JSON-able
        data (None: no open incident), for :meth:`import_incident` on the group's next owner."""
        found = self.core.handover(cluster, group)
        if found is None:
            return None
        incident, result, entries = found
        return {
            "incident": incident_to_dict(incident),
            "result": None if result is None else result_to_dict(result),
            "log": [
                [
                    e.route,
                    e.sent_status.value,
                    e.last_event.value,
                    e.last_sent_at,
                    e.resolved,
                    None if e.sent_rules is None else sorted(e.sent_rules),
                ]
                for e in entries
            ],
        }

    def import_incident(self, data: Mapping[str, Any]) -> Incident:
        """Continue an incident another instance opened (from :meth:`export_incident`): the
        group's next transition updates or resolves this incident (same id, same dedup key)
        and the log keeps what was sent from being sent again. Persisted at once."""
        incident = incident_from_dict(data["incident"])
        result = None if data.get("result") is None else result_from_dict(data["result"])
        entries = [
            LogEntry(
                route,
                incident.id,
                GroupStatus(sent),
                Event(event),
                int(at),
                bool(done),
                # An instance from before rules were logged sends five fields.
                None if len(rest) == 0 or rest[0] is None else frozenset(rest[0]),
            )
            for route, sent, event, at, done, *rest in data.get("log", [])
        ]
        held = self.core.book.open.get((incident.cluster, incident.group))
        if held is not None:
            self.core.drop([held.id])  # ours is older: the exporter owned the group since
        self.store.save([(incident, result, "group")], entries)
        self.core.restore([(incident, result, "group")], entries, self.clock())
        self._changes += 1
        self._wake.set()
        return incident

    def drop_incidents(self, keys: Collection[tuple[str, str]]) -> list[str]:
        """Forget the open incidents of groups another instance owns now (no resolve, no
        further notification from here; the store forgets them too); their ids."""
        ids = [i.id for k, i in self.core.book.open.items() if k in keys]
        if ids:
            self.core.drop(ids)
            self.store.forget_incidents(ids)
            self._changes += 1
        return ids

    def metrics(self) -> dict[str, Any]:
        """Delivery counters (per channel), outbox depth, oldest pending age, and what the
        core decided (for the API to export)."""
        return {
            **self.deliverer.metrics.snapshot(self.clock()),
            "planned": self.core.counters.snapshot(),
            "open_incidents": len(self.core.book.open),
            "clusters_down": sorted(self.core.book.clusters),
            "store": self.store.health.summary(),
        }

    async def wait_delivered(self, timeout: float | None = None) -> bool:
        """Wait until nothing is due and the outbox is empty (tests, the demo, shutdown)."""
        loop = asyncio.get_running_loop()
        deadline = None if timeout is None else loop.time() + timeout
        while True:
            remaining = None if deadline is None else max(0.0, deadline - loop.time())
            if not await self.deliverer.wait_idle(remaining):
                return False
            if not self.deliverer.idle:
                continue  # rows arrived while the waiter was waking up
            due = self.core.next_due()
            if due is None or due > self.clock():
                return True
            await asyncio.sleep(0.005)
