"""The durable half of notifications: the SQLite store, the outbox and the delivery workers.

:mod:`notifier.notify.notifier` decides *what* to send (a pure, clock-free core); this module makes
sure it *arrives*. Every notification is written to the outbox in the same transaction as the
notification-log entries that say it was sent, so a crash can lose neither: after a restart
the log stops it from being planned twice and the outbox still holds it until a channel
accepts it. Delivery is at-least-once — a row is marked sent only after the receiver said
yes, so a crash between the two re-sends it, and receivers dedupe what they can (PagerDuty by
``dedup_key``, Slack by updating the original message).

Workers keep one lane per (channel, receiver, group key): rows in a lane go out strictly in
order (a retry blocks the lane behind it, so a resolve never overtakes its open), while lanes
run concurrently up to the channel's ``concurrency`` and share the channel's token bucket
(Slack about 1/s per channel, PagerDuty 120/min per routing key). Retryable failures back off
exponentially with full jitter, never sooner than the receiver's ``Retry-After``; final
failures are marked ``failed``, logged as one JSON line and counted — never dropped silently.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
import math
import random
import sqlite3
import time
from collections import Counter, OrderedDict, deque
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from notifier.config import Rate
from notifier.notify import jsonenc
from notifier.notify.channels import (
    Channel,
    Delivery,
    Email,
    PagerDuty,
    SlackBot,
    SlackMessageRef,
    SlackWebhook,
    Webhook,
)
from notifier.types import (
    Alert,
    CommitPoint,
    Event,
    Finding,
    GroupResult,
    GroupStatus,
    Incident,
    Notification,
    PartitionResult,
    PartitionStatus,
    Severity,
)

__all__ = [
    "ChannelPolicy",
    "Deliverer",
    "DeliveryMetrics",
    "LogEntry",
    "NotifyStore",
    "OutboxEntry",
    "OutboxRow",
    "Rate",
    "RetryPolicy",
    "TokenBucket",
    "backoff_delay",
    "default_policy",
    "notification_from_dict",
    "notification_to_dict",
    "result_from_dict",
    "result_to_dict",
]

log = logging.getLogger("notifier.notify")


def wall_ms() -> int:
    """The default clock: epoch milliseconds."""
    return int(time.time() * 1000)


def log_json(level: int, event: str, **fields: Any) -> None:
    """One structured log line (a JSON object), so failures can be counted and searched."""
    if log.isEnabledFor(level):
        log.log(level, json.dumps({"event": event, **fields}, default=str, ensure_ascii=False))


# --------------------------------------------------------------------------------------------
# Serialisation: Notification <-> plain JSON-able dicts (the outbox body format)


def finding_from_dict(d: Mapping[str, Any]) -> Finding:
    return Finding(
        rule=d["rule"],
        kind=d["kind"],
        severity=Severity(d["severity"]),
        status=d["status"],
        topic=d.get("topic"),
        partition=d.get("partition"),
        message=d.get("message", ""),
        evidence=dict(d.get("evidence") or {}),
        since=d.get("since"),
    )


def _point_to_dict(p: CommitPoint | None) -> dict[str, Any] | None:
    return None if p is None else {"offset": p.offset, "timestamp": p.timestamp, "lag": p.lag}


def _point_from_dict(d: Mapping[str, Any] | None) -> CommitPoint | None:
    return None if d is None else CommitPoint(d["offset"], d["timestamp"], d.get("lag"))


def _partition_to_dict(p: PartitionResult) -> dict[str, Any]:
    return {
        "topic": p.topic,
        "partition": p.partition,
        "status": p.status.value,
        "complete": p.complete,
        "burrow_complete": p.burrow_complete,
        "committed_offset": p.committed_offset,
        "log_end_offset": p.log_end_offset,
        "log_start_offset": p.log_start_offset,
        "current_lag": p.current_lag,
        "lag_seconds": p.lag_seconds,
        "start": _point_to_dict(p.start),
        "end": _point_to_dict(p.end),
        "owner": p.owner,
        "client_id": p.client_id,
    }


def _partition_from_dict(d: Mapping[str, Any]) -> PartitionResult:
    return PartitionResult(
        topic=d["topic"],
        partition=d["partition"],
        status=PartitionStatus(d["status"]),
        complete=d["complete"],
        burrow_complete=d["burrow_complete"],
        committed_offset=d.get("committed_offset"),
        log_end_offset=d["log_end_offset"],
        log_start_offset=d.get("log_start_offset"),
        current_lag=d.get("current_lag"),
        lag_seconds=d.get("lag_seconds"),
        start=_point_from_dict(d.get("start")),
        end=_point_from_dict(d.get("end")),
        owner=d.get("owner", ""),
        client_id=d.get("client_id", ""),
    )


def result_to_dict(r: GroupResult) -> dict[str, Any]:
    """A :class:`GroupResult` as plain data; ``max_lag`` is kept as an index into partitions
    when it is one of them (it normally is), so large groups are not stored twice."""
    max_lag: Any = None
    if r.max_lag is not None:
        index = next((i for i, p in enumerate(r.partitions) if p is r.max_lag), None)
        max_lag = {"index": index} if index is not None else _partition_to_dict(r.max_lag)
    return {
        "cluster": r.cluster,
        "group": r.group,
        "status": r.status.value,
        "complete": r.complete,
        "burrow_complete": r.burrow_complete,
        "partial": r.partial,
        "evaluated_at": r.evaluated_at,
        "partitions": [_partition_to_dict(p) for p in r.partitions],
        "findings": [f.to_dict() for f in r.findings],
        "total_lag": r.total_lag,
        "max_lag": max_lag,
        "max_lag_seconds": r.max_lag_seconds,
        "group_state": r.group_state,
        "members": r.members,
    }


def result_from_dict(d: Mapping[str, Any]) -> GroupResult:
    partitions = [_partition_from_dict(p) for p in d.get("partitions", [])]
    raw = d.get("max_lag")
    max_lag: PartitionResult | None = None
    if isinstance(raw, Mapping):
        index = raw.get("index")
        max_lag = partitions[index] if index is not None else _partition_from_dict(raw)
    return GroupResult(
        cluster=d["cluster"],
        group=d["group"],
        status=GroupStatus(d["status"]),
        complete=d["complete"],
        burrow_complete=d["burrow_complete"],
        partial=d["partial"],
        evaluated_at=d["evaluated_at"],
        partitions=partitions,
        findings=[finding_from_dict(f) for f in d.get("findings", [])],
        total_lag=d.get("total_lag", 0),
        max_lag=max_lag,
        max_lag_seconds=d.get("max_lag_seconds"),
        group_state=d.get("group_state", "Unknown"),
        members=d.get("members", 0),
    )


def incident_to_dict(i: Incident) -> dict[str, Any]:
    return {
        "id": i.id,
        "cluster": i.cluster,
        "group": i.group,
        "opened_at": i.opened_at,
        "status": i.status.value,
        "peak_status": i.peak_status.value,
        "closed_at": i.closed_at,
        "close_reason": i.close_reason,
        "findings": [f.to_dict() for f in i.findings],
        "silenced": i.silenced,
    }


def incident_from_dict(d: Mapping[str, Any]) -> Incident:
    return Incident(
        id=d["id"],
        cluster=d["cluster"],
        group=d["group"],
        opened_at=d["opened_at"],
        status=GroupStatus(d["status"]),
        peak_status=GroupStatus(d["peak_status"]),
        closed_at=d.get("closed_at"),
        close_reason=d.get("close_reason"),
        findings=[finding_from_dict(f) for f in d.get("findings", [])],
        silenced=bool(d.get("silenced", False)),
    )


def notification_to_dict(n: Notification) -> dict[str, Any]:
    """A :class:`Notification` as plain data (what the outbox stores, as JSON)."""
    return {
        "id": n.id,
        "receiver": n.receiver,
        "group_key": n.group_key,
        "created_at": n.created_at,
        "status_page_url": n.status_page_url,
        "extras": n.extras,
        "alerts": [
            {
                "event": a.event.value,
                "incident": incident_to_dict(a.incident),
                "result": None if a.result is None else result_to_dict(a.result),
            }
            for a in n.alerts
        ],
    }


def notification_from_dict(d: Mapping[str, Any]) -> Notification:
    """The inverse of :func:`notification_to_dict`."""
    return Notification(
        id=d["id"],
        receiver=d["receiver"],
        group_key=d["group_key"],
        created_at=d["created_at"],
        status_page_url=d.get("status_page_url"),
        extras=dict(d.get("extras") or {}),
        alerts=[
            Alert(
                event=Event(a["event"]),
                incident=incident_from_dict(a["incident"]),
                result=None if a.get("result") is None else result_from_dict(a["result"]),
            )
            for a in d["alerts"]
        ],
    )


# --------------------------------------------------------------------------------------------
# The store


@dataclass(slots=True)
class LogEntry:
    """The notification log: what one route last told its receiver about one incident.

    An entry exists once something was sent (so its open was sent); ``sent_status`` is the
    worst status notified (an escalation is a status above it), ``resolved`` is set once the
    resolve went out. Like Alertmanager's nflog, this is what makes planning idempotent.
    """

    route: str
    incident_id: str
    sent_status: GroupStatus
    last_event: Event
    last_sent_at: int
    resolved: bool = False


@dataclass(slots=True)
class OutboxEntry:
    """A notification to write to the outbox for one channel (before it has an id)."""

    notification: Notification
    channel: str
    lane: str


@dataclass(slots=True)
class OutboxRow:
    """A pending outbox row as the workers see it; the body is parsed lazily after a restart."""

    id: int
    channel: str
    lane: str
    created_at: int
    notification_id: str
    attempts: int = 0
    next_attempt_at: int = 0
    body: str | None = None
    _notification: Notification | None = None

    @property
    def notification(self) -> Notification:
        if self._notification is None:
            assert self.body is not None
            self._notification = notification_from_dict(json.loads(self.body))
        return self._notification


_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS incidents (
    id TEXT PRIMARY KEY,
    kind TEXT NOT NULL,
    cluster TEXT NOT NULL,
    grp TEXT NOT NULL,
    opened_at INTEGER NOT NULL,
    closed_at INTEGER,
    status TEXT NOT NULL,
    peak_status TEXT NOT NULL,
    close_reason TEXT,
    silenced INTEGER NOT NULL DEFAULT 0,
    findings TEXT NOT NULL,
    result TEXT
);
CREATE INDEX IF NOT EXISTS incidents_open ON incidents (closed_at, opened_at);
CREATE TABLE IF NOT EXISTS notify_log (
    route TEXT NOT NULL,
    incident_id TEXT NOT NULL,
    sent_status TEXT NOT NULL,
    last_event TEXT NOT NULL,
    last_sent_at INTEGER NOT NULL,
    resolved INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (route, incident_id)
);
CREATE INDEX IF NOT EXISTS notify_log_incident ON notify_log (incident_id);
CREATE TABLE IF NOT EXISTS silences (
    id TEXT PRIMARY KEY,
    body TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS outbox (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    notification_id TEXT NOT NULL,
    receiver TEXT NOT NULL,
    channel TEXT NOT NULL,
    lane TEXT NOT NULL,
    created_at INTEGER NOT NULL,
    body TEXT NOT NULL,
    state TEXT NOT NULL DEFAULT 'pending',
    attempts INTEGER NOT NULL DEFAULT 0,
    next_attempt_at INTEGER NOT NULL DEFAULT 0,
    last_error TEXT,
    done_at INTEGER
);
CREATE INDEX IF NOT EXISTS outbox_state ON outbox (state, id);
CREATE TABLE IF NOT EXISTS slack_refs (
    channel TEXT NOT NULL,
    incident_id TEXT NOT NULL,
    slack_channel TEXT NOT NULL,
    ts TEXT NOT NULL,
    PRIMARY KEY (channel, incident_id)
);
"""

