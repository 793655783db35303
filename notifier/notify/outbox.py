"""The durable half of notifications: one SQLite store for the core's state and the outbox.

It holds incidents, the notification log (:class:`LogEntry`), API silences, outbox rows and
message refs (where a channel that follows up, a Slack bot, posted each incident). Every
notification is written to the outbox in the same transaction as the notification-log entries
that say it was sent, so a crash can lose neither: after a restart the log stops it from being
planned twice and the outbox still holds it until a channel accepts it. Delivery is
at-least-once — a row is marked sent only after the receiver said yes, so a crash between the
two re-sends it, and receivers dedupe what they can (PagerDuty by ``dedup_key``, Slack by
updating the original message).

A database SQLite cannot read (truncated, garbled pages, a disk error) never keeps the service
from starting: :class:`NotifyStore` moves it aside as ``NAME.corrupt-<time>``, starts a new
one, copies into it every row it can still read (table by table, row by row, stepping over
damaged pages) and says in one line what it kept and what is lost from when
(:mod:`notifier.notify.salvage`).

A disk that refuses writes (full, read-only, the file or its directory removed) loses nothing
already decided: every write the store cannot commit is kept in memory, in order, and committed
once the disk takes writes again (tried every second, and at every write); outbox rows planned
meanwhile get provisional ids (negative) and are delivered all the same, and what became of them
is written with them. :attr:`NotifyStore.health` says so (the API's ``/readyz`` and
``/metrics``). A database file removed while open is written again, whole, from the open
connection (:meth:`NotifyStore.retry`).
"""

from __future__ import annotations

import itertools
import json
import logging
import operator
import os
import sqlite3
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from notifier.diskfaults import DataDirError, WriteHealth, error_text, is_disk_error
from notifier.notify import jsonenc
from notifier.notify.channels.base import MessageRef
from notifier.notify.codec import (
    finding_from_dict,
    notification_from_dict,
    notification_to_dict,
    result_from_dict,
    result_to_dict,
)
from notifier.notify.salvage import Salvage, start_over
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
    sent_rules: frozenset[str] | None = None
    """The rules notified at ``sent_status``: one firing at that status outside them is news
    (``escalate``). None for an entry kept before rules were (every rule counts as told)."""


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


@dataclass(slots=True)
class _Unwritten:
    """An outbox row planned while the disk refused writes (its provisional id is negative):
    delivered all the same, and written with what became of it once the disk takes writes."""

    entry: OutboxEntry
    state: str = "pending"
    attempts: int = 0
    next_attempt_at: int = 0
    last_error: str | None = None
    done_at: int | None = None
    row_id: int | None = None
    """Its id in the outbox, once written."""


@dataclass(slots=True)
class _Kept:
    """A write the disk refused: run again, in order, in one transaction of its own; ``done``
    gets what ``write`` returned once that is committed."""

    write: Callable[[sqlite3.Connection], Any]
    done: Callable[[Any], None] | None = None


RETRY_S = 1.0
"""How often writes the disk refused are tried again."""

_FINISHING = ("UPDATE outbox SET state='sent'", "UPDATE outbox SET state='failed'")

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
    sent_rules TEXT,
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
_TABLES = ("meta", "incidents", "notify_log", "silences", "outbox", "slack_refs")

log = logging.getLogger("notifier.notify")


def _open(path: Path) -> sqlite3.Connection:
    """Connect, create the schema and check the file; raises sqlite3.DatabaseError when the
    file is damaged."""
    if path.exists() and path.stat().st_size == 0:
        # SQLite takes an empty file for a new database: say what happened instead.
        raise sqlite3.DatabaseError("the file is empty (truncated to nothing)")
    db = sqlite3.connect(str(path), isolation_level=None, check_same_thread=False)
    try:
        db.execute("PRAGMA journal_mode=WAL")
        db.execute("PRAGMA synchronous=NORMAL")
        db.execute("PRAGMA busy_timeout=5000")
        db.executescript(_SCHEMA)
        _add_missing_columns(db)
        db.execute(
            "INSERT OR IGNORE INTO meta (key, value) VALUES ('schema', ?)", (SCHEMA_VERSION,)
        )
        problems = [row[0] for row in db.execute("PRAGMA quick_check")]
        if problems != ["ok"]:
            raise sqlite3.DatabaseError("; ".join(problems[:3]))
    except BaseException:
        db.close()
        raise
    return db


