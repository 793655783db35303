"""Notifications: from transitions to messages, the Alertmanager way — one stage per concern.

Three layers, so the backtest can drive the very same decisions with simulated time:

1. **Config** (:class:`NotifyConfig`): receivers (channel configs, secrets from ``${ENV}`` or
   ``{file: path}``), the route tree, static silences, templates, inhibition.
2. **The core** (:class:`IncidentBook`, :class:`Dispatcher`): pure, synchronous, no I/O, no
   clock — every call takes ``now`` (epoch ms). Transitions open, escalate and close
   incidents; routes decide who hears about them; aggregation groups (``group_by``,
   ``group_wait``, ``group_interval``) batch what is due into one :class:`Notification` per
   receiver; the notification log (:class:`~notifier.notify.outbox.LogEntry`) makes planning
   idempotent (``repeat_interval``, "a resolve is never sent for an open that was never
   sent"); silences and cluster-down inhibition hold alerts back without forgetting them.
3. **The service** (:class:`Notifier`): persists the core's changes and the outbox in SQLite
   (:mod:`notifier.notify.outbox`), runs the flush timer and the delivery workers.

Deliberate differences from Burrow's notifier (tested as such): no notification for a healthy
group except as a resolve (Burrow's threshold ``OK`` notifies every evaluation); a resolve
only follows an open this route actually sent (Burrow sends a close for any incident); the
complete-flag gate lives in the evaluator — a partial result never becomes a transition.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import hashlib
import heapq
import json
import logging
import math
import random
import uuid
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from pydantic import (
    ValidationError,
)

from notifier.config import (
    ChannelEntry,
    ConfigError,
    EmailConfig,
    Matcher,
    NotifyConfig,
    RouteConfig,
    SilenceConfig,
    SlackBotConfig,
    SlackWebhookConfig,
    WebhookConfig,
    parse_matchers,
    substitute_env,
)
from notifier.notify.channels import (
    Channel,
    Delivery,
    Email,
    PagerDuty,
    SlackBot,
    SlackMessageRef,
    SlackWebhook,
    TemplateProblem,
    Templates,
    Webhook,
)
from notifier.notify.outbox import (
    ChannelPolicy,
    Deliverer,
    LogEntry,
    NotifyStore,
    OutboxEntry,
    OutboxRow,
    RetryPolicy,
    default_policy,
    log_json,
    notification_from_dict,
    notification_to_dict,
    wall_ms,
)
from notifier.types import (
    Alert,
    Event,
    Finding,
    GroupResult,
    GroupStatus,
    Incident,
    Notification,
    Severity,
    Transition,
)

__all__ = [
    "CLUSTER_GROUP",
    "CoreChanges",
    "DispatchCounters",
    "Dispatcher",
    "IncidentBook",
    "IncidentChange",
    "Matcher",
    "Notifier",
    "NotifyConfig",
    "Planned",
    "Route",
    "RouteConfig",
    "Silence",
    "SilenceError",
    "build_channels",
    "channel_policies",
    "incident_id",
    "make_silence",
    "matches_incident",
    "notification_from_dict",
    "notification_to_dict",
    "parse_matchers",
    "substitute_env",
]

CLUSTER_GROUP = "*"
"""The ``group`` of a cluster-down incident (``prod/*``): one alert standing for every group."""

log = logging.getLogger("notifier.notify")
MAX_INCIDENT_FINDINGS = 200
MIN_TIMED_WAKE_MS = 1000
"""Time-driven flushes (repeats, silence expiry) are at least this far apart, so a
``repeat_interval`` of 0 (Burrow's send-interval 0) cannot spin the flush timer."""


def _ms(seconds: float) -> int:
    return round(seconds * 1000)


def _finding_label(finding: Finding | None, label: str) -> str | None:
    if finding is None:
        return None
    if label == "topic":
        return finding.topic
    if label == "rule":
        return finding.rule
    return finding.severity.value


def matches_incident(matchers: Sequence[Matcher], incident: Incident) -> bool:
    """Cluster/group matchers against the incident; topic/rule/severity matchers against any
    one of its findings (all of them against the same finding)."""
    finding_level = []
    for m in matchers:
        if m.label == "cluster":
            if not m.matches(incident.cluster):
                return False
        elif m.label == "group":
            if not m.matches(incident.group):
                return False
        else:
            finding_level.append(m)
    if not finding_level:
        return True
    candidates: Sequence[Finding | None] = incident.findings or [None]
    return any(
        all(m.matches(_finding_label(f, m.label)) for m in finding_level) for f in candidates
    )



# --------------------------------------------------------------------------------------------
# Building channels


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


def _body_template(value: str | None) -> str | Path | None:
    if value is None:
        return None
    path = Path(value).expanduser()
    return path if path.is_file() else value


def build_channels(
    config: NotifyConfig, templates: Templates | None = None
) -> dict[str, list[Channel]]:
    """receiver name → its channels (named ``receiver/kind``, ``receiver/kind#i`` if repeated),
    sharing one :class:`Templates` (``config.templates`` overrides the shipped ones)."""
    templates = templates or Templates(config.templates)
    out: dict[str, list[Channel]] = {}
    for receiver, named in _channel_names(config).items():
        channels: list[Channel] = []
        for name, entry in named:
            c = entry.config
            if isinstance(c, SlackWebhookConfig):
                channels.append(
                    SlackWebhook(
                        c.url,
                        name=name,
                        templates=templates,
                        timeout=c.timeout,
                        max_alerts=c.max_alerts,
                    )
                )
            elif isinstance(c, SlackBotConfig):
                channels.append(
                    SlackBot(
                        c.token,
                        c.channel,
                        api_url=c.api_url,
                        name=name,
                        templates=templates,
                        timeout=c.timeout,
                        followup=c.followup,
                        max_alerts=c.max_alerts,
                    )
                )
            elif isinstance(c, EmailConfig):
                channels.append(
                    Email(
                        c.host,
                        c.port,
                        sender=c.sender,
                        recipients=c.recipients,
                        username=c.username,
                        password=c.password,
                        tls=c.tls,
                        name=name,
                        templates=templates,
                        timeout=c.timeout,
                        validate_certs=c.validate_certs,
                    )
                )
            elif isinstance(c, WebhookConfig):
                basic = (c.basic_auth.username, c.basic_auth.password) if c.basic_auth else None
                channels.append(
                    Webhook(
                        c.url,
                        method=c.method,
                        headers=c.headers,
                        basic_auth=basic,
                        bearer_token=c.bearer_token,
                        body_template=_body_template(c.body_template),
                        name=name,
                        templates=templates,
                        timeout=c.timeout,
                    )
                )
            else:
                channels.append(
                    PagerDuty(
                        c.routing_key,
                        url=c.url,
                        severity_map=c.severity_map,
                        name=name,
                        templates=templates,
                        timeout=c.timeout,
                    )
                )
        out[receiver] = channels
    return out


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


# --------------------------------------------------------------------------------------------
# The core: routes


@dataclass(slots=True, eq=False)
class Route:
    """A route with its parameters resolved (inherited); times in milliseconds."""

    id: str
    receiver: str
    matchers: tuple[Matcher, ...]
    continue_: bool
    threshold: Severity
    send_resolved: bool
    repeat_interval: float
    group_by: tuple[str, ...] | None
    group_wait: int
    group_interval: int
    children: list[Route] = field(default_factory=list)

    @classmethod
    def build(cls, config: RouteConfig, parent: Route | None = None, path: str = "root") -> Route:
        """Resolve ``config`` under ``parent``: unset parameters are inherited (the root's
        defaults: threshold warn, send_resolved, repeat 4h, group_by [cluster] — so a storm
        of groups failing at once is one message per receiver, as the issue asks —,
        group_wait 30s, group_interval 5m)."""
        if parent is None:
            receiver = config.receiver or ""
            threshold, send_resolved, repeat = Severity.WARN, True, _ms(4 * 3600)
            group_by: tuple[str, ...] | None = ("cluster",)
            group_wait, group_interval = _ms(30), _ms(300)
        else:
            receiver, threshold = parent.receiver, parent.threshold
            send_resolved, repeat = parent.send_resolved, parent.repeat_interval
            group_by, group_wait = parent.group_by, parent.group_wait
            group_interval = parent.group_interval
        if config.group_by is not None:
            group_by = None if config.group_by == ("...",) else config.group_by
        route = cls(
            id=config.name or path,
            receiver=config.receiver or receiver,
            matchers=tuple(config.matchers),
            continue_=config.continue_,
            threshold=config.threshold or threshold,
            send_resolved=send_resolved if config.send_resolved is None else config.send_resolved,
            repeat_interval=repeat
            if config.repeat_interval is None
            else (math.inf if config.repeat_interval == math.inf else _ms(config.repeat_interval)),
            group_by=group_by,
            group_wait=group_wait if config.group_wait is None else _ms(config.group_wait),
            group_interval=group_interval
            if config.group_interval is None
            else _ms(config.group_interval),
        )
        route.children = [
            cls.build(child, route, f"{path}.{index}") for index, child in enumerate(config.routes)
        ]
        return route

    def walk(self) -> Iterable[Route]:
        yield self
        for child in self.children:
            yield from child.walk()

    def match(self, incident: Incident) -> list[Route]:
        """The routes that handle ``incident`` below (and including) this matched node."""
        found: list[Route] = []
        for child in self.children:
            if matches_incident(child.matchers, incident):
                found.extend(child.match(incident))
                if not child.continue_:
                    break
        return found or [self]

    def group_key(self, incident: Incident, *, lane: bool = False) -> str:
        """``{cluster="prod",group="orders"}``: the aggregation group within this route
        (``lane``: without ``status``, which changes during an incident's life)."""
        labels = ("cluster", "group") if self.group_by is None else self.group_by
        if lane:
            labels = tuple(label for label in labels if label != "status")
        values = {"cluster": incident.cluster, "group": incident.group, "status": incident.status}
        return "{" + ",".join(f"{label}={json.dumps(str(values[label]))}" for label in labels) + "}"


# --------------------------------------------------------------------------------------------
# The core: silences


@dataclass(slots=True)
class Silence:
    """Alerts matching every matcher are held back while ``starts_at <= now < ends_at``.

    A silenced incident is still tracked (and shown as silenced); when the silence ends while
    it still fires, it is notified. ``source``: ``config`` or ``api``.
    """

    id: str
    matchers: tuple[Matcher, ...]
    starts_at: int
    ends_at: int
    author: str
    comment: str
    created_at: int
    source: str = "api"

    def active(self, now: int) -> bool:
        return self.starts_at <= now < self.ends_at

    def state(self, now: int) -> str:
        if now < self.starts_at:
            return "pending"
        return "active" if now < self.ends_at else "expired"

    def matches(self, incident: Incident) -> bool:
        return matches_incident(self.matchers, incident)

    def to_dict(self, now: int | None = None) -> dict[str, Any]:
        data: dict[str, Any] = {
            "id": self.id,
            "matchers": [str(m) for m in self.matchers],
            "starts_at": self.starts_at,
            "ends_at": self.ends_at,
            "author": self.author,
            "comment": self.comment,
            "created_at": self.created_at,
            "source": self.source,
        }
        if now is not None:
            data["state"] = self.state(now)
        return data

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Silence:
        matchers = tuple(Matcher.model_validate(m) for m in parse_matchers(data["matchers"]))
        return cls(
            id=data["id"],
            matchers=matchers,
            starts_at=data["starts_at"],
            ends_at=data["ends_at"],
            author=data["author"],
            comment=data["comment"],
            created_at=data["created_at"],
            source=data.get("source", "api"),
        )


class SilenceError(ConfigError):
    """A silence request is invalid; ``problems`` are ``(field, message)`` pairs."""

    def __init__(self, problems: list[tuple[str, str]]) -> None:
        super().__init__("silence", problems)


def make_silence(
    matchers: Any,
    *,
    ends_at: int,
    starts_at: int | None = None,
    author: str,
    comment: str,
    now: int,
    silence_id: str | None = None,
    source: str = "api",
) -> Silence:
    """Validate a silence request (the API's POST body); raises :class:`SilenceError`."""
    problems: list[tuple[str, str]] = []
    parsed: list[Matcher] = []
    try:
        items = parse_matchers(matchers)
    except ValueError as exc:
        items = []
        problems.append(("matchers", str(exc)))
    for index, item in enumerate(items):
        try:
            parsed.append(Matcher.model_validate(item))
        except ValueError as exc:
            message = str(exc)
            if isinstance(exc, ValidationError):
                message = "; ".join(e["msg"].removeprefix("Value error, ") for e in exc.errors())
            problems.append((f"matchers[{index}]", message))
    if not items and not problems:
        problems.append(("matchers", "at least one matcher is required"))
    start = now if starts_at is None else int(starts_at)
    if int(ends_at) <= start:
        problems.append(("ends_at", "must be after starts_at"))
    elif int(ends_at) <= now:
        problems.append(("ends_at", "is in the past: the silence would never be active"))
    if not str(author or "").strip():
        problems.append(("author", "is required"))
    if not str(comment or "").strip():
        problems.append(("comment", "is required"))
    if problems:
        raise SilenceError(problems)
    return Silence(
        id=silence_id or uuid.uuid4().hex,
        matchers=tuple(parsed),
        starts_at=start,
        ends_at=int(ends_at),
        author=str(author).strip(),
        comment=str(comment).strip(),
        created_at=now,
        source=source,
    )


def _config_silence(config: SilenceConfig) -> Silence:
    starts, ends = config.starts_at_ms, config.ends_at_ms
    digest = hashlib.sha256(
        f"{[str(m) for m in config.matchers]}|{starts}|{ends}|{config.author}".encode()
    ).hexdigest()[:16]
    return Silence(
        id=f"config-{digest}",
        matchers=tuple(config.matchers),
        starts_at=starts,
        ends_at=ends,
        author=config.author,
        comment=config.comment,
        created_at=starts,
        source="config",
    )


# --------------------------------------------------------------------------------------------
# The core: incidents


def incident_id(cluster: str, group: str, opened_at: int) -> str:
    """Stable and deterministic (the backtest replays the same ids): a hash of the key and the
    opening time. Used as PagerDuty's dedup_key and the e-mail thread id."""
    return hashlib.blake2b(
        f"{cluster}\x00{group}\x00{opened_at}".encode(), digest_size=16
    ).hexdigest()


@dataclass(slots=True)
class IncidentChange:
    """What a transition did to an incident: ``opened``, ``escalated``, ``updated`` (same or
    lower status, new findings) or ``closed``."""

    kind: Literal["opened", "escalated", "updated", "closed"]
    incident: Incident
    result: GroupResult | None


def _finding_key(f: Finding) -> tuple[Any, ...]:
    return (f.rule, f.kind, f.topic, f.partition)


class IncidentBook:
    """One incident per (cluster, group): opens on the first transition above OK, escalates
    WARN→ERR (``peak_status`` keeps the worst), closes when the group is OK again or gone.

    ``findings`` accumulate over the incident's life (the latest version of each
    rule/topic/partition, in order of first appearance). Cluster-down incidents
    (group :data:`CLUSTER_GROUP`) are kept apart so no real group can collide with them.
    """

    def __init__(self) -> None:
        self.open: dict[tuple[str, str], Incident] = {}
        self.clusters: dict[str, Incident] = {}
        self.results: dict[str, GroupResult | None] = {}

    def apply(self, transition: Transition) -> IncidentChange | None:
        key = transition.key
        incident = self.open.get(key)
        result = transition.result
        current = transition.current
        if transition.gone or current.rank <= GroupStatus.OK.rank:
            if incident is None:
                return None
            del self.open[key]
            incident.closed_at = transition.at
            incident.status = current
            gone = transition.gone or current is GroupStatus.NOTFOUND
            incident.close_reason = "gone" if gone else "recovered"
            self.results[incident.id] = result
            return IncidentChange("closed", incident, result)
        findings = list(result.findings) if result is not None else []
        if incident is None:
            incident = Incident(
                id=incident_id(transition.cluster, transition.group, transition.at),
                cluster=transition.cluster,
                group=transition.group,
                opened_at=transition.at,
                status=current,
                peak_status=current,
                findings=findings[:MAX_INCIDENT_FINDINGS],
            )
            self.open[key] = incident
            self.results[incident.id] = result
            return IncidentChange("opened", incident, result)
        previous = incident.status
        incident.status = current
        if current.rank > incident.peak_status.rank:
            incident.peak_status = current
        self._merge(incident, findings)
        self.results[incident.id] = result
        kind: Literal["escalated", "updated"] = (
            "escalated" if current.rank > previous.rank else "updated"
        )
        return IncidentChange(kind, incident, result)

    @staticmethod
    def _merge(incident: Incident, findings: list[Finding]) -> None:
        if not findings:
            return
        index = {_finding_key(f): i for i, f in enumerate(incident.findings)}
        for finding in findings:
            at = index.get(_finding_key(finding))
            if at is not None:
                incident.findings[at] = finding
            elif len(incident.findings) < MAX_INCIDENT_FINDINGS:
                index[_finding_key(finding)] = len(incident.findings)
                incident.findings.append(finding)

    def cluster_down(self, cluster: str, now: int, reason: str = "") -> IncidentChange | None:
        """Open the cluster's incident (None if it is already down)."""
        if cluster in self.clusters:
            return None
        message = reason or "the cluster cannot be scanned"
        incident = Incident(
            id=incident_id(cluster, CLUSTER_GROUP, now),
            cluster=cluster,
            group=CLUSTER_GROUP,
            opened_at=now,
            status=GroupStatus.ERR,
            peak_status=GroupStatus.ERR,
            findings=[
                Finding(
                    rule="cluster_down",
                    kind="cluster_down",
                    severity=Severity.ERR,
                    status="ERR",
                    message=f"{message}; alerts for its groups are muted until it is back",
                    evidence={"reason": message},
                    since=now,
                )
            ],
        )
        self.clusters[cluster] = incident
        self.results[incident.id] = None
        return IncidentChange("opened", incident, None)

    def cluster_up(self, cluster: str, now: int) -> IncidentChange | None:
        incident = self.clusters.pop(cluster, None)
        if incident is None:
            return None
        incident.closed_at = now
        incident.status = GroupStatus.OK
        incident.close_reason = "cluster reachable again"
        return IncidentChange("closed", incident, None)

    def restore(self, incident: Incident, result: GroupResult | None, kind: str) -> None:
        """Put back an incident loaded from the store (open ones become current again)."""
        self.results[incident.id] = result
        if incident.closed_at is not None:
            return
        if kind == "cluster":
            self.clusters[incident.cluster] = incident
        else:
            self.open[(incident.cluster, incident.group)] = incident


# --------------------------------------------------------------------------------------------
# The core: the dispatcher


@dataclass(slots=True)
class _AggGroup:
    route: Route
    key: str
    created_at: int
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
        status_page_url: str | None = None,
        extras: Mapping[str, Any] | None = None,
    ) -> None:
        self.root = route if isinstance(route, Route) else Route.build(route)
        self.routes = {r.id: r for r in self.root.walk()}
        self.book = IncidentBook()
        self.silences: dict[str, Silence] = {s.id: s for s in silences}
        self.inhibit_cluster_down = inhibit_cluster_down
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
            silences=[_config_silence(s) for s in config.silences],
            inhibit_cluster_down=config.inhibit_cluster_down,
            status_page_url=config.status_page_url,
            extras=config.extras,
        )

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

    def cluster_up(self, cluster: str, now: int) -> Incident | None:
        change = self.book.cluster_up(cluster, now)
        if change is None:
            return None
        self._changed(change, now, kind="cluster")
        # Its groups may owe notifications that were inhibited: look again soon.
        for key, group in self._groups.items():
            if any(self._live[i].cluster == cluster for i in group.members if i in self._live):
                self._touch(key, now)
        return change.incident

    def add_silence(self, silence: Silence, now: int) -> None:
        """Hold back matching alerts from ``silence.starts_at`` (flags update at once)."""
        self.silences[silence.id] = silence
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
        due: list[tuple[Event, Incident]] = []
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
                    due.append((Event.RESOLVE, incident))
                done.append(incident.id)
                continue
            if incident.status.rank < threshold:
                continue  # below this route's threshold; a status change touches the group
            next_repeat = math.inf
            if entry is None:
                event: Event | None = Event.OPEN
            elif incident.status.rank > entry.sent_status.rank:
                event = Event.ESCALATE
            else:
                event = None
                next_repeat = entry.last_sent_at + route.repeat_interval
            held, until = self._held(incident, now)
            if held is not None:
                if event is not None or next_repeat <= now:
                    self.counters.held[held] += 1
                wake = min(wake, until)
            elif event is not None:
                due.append((event, incident))
            else:
                firing.append(incident)
                if next_repeat <= now:
                    repeat_due = True
                else:
                    wake = min(wake, next_repeat)
        if repeat_due:
            # Coalesce: when one firing alert repeats, the group's other firing alerts ride
            # along, so repeats stay batched like the opens were.
            due.extend((Event.REPEAT, incident) for incident in firing)
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

    def _held(self, incident: Incident, now: int) -> tuple[str | None, float]:
        """Why ``incident`` is held back at ``now`` (``silenced``/``inhibited``) and until
        when at the earliest it might not be (∞: until something happens)."""
        if (
            self.inhibit_cluster_down
            and incident.group != CLUSTER_GROUP
            and incident.cluster in self.book.clusters
        ):
            return "inhibited", math.inf
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
        self, group: _AggGroup, due: list[tuple[Event, Incident]], now: int
    ) -> Notification:
        route = group.route
        alerts = []
        for event, incident in due:
            snapshot = dataclasses.replace(incident, findings=list(incident.findings))
            alerts.append(Alert(event, snapshot, self.book.results.get(incident.id)))
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
        self._dirty_log[key] = entry

    # ---- groups and membership

    def _changed(self, change: IncidentChange, now: int, kind: str = "group") -> None:
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
        routes = {r.id: r for r in self.root.match(incident)}
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
        key = (route.id, route.group_key(incident))
        old = self._membership.get((route.id, incident.id))
        if old is not None and old != key:
            self._leave(self._groups[old], incident.id)
        group = self._groups.get(key)
        if group is None:
            group = self._groups[key] = _AggGroup(route, key[1], created_at=now)
        group.members.add(incident.id)
        self._membership[(route.id, incident.id)] = key
        self._incident_groups.setdefault(incident.id, set()).add(key)
        self._touch(key, now)

    def _touch(self, key: _GroupKey, now: int) -> None:
        group = self._groups[key]
        if group.last_flush is None:
            due = group.created_at + group.route.group_wait
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

    # ---- views

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


# --------------------------------------------------------------------------------------------
# The service


@dataclass(slots=True)
class _SendHook:
    """Keeps Slack message refs from each bot delivery, so follow-ups find the original."""

    store: NotifyStore

    def __call__(self, channel: Channel, row: OutboxRow, delivery: Delivery) -> None:
        if not isinstance(channel, SlackBot):
            return
        refs: dict[str, SlackMessageRef] = {}
        for message in delivery.meta.get("messages", []):
            root = message.get("method") == "chat.postMessage" and not message.get("thread_ts")
            if root and message.get("channel") and message.get("ts"):
                ref = SlackMessageRef(str(message["channel"]), str(message["ts"]))
                for incident in message.get("incident_ids", []):
                    refs[incident] = ref
        self.store.save_slack_refs(channel.name, refs)


class Notifier:
    """The notification service as the coordinator sees it.

    ``handle`` / ``cluster_down`` / ``cluster_up`` feed the core and persist what changed at
    once; a flush task turns due groups into outbox rows (committed with the log entries that
    planned them) and hands them to the :class:`~notifier.notify.outbox.Deliverer`. A restart on the
    same database resumes pending rows and neither re-plans what was sent nor forgets what
    was open.

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
            self.core.add_silence(Silence.from_dict(data), now)
        incidents, entries = self.store.load_live()
        self.core.restore(incidents, entries, now)
        self.channels: dict[str, list[Channel]] = (
            {k: list(v) for k, v in channels.items()}
            if channels is not None
            else build_channels(config, self.templates)
        )
        by_name: dict[str, Channel] = {}
        for chs in self.channels.values():
            for channel in chs:
                if channel.name in by_name and by_name[channel.name] is not channel:
                    raise ValueError(f"two channels are named {channel.name!r}")
                by_name[channel.name] = channel
                if isinstance(channel, SlackBot) and channel.lookup is None:
                    channel.lookup = self._slack_lookup(channel.name)
        if policies is None:
            policies = channel_policies(config, self.channels)
        d = config.delivery
        self.deliverer = Deliverer(
            self.store,
            by_name,
            policies=policies,
            retry=RetryPolicy(
                initial=d.retry_initial, cap=d.retry_max, give_up_after=d.give_up_after
            ),
            clock=clock,
            rng=rng,
            on_result=_SendHook(self.store),
        )
        self._wake = asyncio.Event()
        self._ticker: asyncio.Task[None] | None = None
        self._last_prune = 0
        self._closed = False

    def _slack_lookup(self, name: str) -> Callable[[Incident], SlackMessageRef | None]:
        def lookup(incident: Incident) -> SlackMessageRef | None:
            return self.store.slack_ref(name, incident.id)

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
                self.flush_due(now)
                if now - self._last_prune > 3_600_000:
                    self._last_prune = now
                    self._housekeeping(now)
            except Exception:  # keep the timer alive; the next round retries
                log.exception("notification flush failed")
            due = self.core.next_due()
            delay = 60.0 if due is None else min(60.0, max(0.0, (due - self.clock()) / 1000))
            # asyncio.timeout, not wait_for: in Python 3.11 wait_for can swallow the
            # cancellation stop() sends if the wake-up comes at the same moment.
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(delay):
                    await self._wake.wait()

    def _housekeeping(self, now: int) -> None:
        """Forget finished outbox rows, closed incidents and API silences past retention."""
        before = now - _ms(self.config.delivery.outbox_retention)
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
        self._persist()
        self._wake.set()

    def cluster_down(self, cluster: str, now: int | None = None, reason: str = "") -> None:
        self.core.cluster_down(cluster, self.clock() if now is None else now, reason)
        self._persist()
        self._wake.set()

    def cluster_up(self, cluster: str, now: int | None = None) -> None:
        self.core.cluster_up(cluster, self.clock() if now is None else now)
        self._persist()
        self._wake.set()

    def flush_due(self, now: int | None = None) -> list[Notification]:
        """Plan what is due at ``now``, write it to the outbox (with the log entries, in one
        transaction) and hand it to the workers. The flush task calls this."""
        now = self.clock() if now is None else now
        planned = self.core.plan(now)
        entries = []
        for item in planned:
            notification = item.notification
            channels = self.channels.get(notification.receiver, [])
            if not channels:
                log_json(
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
        return self.store.save(changes.incidents, changes.log, changes.forget, entries)

    # ---- views and silences (the API's interface)

    def incidents(self, open_only: bool = True, limit: int = 1000) -> list[Incident]:
        """Open incidents (with ``silenced`` as of now), or the history, newest first."""
        if open_only:
            return self.core.incidents(self.clock(), open_only=True)
        live = {i.id: i for i in self.core.incidents(self.clock(), open_only=False)}
        stored = self.store.incidents(limit=limit)
        return [live.get(i.id, i) for i in stored]

    def add_silence(
        self,
        matchers: Any,
        *,
        ends_at: int,
        starts_at: int | None = None,
        author: str,
        comment: str,
    ) -> Silence:
        """Create a silence (raises :class:`SilenceError` naming each bad field)."""
        silence = make_silence(
            matchers,
            ends_at=ends_at,
            starts_at=starts_at,
            author=author,
            comment=comment,
            now=self.clock(),
        )
        self.store.save_silence(silence.id, silence.to_dict())
        self.core.add_silence(silence, self.clock())
        return silence

    def list_silences(self, *, include_expired: bool = True) -> list[Silence]:
        now = self.clock()
        silences = sorted(self.core.silences.values(), key=lambda s: (s.starts_at, s.id))
        return [s for s in silences if include_expired or s.state(now) != "expired"]

    def delete_silence(self, silence_id: str) -> Silence:
        """Delete an API silence; a config silence must be removed from the config."""
        silence = self.core.silences.get(silence_id)
        if silence is None:
            raise SilenceError([("id", f"no silence {silence_id!r}")])
        if silence.source == "config":
            raise SilenceError([("id", "defined in the config file; remove it there")])
        self.core.delete_silence(silence_id, self.clock())
        self.store.delete_silence(silence_id)
        self._wake.set()
        return silence

    def check(self) -> list[TemplateProblem]:
        """Render every template with sample data (and each webhook's body template)."""
        problems = self.templates.render_check()
        seen = {p.template for p in problems}
        for channels in self.channels.values():
            for channel in channels:
                name = getattr(channel, "body_template", None)
                if isinstance(channel, Webhook) and name and name not in seen:
                    for problem in channel.templates.render_check([name]):
                        problems.append(problem)
                        seen.add(problem.template)
        return problems

    def metrics(self) -> dict[str, Any]:
        """Delivery counters (per channel), outbox depth, oldest pending age, and what the
        core decided (for the API to export)."""
        return {
            **self.deliverer.metrics.snapshot(self.clock()),
            "planned": self.core.counters.snapshot(),
            "open_incidents": len(self.core.book.open),
            "clusters_down": sorted(self.core.book.clusters),
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