SCHEMA_VERSION = "1"


class NotifyStore:
    """Incidents, the notification log, silences, the outbox and Slack message refs in SQLite.

    One connection, used from one thread (the event loop's): the core's state changes and the
    outbox rows they produce commit together (:meth:`save`); delivery outcomes are buffered
    and committed in small batches (:meth:`flush`), which at worst re-sends a few rows after a
    crash — never loses one. WAL mode keeps readers (the API) off the writer's back.
    """

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.db = sqlite3.connect(str(self.path), isolation_level=None, check_same_thread=False)
        self.db.execute("PRAGMA journal_mode=WAL")
        self.db.execute("PRAGMA synchronous=NORMAL")
        self.db.execute("PRAGMA busy_timeout=5000")
        self.db.executescript(_SCHEMA)
        self.db.execute(
            "INSERT OR IGNORE INTO meta (key, value) VALUES ('schema', ?)", (SCHEMA_VERSION,)
        )
        self._ops: list[tuple[str, tuple[Any, ...]]] = []
        self._slack_cache: dict[tuple[str, str], SlackMessageRef | None] = {}

    def close(self) -> None:
        self.flush()
        self.db.close()

    # ---- core state + outbox, atomically

    def save(
        self,
        incidents: Iterable[tuple[Incident, GroupResult | None, str]] = (),
        log_entries: Iterable[LogEntry] = (),
        forget: Iterable[str] = (),
        outbox: Iterable[OutboxEntry] = (),
    ) -> list[OutboxRow]:
        """Commit state changes and new outbox rows in one transaction; returns the rows."""
        rows: list[OutboxRow] = []
        bodies: dict[str, str] = {}
        db = self.db
        db.execute("BEGIN")
        try:
            db.executemany(
                "INSERT INTO incidents (id, kind, cluster, grp, opened_at, closed_at, status,"
                " peak_status, close_reason, silenced, findings, result)"
                " VALUES (?,?,?,?,?,?,?,?,?,?,?,?) ON CONFLICT(id) DO UPDATE SET"
                " closed_at=excluded.closed_at, status=excluded.status,"
                " peak_status=excluded.peak_status, close_reason=excluded.close_reason,"
                " silenced=excluded.silenced, findings=excluded.findings,"
                " result=excluded.result",
                [
                    (
                        i.id,
                        kind,
                        i.cluster,
                        i.group,
                        i.opened_at,
                        i.closed_at,
                        i.status.value,
                        i.peak_status.value,
                        i.close_reason,
                        int(i.silenced),
                        jsonenc.dumps([f.to_dict() for f in i.findings]),
                        None if r is None else jsonenc.dumps(result_to_dict(r)),
                    )
                    for i, r, kind in incidents
                ],
            )
            db.executemany(
                "INSERT INTO notify_log (route, incident_id, sent_status, last_event,"
                " last_sent_at, resolved) VALUES (?,?,?,?,?,?) ON CONFLICT(route, incident_id)"
                " DO UPDATE SET sent_status=excluded.sent_status,"
                " last_event=excluded.last_event, last_sent_at=excluded.last_sent_at,"
                " resolved=excluded.resolved",
                [
                    (
                        e.route,
                        e.incident_id,
                        e.sent_status.value,
                        e.last_event.value,
                        e.last_sent_at,
                        int(e.resolved),
                    )
                    for e in log_entries
                ],
            )
            db.executemany("DELETE FROM notify_log WHERE incident_id = ?", [(i,) for i in forget])
            for entry in outbox:
                n = entry.notification
                body = bodies.get(n.id)
                if body is None:
                    body = bodies[n.id] = jsonenc.dumps(notification_to_dict(n))
                cursor = db.execute(
                    "INSERT INTO outbox (notification_id, receiver, channel, lane, created_at,"
                    " body) VALUES (?,?,?,?,?,?)",
                    (n.id, n.receiver, entry.channel, entry.lane, n.created_at, body),
                )
                row_id = cursor.lastrowid
                assert row_id is not None
                rows.append(
                    OutboxRow(
                        id=row_id,
                        channel=entry.channel,
                        lane=entry.lane,
                        created_at=n.created_at,
                        notification_id=n.id,
                        _notification=n,
                    )
                )
            db.execute("COMMIT")
        except BaseException:
            db.execute("ROLLBACK")
            raise
        return rows

    def load_live(self) -> tuple[list[tuple[Incident, GroupResult | None, str]], list[LogEntry]]:
        """What the core needs after a restart: open incidents, closed ones whose resolve is
        still owed to some route, and their notification-log entries."""
        cursor = self.db.execute(
            "SELECT id, kind, cluster, grp, opened_at, closed_at, status, peak_status,"
            " close_reason, silenced, findings, result FROM incidents WHERE closed_at IS NULL"
            " OR id IN (SELECT incident_id FROM notify_log WHERE resolved = 0)"
            " ORDER BY opened_at, id"
        )
        incidents = [self._incident_row(row) for row in cursor]
        ids = {i.id for i, _r, _k in incidents}
        entries = [
            LogEntry(
                route=row[0],
                incident_id=row[1],
                sent_status=GroupStatus(row[2]),
                last_event=Event(row[3]),
                last_sent_at=row[4],
                resolved=bool(row[5]),
            )
            for row in self.db.execute(
                "SELECT route, incident_id, sent_status, last_event, last_sent_at, resolved"
                " FROM notify_log"
            )
            if row[1] in ids
        ]
        return incidents, entries

    @staticmethod
    def _incident_row(row: tuple[Any, ...]) -> tuple[Incident, GroupResult | None, str]:
        incident = Incident(
            id=row[0],
            cluster=row[2],
            group=row[3],
            opened_at=row[4],
            closed_at=row[5],
            status=GroupStatus(row[6]),
            peak_status=GroupStatus(row[7]),
            close_reason=row[8],
            silenced=bool(row[9]),
            findings=[finding_from_dict(f) for f in json.loads(row[10])],
        )
        result = None if row[11] is None else result_from_dict(json.loads(row[11]))
        return incident, result, row[1]

    def incidents(self, *, open_only: bool = False, limit: int = 1000) -> list[Incident]:
        """Incidents newest first (history included unless ``open_only``)."""
        where = "WHERE closed_at IS NULL" if open_only else ""
        cursor = self.db.execute(
            "SELECT id, kind, cluster, grp, opened_at, closed_at, status, peak_status,"
            f" close_reason, silenced, findings, NULL FROM incidents {where}"
            " ORDER BY opened_at DESC, id LIMIT ?",
            (limit,),
        )
        return [self._incident_row(row)[0] for row in cursor]

    # ---- silences (those created through the API; config silences live in the config)

    def save_silence(self, silence_id: str, body: Mapping[str, Any]) -> None:
        self.db.execute(
            "INSERT OR REPLACE INTO silences (id, body) VALUES (?, ?)",
            (silence_id, jsonenc.dumps(body)),
        )

    def delete_silence(self, silence_id: str) -> bool:
        return self.db.execute("DELETE FROM silences WHERE id = ?", (silence_id,)).rowcount > 0

    def load_silences(self) -> list[dict[str, Any]]:
        return [json.loads(row[0]) for row in self.db.execute("SELECT body FROM silences")]

    # ---- the outbox

    def pending(self) -> list[OutboxRow]:
        """Pending rows in id order (per lane, the order they must go out in)."""
        self.flush()
        return [
            OutboxRow(
                id=row[0],
                channel=row[1],
                lane=row[2],
                created_at=row[3],
                notification_id=row[4],
                attempts=row[5],
                next_attempt_at=row[6],
                body=row[7],
            )
            for row in self.db.execute(
                "SELECT id, channel, lane, created_at, notification_id, attempts,"
                " next_attempt_at, body FROM outbox WHERE state = 'pending' ORDER BY id"
            )
        ]

    def mark_sent(self, row_id: int, at: int, attempts: int) -> None:
        self._ops.append(
            (
                "UPDATE outbox SET state='sent', done_at=?, attempts=?, last_error=NULL WHERE id=?",
                (at, attempts, row_id),
            )
        )

    def mark_retry(self, row_id: int, attempts: int, next_attempt_at: int, error: str) -> None:
        self._ops.append(
            (
                "UPDATE outbox SET attempts=?, next_attempt_at=?, last_error=? WHERE id=?",
                (attempts, next_attempt_at, error, row_id),
            )
        )

    def mark_failed(self, row_id: int, at: int, attempts: int, error: str) -> None:
        self._ops.append(
            (
                "UPDATE outbox SET state='failed', done_at=?, attempts=?, last_error=? WHERE id=?",
                (at, attempts, error, row_id),
            )
        )

    @property
    def unflushed(self) -> int:
        return len(self._ops)

    def flush(self) -> None:
        """Commit buffered delivery outcomes (one transaction)."""
        if not self._ops:
            return
        ops, self._ops = self._ops, []
        self.db.execute("BEGIN")
        try:
            for sql, params in ops:
                self.db.execute(sql, params)
            self.db.execute("COMMIT")
        except BaseException:
            self.db.execute("ROLLBACK")
            raise

    def outbox_counts(self) -> dict[str, int]:
        self.flush()
        return {
            state: count
            for state, count in self.db.execute("SELECT state, COUNT(*) FROM outbox GROUP BY state")
        }

    def outbox_rows(self, state: str | None = None) -> list[dict[str, Any]]:
        """Rows for inspection (tests, the API): id, notification_id, channel, state, ..."""
        self.flush()
        where, params = ("WHERE state = ?", (state,)) if state else ("", ())
        cursor = self.db.execute(
            "SELECT id, notification_id, receiver, channel, lane, created_at, state, attempts,"
            f" last_error, done_at FROM outbox {where} ORDER BY id",
            params,
        )
        names = [d[0] for d in cursor.description]
        return [dict(zip(names, row)) for row in cursor]

    def prune(self, before: int) -> int:
        """Forget finished outbox rows and closed incidents older than ``before`` (ms)."""
        self.flush()
        removed = self.db.execute(
            "DELETE FROM outbox WHERE state != 'pending' AND done_at < ?", (before,)
        ).rowcount
        self.db.execute(
            "DELETE FROM incidents WHERE closed_at IS NOT NULL AND closed_at < ? AND id NOT IN"
            " (SELECT incident_id FROM notify_log)",
            (before,),
        )
        self.db.execute(
            "DELETE FROM slack_refs WHERE incident_id NOT IN (SELECT id FROM incidents)"
        )
        return removed

    # ---- Slack message refs (so a follow-up updates the original message)

    def slack_ref(self, channel: str, incident_id: str) -> SlackMessageRef | None:
        key = (channel, incident_id)
        if key not in self._slack_cache:
            row = self.db.execute(
                "SELECT slack_channel, ts FROM slack_refs WHERE channel=? AND incident_id=?",
                key,
            ).fetchone()
            self._slack_cache[key] = None if row is None else SlackMessageRef(row[0], row[1])
        return self._slack_cache[key]

    def save_slack_refs(self, channel: str, refs: Mapping[str, SlackMessageRef]) -> None:
        """Written through at once: the next follow-up may be planned a moment later."""
        if not refs:
            return
        self.db.executemany(
            "INSERT OR REPLACE INTO slack_refs (channel, incident_id, slack_channel, ts)"
            " VALUES (?,?,?,?)",
            [(channel, incident, ref.channel, ref.ts) for incident, ref in refs.items()],
        )
        for incident, ref in refs.items():
            self._slack_cache[(channel, incident)] = ref


