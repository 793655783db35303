"""The planning core: transitions in, due notifications out — pure, synchronous, clock-free.

No I/O and no clock: every call takes ``now`` (epoch ms), so the backtest drives the very same
decisions with simulated time. Transitions open, escalate and close incidents; routes decide
who hears about them; aggregation groups (``group_by``, ``group_wait``, ``group_interval``)
batch what is due into one :class:`Notification` per receiver; the notification log
(:class:`~notifier.notify.outbox.LogEntry`) makes planning idempotent (``repeat_interval``, "a
resolve is never sent for an open that was never sent"); silences and cluster-down inhibition
hold alerts back without forgetting them.

Deliberate differences from Burrow's notifier (tested as such): no notification for a healthy
group except as a resolve (Burrow's threshold ``OK`` notifies every evaluation); a resolve
only follows an open this route actually sent (Burrow sends a close for any incident); the
complete-flag gate lives in the evaluator — a partial result never becomes a transition.
"""

from __future__ import annotations

import dataclasses
import hashlib
import heapq
import math
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from notifier.config import InhibitRuleConfig, NotifyConfig, RouteConfig
from notifier.config.notify import CLUSTER_DOWN_INHIBIT_RULE, ERR_MUTES_WARN_INHIBIT_RULE
from notifier.notify.incidents import IncidentBook, IncidentChange
from notifier.notify.inhibit import Inhibitor, current_findings
from notifier.notify.matchers import matches_incident
from notifier.notify.outbox import LogEntry
from notifier.notify.routes import Route
from notifier.notify.silences import Silence, config_silence
from notifier.types import (
    Alert,
    Event,
    Finding,
    GroupResult,
    Incident,
    Notification,
    Transition,
)

MIN_TIMED_WAKE_MS = 1000
"""Time-driven flushes (repeats, silence expiry) are at least this far apart, so a
``repeat_interval`` of 0 (Burrow's send-interval 0) cannot spin the flush timer."""


@dataclass(slots=True)
class _AggGroup:
    route: Route
    key: str
    created_at: int
    first_wait: int
    """How long after it forms the group is first flushed: the route's ``group_wait``, or
    ``cluster_down_wait`` for a cluster-down alert's group."""
    members: set[str] = field(default_factory=set)
    last_flush: int | None = None
    next_flush: int | None = None


@dataclass(slots=True)
class DispatchCounters:
    """What the core decided to send (the backtest's ``notifications`` column) and held back."""

    notifications: int = 0
    alerts: int = 0
    events: Counter[str] = field(default_factory=Counter)
    receivers: Counter[str] = field(default_factory=Counter)
    held: Counter[str] = field(default_factory=Counter)
    """Alerts due at a flush but held back: ``silenced``, ``inhibited``."""

    def snapshot(self) -> dict[str, Any]:
        return {
            "notifications": self.notifications,
            "alerts": self.alerts,
            "events": dict(self.events),
            "receivers": dict(self.receivers),
            "held": dict(self.held),
        }


@dataclass(slots=True, frozen=True)
class Planned:
    """A notification and its delivery lane: notifications in one lane are delivered in
    order. The lane is the route's receiver and group key without ``status``, so an
    incident's open, escalation and resolve always share one."""

    notification: Notification
    route: str
    lane: str


@dataclass(slots=True)
class CoreChanges:
    """What changed since the last :meth:`Dispatcher.take_changes` (for the store)."""

    incidents: list[tuple[Incident, GroupResult | None, str]]
    log: list[LogEntry]
    forget: list[str]


_GroupKey = tuple[str, str]


