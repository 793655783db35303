"""The SQLite store: state and outbox rows committed together in WAL mode, pending rows that
survive a restart, and a database any other SQLite client can read.
"""

from __future__ import annotations

import contextlib
import json
import sqlite3

from notifier.notify import NotifyStore, OutboxEntry, notification_from_dict

from .notify_helpers import full_notification


def test_the_store_uses_wal_and_commits_state_with_the_outbox(tmp_path):
    store = NotifyStore(tmp_path / "data" / "notify.sqlite")
    assert store.db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    n = full_notification()
    incident = n.alerts[0].incident
    rows = store.save(
        incidents=[(incident, n.alerts[0].result, "group")],
        outbox=[OutboxEntry(n, "oncall/webhook", "lane"), OutboxEntry(n, "oncall/email", "lane")],
    )
    assert [r.channel for r in rows] == ["oncall/webhook", "oncall/email"]
    store.mark_sent(rows[0].id, 3_000, 1)
    store.close()

    again = NotifyStore(tmp_path / "data" / "notify.sqlite")
    [pending] = again.pending()
    assert (pending.channel, pending.notification) == ("oncall/email", n)
    live, _log = again.load_live()
    assert [(i.id, r.max_lag_seconds, k) for i, r, k in live] == [("abc", 12.5, "group")]
    assert again.outbox_counts() == {"sent": 1, "pending": 1}


def test_the_database_is_plain_sqlite_another_process_can_read(tmp_path):
    store = NotifyStore(tmp_path / "n.sqlite")
    store.save(outbox=[OutboxEntry(full_notification(), "c", "l")])
    with contextlib.closing(sqlite3.connect(tmp_path / "n.sqlite")) as other:
        [(body,)] = other.execute("SELECT body FROM outbox").fetchall()
    assert notification_from_dict(json.loads(body)).id == "n1"
    store.close()