# --------------------------------------------------------------------------------------------
# Rate limits, backoff and channel policies



class TokenBucket:
    """An async token bucket: ``rate.count`` tokens, refilled at ``rate.per_second``.

    Waiters are served in arrival order. :meth:`pause` holds everyone back — what a 429 with
    ``Retry-After`` asks for, since the limit is the receiver's, not one lane's.
    """

    def __init__(self, rate: Rate, clock: Callable[[], float] = time.monotonic) -> None:
        self.rate = rate
        self.capacity = max(1.0, rate.count)
        self.tokens = self.capacity
        self.clock = clock
        self.updated = clock()
        self.paused_until = 0.0
        self._lock = asyncio.Lock()

    def _refill(self, now: float) -> None:
        self.tokens = min(self.capacity, self.tokens + (now - self.updated) * self.rate.per_second)
        self.updated = now

    async def acquire(self, cost: float = 1.0) -> None:
        cost = min(max(cost, 0.0), self.capacity)
        async with self._lock:
            while True:
                now = self.clock()
                if now < self.paused_until:
                    await asyncio.sleep(self.paused_until - now)
                    continue
                self._refill(now)
                if self.tokens >= cost:
                    self.tokens -= cost
                    return
                await asyncio.sleep((cost - self.tokens) / self.rate.per_second)

    def pause(self, seconds: float) -> None:
        self.paused_until = max(self.paused_until, self.clock() + seconds)


