"""Slack, against a real loopback receiver (notifier/demo/receivers.py): the incoming webhook's
Block Kit message within Slack's limits, how HTTP failures are classified, and the bot that
posts, updates and threads under the message an incident was first posted in.
"""

from __future__ import annotations

import json

import pytest

from notifier.demo import SLACK_CHANNEL_ID
from notifier.notify.channels import Delivery
from notifier.notify.channels.slack import (
    SlackBot,
    SlackMessageRef,
    SlackWebhook,
    fit_slack_message,
)
from notifier.types import Event, Finding, GroupStatus, Incident, Severity

from .channel_helpers import WEBHOOK_PATH, make_alert, make_notification, many_alerts

SLACK_TOKEN = "xoxb-0000-s3cr3t-b0t-t0k3n"


def section_texts(message: dict) -> list[str]:
    blocks = list(message.get("blocks", []))
    for attachment in message.get("attachments", []):
        blocks += attachment.get("blocks", [])
    return [b["text"]["text"] for b in blocks if b["type"] == "section"]


def block_count(message: dict) -> int:
    return len(message.get("blocks", [])) + sum(
        len(a.get("blocks", [])) for a in message.get("attachments", [])
    )


async def test_slack_webhook_posts_a_block_kit_message_explaining_the_alert(http):
    async with SlackWebhook(http.url_for(WEBHOOK_PATH)) as slack:
        delivery = await slack.send(make_notification(make_alert(Event.OPEN)))

    assert delivery == Delivery(ok=True, status_code=200)
    [request] = http.to(WEBHOOK_PATH)
    message = request.json
    assert message["blocks"][0]["type"] == "header"
    assert "prod/orders" in message["blocks"][0]["text"]["text"]
    assert "<https://notifier.example/status|Status page>" in json.dumps(message)
    [attachment] = message["attachments"]
    assert attachment["color"] == "#a30200"  # ERR is red
    [text] = section_texts({"attachments": [attachment]})
    assert "`prod` / *orders*" in text
    assert "*ERR*" in text
    assert "48k messages, 47 min behind" in text
    assert "*STALL* orders[3]: committed offset stopped moving" in text
    assert "lag_start=1200, lag_end=48000" in text
    assert message["text"].startswith(":rotating_light: Consumer lag ERR: prod/orders")


async def test_slack_resolve_is_green_and_says_resolved(http):
    async with SlackWebhook(http.url_for(WEBHOOK_PATH)) as slack:
        await slack.send(make_notification(make_alert(Event.RESOLVE, status=GroupStatus.OK)))

    message = http.to(WEBHOOK_PATH)[0].json
    assert message["blocks"][0]["text"]["text"] == ":white_check_mark: Resolved: prod/orders"
    assert message["attachments"][0]["color"] == "#2eb886"
    assert "caught up" in section_texts(message)[0]


async def test_slack_200_groups_fit_one_message_within_slack_limits(http):
    """A storm becomes one message: ≤ 50 blocks, ≤ 3000 chars a section, "… and N more"."""
    async with SlackWebhook(http.url_for(WEBHOOK_PATH)) as slack:
        delivery = await slack.send(make_notification(*many_alerts(200)))

    assert delivery.ok
    [request] = http.to(WEBHOOK_PATH)
    message = request.json
    assert block_count(message) <= 50
    assert all(len(text) <= 3000 for text in section_texts(message))
    assert "… and 160 more" in section_texts(message)[-1]
    assert "200 consumer groups on prod" in message["blocks"][0]["text"]["text"]


async def test_slack_section_with_too_many_findings_is_cut_with_a_count(http):
    findings = [
        Finding("burrow.stall", "stall", Severity.ERR, "STALL", "orders", p, "stalled", {"p": p})
        for p in range(300)
    ]
    async with SlackWebhook(http.url_for(WEBHOOK_PATH)) as slack:
        await slack.send(make_notification(make_alert(findings=findings)))

    [text] = section_texts(http.to(WEBHOOK_PATH)[0].json)
    assert len(text) <= 3000
    assert text.splitlines()[-1].startswith("… and ")
    assert text.splitlines()[-1].endswith(" more")