_ADDED_COLUMNS = (("notify_log", "sent_rules", "TEXT"),)
"""Columns added to a table since the schema's first version: a file from before gets them
(empty) when it is opened, and keeps everything else."""


def _add_missing_columns(db: sqlite3.Connection) -> None:
    for table, column, kind in _ADDED_COLUMNS:
        have = {row[1] for row in db.execute(f"PRAGMA table_info({table})")}
        if column not in have:
            db.execute(f"ALTER TABLE {table} ADD COLUMN {column} {kind}")


def _rules_text(rules: frozenset[str] | None) -> str | None:
    return None if rules is None else jsonenc.dumps(sorted(rules))


def _rules_of(text: str | None) -> frozenset[str] | None:
    return None if text is None else frozenset(json.loads(text))


def _decodes(table: str, columns: list[str], row: tuple[Any, ...]) -> bool:
    """Whether a salvaged row can be used (its JSON parses into what the service reads)."""
    values = dict(zip(columns, row, strict=True))
    try:
        if table == "outbox":
            notification_from_dict(json.loads(values["body"]))
        elif table == "incidents":
            NotifyStore._incident_row(tuple(values[c] for c in _INCIDENT_COLUMNS))
        elif table == "silences":
            json.loads(values["body"])
        return True
    except Exception:
        return False


_INCIDENT_COLUMNS = (
    "id", "kind", "cluster", "grp", "opened_at", "closed_at", "status", "peak_status",
    "close_reason", "silenced", "findings", "result",
)  # fmt: skip