@dataclass(slots=True, frozen=True)
class RetryPolicy:
    """Exponential backoff with full jitter: attempt *n* waits uniform(0, min(cap, initial·2ⁿ⁻¹)),
    but never less than the receiver's ``Retry-After``; after ``give_up_after`` seconds
    of trying, a row is marked failed (and reported)."""

    initial: float = 1.0
    cap: float = 300.0
    give_up_after: float = 86400.0
    max_retry_after: float = 3600.0


def backoff_delay(
    attempt: int, policy: RetryPolicy, rng: random.Random, retry_after: float | None = None
) -> float:
    """Seconds to wait before attempt ``attempt + 1`` (``attempt`` ≥ 1 failures so far)."""
    ceiling = min(policy.cap, policy.initial * 2 ** min(attempt - 1, 62))
    delay = rng.uniform(0.0, ceiling)
    if retry_after is not None:
        delay = max(delay, min(retry_after, policy.max_retry_after))
    return delay


@dataclass(slots=True, frozen=True)
class ChannelPolicy:
    """How one channel is driven: its rate (``None``: unlimited), lanes in flight at once, and
    the bucket it shares (channels that hit the same receiver limit share one bucket)."""

    rate: Rate | None
    concurrency: int
    bucket: str


def _digest(*parts: str) -> str:
    return hashlib.sha256("\x00".join(parts).encode()).hexdigest()[:16]