def test_fit_slack_message_enforces_limits_whatever_a_custom_template_produced():
    section = {"type": "section", "text": {"type": "mrkdwn", "text": "x\n" * 4000}}
    message = {
        "text": "storm",
        "blocks": [{"type": "header", "text": {"type": "plain_text", "text": "h" * 400}}],
        "attachments": [{"color": "#a30200", "blocks": [dict(section)]} for _ in range(120)],
    }

    fitted = fit_slack_message(message)

    assert block_count(fitted) == 50
    assert len(fitted["blocks"][0]["text"]["text"]) == 150
    assert section_texts(fitted)[-1] == "… and 72 more"
    assert all(len(t) <= 3000 for t in section_texts(fitted))


async def test_slack_429_is_retryable_and_carries_retry_after(http):
    http.reply(WEBHOOK_PATH, 429, text="rate_limited", headers={"Retry-After": "7"})
    async with SlackWebhook(http.url_for(WEBHOOK_PATH)) as slack:
        delivery = await slack.send(make_notification())

    assert not delivery.ok
    assert delivery.retryable
    assert delivery.retry_after == 7.0
    assert delivery.status_code == 429


async def test_a_caller_that_honours_retry_after_gets_through(http):
    http.reply(WEBHOOK_PATH, 429, text="rate_limited", headers={"Retry-After": "0"}, times=1)
    async with SlackWebhook(http.url_for(WEBHOOK_PATH)) as slack:
        first = await slack.send(make_notification())
        second = await slack.send(make_notification())

    assert (first.ok, first.retryable, first.retry_after) == (False, True, 0.0)
    assert second.ok
    assert len(http.to(WEBHOOK_PATH)) == 2


@pytest.mark.parametrize(
    ("status", "body", "retryable"),
    [
        (500, "internal error", True),
        (503, "unavailable", True),
        (400, "invalid_payload", False),
        (404, "channel_not_found", False),
        (410, "channel_is_archived", False),
    ],
)
async def test_slack_http_errors_are_classified(http, status, body, retryable):
    http.reply(WEBHOOK_PATH, status, text=body)
    async with SlackWebhook(http.url_for(WEBHOOK_PATH)) as slack:
        delivery = await slack.send(make_notification())

    assert (delivery.ok, delivery.retryable, delivery.status_code) == (False, retryable, status)
    assert delivery.error == f"HTTP {status}: {body}"


async def test_slack_bot_posts_with_bearer_token_and_returns_ts_for_later(http):
    async with SlackBot(SLACK_TOKEN, "#kafka-alerts", api_url=http.url_for("/api")) as bot:
        delivery = await bot.send(make_notification(make_alert(Event.OPEN)))

    assert delivery.ok
    [request] = http.to("/api/chat.postMessage")
    assert request.headers["authorization"] == f"Bearer {SLACK_TOKEN}"
    assert request.headers["content-type"].startswith("application/json")
    assert request.json["channel"] == "#kafka-alerts"
    assert "thread_ts" not in request.json
    assert request.json["blocks"][0]["type"] == "header"
    assert delivery.meta["channel"] == SLACK_CHANNEL_ID
    assert delivery.meta["ts"] == "1714560000.000001"
    assert delivery.meta["messages"][0]["incident_ids"] == ["prod/orders/1714556400000"]


async def test_slack_bot_resolve_updates_the_original_and_replies_in_its_thread(http):
    original = {"slack_ts": "1714556400.000100", "slack_channel": SLACK_CHANNEL_ID}
    resolve = make_notification(make_alert(Event.RESOLVE, status=GroupStatus.OK), extras=original)
    async with SlackBot(SLACK_TOKEN, "#kafka-alerts", api_url=http.url_for("/api")) as bot:
        delivery = await bot.send(resolve)

    assert delivery.ok
    [update] = http.to("/api/chat.update")
    assert (update.json["channel"], update.json["ts"]) == (SLACK_CHANNEL_ID, "1714556400.000100")
    assert "Resolved" in update.json["blocks"][0]["text"]["text"]
    [reply] = http.to("/api/chat.postMessage")
    assert reply.json["thread_ts"] == "1714556400.000100"
    assert (delivery.meta["channel"], delivery.meta["ts"]) == (
        SLACK_CHANNEL_ID,
        "1714556400.000100",
    )