class NotifyStore:
    """Incidents, the notification log, silences, the outbox and Slack message refs in SQLite.

    One connection, used from one thread (the event loop's): the core's state changes and the
    outbox rows they produce commit together (:meth:`save`); delivery outcomes are buffered
    and committed in small batches (:meth:`flush`), which at worst re-sends a few rows after a
    crash — never loses one. WAL mode keeps readers (the API) off the writer's back.
    """

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise DataDirError(self.path.parent, f"cannot be created ({error_text(exc)})") from exc
        self.salvage: Salvage | None = None
        """Set when the file was damaged: what was moved aside and what was kept."""
        self.health = WriteHealth("notification store", self.path)
        self._kept: list[_Kept] = []
        self._unwritten: dict[int, _Unwritten] = {}
        self._unwritten_incidents: dict[str, Incident] = {}
        """Incidents as last saved, while that save waits for the disk (history reads)."""
        self._next_provisional = -1
        self._retry_at = 0.0
        try:
            self.db = _open(self.path)
        except sqlite3.DatabaseError as exc:
            if is_disk_error(exc):  # the disk refused, the file is not damaged: keep it
                raise DataDirError(self.path, f"cannot be opened ({exc})") from exc
            self.db, self.salvage = start_over(
                self.path, exc, open_store=_open, tables=_TABLES, usable=_decodes
            )
            log.error(
                self.salvage.message(self.path),
                extra={"event": "notify_store_damaged", "path": str(self.path),
                       "moved_to": str(self.salvage.moved_to), "kept": self.salvage.kept,
                       "pending": self.salvage.pending,
                       "last_written": self.salvage.last_written},
            )  # fmt: skip
        self._ops: list[tuple[str, tuple[Any, ...]]] = []
        self._ref_cache: dict[tuple[str, str], MessageRef | None] = {}
        self._inode = self._file_inode()

    def close(self) -> None:
        self.flush()
        if self.failing:
            self.retry(force=True)
        if self.failing:
            log.error(
                "notification store %s: %d change(s) could not be written before the stop and "
                "are lost (%s)", self.path, self.unwritten, self.health.error,
                extra={"event": "state_lost_at_stop", "path": str(self.path),
                       "unwritten": self.unwritten, "error": self.health.error},
            )  # fmt: skip
        self.db.close()

    # ---- a disk that refuses writes

    @property
    def failing(self) -> bool:
        """Some change is kept in memory because the disk refused it."""
        return bool(self._kept) or self.health.failing

    @property
    def unwritten(self) -> int:
        """Changes kept in memory, waiting for the disk (buffered delivery outcomes included
        while failing)."""
        return len(self._kept) + (len(self._ops) if self.health.failing else 0)

    def _file_inode(self) -> int | None:
        try:
            return os.stat(self.path).st_ino
        except OSError:
            return None

    def _in_place(self) -> None:
        """Raise when the database file was removed (or replaced) under the open connection:
        SQLite would go on writing to a file nobody will ever open again."""
        if self._inode is not None and self._file_inode() != self._inode:
            raise FileNotFoundError(2, "the database file was removed while open", str(self.path))

    def _restore_file(self) -> None:
        """Write the open database, whole, to its path again (the file or its directory was
        removed): its directory is made again, the copy written beside and renamed."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fresh = self.path.with_name(self.path.name + ".restoring")
        fresh.unlink(missing_ok=True)
        target = sqlite3.connect(str(fresh))
        try:
            self.db.backup(target)
        finally:
            target.close()
        os.replace(fresh, self.path)
        old, self.db = self.db, _open(self.path)
        old.close()
        self._inode = self._file_inode()
        log.warning(
            "notification store %s was removed while open; written again from memory",
            self.path,
            extra={"event": "notify_store_restored", "path": str(self.path)},
        )

    def _transaction(self, write: Callable[[sqlite3.Connection], Any]) -> Any:
        self._in_place()
        db = self.db
        db.execute("BEGIN")
        try:
            result = write(db)
            db.execute("COMMIT")
        except BaseException:
            # A full disk may have rolled the transaction back already ("no transaction is
            # active" would then hide the error that matters).
            if db.in_transaction:
                try:
                    db.execute("ROLLBACK")
                except sqlite3.Error as rollback_error:
                    log.debug("rollback failed: %s", rollback_error)
            raise
        return result

    def _refused(self, exc: BaseException) -> None:
        self._retry_at = time.monotonic() + RETRY_S
        self.health.failed(exc, self.unwritten)

    def _write(self, write: Callable[[sqlite3.Connection], Any]) -> bool:
        """Commit ``write`` now (True), or keep it for later (False) when the disk refuses it
        or earlier writes still wait (their order is kept)."""
        if not self._kept:
            try:
                self._transaction(write)
                return True
            except (sqlite3.Error, OSError) as exc:
                if not is_disk_error(exc):
                    raise
                self._kept.append(_Kept(write))
                self._refused(exc)
                return False
        self._kept.append(_Kept(write))
        self.retry()
        return False

    def retry(self, *, force: bool = False) -> bool:
        """Write what the disk refused before, in order, then the buffered delivery outcomes;
        True when nothing is left in memory. At most every :data:`RETRY_S` unless ``force``."""
        if not self.failing:
            return True
        if not force and time.monotonic() < self._retry_at:
            self.health.unwritten = self.unwritten
            return False
        written = 0
        try:
            if self._inode is not None and self._file_inode() != self._inode:
                self._restore_file()
            while self._kept:
                kept = self._kept[0]
                try:
                    result = self._transaction(kept.write)
                except sqlite3.Error as exc:
                    if is_disk_error(exc):
                        raise
                    # It can never be written (it would block every write behind it): said,
                    # and dropped.
                    self._kept.pop(0)
                    log.error("notification store %s: a change kept in memory cannot be "
                              "written and is dropped: %s", self.path, exc,
                              extra={"event": "state_write_dropped", "path": str(self.path),
                                     "error": str(exc)})  # fmt: skip
                    continue
                self._kept.pop(0)
                written += 1
                if kept.done is not None:
                    kept.done(result)
            written += len(self._ops)
            self._apply_ops()
        except (sqlite3.Error, OSError) as exc:
            if not is_disk_error(exc):
                raise
            self._refused(exc)
            return False
        self.health.succeeded(written)
        return True

    # ---- core state + outbox, atomically

    def save(
        self,
        incidents: Iterable[tuple[Incident, GroupResult | None, str]] = (),
        log_entries: Iterable[LogEntry] = (),
        forget: Iterable[str] = (),
        outbox: Iterable[OutboxEntry] = (),
    ) -> list[OutboxRow]:
        """Commit state changes and new outbox rows in one transaction; returns the rows.

        When the disk refuses it, everything is kept in memory to be written later, and the
        rows come back with provisional ids (negative) for the workers to deliver now."""
        incidents, log_entries, forget = list(incidents), list(log_entries), list(forget)
        entries = list(outbox)
        if not self._kept:
            try:
                rows: list[OutboxRow] = self._transaction(
                    lambda db: self._save(db, incidents, log_entries, forget, entries)
                )
                return rows
            except (sqlite3.Error, OSError) as exc:
                if not is_disk_error(exc):
                    raise
                failure: BaseException | None = exc
        else:
            failure = None
        provisional = []
        for entry in entries:
            self._unwritten[self._next_provisional] = _Unwritten(entry)
            provisional.append(self._next_provisional)
            self._next_provisional -= 1

        def write(db: sqlite3.Connection) -> list[OutboxRow]:
            unwritten = [self._unwritten[p] for p in provisional]
            return self._save(db, incidents, log_entries, forget, entries, unwritten)

        for incident, _result, _kind in incidents:
            self._unwritten_incidents[incident.id] = incident

        def done(rows: list[OutboxRow]) -> None:
            for incident, _result, _kind in incidents:
                if self._unwritten_incidents.get(incident.id) is incident:
                    del self._unwritten_incidents[incident.id]
            for pid, row in zip(provisional, rows, strict=True):
                kept = self._unwritten[pid]
                kept.row_id = row.id
                if kept.state != "pending":
                    del self._unwritten[pid]  # finished before it was written: nothing follows

        self._kept.append(_Kept(write, done))
        if failure is not None:
            self._refused(failure)
        else:
            self.retry()
        return [
            OutboxRow(
                id=pid,
                channel=entry.channel,
                lane=entry.lane,
                created_at=entry.notification.created_at,
                notification_id=entry.notification.id,
                _notification=entry.notification,
            )
            for pid, entry in zip(provisional, entries, strict=True)
        ]

    def _save(
        self,
        db: sqlite3.Connection,
        incidents: list[tuple[Incident, GroupResult | None, str]],
        log_entries: list[LogEntry],
        forget: list[str],
        entries: list[OutboxEntry],
        unwritten: list[_Unwritten] | None = None,
    ) -> list[OutboxRow]:
        """The statements of :meth:`save`, inside its transaction; ``unwritten``: the rows
        were delivered (or tried) already, and are written as they stand."""
        rows: list[OutboxRow] = []
        bodies: dict[str, str] = {}
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
            " last_sent_at, resolved, sent_rules) VALUES (?,?,?,?,?,?,?)"
            " ON CONFLICT(route, incident_id) DO UPDATE SET sent_status=excluded.sent_status,"
            " last_event=excluded.last_event, last_sent_at=excluded.last_sent_at,"
            " resolved=excluded.resolved, sent_rules=excluded.sent_rules",
            [
                (
                    e.route,
                    e.incident_id,
                    e.sent_status.value,
                    e.last_event.value,
                    e.last_sent_at,
                    int(e.resolved),
                    _rules_text(e.sent_rules),
                )
                for e in log_entries
            ],
        )
        db.executemany("DELETE FROM notify_log WHERE incident_id = ?", [(i,) for i in forget])
        values = []
        for index, entry in enumerate(entries):
            n = entry.notification
            body = bodies.get(n.id)
            if body is None:
                body = bodies[n.id] = jsonenc.dumps(notification_to_dict(n))
            if unwritten is None:
                outcome: tuple[Any, ...] = ("pending", 0, 0, None, None)
            else:
                u = unwritten[index]
                outcome = (u.state, u.attempts, u.next_attempt_at, u.last_error, u.done_at)
            values.append(
                (n.id, n.receiver, entry.channel, entry.lane, n.created_at, body, *outcome)
            )
        db.executemany(
            "INSERT INTO outbox (notification_id, receiver, channel, lane, created_at,"
            " body, state, attempts, next_attempt_at, last_error, done_at)"
            " VALUES (?,?,?,?,?,?,?,?,?,?,?)",
            values,
        )
        if entries:
            # One statement for the batch: inside this transaction, on the only writing
            # connection, AUTOINCREMENT hands out consecutive ids ending at the last one.
            last = db.execute("SELECT last_insert_rowid()").fetchone()[0]
            first = last - len(entries) + 1
            (count,) = db.execute(
                "SELECT count(*) FROM outbox WHERE id BETWEEN ? AND ?", (first, last)
            ).fetchone()
            if count != len(entries):
                raise sqlite3.DatabaseError(
                    f"outbox ids {first}..{last} are not the {len(entries)} rows just written"
                )
            rows.extend(
                OutboxRow(
                    id=row_id,
                    channel=entry.channel,
                    lane=entry.lane,
                    created_at=entry.notification.created_at,
                    notification_id=entry.notification.id,
                    _notification=entry.notification,
                )
                for row_id, entry in enumerate(entries, start=first)
            )
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
        incidents = []
        for row in cursor:
            try:
                incidents.append(self._incident_row(row))
            except Exception as exc:  # a damaged row costs that incident, not the start
                log.error("incident %s cannot be read and is dropped: %s", row[0], exc,
                          extra={"event": "incident_unreadable", "incident": row[0]})  # fmt: skip
        ids = {i.id for i, _r, _k in incidents}
        entries = [
            LogEntry(
                route=row[0],
                incident_id=row[1],
                sent_status=GroupStatus(row[2]),
                last_event=Event(row[3]),
                last_sent_at=row[4],
                resolved=bool(row[5]),
                sent_rules=_rules_of(row[6]),
            )
            for row in self.db.execute(
                "SELECT route, incident_id, sent_status, last_event, last_sent_at, resolved,"
                " sent_rules FROM notify_log"
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
        found = [self._incident_row(row)[0] for row in cursor]
        if not self._unwritten_incidents:
            return found
        # What the disk refused so far is only in memory: newer than the file's copy.
        merged = {i.id: i for i in found} | {
            i.id: i
            for i in self._unwritten_incidents.values()
            if not open_only or i.closed_at is None
        }
        return sorted(merged.values(), key=lambda i: (-i.opened_at, i.id))[:limit]

    # ---- silences (those created through the API; config silences live in the config)

    def save_silence(self, silence_id: str, body: Mapping[str, Any]) -> None:
        text = jsonenc.dumps(body)
        self._write(
            lambda db: db.execute(
                "INSERT OR REPLACE INTO silences (id, body) VALUES (?, ?)", (silence_id, text)
            )
        )

    def delete_silence(self, silence_id: str) -> None:
        self._write(lambda db: db.execute("DELETE FROM silences WHERE id = ?", (silence_id,)))

    def load_silences(self) -> list[dict[str, Any]]:
        silences = []
        for silence_id, body in self.db.execute("SELECT id, body FROM silences"):
            try:
                silences.append(json.loads(body))
            except ValueError as exc:
                log.error("silence %s cannot be read and is dropped: %s", silence_id, exc,
                          extra={"event": "silence_unreadable", "silence": silence_id})  # fmt: skip
        return silences

    # ---- the outbox

    def pending(self) -> list[OutboxRow]:
        """Pending rows in id order (per lane, the order they must go out in), those kept in
        memory while the disk refuses writes last (they were planned last)."""
        self.flush()
        finished = {params[-1] for sql, params in self._ops if sql.startswith(_FINISHING)}
        stored = [
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
        kept = [
            OutboxRow(
                id=pid,
                channel=u.entry.channel,
                lane=u.entry.lane,
                created_at=u.entry.notification.created_at,
                notification_id=u.entry.notification.id,
                attempts=u.attempts,
                next_attempt_at=u.next_attempt_at,
                _notification=u.entry.notification,
            )
            for pid, u in self._unwritten.items()
            if u.row_id is None and u.state == "pending"
        ]
        return [row for row in stored if row.id not in finished] + kept

    def _outcome(self, row_id: int, sql: str, params: tuple[Any, ...], **fields: Any) -> None:
        """Buffer a delivery outcome, or note it on a row still kept in memory."""
        if row_id < 0:
            kept = self._unwritten.get(row_id)
            if kept is None:
                return
            if kept.row_id is None:
                for name, value in fields.items():
                    setattr(kept, name, value)
                return
            if fields.get("state", "pending") != "pending":
                del self._unwritten[row_id]
            row_id = kept.row_id
        self._ops.append((sql, (*params, row_id)))

    def mark_sent(self, row_id: int, at: int, attempts: int) -> None:
        self._outcome(
            row_id,
            "UPDATE outbox SET state='sent', done_at=?, attempts=?, last_error=NULL WHERE id=?",
            (at, attempts),
            state="sent", done_at=at, attempts=attempts, last_error=None,
        )  # fmt: skip

    def mark_retry(self, row_id: int, attempts: int, next_attempt_at: int, error: str) -> None:
        self._outcome(
            row_id,
            "UPDATE outbox SET attempts=?, next_attempt_at=?, last_error=? WHERE id=?",
            (attempts, next_attempt_at, error),
            attempts=attempts, next_attempt_at=next_attempt_at, last_error=error,
        )  # fmt: skip

    def mark_failed(self, row_id: int, at: int, attempts: int, error: str) -> None:
        self._outcome(
            row_id,
            "UPDATE outbox SET state='failed', done_at=?, attempts=?, last_error=? WHERE id=?",
            (at, attempts, error),
            state="failed", done_at=at, attempts=attempts, last_error=error,
        )  # fmt: skip

    @property
    def unflushed(self) -> int:
        return len(self._ops)

    def flush(self) -> None:
        """Commit buffered delivery outcomes (one transaction). While the disk refuses
        writes they stay buffered, behind the writes kept before them (:meth:`retry`)."""
        if self.failing:
            self.retry()
            return
        try:
            self._apply_ops()
        except (sqlite3.Error, OSError) as exc:
            if not is_disk_error(exc):
                raise
            self._refused(exc)

    def _apply_ops(self) -> None:
        if not self._ops:
            return
        ops = self._ops

        def write(db: sqlite3.Connection) -> None:
            # Runs of one statement in one call each (in order): at a few thousand outcomes a
            # second, a call per row cost more than SQLite's work.
            for sql, run in itertools.groupby(ops, key=operator.itemgetter(0)):
                db.executemany(sql, [params for _sql, params in run])

        self._transaction(write)
        del self._ops[: len(ops)]

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
        """Forget finished outbox rows and closed incidents older than ``before`` (ms); put
        off while the disk refuses writes."""
        self.flush()
        if self.failing:
            return 0
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

    def forget_incidents(self, ids: Iterable[str]) -> None:
        """Delete incidents and their notification log (another instance owns them now: a
        restart here must not bring them back as its own)."""
        params = [(i,) for i in ids]
        if not params:
            return
        self.flush()

        def write(db: sqlite3.Connection) -> None:
            db.executemany("DELETE FROM notify_log WHERE incident_id = ?", params)
            db.executemany("DELETE FROM incidents WHERE id = ?", params)

        self._write(write)

    # ---- Message refs (so a follow-up updates the original message). The table keeps the
    # name it had when the Slack bot was the one channel keeping them: databases have it.

    def message_ref(self, channel: str, incident_id: str) -> MessageRef | None:
        key = (channel, incident_id)
        if key not in self._ref_cache:
            row = self.db.execute(
                "SELECT slack_channel, ts FROM slack_refs WHERE channel=? AND incident_id=?",
                key,
            ).fetchone()
            self._ref_cache[key] = None if row is None else MessageRef(row[0], row[1])
        return self._ref_cache[key]

    def save_message_refs(self, channel: str, refs: Mapping[str, MessageRef]) -> None:
        """Written through at once: the next follow-up may be planned a moment later."""
        if not refs:
            return
        values = [(channel, incident, ref.channel, ref.ts) for incident, ref in refs.items()]
        self._write(
            lambda db: db.executemany(
                "INSERT OR REPLACE INTO slack_refs (channel, incident_id, slack_channel, ts)"
                " VALUES (?,?,?,?)",
                values,
            )
        )
        for incident, ref in refs.items():
            self._ref_cache[(channel, incident)] = ref