def default_policy(channel: Channel) -> ChannelPolicy:
    """The receivers' documented limits: Slack about 1 message/s per channel (one bucket per
    webhook URL or bot channel), PagerDuty 120 events/min per routing key; e-mail and
    generic webhooks unlimited."""
    if isinstance(channel, SlackWebhook):
        return ChannelPolicy(Rate(1, 1), 1, "slack-webhook:" + _digest(channel.url.reveal()))
    if isinstance(channel, SlackBot):
        key = _digest(channel.api_url, channel.token.reveal(), channel.channel)
        return ChannelPolicy(Rate(1, 1), 1, "slack-bot:" + key)
    if isinstance(channel, PagerDuty):
        key = _digest(channel.url, channel.routing_key.reveal())
        return ChannelPolicy(Rate(120, 60), 4, "pagerduty:" + key)
    if isinstance(channel, Email):
        return ChannelPolicy(None, 4, "email:" + channel.name)
    if isinstance(channel, Webhook):
        # More lanes in flight do not help: httpcore's pool bookkeeping grows with them.
        return ChannelPolicy(None, 4, "webhook:" + channel.name)
    return ChannelPolicy(None, 4, "channel:" + channel.name)


def _request_cost(channel: Channel, notification: Notification) -> float:
    """Requests a notification costs: PagerDuty sends one event per alert."""
    return float(len(notification.alerts)) if isinstance(channel, PagerDuty) else 1.0