class Dispatcher:
    """The pure planning core: transitions in, due notifications out, all at a given ``now``.

    :meth:`handle` applies transitions to the :class:`IncidentBook` and files each changed
    incident into the aggregation groups of the routes that match it; :meth:`tick` flushes
    the groups that are due — the first time ``group_wait`` after a group forms, later no
    more often than ``group_interval`` — deciding per incident and route, from the
    notification log, whether to send ``open``, ``escalate``, ``repeat``, ``resolve`` or
    nothing. Nothing here sleeps, reads a clock or does I/O; :meth:`next_due` says when the
    next flush is due, and :meth:`take_changes` hands the state changes to whoever persists
    them.
    """

    def __init__(
        self,
        route: RouteConfig | Route,
        *,
        silences: Iterable[Silence] = (),
        inhibit_cluster_down: bool = True,
        inhibit_rules: Iterable[InhibitRuleConfig] | None = None,
        status_page_url: str | None = None,
        extras: Mapping[str, Any] | None = None,
        cluster_down_wait: float = 0.0,
    ) -> None:
        self.root = route if isinstance(route, Route) else Route.build(route)
        self.cluster_down_wait = round(cluster_down_wait * 1000)
        """Milliseconds a cluster-down alert waits in its own aggregation group."""
        self.routes = {r.id: r for r in self.root.walk()}
        self.book = IncidentBook()
        self.silences: dict[str, Silence] = {s.id: s for s in silences}
        if inhibit_rules is None:
            defaults = [CLUSTER_DOWN_INHIBIT_RULE] if inhibit_cluster_down else []
            inhibit_rules = [*defaults, ERR_MUTES_WARN_INHIBIT_RULE]
        self.inhibitor = Inhibitor(inhibit_rules)
        self._inhibited: set[str] = set()
        """Incidents held back by an inhibit rule at their last flush: looked at again
        whenever another incident changes (their source may have gone)."""
        self._narrowed: set[str] = set()
        """Open incidents routed without some muted findings: routed again on a change."""
        self.status_page_url = status_page_url
        self.extras = dict(extras or {})
        self.counters = DispatchCounters()
        self.log: dict[tuple[str, str], LogEntry] = {}
        self._log_by_incident: dict[str, dict[str, LogEntry]] = {}
        self._groups: dict[_GroupKey, _AggGroup] = {}
        self._membership: dict[tuple[str, str], _GroupKey] = {}
        self._incident_groups: dict[str, set[_GroupKey]] = {}
        self._live: dict[str, Incident] = {}
        self._heap: list[tuple[int, int, _GroupKey]] = []
        self._seq = 0
        self._dirty_incidents: dict[str, Incident] = {}
        self._dirty_log: dict[tuple[str, str], LogEntry] = {}
        self._forget: set[str] = set()
        self._kinds: dict[str, str] = {}

    @classmethod
    def from_config(cls, config: NotifyConfig) -> Dispatcher:
        return cls(
            config.route,
            silences=[config_silence(s) for s in config.silences],
            inhibit_rules=config.effective_inhibit_rules,
            status_page_url=config.status_page_url,
            extras=config.extras,
            cluster_down_wait=config.cluster_down_wait,
        )

    def reconfigure(self, config: NotifyConfig, now: int) -> None:
        """Swap in a reloaded notify config: routes, config silences, inhibit rules, the
        status page URL and extras. Incidents, the notification log and API silences stay;
        every live incident is filed anew into the new routes' aggregation groups (the log
        keeps what was sent from being sent again; a route that is gone owes nothing)."""
        self.root = Route.build(config.route)
        self.routes = {r.id: r for r in self.root.walk()}
        for silence_id in [i for i, s in self.silences.items() if s.source == "config"]:
            del self.silences[silence_id]
        for silence in (config_silence(s) for s in config.silences):
            self.silences[silence.id] = silence
        self.inhibitor = Inhibitor(config.effective_inhibit_rules)
        for incident in self._live.values():
            self.inhibitor.update(incident, self.book.results.get(incident.id))
        self._inhibited.clear()
        self._narrowed.clear()
        self.status_page_url = config.status_page_url
        self.extras = dict(config.extras)
        self.cluster_down_wait = round(config.cluster_down_wait * 1000)
        for group in self._groups.values():
            group.next_flush = None
        self._groups.clear()
        self._membership.clear()
        self._incident_groups.clear()
        self._heap.clear()
        for incident in sorted(self._live.values(), key=lambda i: (i.opened_at, i.id)):
            result = self.book.results.get(incident.id)
            change = IncidentChange(
                "closed" if incident.closed_at is not None else "updated", incident, result
            )
            self._changed(change, now, self._kinds.get(incident.id, "group"))

    # ---- inputs

    def handle(self, transitions: Iterable[Transition], now: int) -> list[IncidentChange]:
        """Apply transitions (gated, in order) and file the changed incidents for routing."""
        changes = []
        for transition in transitions:
            change = self.book.apply(transition)
            if change is not None:
                self._changed(change, now)
                changes.append(change)
        return changes

    def cluster_down(self, cluster: str, now: int, reason: str = "") -> Incident | None:
        """The cluster cannot be scanned: raise one cluster alert; with inhibition on, its
        groups' alerts are held back until :meth:`cluster_up`."""
        change = self.book.cluster_down(cluster, now, reason)
        if change is None:
            return None
        self._changed(change, now, kind="cluster")
        return change.incident

    def cluster_up(
        self, cluster: str, now: int, reason: str = "cluster reachable again"
    ) -> Incident | None:
        change = self.book.cluster_up(cluster, now, reason)
        if change is None:
            return None
        self._changed(change, now, kind="cluster")
        # Its groups may owe notifications that were inhibited: look again soon.
        for key, group in self._groups.items():
            if any(self._live[i].cluster == cluster for i in group.members if i in self._live):
                self._touch(key, now)
        return change.incident

    def add_silence(self, silence: Silence, now: int) -> None:
        """Hold back matching alerts from ``silence.starts_at`` (flags update at once). A new
        version of a known silence (say, expired now) replaces it, and what the old one held
        back is looked at again right away."""
        previous = self.silences.get(silence.id)
        self.silences[silence.id] = silence
        if previous is not None and previous != silence:
            for key in list(self._groups):
                self._touch(key, now)
        for incident in self._live.values():
            if incident.closed_at is None and silence.active(now) and silence.matches(incident):
                incident.silenced = True

    def delete_silence(self, silence_id: str, now: int) -> Silence | None:
        """Remove a silence; what it held back is looked at again right away."""
        silence = self.silences.pop(silence_id, None)
        if silence is not None:
            for key in list(self._groups):
                self._touch(key, now)
        return silence

    # ---- the flush

    def next_due(self) -> int | None:
        """When :meth:`tick` next has work (ms), or None when nothing is scheduled."""
        while self._heap:
            due, _seq, key = self._heap[0]
            group = self._groups.get(key)
            if group is not None and group.next_flush == due:
                return due
            heapq.heappop(self._heap)
        return None

    def tick(self, now: int) -> list[Notification]:
        """Flush every aggregation group due at ``now``: one notification per group with
        something to say, addressed to the route's receiver."""
        return [planned.notification for planned in self.plan(now)]

    def plan(self, now: int) -> list[Planned]:
        """:meth:`tick` with each notification's route and delivery lane."""
        out: list[Planned] = []
        while self._heap and self._heap[0][0] <= now:
            due, _seq, key = heapq.heappop(self._heap)
            group = self._groups.get(key)
            if group is None or group.next_flush != due:
                continue
            group.next_flush = None
            notification = self._flush(group, now)
            if notification is not None:
                route = group.route
                first = notification.alerts[0].incident
                lane = route.receiver + "|" + route.group_key(first, lane=True)
                out.append(Planned(notification, route.id, lane))
        return out

    def _flush(self, group: _AggGroup, now: int) -> Notification | None:
        route = group.route
        threshold = route.threshold.group_status.rank
        due: list[tuple[Event, Incident, list[str]]] = []  # with the rules that are news
        firing: list[Incident] = []
        repeat_due = False
        wake = math.inf
        done: list[str] = []
        members = sorted(
            (self._live[i] for i in group.members if i in self._live),
            key=lambda inc: (inc.opened_at, inc.id),
        )
        for incident in members:
            entry = self.log.get((route.id, incident.id))
            if incident.closed_at is not None:
                if entry is not None and not entry.resolved and route.send_resolved:
                    # Resolves go out even when silenced or inhibited: a receiver that was
                    # told about an incident must not be left with it open forever.
                    due.append((Event.RESOLVE, incident, []))
                done.append(incident.id)
                continue
            if incident.status.rank < threshold:
                continue  # below this route's threshold; a status change touches the group
            next_repeat = math.inf
            news: list[str] = []
            if entry is None:
                event: Event | None = Event.OPEN
            elif (news := self._news(incident, entry)) or (
                incident.status.rank > entry.sent_status.rank
            ):
                event = Event.ESCALATE
            else:
                event = None
                next_repeat = entry.last_sent_at + route.repeat_interval
            held, until = self._held(incident, now, route)
            if held is not None:
                if event is not None or next_repeat <= now:
                    self.counters.held[held] += 1
                wake = min(wake, until)
            elif event is not None:
                due.append((event, incident, news))
            else:
                firing.append(incident)
                if next_repeat <= now:
                    repeat_due = True
                else:
                    wake = min(wake, next_repeat)
        if repeat_due:
            # Coalesce: when one firing alert repeats, the group's other firing alerts ride
            # along, so repeats stay batched like the opens were.
            due.extend((Event.REPEAT, incident, []) for incident in firing)
        notification = self._notify(group, due, now) if due else None
        if due and route.repeat_interval != math.inf:
            wake = min(wake, now + route.repeat_interval)
        group.last_flush = now
        for incident_id_ in done:
            self._leave(group, incident_id_)
        if not group.members:
            self._drop_group(group)
        elif wake != math.inf:
            self._schedule(
                group, max(int(wake), now + max(route.group_interval, MIN_TIMED_WAKE_MS))
            )
        return notification

    def _speaking_rules(self, incident: Incident) -> frozenset[str]:
        """The rules a notification about ``incident`` speaks of now: those firing at its
        status, less what an inhibit rule mutes."""
        findings = current_findings(incident, self.book.results.get(incident.id))
        muted = self.inhibitor.muted(incident, findings) if findings else {}
        rank = incident.status.rank
        return frozenset(
            f.rule
            for i, f in enumerate(findings)
            if i not in muted and f.severity.group_status.rank == rank
        )

    def _news(self, incident: Incident, entry: LogEntry) -> list[str]:
        """The rules firing at the status already notified that were not told of (a rewind
        while the group was stopped): Alertmanager tells a group of a new alert in it."""
        if entry.sent_rules is None or incident.status.rank != entry.sent_status.rank:
            return []
        return sorted(self._speaking_rules(incident) - entry.sent_rules)

    def muted_findings(self, incident: Incident) -> list[Finding]:
        """The current findings of ``incident`` that an inhibit rule mutes."""
        findings = current_findings(incident, self.book.results.get(incident.id))
        muted = self.inhibitor.muted(incident, findings) if findings else {}
        return [f for i, f in enumerate(findings) if i in muted]

    def _inhibited_for(self, route: Route, incident: Incident) -> bool:
        """Whether inhibit rules mute everything ``route`` took ``incident`` for: all its
        findings, or every finding the route's matchers (and its parents') picked."""
        findings = current_findings(incident, self.book.results.get(incident.id))
        muted = self.inhibitor.muted(incident, findings)
        if not muted:
            return False
        speaking = [f for i, f in enumerate(findings) if i not in muted]
        if not speaking:
            return True
        narrowed = dataclasses.replace(incident, findings=speaking)
        return not matches_incident(route.path_matchers, narrowed)

    def _held(
        self, incident: Incident, now: int, route: Route | None = None
    ) -> tuple[str | None, float]:
        """Why ``incident`` is held back at ``now`` (``silenced``/``inhibited``) and until
        when at the earliest it might not be (∞: until something happens)."""
        if route is not None and self._inhibited_for(route, incident):
            self._inhibited.add(incident.id)
            return "inhibited", math.inf
        self._inhibited.discard(incident.id)
        until = -1
        for silence in self.silences.values():
            if silence.active(now) and silence.matches(incident):
                until = max(until, silence.ends_at)
        incident.silenced = until >= 0
        if incident.silenced:
            self._dirty_incidents[incident.id] = incident
            return "silenced", until
        return None, math.inf

    def _notify(
        self, group: _AggGroup, due: list[tuple[Event, Incident, list[str]]], now: int
    ) -> Notification:
        route = group.route
        alerts = []
        for event, incident, news in due:
            snapshot = dataclasses.replace(incident, findings=list(incident.findings))
            muted = [] if event is Event.RESOLVE else self.muted_findings(incident)
            result = self.book.results.get(incident.id)
            alerts.append(Alert(event, snapshot, result, muted, news))
            self._record(route, incident, event, now)
        digest = hashlib.blake2b(
            "\x00".join(
                [route.id, group.key, str(now)] + [f"{a.incident.id}:{a.event}" for a in alerts]
            ).encode(),
            digest_size=12,
        ).hexdigest()
        self.counters.notifications += 1
        self.counters.alerts += len(alerts)
        self.counters.receivers[route.receiver] += 1
        for alert in alerts:
            self.counters.events[alert.event.value] += 1
        return Notification(
            id=digest,
            receiver=route.receiver,
            group_key=group.key,
            alerts=alerts,
            created_at=now,
            status_page_url=self.status_page_url,
            extras=dict(self.extras),
        )

    def _record(self, route: Route, incident: Incident, event: Event, now: int) -> None:
        key = (route.id, incident.id)
        entry = self.log.get(key)
        if entry is None:
            entry = LogEntry(route.id, incident.id, incident.status, event, now)
            self.log[key] = entry
            self._log_by_incident.setdefault(incident.id, {})[route.id] = entry
        entry.last_event = event
        entry.last_sent_at = now
        if event is Event.RESOLVE:
            entry.resolved = True
        elif incident.status.rank > entry.sent_status.rank:
            entry.sent_status = incident.status
            entry.sent_rules = self._speaking_rules(incident)
        elif incident.status.rank == entry.sent_status.rank:
            entry.sent_rules = (entry.sent_rules or frozenset()) | self._speaking_rules(incident)
        self._dirty_log[key] = entry

    # ---- groups and membership

    def _changed(self, change: IncidentChange, now: int, kind: str = "group") -> None:
        incident = change.incident
        self.inhibitor.update(incident, self.book.results.get(incident.id))
        self._file_change(change, now, kind)
        # Another incident's change may mute or unmute these: route and look at them again.
        for other_id in (self._inhibited | self._narrowed) - {change.incident.id}:
            other = self._live.get(other_id)
            if other is None or other.closed_at is not None:
                self._narrowed.discard(other_id)
                continue
            for route in self.root.match(self._route_view(other)):
                self._file(route, other, now)
            for key in list(self._incident_groups.get(other_id, ())):
                if key in self._groups:
                    self._touch(key, now)

    def _route_view(self, incident: Incident) -> Incident:
        """``incident`` as routes should see it: without the findings an inhibit rule mutes
        (a group's muted WARN must not take its ERR to the WARN route), unless all are."""
        muted = self.muted_findings(incident)
        if not muted:
            self._narrowed.discard(incident.id)
            return incident
        keys = {(f.rule, f.topic, f.partition) for f in muted}
        speaking = [f for f in incident.findings if (f.rule, f.topic, f.partition) not in keys]
        if not speaking:
            self._narrowed.discard(incident.id)
            return incident  # all muted: routed as usual, held back at the flush
        self._narrowed.add(incident.id)
        return dataclasses.replace(incident, findings=speaking)

    def _file_change(self, change: IncidentChange, now: int, kind: str) -> None:
        incident = change.incident
        self._live[incident.id] = incident
        self._dirty_incidents[incident.id] = incident
        self._kinds[incident.id] = kind
        logged = self._log_by_incident.get(incident.id, {})
        if incident.closed_at is not None:
            # Only routes that told someone about it have anything left to say.
            owed = {r for r, e in logged.items() if not e.resolved and r in self.routes}
            if not owed:
                for key in list(self._incident_groups.get(incident.id, ())):
                    self._leave(self._groups[key], incident.id)
                self._retire(incident.id)
                return
            for route_id in sorted(owed):
                self._file(self.routes[route_id], incident, now)
            for key in list(self._incident_groups.get(incident.id, ())):
                if key[0] not in owed:
                    self._leave(self._groups[key], incident.id)
            return
        self._silence_flag(incident, now)
        routes = {r.id: r for r in self.root.match(self._route_view(incident))}
        for route_id in logged:
            if route_id in self.routes:
                routes.setdefault(route_id, self.routes[route_id])
        for route in routes.values():
            self._file(route, incident, now)

    def _silence_flag(self, incident: Incident, now: int) -> None:
        incident.silenced = any(
            s.active(now) and s.matches(incident) for s in self.silences.values()
        )

    def _file(self, route: Route, incident: Incident, now: int) -> None:
        """Put ``incident`` in its aggregation group of ``route`` (moving it if its group key
        changed) and make sure that group is flushed soon."""
        cluster_alert = self._kinds.get(incident.id) == "cluster"
        group_key = route.group_key(incident)
        if cluster_alert:  # its own group: never behind the cluster's group alerts' interval
            group_key = (
                group_key[:-1] + ("," if group_key != "{}" else "") + 'alert="cluster-down"}'
            )
        key = (route.id, group_key)
        old = self._membership.get((route.id, incident.id))
        if old is not None and old != key:
            self._leave(self._groups[old], incident.id)
        group = self._groups.get(key)
        if group is None:
            wait = self.cluster_down_wait if cluster_alert else route.group_wait
            group = self._groups[key] = _AggGroup(route, key[1], created_at=now, first_wait=wait)
        group.members.add(incident.id)
        self._membership[(route.id, incident.id)] = key
        self._incident_groups.setdefault(incident.id, set()).add(key)
        self._touch(key, now)

    def _touch(self, key: _GroupKey, now: int) -> None:
        group = self._groups[key]
        if group.last_flush is None:
            due = group.created_at + group.first_wait
        else:
            due = max(now, group.last_flush + group.route.group_interval)
        if group.next_flush is None or due < group.next_flush:
            self._schedule(group, due)

    def _schedule(self, group: _AggGroup, due: int) -> None:
        group.next_flush = due
        self._seq += 1
        heapq.heappush(self._heap, (due, self._seq, (group.route.id, group.key)))

    def _leave(self, group: _AggGroup, incident_id_: str) -> None:
        group.members.discard(incident_id_)
        key = (group.route.id, group.key)
        self._membership.pop((group.route.id, incident_id_), None)
        groups = self._incident_groups.get(incident_id_)
        if groups is not None:
            groups.discard(key)
            incident = self._live.get(incident_id_)
            if not groups and incident is not None and incident.closed_at is not None:
                self._retire(incident_id_)
        if not group.members:
            self._drop_group(group)

    def _drop_group(self, group: _AggGroup) -> None:
        key = (group.route.id, group.key)
        if self._groups.get(key) is group:
            del self._groups[key]
            group.next_flush = None

    def _retire(self, incident_id_: str) -> None:
        """A closed incident with nothing left to send: forget it (the store keeps history)."""
        self._inhibited.discard(incident_id_)
        self._narrowed.discard(incident_id_)
        self._live.pop(incident_id_, None)
        self._incident_groups.pop(incident_id_, None)
        self.book.results.pop(incident_id_, None)
        self._kinds.pop(incident_id_, None)
        for route_id in self._log_by_incident.pop(incident_id_, {}):
            self.log.pop((route_id, incident_id_), None)
            self._dirty_log.pop((route_id, incident_id_), None)
        self._forget.add(incident_id_)

    # ---- persistence hooks

    def take_changes(self) -> CoreChanges:
        """The incidents and log entries changed since the last call, and the incidents whose
        log entries can be forgotten."""
        incidents = [
            (i, self.book.results.get(i.id), self._kinds.get(i.id, "group"))
            for i in self._dirty_incidents.values()
        ]
        changes = CoreChanges(incidents, list(self._dirty_log.values()), sorted(self._forget))
        self._dirty_incidents.clear()
        self._dirty_log.clear()
        self._forget.clear()
        return changes

    def restore(
        self,
        incidents: Iterable[tuple[Incident, GroupResult | None, str]],
        log_entries: Iterable[LogEntry],
        now: int,
    ) -> None:
        """Rebuild from the store after a restart: the incidents, the log, and aggregation
        groups (which flush ``group_wait`` from now; the log keeps them from re-sending)."""
        for entry in log_entries:
            self.log[(entry.route, entry.incident_id)] = entry
            self._log_by_incident.setdefault(entry.incident_id, {})[entry.route] = entry
        for incident, result, kind in incidents:
            self.book.restore(incident, result, kind)
            change = IncidentChange(
                "closed" if incident.closed_at is not None else "updated", incident, result
            )
            self._changed(change, now, kind=kind)
        self._dirty_incidents.clear()

    # ---- groups moving to another instance (fleet)

    def handover(
        self, cluster: str, group: str
    ) -> tuple[Incident, GroupResult | None, list[LogEntry]] | None:
        """The open incident of a group, its latest result and its notification log (None: no
        open incident): what the group's next owner needs to continue it."""
        incident = self.book.open.get((cluster, group))
        if incident is None:
            return None
        entries = list(self._log_by_incident.get(incident.id, {}).values())
        return incident, self.book.results.get(incident.id), entries

    def incident(self, incident_id_: str) -> Incident | None:
        """A live incident (open, or closed and still owed a resolve) by id."""
        return self._live.get(incident_id_)

    def drop(self, incident_ids: Iterable[str]) -> None:
        """Forget live incidents another instance has taken over: they leave their
        aggregation groups unsent, unclosed and unlogged (the new owner continues them)."""
        for incident_id_ in incident_ids:
            incident = self._live.get(incident_id_)
            if incident is None:
                continue
            for key in list(self._incident_groups.get(incident_id_, ())):
                group = self._groups.get(key)
                if group is not None:
                    group.members.discard(incident_id_)
                    if not group.members:
                        self._drop_group(group)
                self._membership.pop((key[0], incident_id_), None)
            if self.book.open.get((incident.cluster, incident.group)) is incident:
                del self.book.open[(incident.cluster, incident.group)]
            # No longer a source for inhibit rules here.
            self.inhibitor.update(dataclasses.replace(incident, closed_at=0), None)
            self._retire(incident_id_)
            self._forget.discard(incident_id_)
            self._dirty_incidents.pop(incident_id_, None)

    # ---- views

    def waiting(self, incident_id_: str, now: int) -> list[dict[str, Any]]:
        """What each route that took a live incident waits for before it notifies it, and
        until when (epoch ms; None: until something changes): one entry per route, each with
        ``route``, ``receiver``, ``reason`` (``group_wait``, ``cluster_down_wait``,
        ``group_interval``, ``silenced``, ``inhibited``, ``below_threshold``, ``sent``: it
        was notified and nothing new is due) and ``until``. Empty: no route took it."""
        incident = self._live.get(incident_id_)
        if incident is None:
            return []
        out = []
        for key in sorted(self._incident_groups.get(incident_id_, ())):
            group = self._groups.get(key)
            if group is None:
                continue
            route = group.route
            reason, until = self._waits_for(group, incident, now)
            out.append({"route": route.id, "receiver": route.receiver, "reason": reason,
                        "until": until})  # fmt: skip
        return out

    def _waits_for(self, group: _AggGroup, incident: Incident, now: int) -> tuple[str, int | None]:
        route = group.route
        if incident.closed_at is None and incident.status.rank < route.threshold.group_status.rank:
            return "below_threshold", None
        if self._inhibited_for(route, incident):
            return "inhibited", None
        silenced_until = max(
            (s.ends_at for s in self.silences.values() if s.active(now) and s.matches(incident)),
            default=None,
        )
        if silenced_until is not None:
            return "silenced", silenced_until
        if group.last_flush is None:
            cluster_alert = self._kinds.get(incident.id) == "cluster"
            return ("cluster_down_wait" if cluster_alert else "group_wait"), group.next_flush
        entry = self.log.get((route.id, incident.id))
        if entry is not None and group.next_flush is None:
            return "sent", None
        return "group_interval", group.next_flush

    def incidents(self, now: int, *, open_only: bool = True) -> list[Incident]:
        """Incidents the core holds (open ones, and closed ones still owed a resolve), with
        ``silenced`` as of ``now``."""
        out = []
        for incident in self._live.values():
            if open_only and incident.closed_at is not None:
                continue
            if incident.closed_at is None:
                self._silence_flag(incident, now)
            out.append(incident)
        return sorted(out, key=lambda i: (i.opened_at, i.id))
