"""The channel senders, against real loopback servers (notifier/receivers.py).

Each test is a statement about what a receiver gets, or how a failure is classified for the
caller's retry loop: 2xx ok; 429 retryable with the receiver's Retry-After; 5xx, timeouts and
refused connections retryable; other 4xx final. Secrets never leak into errors or reprs.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest

from notifier.config import Secret
from notifier.demo import SLACK_CHANNEL_ID, HttpReceiver, SmtpReceiver
from notifier.notify.channels import (
    Delivery,
    Email,
    PagerDuty,
    SlackBot,
    SlackMessageRef,
    SlackWebhook,
    Templates,
    Webhook,
    environment_proxy,
    fit_slack_message,
    humanize_lag,
    humanize_seconds,
    parse_retry_after,
    sample_notification,
)
from notifier.types import (
    Alert,
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

NOW = 1_714_560_000_000  # 2024-05-01 10:40 UTC, in ms
WEBHOOK_PATH = "/services/T000/B000/s3cr3tW3bh00kT0k3n"
SLACK_TOKEN = "xoxb-0000-s3cr3t-b0t-t0k3n"
ROUTING_KEY = "R0UT1NGK3Y0000000000000000000000"


# --------------------------------------------------------------------------------------------
# Building notifications


def make_alert(
    event: Event = Event.OPEN,
    *,
    cluster: str = "prod",
    group: str = "orders",
    status: GroupStatus = GroupStatus.ERR,
    lag_seconds: float | None = 47 * 60,
    findings: list[Finding] | None = None,
    gone: bool = False,
) -> Alert:
    """One alert for ``cluster/group``; its incident id is ``cluster/group/opened_at``."""
    if findings is None:
        findings = [
            Finding(
                rule="burrow.stall",
                kind="stall",
                severity=Severity.ERR,
                status="STALL",
                topic="orders",
                partition=3,
                message="committed offset stopped moving while lag grew",
                evidence={"lag_start": 1200, "lag_end": 48_000},
            )
        ]
    if status is GroupStatus.OK:
        findings = []
    partition = PartitionResult(
        topic="orders",
        partition=3,
        status=PartitionStatus.STALL if findings else PartitionStatus.OK,
        complete=1.0,
        burrow_complete=1.0,
        committed_offset=1000,
        log_end_offset=49_000,
        log_start_offset=0,
        current_lag=48_000 if findings else 0,
        lag_seconds=lag_seconds,
        start=None,
        end=None,
    )
    result = GroupResult(
        cluster=cluster,
        group=group,
        status=status,
        complete=1.0,
        burrow_complete=1.0,
        partial=False,
        evaluated_at=NOW,
        partitions=[partition],
        findings=findings,
        total_lag=partition.current_lag or 0,
        max_lag=partition,
        max_lag_seconds=lag_seconds if findings else 0.0,
        group_state="Stable",
        members=2,
    )
    opened = NOW - 3_600_000
    incident = Incident(
        id=f"{cluster}/{group}/{opened}",
        cluster=cluster,
        group=group,
        opened_at=opened,
        status=status,
        peak_status=GroupStatus.ERR,
        closed_at=NOW if event is Event.RESOLVE else None,
        findings=findings,
    )
    return Alert(event=event, incident=incident, result=None if gone else result)


def make_notification(*alerts: Alert, extras: dict | None = None) -> Notification:
    alerts = alerts or (make_alert(),)
    return Notification(
        id=f"n-{alerts[0].event.value}-{len(alerts)}",
        receiver="oncall",
        group_key='{cluster="prod"}',
        alerts=list(alerts),
        created_at=NOW,
        status_page_url="https://notifier.example/status",
        extras=extras or {},
    )


def many_alerts(count: int, event: Event = Event.OPEN) -> list[Alert]:
    return [make_alert(event, group=f"group-{i:03d}") for i in range(count)]


@pytest.fixture
async def smtp():
    async with SmtpReceiver() as receiver:
        yield receiver


def section_texts(message: dict) -> list[str]:
    blocks = list(message.get("blocks", []))
    for attachment in message.get("attachments", []):
        blocks += attachment.get("blocks", [])
    return [b["text"]["text"] for b in blocks if b["type"] == "section"]


def block_count(message: dict) -> int:
    return len(message.get("blocks", [])) + sum(
        len(a.get("blocks", [])) for a in message.get("attachments", [])
    )


# --------------------------------------------------------------------------------------------
# Slack incoming webhook


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


async def test_a_receiver_that_hangs_times_out_as_retryable(http):
    http.reply(WEBHOOK_PATH, hang=5.0)
    async with SlackWebhook(http.url_for(WEBHOOK_PATH), timeout=0.3) as slack:
        delivery = await slack.send(make_notification())

    assert not delivery.ok
    assert delivery.retryable
    assert delivery.error.startswith("timed out after 0.3 s")


async def test_a_refused_connection_is_retryable_and_does_not_leak_the_url():
    async with HttpReceiver() as gone:
        url = gone.url_for(WEBHOOK_PATH)
    async with SlackWebhook(url) as slack:
        delivery = await slack.send(make_notification())

    assert (delivery.ok, delivery.retryable) == (False, True)
    assert "s3cr3t" not in delivery.error


# --------------------------------------------------------------------------------------------
# Slack bot (chat.postMessage / chat.update)


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


# --------------------------------------------------------------------------------------------
# E-mail


def email_channel(smtp: SmtpReceiver, **kwargs) -> Email:
    return Email(
        "127.0.0.1",
        smtp.port,
        sender="notifier <alerts@example.com>",
        recipients=["oncall@example.com"],
        tls="none",
        **kwargs,
    )


async def test_email_is_multipart_text_and_html(smtp):
    delivery = await email_channel(smtp).send(make_notification(make_alert(Event.OPEN)))

    assert delivery.ok
    [envelope] = smtp.messages
    assert envelope.sender == "alerts@example.com"
    assert envelope.recipients == ["oncall@example.com"]
    message = envelope.message
    assert message.get_content_type() == "multipart/alternative"
    text = message.get_body(("plain",)).get_content()
    html = message.get_body(("html",)).get_content()
    assert "Consumer lag ERR: prod/orders" in text
    assert "48k messages, 47 min behind (worst: orders[3])" in text
    assert "evidence: lag_start=1200, lag_end=48000" in text
    assert "<strong>orders</strong>" in html
    assert 'href="https://notifier.example/status"' in html
    assert message["Auto-Submitted"] == "auto-generated"


async def test_email_threads_an_incident_by_subject_and_message_ids(smtp):
    channel = email_channel(smtp)
    for event in (Event.OPEN, Event.ESCALATE, Event.RESOLVE):
        status = GroupStatus.OK if event is Event.RESOLVE else GroupStatus.ERR
        assert (await channel.send(make_notification(make_alert(event, status=status)))).ok

    opened, escalated, resolved = (e.message for e in smtp.messages)
    assert {m["Subject"] for m in (opened, escalated, resolved)} == {"[notifier] prod/orders"}
    root = opened["Message-ID"]
    assert root == "<incident.prod-orders-1714556400000@example.com>"
    assert opened["In-Reply-To"] is None
    for later in (escalated, resolved):
        assert later["In-Reply-To"] == root
        assert later["References"] == root
        assert later["Message-ID"] != root
    assert "Resolved: prod/orders" in resolved.get_body(("plain",)).get_content()


async def test_email_for_several_groups_threads_on_the_group_key(smtp):
    channel = email_channel(smtp)
    await channel.send(make_notification(*many_alerts(3, Event.OPEN)))
    await channel.send(make_notification(*many_alerts(2, Event.RESOLVE)))

    first, second = (e.message for e in smtp.messages)
    assert first["Subject"] == second["Subject"] == '[notifier] consumer lag: {cluster="prod"}'
    assert first["In-Reply-To"] == second["In-Reply-To"]
    assert "<incident.prod-group-000-1714556400000@example.com>" in first["References"]


@pytest.mark.parametrize(
    ("refusal", "retryable", "code"),
    [("451 4.3.0 try again later", True, 451), ("550 5.1.1 no such user", False, 550)],
)
async def test_email_smtp_refusals_are_classified(smtp, refusal, retryable, code):
    smtp.refuse_rcpt = refusal
    delivery = await email_channel(smtp).send(make_notification())

    assert (delivery.ok, delivery.retryable, delivery.status_code) == (False, retryable, code)
    assert str(code) in delivery.error


async def test_email_data_rejection_4xx_retryable_5xx_final(smtp):
    smtp.refuse_data = "554 5.6.0 message rejected"
    assert (await email_channel(smtp).send(make_notification())).retryable is False
    smtp.refuse_data = "452 4.3.1 insufficient storage"
    assert (await email_channel(smtp).send(make_notification())).retryable is True


async def test_email_server_down_is_retryable():
    async with SmtpReceiver() as gone:
        port = gone.port
    channel = Email(
        "127.0.0.1", port, sender="a@example.com", recipients=["b@example.com"], tls="none"
    )
    delivery = await channel.send(make_notification())

    assert (delivery.ok, delivery.retryable) == (False, True)


@pytest.mark.filterwarnings("ignore:Requiring AUTH while not requiring TLS:UserWarning")
async def test_email_login_works_and_a_wrong_password_is_final_and_never_shown():
    async with SmtpReceiver(login=("notifier", "right-password")) as smtp:
        good = email_channel(smtp, username="notifier", password="right-password")
        bad = email_channel(smtp, username="notifier", password="wr0ng-passw0rd")
        assert (await good.send(make_notification())).ok
        delivery = await bad.send(make_notification())

    assert (delivery.ok, delivery.retryable, delivery.status_code) == (False, False, 535)
    assert "wr0ng-passw0rd" not in delivery.error
    assert "wr0ng-passw0rd" not in repr(bad) + repr(bad.password)
    assert len(smtp.messages) == 1


# --------------------------------------------------------------------------------------------
# Generic webhook


async def test_webhook_default_body_is_the_documented_document(http):
    notification = make_notification(
        make_alert(Event.OPEN), make_alert(Event.RESOLVE, group="billing", status=GroupStatus.OK)
    )
    async with Webhook(http.url_for("/hook"), headers={"X-Team": "data"}) as hook:
        delivery = await hook.send(notification)

    assert delivery.ok
    [request] = http.to("/hook")
    assert request.method == "POST"
    assert request.headers["x-team"] == "data"
    body = request.json
    assert body["version"] == "1"
    assert (body["receiver"], body["group_key"]) == ("oncall", '{cluster="prod"}')
    assert body["status"] == "firing"  # firing while any alert fires
    assert body["status_page_url"] == "https://notifier.example/status"
    firing, resolved = body["alerts"]
    assert (firing["event"], firing["status"]) == ("open", "firing")
    assert (resolved["event"], resolved["status"]) == ("resolve", "resolved")
    assert firing["incident"] == {
        "id": "prod/orders/1714556400000",
        "cluster": "prod",
        "group": "orders",
        "status": "ERR",
        "peak_status": "ERR",
        "opened_at": "2024-05-01T09:40:00Z",
        "closed_at": None,
        "close_reason": None,
        "findings": firing["findings"],
    }
    result = firing["result"]
    assert (result["status"], result["complete"], result["total_lag"]) == ("ERR", 1.0, 48_000)
    assert result["max_lag_seconds"] == 2820
    assert result["partitions"][0]["lag"] == 48_000
    assert firing["findings"][0]["evidence"] == {"lag_start": 1200, "lag_end": 48_000}
    assert resolved["incident"]["closed_at"] == "2024-05-01T10:40:00Z"


async def test_webhook_sends_bearer_or_basic_auth(http):
    async with Webhook(http.url_for("/bearer"), bearer_token="t0ken-abcdef") as hook:
        await hook.send(make_notification())
    async with Webhook(http.url_for("/basic"), basic_auth=("user", "pa55word")) as hook:
        await hook.send(make_notification())

    assert http.to("/bearer")[0].headers["authorization"] == "Bearer t0ken-abcdef"
    assert http.to("/basic")[0].headers["authorization"] == "Basic dXNlcjpwYTU1d29yZA=="


async def test_http_channels_go_through_the_proxy_the_environment_names(http, monkeypatch):
    # The receiver plays a forward proxy: it gets the absolute-form request for the real host.
    monkeypatch.setenv("HTTP_PROXY", f"http://ops:s3cret@127.0.0.1:{http.port}")
    monkeypatch.delenv("http_proxy", raising=False)
    monkeypatch.delenv("NO_PROXY", raising=False)
    monkeypatch.delenv("no_proxy", raising=False)
    async with Webhook("http://alerts.example.invalid/hook") as hook:
        delivery = await hook.send(make_notification())

    assert delivery.ok
    [request] = http.to("/hook")
    assert request.headers["host"] == "alerts.example.invalid"
    assert request.headers["proxy-authorization"] == "Basic b3BzOnMzY3JldA=="  # ops:s3cret


def test_no_proxy_exempts_hosts_from_the_environment_proxy(monkeypatch):
    for name in ("http_proxy", "https_proxy", "all_proxy", "no_proxy"):
        monkeypatch.delenv(name, raising=False)
        monkeypatch.delenv(name.upper(), raising=False)
    monkeypatch.setenv("HTTPS_PROXY", "proxy.corp:3128")
    monkeypatch.setenv("NO_PROXY", "localhost,.internal")

    assert environment_proxy("https", "hooks.slack.com") == "http://proxy.corp:3128"
    assert environment_proxy("https", "alerts.internal") is None
    assert environment_proxy("https", "localhost") is None
    assert environment_proxy("http", "hooks.slack.com") is None


async def test_webhook_custom_template_renders_the_body(http, tmp_path):
    template = tmp_path / "opsgenie.json.j2"
    template.write_text(
        '{"message": {{ (alert.incident.group ~ " is " ~ (alert|alert_status))|tojson }},\n'
        ' "alias": {{ alert.incident.id|tojson }},\n'
        ' "alerts": {{ payload.alerts|length }}}\n'
    )
    async with Webhook(http.url_for("/custom"), body_template=template, method="PUT") as hook:
        delivery = await hook.send(make_notification())

    assert delivery.ok
    [request] = http.to("/custom")
    assert request.method == "PUT"
    assert request.json == {
        "message": "orders is ERR",
        "alias": "prod/orders/1714556400000",
        "alerts": 1,
    }


async def test_webhook_shipped_text_template_suits_chat_bridges(http):
    async with Webhook(http.url_for("/mattermost"), body_template="webhook/text.json.j2") as hook:
        await hook.send(make_notification())

    text = http.to("/mattermost")[0].json["text"]
    assert text.splitlines()[0] == "Consumer lag ERR: prod/orders"


async def test_webhook_template_with_invalid_json_fails_naming_the_template(http, tmp_path):
    template = tmp_path / "broken.json.j2"
    template.write_text('{"group": {{ alert.incident.group }}}')  # forgot |tojson
    async with Webhook(http.url_for("/custom"), body_template=template) as hook:
        delivery = await hook.send(make_notification())

    assert (delivery.ok, delivery.retryable) == (False, False)
    assert str(template) in delivery.error
    assert "invalid JSON" in delivery.error
    assert http.requests == []


async def test_webhook_url_credentials_never_appear(http):
    url = http.url_for("/hook?token=SuperS3cretQuery")
    http.reply("/hook", 403, text="forbidden for https://x/hook?token=SuperS3cretQuery")
    hook = Webhook(url, basic_auth=("user", "B4sicPassw0rd"))
    async with hook:
        delivery = await hook.send(make_notification())

    assert (delivery.ok, delivery.retryable) == (False, False)
    assert "SuperS3cretQuery" not in delivery.error
    assert "SuperS3cretQuery" not in repr(hook) + repr(hook.url)
    assert "B4sicPassw0rd" not in repr(hook.basic_auth)


async def test_webhook_credential_headers_are_sent_but_never_shown(http):
    http.reply("/hook", 401, text="bad key Ap1K3y-0000-1111")
    hook = Webhook(http.url_for("/hook"), headers={"X-Api-Key": "Ap1K3y-0000-1111"})
    async with hook:
        delivery = await hook.send(make_notification())

    assert http.to("/hook")[0].headers["x-api-key"] == "Ap1K3y-0000-1111"
    assert delivery.error == "HTTP 401: bad key ***"
    assert repr(hook.headers["X-Api-Key"]) == "Secret('***')"


async def test_the_request_log_does_not_show_a_webhook_url(http, caplog):
    caplog.set_level(logging.DEBUG)
    async with SlackWebhook(http.url_for(WEBHOOK_PATH)) as slack:
        await slack.send(make_notification())

    logged = "\n".join(record.getMessage() for record in caplog.records)
    assert f"HTTP POST http://127.0.0.1:{http.port}/***: 200 (slack)" in logged
    assert "s3cr3tW3bh00kT0k3n" not in logged


# --------------------------------------------------------------------------------------------
# PagerDuty Events API v2


def pagerduty(http: HttpReceiver, **kwargs) -> PagerDuty:
    return PagerDuty(ROUTING_KEY, url=http.url_for("/v2/enqueue"), **kwargs)


async def test_pagerduty_trigger_event_carries_the_incident(http):
    async with pagerduty(http) as pd:
        delivery = await pd.send(make_notification(make_alert(Event.OPEN)))

    assert delivery.ok and delivery.status_code == 202
    [request] = http.to("/v2/enqueue")
    event = request.json
    assert event["routing_key"] == ROUTING_KEY
    assert event["event_action"] == "trigger"
    assert event["dedup_key"] == "prod/orders/1714556400000"
    payload = event["payload"]
    assert payload["summary"] == (
        "[ERR] prod/orders: 48k messages, 47 min behind (worst: orders[3]) · "
        "STALL orders[3]: committed offset stopped moving while lag grew"
    )
    assert (payload["source"], payload["component"], payload["group"]) == (
        "prod",
        "orders",
        "prod",
    )
    assert (payload["severity"], payload["class"]) == ("error", "ERR")
    assert payload["timestamp"] == "2024-05-01T10:40:00Z"
    details = payload["custom_details"]
    assert details["findings"][0]["evidence"] == {"lag_start": 1200, "lag_end": 48_000}
    assert details["behind"] == "47 min"
    assert event["links"] == [{"href": "https://notifier.example/status", "text": "Status page"}]
    assert delivery.meta["events"] == [
        {
            "dedup_key": "prod/orders/1714556400000",
            "event_action": "trigger",
            "ok": True,
            "status_code": 202,
        }
    ]


async def test_pagerduty_resolve_sends_only_what_resolve_needs(http):
    async with pagerduty(http) as pd:
        await pd.send(make_notification(make_alert(Event.RESOLVE, status=GroupStatus.OK)))

    assert http.to("/v2/enqueue")[0].json == {
        "routing_key": ROUTING_KEY,
        "event_action": "resolve",
        "dedup_key": "prod/orders/1714556400000",
    }


async def test_pagerduty_sends_one_event_per_alert_with_mapped_severity(http):
    notification = make_notification(
        make_alert(Event.ESCALATE, group="a"),
        make_alert(Event.REPEAT, group="b", status=GroupStatus.WARN),
        make_alert(Event.RESOLVE, group="c", status=GroupStatus.OK),
    )
    async with pagerduty(http, severity_map={"WARN": "info", "ERR": "critical"}) as pd:
        assert (await pd.send(notification)).ok

    events = [r.json for r in http.to("/v2/enqueue")]
    assert [e["event_action"] for e in events] == ["trigger", "trigger", "resolve"]
    assert [e["payload"]["severity"] for e in events[:2]] == ["critical", "info"]
    assert [e["dedup_key"].split("/")[1] for e in events] == ["a", "b", "c"]


async def test_pagerduty_limits_summary_dedup_key_and_event_size(http):
    huge = {"samples": ["x" * 1000] * 1000}  # ~1 MB of evidence
    findings = [Finding("r", "k", Severity.ERR, "STALL", "t", 0, "m", huge)]
    alert = make_alert(group="g" * 2000, findings=findings)
    async with pagerduty(http) as pd:
        assert (await pd.send(make_notification(alert))).ok

    [request] = http.to("/v2/enqueue")
    event = request.json
    assert len(request.body) < 512 * 1024
    assert len(event["payload"]["summary"]) <= 1024
    assert len(event["dedup_key"]) <= 255
    assert event["payload"]["custom_details"]["trimmed"] is True


@pytest.mark.parametrize(
    ("status", "retryable"), [(400, False), (429, True), (500, True), (502, True)]
)
async def test_pagerduty_errors_are_classified(http, status, retryable):
    http.reply(
        "/v2/enqueue",
        status,
        json_body={"status": "invalid event", "message": "Event object is invalid"},
        headers={"Retry-After": "12"} if status == 429 else None,
    )
    async with pagerduty(http) as pd:
        delivery = await pd.send(make_notification())

    assert (delivery.ok, delivery.retryable, delivery.status_code) == (False, retryable, status)
    assert delivery.error.startswith(f"trigger prod/orders/1714556400000: HTTP {status}")
    assert ROUTING_KEY not in delivery.error
    if status == 429:
        assert delivery.retry_after == 12.0


async def test_pagerduty_stops_at_a_retryable_failure_but_not_at_a_bad_event(http):
    http.reply("/v2/enqueue", 400, json_body={"status": "invalid event"}, times=1)
    http.reply("/v2/enqueue", 500, text="down", times=1)
    async with pagerduty(http) as pd:
        delivery = await pd.send(make_notification(*many_alerts(4)))

    assert len(http.to("/v2/enqueue")) == 2  # the 400 did not stop it, the 500 did
    assert (delivery.ok, delivery.retryable) == (False, True)
    assert [e["ok"] for e in delivery.meta["events"]] == [False, False]


def test_pagerduty_rejects_severities_it_does_not_know():
    with pytest.raises(ValueError, match="severities"):
        PagerDuty(ROUTING_KEY, severity_map={"ERR": "sev1"})


def test_pagerduty_routing_key_not_in_repr():
    pd = PagerDuty(ROUTING_KEY)
    assert ROUTING_KEY not in repr(pd) + repr(pd.routing_key) + str(pd.routing_key)


# --------------------------------------------------------------------------------------------
# Templates


def test_every_shipped_template_renders_with_sample_data():
    assert Templates().render_check() == []


def test_render_check_names_the_broken_template_and_its_line(tmp_path):
    (tmp_path / "slack").mkdir()
    (tmp_path / "slack" / "open.json.j2").write_text('{"text": "ok",\n\n "x": {{ oops( }}\n}')
    (tmp_path / "slack" / "resolve.json.j2").write_text(
        '{\n "text": {{ alert.incident.gruop|tojson }}\n}'
    )

    problems = Templates(tmp_path).render_check()

    by_name = {p.template: p for p in problems}
    assert set(by_name) == {"slack/open.json.j2", "slack/resolve.json.j2"}
    assert by_name["slack/open.json.j2"].line == 3
    assert by_name["slack/resolve.json.j2"].line == 2
    assert "gruop" in by_name["slack/resolve.json.j2"].message
    assert str(by_name["slack/resolve.json.j2"]).startswith("slack/resolve.json.j2:2: ")


async def test_a_template_error_is_a_final_delivery_error_with_name_and_line(http, tmp_path):
    broken = tmp_path / "open.json.j2"
    broken.write_text('{"text": {{ notification.nope|tojson }}}')
    templates = Templates(paths={"slack/open.json.j2": broken})
    async with SlackWebhook(http.url_for(WEBHOOK_PATH), templates=templates) as slack:
        delivery = await slack.send(make_notification())

    assert (delivery.ok, delivery.retryable) == (False, False)
    assert delivery.error.startswith("template slack/open.json.j2:1: ")
    assert http.requests == []


def test_an_override_directory_wins_over_the_shipped_templates(tmp_path):
    (tmp_path / "email").mkdir()
    (tmp_path / "email" / "open.subject.j2").write_text("ALERT {{ alert.incident.group }}")
    templates = Templates(tmp_path)
    context = templates.context(make_notification())

    assert templates.render("email/open.subject.j2", context) == "ALERT orders"
    # Everything not overridden still comes from the shipped templates.
    assert templates.render("email/resolve.subject.j2", context) == "[notifier] prod/orders"


def test_sample_notifications_cover_every_event():
    for event in Event:
        notification = sample_notification(event)
        assert {a.event for a in notification.alerts} == {event}
        assert any(a.result is None for a in notification.alerts)


# --------------------------------------------------------------------------------------------
# Helpers


@pytest.mark.parametrize(
    ("seconds", "text"),
    [(None, "unknown"), (0, "0 s"), (59, "59 s"), (2820, "47 min"), (7200, "2 h"),
     (5400, "1 h 30 min"), (90000, "1 d 1 h")],
)  # fmt: skip
def test_humanize_seconds(seconds, text):
    assert humanize_seconds(seconds) == text


@pytest.mark.parametrize(
    ("lag", "text"),
    [(None, "unknown"), (0, "0"), (999, "999"), (1234, "1.23k"), (48_000, "48k"),
     (999_999, "1M"), (1_234_567, "1.23M")],
)  # fmt: skip
def test_humanize_lag(lag, text):
    assert humanize_lag(lag) == text


def test_retry_after_accepts_seconds_and_http_dates():
    from datetime import UTC, datetime

    now = datetime(2024, 5, 1, 10, 0, 0, tzinfo=UTC)
    assert parse_retry_after("30") == 30.0
    assert parse_retry_after("Wed, 01 May 2024 10:00:45 GMT", now=now) == 45.0
    assert parse_retry_after("soon") is None
    assert parse_retry_after(None) is None


def test_secret_masks_itself():
    secret = Secret("hunter2-hunter2")
    assert repr(secret) == str(secret) == "Secret('***')"
    assert f"{secret}" == "Secret('***')"
    assert secret.reveal() == "hunter2-hunter2"
    assert secret == Secret("hunter2-hunter2")


def test_every_template_file_is_documented_in_the_naming_scheme():
    names = Templates().names()
    assert "slack/open.json.j2" in names
    assert all(Path(name).name.count(".") >= 2 for name in names)
