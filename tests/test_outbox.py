"""The durable half: SQLite store, outbox, delivery workers and the Notifier service.

Real loopback servers (notifier/receivers.py: HTTP for webhooks, Slack and PagerDuty; aiosmtpd
for e-mail) and real channels — no mocks. Intervals are short (group_wait/group_interval 0,
retries from 10 ms) so the whole file runs in seconds; simulated-time behaviour is covered in
test_notify.py.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import random
import socket
import sqlite3
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from notifier.config import ConfigError, NotifyConfig, Rate, parse_notify, parse_rate
from notifier.demo import SLACK_CHANNEL_ID, HttpReceiver, SmtpReceiver
from notifier.notify import (
    Notifier,
    NotifyStore,
    OutboxEntry,
    RetryPolicy,
    SilenceError,
    TokenBucket,
    backoff_delay,
    notification_from_dict,
    notification_to_dict,
)
from notifier.types import (
    Alert,
    CommitPoint,
    Event,
    GroupStatus,
    Incident,
    Notification,
    PartitionResult,
    PartitionStatus,
)

from .test_notify import finding, move, result

OK, WARN, ERR = GroupStatus.OK, GroupStatus.WARN, GroupStatus.ERR
FAST_DELIVERY = {"retry_initial": "10ms", "retry_max": "50ms", "stop_timeout": "2s"}


def now_ms() -> int:
    return int(time.time() * 1000)


def config(
    receivers: dict[str, Any], route: dict[str, Any] | None = None, **top: Any
) -> NotifyConfig:
    receiver = next(iter(receivers))
    data = {
        "receivers": receivers,
        "route": {"receiver": receiver, "group_wait": 0, "group_interval": 0, **(route or {})},
        "delivery": FAST_DELIVERY,
        **top,
    }
    return parse_notify(data, env={})


def webhook(url: str, **kwargs: Any) -> dict[str, Any]:
    return {"hook": {"webhook": {"url": url, **kwargs}}}


async def eventually(predicate: Callable[[], bool], timeout: float = 5.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError("condition not reached in time")
        await asyncio.sleep(0.005)


def alerts_of(requests) -> list[tuple[str, str, str]]:
    """``(notification id, event, group)`` per alert of each webhook request."""
    return [
        (body["notification_id"], alert["event"], alert["incident"]["group"])
        for body in (r.json for r in requests)
        for alert in body["alerts"]
    ]


@pytest.fixture
async def notifiers():
    """Start notifiers in a test; any still running are stopped at the end."""
    started: list[Notifier] = []

    async def start(cfg: NotifyConfig, db: Path, **kwargs: Any) -> Notifier:
        notifier = Notifier(cfg, db, rng=random.Random(7), **kwargs)
        await notifier.start()
        started.append(notifier)
        return notifier

    yield start
    for notifier in started:
        await notifier.stop()


# --------------------------------------------------------------------------------------------
# Serialisation and the store


def full_notification() -> Notification:
    partitions = [
        PartitionResult(
            topic="orders",
            partition=p,
            status=PartitionStatus.STALL if p else PartitionStatus.OK,
            complete=1.0,
            burrow_complete=0.5,
            committed_offset=None if p == 2 else 100 * p,
            log_end_offset=1000,
            log_start_offset=0,
            current_lag=None if p == 2 else 1000 - 100 * p,
            lag_seconds=None if p == 2 else 12.5,
            start=CommitPoint(10, 1, None),
            end=CommitPoint(20, 2, 5),
            owner="host-1",
            client_id="c-1",
        )
        for p in range(3)
    ]
    res = result("prod", "orders", ERR, 1_000)
    res.partitions = partitions
    res.max_lag = partitions[1]
    res.max_lag_seconds = 12.5
    incident = Incident(
        id="abc",
        cluster="prod",
        group="orders",
        opened_at=1,
        status=ERR,
        peak_status=ERR,
        findings=[finding(ERR)],
        silenced=True,
    )
    gone = Incident("def", "prod", "gone", 1, GroupStatus.NOTFOUND, WARN, 5, "gone", [], False)
    return Notification(
        id="n1",
        receiver="oncall",
        group_key='{cluster="prod"}',
        alerts=[Alert(Event.ESCALATE, incident, res), Alert(Event.RESOLVE, gone, None)],
        created_at=2_000,
        status_page_url="https://status",
        extras={"team": "data"},
    )


def test_a_notification_round_trips_through_json():
    original = full_notification()
    data = json.loads(json.dumps(notification_to_dict(original)))
    restored = notification_from_dict(data)

    assert restored == original
    assert restored.alerts[0].result.max_lag is restored.alerts[0].result.partitions[1]


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


# --------------------------------------------------------------------------------------------
# Rates and backoff


def test_parse_rate():
    assert parse_rate("1/s") == Rate(1, 1)
    assert parse_rate("120/m") == Rate(120, 60)
    assert parse_rate("10/5s") == Rate(10, 5)
    assert parse_rate("off") is None and parse_rate(None) is None
    with pytest.raises(ValueError, match="expected a rate"):
        parse_rate("quick")


def test_backoff_is_exponential_with_full_jitter_capped_and_honours_retry_after():
    policy = RetryPolicy(initial=1.0, cap=300.0)
    rng = random.Random(1)
    for attempt in range(1, 20):
        ceiling = min(300.0, 2.0 ** (attempt - 1))
        delays = [backoff_delay(attempt, policy, rng) for _ in range(200)]
        assert all(0 <= d <= ceiling for d in delays)
        assert max(delays) > ceiling * 0.8  # full jitter spans the range
    assert backoff_delay(1, policy, rng, retry_after=42.0) >= 42.0


async def test_the_token_bucket_spaces_requests_and_pauses_for_retry_after():
    bucket = TokenBucket(Rate(2, 0.1))  # 2 per 100 ms, burst 2
    start = time.monotonic()
    for _ in range(6):
        await bucket.acquire()
    assert time.monotonic() - start >= 0.19  # 2 free, then 4 at 20/s
    bucket.pause(0.1)
    start = time.monotonic()
    await bucket.acquire()
    assert time.monotonic() - start >= 0.09


async def test_rows_submitted_before_start_wait_and_workers_start_once(http, tmp_path):
    from notifier.notify import Deliverer
    from notifier.notify.channels import Webhook

    store = NotifyStore(tmp_path / "n.sqlite")
    hook = Webhook(http.url_for("/hook"), name="hook")
    deliverer = Deliverer(store, {"hook": hook})
    rows = store.save(outbox=[OutboxEntry(full_notification(), "hook", "lane")])
    deliverer.submit(rows)
    await deliverer.start()
    assert len(deliverer._workers["hook"].tasks) == deliverer.policies["hook"].concurrency == 4
    assert await deliverer.wait_idle(5)
    assert len(http.to("/hook")) == 1
    await deliverer.stop()
    await hook.aclose()
    store.close()


# --------------------------------------------------------------------------------------------
# Delivery end to end


async def test_a_webhook_gets_open_escalate_and_resolve_in_order(http, tmp_path, notifiers):
    notifier = await notifiers(config(webhook(http.url_for("/hook"))), tmp_path / "n.sqlite")
    t = now_ms()
    for step in (
        move("orders", OK, WARN, t),
        move("orders", WARN, ERR, t + 1),
        move("orders", ERR, OK, t + 2),
    ):
        notifier.handle([step])
        notifier.flush_due()
    assert await notifier.wait_delivered(5)

    got = [(event, group) for _id, event, group in alerts_of(http.to("/hook"))]
    assert got == [("open", "orders"), ("escalate", "orders"), ("resolve", "orders")]
    assert len({r.json["alerts"][0]["incident"]["id"] for r in http.to("/hook")}) == 1
    metrics = notifier.metrics()
    assert metrics["sent"] == {"hook/webhook": 3}
    assert metrics["outbox_depth"] == 0
    await notifier.stop()


async def test_a_receiver_answering_500_for_a_while_loses_nothing_and_keeps_order(
    http, tmp_path, notifiers
):
    http.reply("/hook", 500, text="down", times=25)
    notifier = await notifiers(
        config(webhook(http.url_for("/hook")), {"group_by": ["..."]}), tmp_path / "n.sqlite"
    )
    t = now_ms()
    planned = 0
    for step, (previous, current) in enumerate([(OK, WARN), (WARN, ERR), (ERR, OK)]):
        notifier.handle([move(f"g{i}", previous, current, t + step) for i in range(8)])
        planned += len(notifier.flush_due())
    assert planned == 24
    assert await notifier.wait_delivered(10)

    delivered = alerts_of(http.to("/hook")[25:])  # the first 25 got a 500
    assert len(delivered) == len({n for n, _e, _g in delivered}) == 24  # each exactly once
    for i in range(8):
        assert [e for _n, e, g in delivered if g == f"g{i}"] == ["open", "escalate", "resolve"]
    metrics = notifier.metrics()
    assert metrics["retried"]["hook/webhook"] == 25
    assert metrics["sent"]["hook/webhook"] == 24
    assert "hook/webhook" not in metrics["failed"]
    await notifier.stop()


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class ReceiverOnPort(HttpReceiver):
    """An HttpReceiver on a chosen port, to come up where the channel already points."""

    def __init__(self, port: int) -> None:
        super().__init__()
        self.wanted = port

    async def __aenter__(self) -> ReceiverOnPort:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", self.wanted)
        self.port = self.wanted
        return self


async def test_a_receiver_not_listening_gets_everything_once_it_is_up(tmp_path, notifiers):
    port = free_port()
    notifier = await notifiers(
        config(webhook(f"http://127.0.0.1:{port}/hook")), tmp_path / "n.sqlite"
    )
    t = now_ms()
    notifier.handle([move("orders", OK, ERR, t)])
    notifier.flush_due()
    notifier.handle([move("orders", ERR, OK, t + 1)])
    notifier.flush_due()
    await eventually(lambda: notifier.metrics()["retried"].get("hook/webhook", 0) >= 3)
    metrics = notifier.metrics()
    assert metrics["outbox_depth"] == 2
    assert metrics["oldest_pending_age_seconds"] > 0

    async with ReceiverOnPort(port) as rx:
        assert await notifier.wait_delivered(5)
        assert [e for _n, e, _g in alerts_of(rx.to("/hook"))] == ["open", "resolve"]
        await notifier.stop()


async def test_429_retry_after_is_honoured(http, tmp_path, notifiers):
    http.reply("/hook", 429, text="slow down", headers={"Retry-After": "0.4"}, times=1)
    notifier = await notifiers(config(webhook(http.url_for("/hook"))), tmp_path / "n.sqlite")
    notifier.handle([move("orders", OK, ERR, now_ms())])
    notifier.flush_due()
    await eventually(lambda: len(http.requests) == 1)
    first = time.monotonic()
    await eventually(lambda: len(http.requests) == 2)
    assert time.monotonic() - first >= 0.35
    assert await notifier.wait_delivered(2)
    await notifier.stop()


async def test_a_final_failure_is_reported_counted_and_the_lane_moves_on(
    http, tmp_path, notifiers, caplog
):
    caplog.set_level(logging.INFO, logger="notifier.notify")
    http.reply("/hook", 400, text="bad request", times=1)
    notifier = await notifiers(config(webhook(http.url_for("/hook"))), tmp_path / "n.sqlite")
    t = now_ms()
    notifier.handle([move("orders", OK, WARN, t)])
    [opened] = notifier.flush_due()
    notifier.handle([move("orders", WARN, ERR, t + 1)])
    notifier.flush_due()
    assert await notifier.wait_delivered(5)

    assert len(http.to("/hook")) == 2  # the 400 is not retried; the escalation still goes
    assert notifier.metrics()["failed"] == {"hook/webhook": 1}
    [failed] = notifier.store.outbox_rows("failed")
    assert failed["notification_id"] == opened.id
    assert failed["last_error"].startswith("HTTP 400")
    lines = [json.loads(r.getMessage()) for r in caplog.records if r.levelno >= logging.ERROR]
    assert lines == [
        {
            "event": "notification_failed",
            "channel": "hook/webhook",
            "notification": opened.id,
            "outbox_id": failed["id"],
            "attempts": 1,
            "status_code": 400,
            "error": "HTTP 400: bad request",
        }
    ]
    await notifier.stop()


async def test_a_restart_with_a_full_outbox_delivers_the_rest_and_resends_nothing(
    http, tmp_path, notifiers
):
    db = tmp_path / "n.sqlite"
    http.reply("/slow", 200, json_body={"status": "ok"}, hang=0.03)
    slow = config(webhook(http.url_for("/slow"), concurrency=1), {"group_by": ["..."]})
    first = await notifiers(slow, db)
    t = now_ms()
    first.handle([move(f"g{i:02d}", OK, ERR, t) for i in range(40)])
    assert len(first.flush_due()) == 40
    await eventually(lambda: len(http.to("/slow")) >= 8)
    await first.stop()  # mid-way: the request in flight finishes and is recorded
    before = alerts_of(http.to("/slow"))
    assert 8 <= len(before) < 40

    # Same database, same channel name; the receiver now answers at once on another path.
    fast = config(webhook(http.url_for("/fast")), {"group_by": ["..."]})
    second = await notifiers(fast, db)
    assert await second.wait_delivered(5)
    after = alerts_of(http.to("/fast"))
    ids = [n for n, _e, _g in before + after]
    assert len(ids) == len(set(ids)) == 40  # everything once, nothing re-sent
    assert second.core.counters.notifications == 0  # nothing re-planned either
    assert len(second.incidents()) == 40  # nothing forgotten

    # The opens were sent before the restart, so their resolves are owed and go out.
    second.handle([move("g00", ERR, OK, now_ms())])
    second.flush_due()
    assert await second.wait_delivered(5)
    [(_n, event, group)] = alerts_of(http.to("/fast"))[len(after) :]
    assert (event, group) == ("resolve", "g00")
    await second.stop()


async def test_a_row_whose_channel_was_removed_fails_loudly_after_a_restart(
    http, tmp_path, notifiers, caplog
):
    db = tmp_path / "n.sqlite"
    http.reply("/hook", 200, json_body={"status": "ok"}, hang=5)
    first = await notifiers(config(webhook(http.url_for("/hook"))), db)
    first.handle([move("orders", OK, ERR, now_ms())])
    [planned] = first.flush_due()
    await eventually(lambda: len(http.to("/hook")) == 1)
    await first.stop()  # the send in flight is cut off after stop_timeout: the row stays pending

    caplog.set_level(logging.ERROR, logger="notifier.notify")
    renamed = {"pager": {"webhook": {"url": http.url_for("/other")}}}
    second = await notifiers(config(renamed), db)

    [failed] = second.store.outbox_rows("failed")
    assert (failed["notification_id"], failed["last_error"]) == (
        planned.id,
        "channel no longer configured",
    )
    assert second.metrics()["failed"] == {"hook/webhook": 1}
    [line] = [json.loads(r.getMessage()) for r in caplog.records if r.levelno >= logging.ERROR]
    assert line == {
        "event": "notification_failed",
        "channel": "hook/webhook",
        "notification": planned.id,
        "outbox_id": failed["id"],
        "attempts": 0,
        "error": "channel no longer configured",
    }
    await second.stop()


async def test_a_repeat_after_restart_keeps_its_schedule(http, tmp_path, notifiers):
    db = tmp_path / "n.sqlite"
    cfg = config(webhook(http.url_for("/hook")), {"repeat_interval": "1h"})
    first = await notifiers(cfg, db)
    first.handle([move("orders", OK, ERR, now_ms())])
    first.flush_due()
    assert await first.wait_delivered(5)
    await first.stop()

    second = await notifiers(cfg, db)
    await asyncio.sleep(0.05)
    assert second.flush_due(now_ms() + 59 * 60_000) == []
    assert [n.alerts[0].event for n in second.flush_due(now_ms() + 61 * 60_000)] == [Event.REPEAT]
    await second.stop()


async def test_a_storm_of_500_groups_is_one_message_per_channel(http, tmp_path, notifiers):
    receivers = {
        "oncall": [
            {"slack_webhook": {"url": http.url_for("/services/T0/B0/storm")}},
            {"webhook": {"url": http.url_for("/storm")}},
        ]
    }
    notifier = await notifiers(
        config(receivers, {"group_by": ["cluster"], "group_wait": "200ms"}), tmp_path / "n.sqlite"
    )
    t = now_ms()
    notifier.handle([move(f"group-{i:03d}", OK, ERR, t) for i in range(500)])
    await eventually(lambda: len(http.requests) == 2)
    assert all(r.received_at_ms >= t + 200 for r in http.requests)  # held for group_wait
    assert await notifier.wait_delivered(5)
    await asyncio.sleep(0.1)

    [slack] = http.to("/services/T0/B0/storm")
    [hook] = http.to("/storm")
    assert len(hook.json["alerts"]) == 500
    message = slack.json
    blocks = len(message["blocks"]) + sum(len(a.get("blocks", [])) for a in message["attachments"])
    assert blocks <= 50
    assert "more" in json.dumps(message["attachments"][-1])
    await notifier.stop()


async def test_pagerduty_dedup_key_is_the_incident_id_from_open_to_resolve(
    http, tmp_path, notifiers
):
    receivers = {
        "pd": {"pagerduty": {"routing_key": "R0UT1NG-K3Y", "url": http.url_for("/v2/enqueue")}}
    }
    notifier = await notifiers(config(receivers), tmp_path / "n.sqlite")
    t = now_ms()
    for step in (move("orders", OK, WARN, t), move("orders", WARN, ERR, t + 1)):
        notifier.handle([step])
        notifier.flush_due()
    notifier.handle([move("orders", ERR, OK, t + 2)])
    notifier.flush_due()
    assert await notifier.wait_delivered(5)

    [incident] = notifier.incidents(open_only=False)
    events = [r.json for r in http.to("/v2/enqueue")]
    assert [(e["event_action"], e["dedup_key"]) for e in events] == [
        ("trigger", incident.id),
        ("trigger", incident.id),
        ("resolve", incident.id),
    ]
    assert [e["payload"]["severity"] for e in events[:2]] == ["warning", "error"]
    await notifier.stop()


async def test_a_slack_bot_resolve_updates_the_original_message_even_after_restart(
    http, tmp_path, notifiers
):
    db = tmp_path / "n.sqlite"
    receivers = {
        "slack": {
            "slack_bot": {
                "token": "xoxb-t0k3n-s3cr3t",
                "channel": "#lag",
                "api_url": http.url_for("/api"),
                "rate": "50/s",
            }
        }
    }
    cfg = config(receivers)
    first = await notifiers(cfg, db)
    first.handle([move("orders", OK, ERR, now_ms())])
    first.flush_due()
    assert await first.wait_delivered(5)
    await first.stop()
    [post] = http.to("/api/chat.postMessage")
    original_ts = "1714560000.000001"
    assert post.json["channel"] == "#lag"

    second = await notifiers(cfg, db)
    second.handle([move("orders", ERR, OK, now_ms())])
    second.flush_due()
    assert await second.wait_delivered(5)
    [update] = http.to("/api/chat.update")
    assert (update.json["channel"], update.json["ts"]) == (SLACK_CHANNEL_ID, original_ts)
    reply = http.to("/api/chat.postMessage")[1].json
    assert reply["thread_ts"] == original_ts
    await second.stop()


async def test_email_threads_an_incident(tmp_path, notifiers):
    async with SmtpReceiver() as smtp:
        receivers = {
            "mail": {
                "email": {
                    "host": "127.0.0.1",
                    "port": smtp.port,
                    "tls": "none",
                    "sender": "notifier@example.com",
                    "recipients": ["a@example.com", "b@example.com"],
                }
            }
        }
        notifier = await notifiers(config(receivers), tmp_path / "n.sqlite")
        t = now_ms()
        notifier.handle([move("orders", OK, ERR, t)])
        notifier.flush_due()
        notifier.handle([move("orders", ERR, OK, t + 1)])
        notifier.flush_due()
        assert await notifier.wait_delivered(5)
        await notifier.stop()

    opened, resolved = (e.message for e in smtp.messages)
    assert opened["Subject"] == resolved["Subject"] == "[notifier] prod/orders"
    assert resolved["In-Reply-To"] == opened["Message-ID"]
    assert smtp.messages[0].recipients == ["a@example.com", "b@example.com"]


# --------------------------------------------------------------------------------------------
# The service's other duties


async def test_silences_through_the_service_validate_persist_and_delete(http, tmp_path, notifiers):
    db = tmp_path / "n.sqlite"
    cfg = config(
        webhook(http.url_for("/hook")),
        silences=[
            {
                "matchers": ['group="batch"'],
                "ends_at": "2100-01-01T00:00:00Z",
                "author": "ops",
                "comment": "by design",
            }
        ],
    )
    first = await notifiers(cfg, db)
    with pytest.raises(SilenceError) as exc:
        first.add_silence(['group=~"("'], ends_at=now_ms() - 1, author="", comment="x")
    assert set(dict(exc.value.problems)) == {"matchers[0]", "ends_at", "author"}

    silence = first.add_silence(
        ["cluster=prod"], ends_at=now_ms() + 3_600_000, author="me", comment="deploy"
    )
    first.handle([move("orders", OK, ERR, now_ms())])
    assert first.flush_due() == []
    assert first.incidents()[0].silenced
    await first.stop()

    second = await notifiers(cfg, db)
    assert sorted(s.source for s in second.list_silences()) == ["api", "config"]
    config_silence = next(s for s in second.list_silences() if s.source == "config")
    with pytest.raises(SilenceError, match="config"):
        second.delete_silence(config_silence.id)
    second.delete_silence(silence.id)
    await eventually(lambda: len(http.to("/hook")) == 1)
    assert [e for _n, e, g in alerts_of(http.to("/hook"))] == ["open"]
    await second.stop()


async def test_secrets_never_reach_logs_errors_or_metrics(http, tmp_path, notifiers, caplog):
    caplog.set_level(logging.DEBUG)
    url = http.url_for("/hook?token=SuperS3cretQuery")
    http.reply("/hook", 500, text="failed for /hook?token=SuperS3cretQuery", times=2)
    http.reply("/hook", 401, text="bad token SuperS3cretQuery", times=1)
    notifier = await notifiers(
        config(webhook(url, bearer_token="B34rer-T0ken-xyz")), tmp_path / "n.sqlite"
    )
    notifier.handle([move("orders", OK, ERR, now_ms())])
    notifier.flush_due()
    assert await notifier.wait_delivered(5)

    shown = "\n".join(r.getMessage() for r in caplog.records)
    shown += json.dumps(notifier.metrics()) + repr(notifier.config) + repr(notifier.channels)
    shown += json.dumps(notifier.store.outbox_rows())
    assert "notification_failed" in shown and "notification_retry" in shown
    for secret in ("SuperS3cretQuery", "B34rer-T0ken-xyz"):
        assert secret not in shown
    await notifier.stop()


async def test_check_renders_every_template_and_names_broken_ones(tmp_path, notifiers):
    ok = Notifier(config(webhook("http://127.0.0.1:9/")), tmp_path / "a.sqlite")
    assert ok.check() == []
    await ok.stop()

    (tmp_path / "t" / "slack").mkdir(parents=True)
    (tmp_path / "t" / "slack" / "open.json.j2").write_text('{"text":\n {{ oops( }}}')
    broken = Notifier(
        config(
            webhook("http://127.0.0.1:9/", body_template="webhook/missing.json.j2"),
            templates=str(tmp_path / "t"),
        ),
        tmp_path / "b.sqlite",
    )
    problems = {p.template: p for p in broken.check()}
    assert problems["slack/open.json.j2"].line == 2
    assert problems["webhook/missing.json.j2"].message == "template not found"
    await broken.stop()


async def test_incidents_show_open_ones_and_history(http, tmp_path, notifiers):
    notifier = await notifiers(config(webhook(http.url_for("/hook"))), tmp_path / "n.sqlite")
    t = now_ms()
    notifier.handle([move("a", OK, ERR, t), move("b", OK, WARN, t)])
    notifier.handle([move("a", ERR, OK, t + 1)])
    assert [i.group for i in notifier.incidents()] == ["b"]
    history = {i.group: i for i in notifier.incidents(open_only=False)}
    assert history["a"].close_reason == "recovered" and history["b"].open
    notifier.cluster_down("prod", t + 2, "timeout")
    assert notifier.metrics()["clusters_down"] == ["prod"]
    await notifier.stop()


def test_a_config_error_from_the_service_names_the_field():
    with pytest.raises(ConfigError) as exc:
        config({"hook": {"webhook": {"url": "http://x", "concurrency": 0}}})
    assert "receivers.hook[0].webhook.concurrency" in dict(exc.value.problems)


def test_the_database_is_plain_sqlite_another_process_can_read(tmp_path):
    store = NotifyStore(tmp_path / "n.sqlite")
    store.save(outbox=[OutboxEntry(full_notification(), "c", "l")])
    with contextlib.closing(sqlite3.connect(tmp_path / "n.sqlite")) as other:
        [(body,)] = other.execute("SELECT body FROM outbox").fetchall()
    assert notification_from_dict(json.loads(body)).id == "n1"
    store.close()