# --------------------------------------------------------------------------------------------
# Delivery


@dataclass(slots=True)
class DeliveryMetrics:
    """Counters for the API to export (prometheus_client later): per channel ``sent``,
    ``failed`` (final failures, including gave-up), ``retried`` (retryable failures)."""

    sent: Counter[str] = field(default_factory=Counter)
    failed: Counter[str] = field(default_factory=Counter)
    retried: Counter[str] = field(default_factory=Counter)
    pending: OrderedDict[int, tuple[str, int]] = field(default_factory=OrderedDict)
    """Pending row id → (channel, created_at ms), oldest first."""

    @property
    def outbox_depth(self) -> int:
        return len(self.pending)

    def depth_by_channel(self) -> dict[str, int]:
        return dict(Counter(channel for channel, _ in self.pending.values()))

    def oldest_pending_age(self, now_ms: int) -> float:
        """Seconds the oldest pending row has waited (0 when the outbox is empty)."""
        if not self.pending:
            return 0.0
        created = min(created for _, created in self.pending.values())
        return max(0.0, (now_ms - created) / 1000)

    def snapshot(self, now_ms: int) -> dict[str, Any]:
        return {
            "sent": dict(self.sent),
            "failed": dict(self.failed),
            "retried": dict(self.retried),
            "outbox_depth": self.outbox_depth,
            "outbox_depth_by_channel": self.depth_by_channel(),
            "oldest_pending_age_seconds": self.oldest_pending_age(now_ms),
        }