async def test_slack_bot_finds_originals_per_incident_through_a_lookup(http):
    seen: list[str] = []

    async def lookup(incident: Incident) -> SlackMessageRef | None:
        seen.append(incident.group)
        return SlackMessageRef(SLACK_CHANNEL_ID, "1.1") if incident.group == "known" else None

    notification = make_notification(
        make_alert(Event.ESCALATE, group="known"), make_alert(Event.ESCALATE, group="unknown")
    )
    bot = SlackBot(
        SLACK_TOKEN, "#kafka-alerts", api_url=http.url_for("/api"), lookup=lookup, followup="thread"
    )
    async with bot:
        delivery = await bot.send(notification)

    assert delivery.ok
    assert seen == ["known", "unknown"]
    assert http.to("/api/chat.update") == []  # followup="thread" never rewrites
    threaded, fresh = http.to("/api/chat.postMessage")
    assert threaded.json["thread_ts"] == "1.1"
    assert "prod/known" in threaded.json["text"]
    assert "thread_ts" not in fresh.json
    assert "prod/unknown" in fresh.json["text"]
    # The fresh post is the message future follow-ups of "unknown" should target.
    assert delivery.meta["ts"] == "1714560000.000002"


async def test_slack_bot_batch_posts_new_incidents_and_updates_resolved_ones(http):
    """Per incident: an open starts a message; a resolve rewrites the one it was posted in."""
    resolved = make_alert(Event.RESOLVE, group="billing", status=GroupStatus.OK)
    notification = make_notification(
        make_alert(Event.OPEN, group="orders"),
        resolved,
        extras={
            "slack_ts": {resolved.incident.id: "1714556400.000100"},
            "slack_channel": SLACK_CHANNEL_ID,
        },
    )
    bot = SlackBot(SLACK_TOKEN, "#kafka-alerts", api_url=http.url_for("/api"), followup="update")
    async with bot:
        delivery = await bot.send(notification)

    assert delivery.ok
    [posted] = http.to("/api/chat.postMessage")
    assert "prod/orders" in posted.json["text"] and "thread_ts" not in posted.json
    [updated] = http.to("/api/chat.update")
    assert updated.json["ts"] == "1714556400.000100"
    assert updated.json["text"].startswith(":white_check_mark: Resolved: prod/billing")
    assert [m["incident_ids"] for m in delivery.meta["messages"]] == [
        ["prod/orders/1714556400000"],
        ["prod/billing/1714556400000"],
    ]


async def test_slack_bot_posts_anew_when_the_original_message_is_gone(http):
    http.reply("/api/chat.update", json_body={"ok": False, "error": "message_not_found"})
    resolve = make_notification(
        make_alert(Event.RESOLVE, status=GroupStatus.OK), extras={"slack_ts": "1.1"}
    )
    async with SlackBot(SLACK_TOKEN, "#kafka-alerts", api_url=http.url_for("/api")) as bot:
        delivery = await bot.send(resolve)

    assert delivery.ok
    assert len(http.to("/api/chat.update")) == 1
    [posted] = http.to("/api/chat.postMessage")
    assert posted.json["channel"] == "#kafka-alerts" and "thread_ts" not in posted.json
    assert delivery.meta["ts"] == "1714560000.000001"


@pytest.mark.parametrize(
    ("error", "retryable"),
    [("ratelimited", True), ("internal_error", True), ("channel_not_found", False)],
)
async def test_slack_bot_ok_false_is_a_failure(http, error, retryable):
    http.reply("/api/chat.postMessage", 200, json_body={"ok": False, "error": error})
    async with SlackBot(SLACK_TOKEN, "#kafka-alerts", api_url=http.url_for("/api")) as bot:
        delivery = await bot.send(make_notification())

    assert (delivery.ok, delivery.retryable) == (False, retryable)
    assert delivery.error == f"chat.postMessage: {error}"
    assert delivery.meta["slack_error"] == error


async def test_slack_bot_http_429_carries_retry_after(http):
    http.reply("/api/chat.postMessage", 429, text="", headers={"Retry-After": "30"})
    async with SlackBot(SLACK_TOKEN, "C1", api_url=http.url_for("/api")) as bot:
        delivery = await bot.send(make_notification())

    assert (delivery.retryable, delivery.retry_after, delivery.status_code) == (True, 30.0, 429)


async def test_slack_bot_token_never_shows(http):
    http.reply("/api/chat.postMessage", 401, text=f"bad token {SLACK_TOKEN}")
    bot = SlackBot(SLACK_TOKEN, "C1", api_url=http.url_for("/api"))
    async with bot:
        delivery = await bot.send(make_notification())

    assert not delivery.ok and not delivery.retryable
    assert SLACK_TOKEN not in delivery.error
    assert "***" in delivery.error
    assert SLACK_TOKEN not in repr(bot)
    assert repr(bot.token) == "Secret('***')"
