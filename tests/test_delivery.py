"""Delivery end to end: the Notifier's outbox rows through real channels to real loopback
receivers (notifier/demo: HTTP for webhooks, Slack and PagerDuty; aiosmtpd for e-mail) — no
mocks. Order per lane, retries, Retry-After, final failures, restarts, storms, PagerDuty's
dedup key, Slack follow-ups and e-mail threads. Intervals are short (group_wait and
group_interval 0, retries from 10 ms) so the whole file runs in seconds.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time

from notifier.demo import SLACK_CHANNEL_ID, HttpReceiver, SmtpReceiver
from notifier.netutil import free_port
from notifier.notify import NotifyStore, OutboxEntry
from notifier.service.logs import JsonFormatter
from notifier.types import Event

from .notify_helpers import (
    ERR,
    OK,
    WARN,
    alerts_of,
    config,
    eventually,
    full_notification,
    move,
    now_ms,
    webhook,
)


async def test_rows_submitted_before_start_wait_and_workers_start_once(http, tmp_path):
    from notifier.notify import Deliverer
    from notifier.notify.channels.webhook import Webhook

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


def logged(record: logging.LogRecord) -> dict:
    """A log record as the service's JSON log line shows it (``ts``, ``level`` and ``logger``
    left out): the fields must be top-level, searchable, not a JSON string inside ``msg``."""
    line = json.loads(JsonFormatter().format(record))
    return {k: v for k, v in line.items() if k not in ("ts", "level", "logger")}


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
    lines = [logged(r) for r in caplog.records if r.levelno >= logging.ERROR]
    assert lines == [
        {
            "msg": "notification failed",
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
    [line] = [logged(r) for r in caplog.records if r.levelno >= logging.ERROR]
    assert line == {
        "msg": "notification failed",
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