DeliveredHook = Callable[[Channel, OutboxRow, Delivery], None]


class _ChannelWorker:
    """One channel: its lanes (FIFO per lane key), a ready queue of lanes, N worker tasks."""

    def __init__(
        self,
        deliverer: Deliverer,
        channel: Channel,
        policy: ChannelPolicy,
        bucket: TokenBucket | None,
    ) -> None:
        self.deliverer = deliverer
        self.channel = channel
        self.policy = policy
        self.bucket = bucket
        self.lanes: dict[str, deque[OutboxRow]] = {}
        self.scheduled: set[str] = set()
        self.ready: asyncio.Queue[str] = asyncio.Queue()
        self.tasks: list[asyncio.Task[None]] = []
        self.sending: set[asyncio.Task[None]] = set()
        self.timers: set[asyncio.TimerHandle] = set()

    def start(self) -> None:
        if self.tasks:
            return
        for index in range(max(1, self.policy.concurrency)):
            self.tasks.append(
                asyncio.create_task(self._run(), name=f"deliver:{self.channel.name}:{index}")
            )

    def submit(self, row: OutboxRow) -> None:
        self.lanes.setdefault(row.lane, deque()).append(row)
        if row.lane not in self.scheduled:
            self.scheduled.add(row.lane)
            self.ready.put_nowait(row.lane)

    def _requeue_later(self, lane: str, delay: float) -> None:
        loop = asyncio.get_running_loop()

        def fire() -> None:
            self.timers.discard(handle)
            self.ready.put_nowait(lane)

        handle = loop.call_later(max(0.0, delay), fire)
        self.timers.add(handle)

    async def _run(self) -> None:
        deliverer = self.deliverer
        while not deliverer.closing:
            lane = await self.ready.get()
            if deliverer.closing:
                break
            queue = self.lanes.get(lane)
            if not queue:
                self.scheduled.discard(lane)
                self.lanes.pop(lane, None)
                continue
            row = queue[0]
            wait = (row.next_attempt_at - deliverer.clock()) / 1000
            if wait > 0:
                self._requeue_later(lane, wait)
                continue
            notification = row.notification
            if self.bucket is not None:
                await self.bucket.acquire(_request_cost(self.channel, notification))
            if deliverer.closing:
                break
            task = asyncio.current_task()
            assert task is not None
            self.sending.add(task)
            try:
                try:
                    delivery = await self.channel.send(notification)
                except Exception as exc:  # a channel bug must not lose the row: retry it
                    delivery = Delivery.failure(
                        f"channel raised {type(exc).__name__}: {exc}", retryable=True
                    )
                done = deliverer.outcome(self, row, delivery)
            finally:
                self.sending.discard(task)
            if done:
                queue.popleft()
                if queue:
                    self.ready.put_nowait(lane)
                else:
                    del self.lanes[lane]
                    self.scheduled.discard(lane)


