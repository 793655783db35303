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


def test_each_returned_row_names_the_outbox_row_written_for_it(tmp_path):
    """A batch is written in one statement; the ids handed back must still be the rows'
    own, after rows were delivered and deleted, so marking one sent marks the right one."""
    store = NotifyStore(tmp_path / "n.sqlite")
    n = full_notification()
    first = store.save(outbox=[OutboxEntry(n, f"r/{i}", "l") for i in range(3)])
    store.mark_sent(first[1].id, 1_000, 1)
    rows = store.save(outbox=[OutboxEntry(n, f"s/{i}", "l") for i in range(5)])
    written = dict(store.db.execute("SELECT id, channel FROM outbox").fetchall())
    assert [written[r.id] for r in first + rows] == [
        *(f"r/{i}" for i in range(3)),
        *(f"s/{i}" for i in range(5)),
    ]
    assert len({r.id for r in first + rows}) == 8
    assert [p.channel for p in store.pending()] == ["r/0", "r/2", *(f"s/{i}" for i in range(5))]
    store.close()


def test_the_rules_told_of_are_kept_and_a_file_from_before_them_opens(tmp_path):
    """The notification log keeps which rules each route was told of (so a rule that joins
    later is news after a restart too). A file written before that column existed opens with
    it added and empty: its entries count every rule as told."""
    from notifier.notify import LogEntry
    from notifier.types import Event, GroupStatus

    path = tmp_path / "n.sqlite"
    with contextlib.closing(sqlite3.connect(path)) as old:
        old.executescript(
            "CREATE TABLE notify_log (route TEXT NOT NULL, incident_id TEXT NOT NULL,"
            " sent_status TEXT NOT NULL, last_event TEXT NOT NULL,"
            " last_sent_at INTEGER NOT NULL, resolved INTEGER NOT NULL DEFAULT 0,"
            " PRIMARY KEY (route, incident_id));"
            "INSERT INTO notify_log VALUES ('r', 'abc', 'ERR', 'open', 1000, 0);"
        )
    store = NotifyStore(path)
    n = full_notification()
    incident = n.alerts[0].incident
    told = LogEntry("r2", incident.id, GroupStatus.ERR, Event.ESCALATE, 2_000, False,
                    frozenset({"rewound", "stalled-or-stopped"}))  # fmt: skip
    store.save(incidents=[(incident, n.alerts[0].result, "group")], log_entries=[told])
    store.close()

    _live, log = NotifyStore(path).load_live()
    kept = {e.route: e.sent_rules for e in log}
    assert kept == {"r": None, "r2": frozenset({"rewound", "stalled-or-stopped"})}
