"""What the notifier recorded, as the status page shows it: which notifications each incident
caused, on which channel, and whether each was delivered, is pending or failed; and the
incidents of one group over a time range.

Read from the notifier's SQLite store (:class:`notifier.notify.outbox.NotifyStore`) through a
read-only connection of its own, opened per read in a worker thread: WAL mode lets it read while
the notifier writes, and the event loop never waits on it. What it relies on is the store's
``outbox`` and ``incidents`` tables and the outbox body (a notification as
:func:`notifier.notify.codec.notification_to_dict` writes it: ``alerts[].event`` and
``alerts[].incident``); ``tests/test_page.py`` reads them after a real notifier wrote them.
Delivery outcomes reach the file within a few tens of milliseconds (the deliverer commits them
in small batches).
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Collection
from contextlib import closing
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote

DELIVERED, PENDING, FAILED, NOT_SENT = "delivered", "pending", "failed", "not sent"
"""An incident's (or a channel's) delivery state, worst first: failed, pending, delivered; "not
sent" while nothing was planned for it (silenced, waiting for the route's group_wait, or no
route matched)."""
_OUTBOX_STATE = {"sent": DELIVERED, "pending": PENDING, "failed": FAILED}


@dataclass(frozen=True, slots=True)
class Delivery:
    """One notification for one incident on one channel (an outbox row)."""

    incident_id: str
    notification_id: str
    receiver: str
    channel: str
    event: str
    """open, escalate, repeat or resolve."""
    status: str
    """The incident's status the notification carried."""
    created_at: int
    state: str
    """delivered, pending or failed."""
    attempts: int
    next_attempt_at: int | None
    """When a pending notification is tried next (epoch ms); None once done."""
    done_at: int | None
    last_error: str | None

    def to_dict(self) -> dict[str, Any]:
        return {
            "notification_id": self.notification_id, "receiver": self.receiver,
            "channel": self.channel, "event": self.event, "status": self.status,
            "created_at": self.created_at, "state": self.state, "attempts": self.attempts,
            "next_attempt_at": self.next_attempt_at, "done_at": self.done_at,
            "last_error": self.last_error,
        }  # fmt: skip


def _connect(path: Path) -> sqlite3.Connection | None:
    """A read-only connection, or None while the store does not exist yet."""
    if not path.is_file():
        return None
    uri = f"file:{quote(str(path.resolve()))}?mode=ro"
    return sqlite3.connect(uri, uri=True, timeout=5, check_same_thread=False)


def deliveries(
    path: Path, incident_ids: Collection[str], since_ms: int
) -> dict[str, list[Delivery]]:
    """Every notification sent (or being sent, or failed) for each incident, oldest first.
    ``since_ms`` bounds the read: no notification of an incident is older than its opening."""
    found: dict[str, list[Delivery]] = {i: [] for i in incident_ids}
    connection = _connect(path)
    if connection is None or not incident_ids:
        return found
    with closing(connection):
        cursor = connection.execute(
            "SELECT json_extract(a.value, '$.incident.id'), o.notification_id, o.receiver,"
            " o.channel, json_extract(a.value, '$.event'),"
            " json_extract(a.value, '$.incident.status'), o.created_at, o.state, o.attempts,"
            " o.next_attempt_at, o.done_at, o.last_error"
            " FROM outbox AS o, json_each(o.body, '$.alerts') AS a"
            " WHERE o.created_at >= ?"
            " AND json_extract(a.value, '$.incident.id') IN (SELECT value FROM json_each(?))"
            " ORDER BY o.id",
            (since_ms, json.dumps(sorted(incident_ids))),
        )
        for row in cursor:
            state = _OUTBOX_STATE.get(row[7], row[7])
            found[row[0]].append(
                Delivery(
                    incident_id=row[0], notification_id=row[1], receiver=row[2],
                    channel=row[3], event=row[4], status=row[5], created_at=row[6],
                    state=state, attempts=row[8],
                    next_attempt_at=row[9] if state == PENDING and row[9] else None,
                    done_at=row[10], last_error=row[11],
                )
            )  # fmt: skip
    return found


def channel_summary(rows: list[Delivery]) -> list[dict[str, Any]]:
    """Per channel: the state of its latest notification, what it was, and the counts."""
    by_channel: dict[str, list[Delivery]] = {}
    for row in rows:
        by_channel.setdefault(row.channel, []).append(row)
    out = []
    for channel, items in sorted(by_channel.items()):
        last = items[-1]
        states = [item.state for item in items]
        out.append(
            {
                "channel": channel,
                "receiver": last.receiver,
                "state": last.state,
                "last_event": last.event,
                "last_at": last.created_at,
                "last_error": next((i.last_error for i in reversed(items) if i.last_error), None),
                "delivered": states.count(DELIVERED),
                "pending": states.count(PENDING),
                "failed": states.count(FAILED),
            }
        )
    return out


def overall_state(channels: list[dict[str, Any]]) -> str:
    """The incident's delivery state: the worst of its channels' latest notifications."""
    states = {c["state"] for c in channels}
    for state in (FAILED, PENDING, DELIVERED):
        if state in states:
            return state
    return NOT_SENT


def incidents_between(
    path: Path, cluster: str, group: str, start_ms: int, end_ms: int
) -> list[dict[str, Any]]:
    """The group's incidents (and its cluster's cluster-down incidents, group ``*``) that were
    open at some moment of ``[start_ms, end_ms)``, oldest first."""
    connection = _connect(path)
    if connection is None:
        return []
    with closing(connection):
        cursor = connection.execute(
            "SELECT id, grp, opened_at, closed_at, status, peak_status, close_reason, silenced"
            " FROM incidents WHERE cluster = ? AND grp IN (?, '*') AND opened_at < ?"
            " AND (closed_at IS NULL OR closed_at >= ?) ORDER BY opened_at, id",
            (cluster, group, end_ms, start_ms),
        )
        return [
            {
                "id": row[0], "cluster_down": row[1] == "*", "opened_at": row[2],
                "closed_at": row[3], "status": row[4], "peak_status": row[5],
                "close_reason": row[6], "silenced": bool(row[7]),
            }
            for row in cursor
        ]  # fmt: skip