class Deliverer:
    """Sends outbox rows through their channels: ordered per lane, concurrent across lanes,
    rate-limited per receiver limit, retried with backoff, every outcome persisted.

    ``channels`` maps channel name → channel (the outbox row names its channel). ``on_result``
    is called after every attempt (e.g. to keep Slack message refs).
    """

    def __init__(
        self,
        store: NotifyStore,
        channels: Mapping[str, Channel],
        *,
        policies: Mapping[str, ChannelPolicy] | None = None,
        retry: RetryPolicy | None = None,
        clock: Callable[[], int] = wall_ms,
        rng: random.Random | None = None,
        on_result: DeliveredHook | None = None,
        flush_interval: float = 0.02,
    ) -> None:
        self.store = store
        self.channels = dict(channels)
        self.policies = {
            name: (policies or {}).get(name) or default_policy(channel)
            for name, channel in self.channels.items()
        }
        self.retry = retry or RetryPolicy()
        self.clock = clock
        self.rng = rng or random.Random()
        self.on_result = on_result
        self.flush_interval = flush_interval
        self.metrics = DeliveryMetrics()
        self.closing = False
        self._buckets: dict[str, TokenBucket] = {}
        self._workers: dict[str, _ChannelWorker] = {}
        self._flush_handle: asyncio.TimerHandle | None = None
        self._idle = asyncio.Event()
        self._idle.set()
        self._started = False

    def _worker(self, name: str) -> _ChannelWorker | None:
        worker = self._workers.get(name)
        if worker is None and name in self.channels:
            channel = self.channels[name]
            policy = self.policies[name]
            bucket = None
            if policy.rate is not None:
                bucket = self._buckets.get(policy.bucket)
                if bucket is None:
                    bucket = self._buckets[policy.bucket] = TokenBucket(policy.rate)
            worker = self._workers[name] = _ChannelWorker(self, channel, policy, bucket)
            if self._started:
                worker.start()
        return worker

    async def start(self, pending: Iterable[OutboxRow] = ()) -> None:
        """Start the workers and resume ``pending`` rows (e.g. from before a restart)."""
        self._started = True
        self.closing = False
        for name in self.channels:
            worker = self._worker(name)
            assert worker is not None
            worker.start()
        self.submit(pending)

    def submit(self, rows: Iterable[OutboxRow]) -> None:
        for row in rows:
            worker = self._worker(row.channel)
            if worker is None:
                # Its channel is no longer configured: final, reported, never silent.
                self._failed(
                    row, row.channel, self.clock(), row.attempts, "channel no longer configured"
                )
                self._schedule_flush()
                continue
            self.metrics.pending[row.id] = (row.channel, row.created_at)
            self._idle.clear()
            worker.submit(row)

    def outcome(self, worker: _ChannelWorker, row: OutboxRow, delivery: Delivery) -> bool:
        """Record one attempt; True when the row is finished (sent or failed for good)."""
        name = worker.channel.name
        now = self.clock()
        attempts = row.attempts + 1
        finished = True
        if delivery.ok:
            self.metrics.sent[name] += 1
            self.store.mark_sent(row.id, now, attempts)
        else:
            error = delivery.error or "failed"
            age = (now - row.created_at) / 1000
            if delivery.retryable and age < self.retry.give_up_after:
                finished = False
                delay = backoff_delay(attempts, self.retry, self.rng, delivery.retry_after)
                row.attempts = attempts
                row.next_attempt_at = now + math.ceil(delay * 1000)
                if delivery.retry_after and worker.bucket is not None:
                    worker.bucket.pause(min(delivery.retry_after, self.retry.max_retry_after))
                self.metrics.retried[name] += 1
                self.store.mark_retry(row.id, attempts, row.next_attempt_at, error)
                log_json(
                    logging.INFO,
                    "notification_retry",
                    channel=name,
                    notification=row.notification_id,
                    outbox_id=row.id,
                    attempts=attempts,
                    retry_in_seconds=round(delay, 3),
                    status_code=delivery.status_code,
                    error=error,
                )
                worker._requeue_later(row.lane, delay)
            else:
                if delivery.retryable:
                    error = f"gave up after {attempts} attempts over {age:.0f} s: {error}"
                self._failed(row, name, now, attempts, error, status_code=delivery.status_code)
        if self.on_result is not None:
            self.on_result(worker.channel, row, delivery)
        if finished:
            self.metrics.pending.pop(row.id, None)
            if not self.metrics.pending:
                self._idle.set()
        self._schedule_flush()
        return finished

    def _failed(
        self, row: OutboxRow, channel: str, now: int, attempts: int, error: str, **log_fields: Any
    ) -> None:
        """``row`` is finished undelivered: counted, persisted as failed, logged at ERROR."""
        self.metrics.failed[channel] += 1
        self.store.mark_failed(row.id, now, attempts, error)
        log_json(
            logging.ERROR,
            "notification_failed",
            channel=channel,
            notification=row.notification_id,
            outbox_id=row.id,
            attempts=attempts,
            **log_fields,
            error=error,
        )

    def _schedule_flush(self) -> None:
        if self.store.unflushed >= 512:
            self.store.flush()
            return
        if self._flush_handle is None:
            try:
                loop = asyncio.get_running_loop()
            except RuntimeError:
                self.store.flush()
                return
            self._flush_handle = loop.call_later(self.flush_interval, self._flush)

    def _flush(self) -> None:
        self._flush_handle = None
        self.store.flush()

    @property
    def idle(self) -> bool:
        """No row pending right now (the event below may have been set and cleared again
        between its ``set`` and a waiter resuming)."""
        return not self.metrics.pending

    async def wait_idle(self, timeout: float | None = None) -> bool:
        """Wait until no row is pending; False on timeout."""
        try:
            await asyncio.wait_for(self._idle.wait(), timeout)
        except TimeoutError:
            return False
        return True

    async def stop(self, timeout: float = 5.0) -> None:
        """Stop taking rows; let sends in flight finish (up to ``timeout``) so they are
        recorded; everything else stays pending in the outbox for the next start."""
        self.closing = True
        workers = list(self._workers.values())
        for worker in workers:
            for handle in worker.timers:
                handle.cancel()
            worker.timers.clear()
            for task in worker.tasks:
                if task not in worker.sending:
                    task.cancel()
        tasks = [task for worker in workers for task in worker.tasks]
        if tasks:
            _done, still = await asyncio.wait(tasks, timeout=timeout)
            for task in still:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
        for worker in workers:
            worker.tasks.clear()
        if self._flush_handle is not None:
            self._flush_handle.cancel()
            self._flush_handle = None
        self.store.flush()
        self._started = False
