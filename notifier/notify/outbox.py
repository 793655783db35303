"""The durable half of notifications: one SQLite store for the core's state and the outbox.

It holds incidents, the notification log (:class:`LogEntry`), API silences, outbox rows and
Slack message refs. Every notification is written to the outbox in the same transaction as
the notification-log entries that say it was sent, so a crash can lose neither: after a
restart the log stops it from being planned twice and the outbox still holds it until a
channel accepts it. Delivery is at-least-once — a row is marked sent only after the receiver
said yes, so a crash between the two re-sends it, and receivers dedupe what they can
(PagerDuty by ``dedup_key``, Slack by updating the original message).
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from notifier.notify import jsonenc
from notifier.notify.channels import SlackMessageRef
from notifier.notify.codec import (
    finding_from_dict,
    notification_from_dict,
    notification_to_dict,
    result_from_dict,
    result_to_dict,
)
from notifier.types import Event, GroupResult, GroupStatus, Incident, Notification


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
