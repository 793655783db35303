"""The message templates: every shipped one renders with sample data, a broken one is named with
its line (at check time and as a final delivery error), an override directory wins.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest

from notifier.demo import SmtpReceiver
from notifier.notify import IncidentBook
from notifier.notify.channels import Channel, Templates, sample_notification
from notifier.notify.channels.email import Email
from notifier.notify.channels.pagerduty import PagerDuty
from notifier.notify.channels.slack import SlackWebhook
from notifier.notify.channels.webhook import Webhook, webhook_payload
from notifier.types import Alert, Event, Notification

from .channel_helpers import WEBHOOK_PATH, make_notification


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


BROKEN_AT_SEND = {
    # channel → (the template it renders for an open alert, a body that breaks only at send time)
    "slack": ("slack/open.json.j2", '{"text": {{ (alert.result.total_lag // 0)|tojson }}}'),
    "pagerduty": ("pagerduty/open.summary.j2", "{{ alert.result.total_lag // 0 }}"),
    "email": ("email/open.subject.j2", "lag {{ alert.result.total_lag // 0 }}"),
    "webhook": ("webhook/custom.json.j2", '{"lag": {{ alert.result.total_lag // 0 }}}'),
}


@pytest.fixture
async def smtp():
    async with SmtpReceiver() as receiver:
        yield receiver


@pytest.mark.parametrize("kind", sorted(BROKEN_AT_SEND))
async def test_a_template_that_fails_at_send_time_falls_back_to_the_built_in_one(
    kind, http, smtp, tmp_path, caplog
):
    name, source = BROKEN_AT_SEND[kind]
    broken = tmp_path / "broken.j2"
    broken.write_text("\n" + source)  # the failure is on line 2
    caplog.set_level(logging.ERROR, logger="notifier.notify")
    if kind == "webhook":
        channel: Channel = Webhook(http.url_for("/hook"), body_template=broken)
    else:
        templates = Templates(paths={name: broken})
        channel = {
            "slack": lambda: SlackWebhook(http.url_for(WEBHOOK_PATH), templates=templates),
            "pagerduty": lambda: PagerDuty("R" * 32, url=http.url_for("/pd"), templates=templates),
            "email": lambda: Email("127.0.0.1", smtp.port, sender="n@example.com",
                                   recipients=["oncall@example.com"], tls="none",
                                   templates=templates),
        }[kind]()  # fmt: skip
    async with channel:
        delivery = await channel.send(make_notification())

    assert delivery.ok, delivery.error  # the alert went out, in the built-in layout
    if kind == "email":
        (message,) = smtp.messages
        assert message.message["Subject"] == "[notifier] prod/orders"
    else:
        (request,) = http.requests
        sent = json.dumps(request.json)
        assert "orders" in sent and "lag" not in request.json  # not the custom body
    (line,) = [r for r in caplog.records if getattr(r, "event", None) == "template_failed"]
    assert line.levelno == logging.ERROR
    assert (line.channel, line.template, line.line) == (channel.name, str(broken) if kind ==
                                                        "webhook" else name, 2)  # fmt: skip
    assert "ZeroDivisionError" in line.error and line.fallback == "built-in"


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


def test_every_template_file_is_documented_in_the_naming_scheme():
    names = Templates().names()
    assert "slack/open.json.j2" in names
    assert all(Path(name).name.count(".") >= 2 for name in names)


def cluster_down_notification(event: Event) -> Notification:
    """What the dispatcher sends when cluster prod cannot be scanned (and when it is back)."""
    book = IncidentBook()
    opened = 1_714_560_000_000
    incident = book.cluster_down("prod", opened, "connection refused").incident
    if event is Event.RESOLVE:
        book.cluster_up("prod", opened + 600_000)
    alert = Alert(event=event, incident=incident, result=None)
    return Notification(id="n1", receiver="oncall", group_key='{cluster="prod"}',
                        alerts=[alert], created_at=opened + 600_000)  # fmt: skip


@pytest.mark.parametrize("event", [Event.OPEN, Event.REPEAT, Event.RESOLVE])
def test_a_cluster_down_notification_talks_about_the_cluster(event):
    templates = Templates()
    notification = cluster_down_notification(event)
    context = templates.context(notification, payload=webhook_payload(notification))
    names = [Templates.name("slack", event, "json"), Templates.name("email", event, "subject"),
             Templates.name("email", event, "txt"), Templates.name("email", event, "html"),
             "webhook/text.json.j2"]  # fmt: skip
    if event is not Event.RESOLVE:
        names.append(Templates.name("pagerduty", event, "summary"))
    for name in names:
        text = templates.render(name, context)
        assert "no longer reported" not in text, name  # that is a vanished group's wording
        assert "prod/*" not in text and "/ <strong>*</strong>" not in text, name
        assert "cluster prod" in text or "prod (cluster)" in text, (name, text)
        if event is Event.RESOLVE:
            assert "can be scanned again" in text or "subject" in name, (name, text)
        elif "subject" not in name:
            assert "cannot be scanned: connection refused" in text, (name, text)


@pytest.mark.parametrize("event", [Event.OPEN, Event.REPEAT])
def test_a_cluster_down_message_says_the_reason_once_and_counts_no_group(event):
    templates = Templates()
    notification = cluster_down_notification(event)
    context = templates.context(notification, payload=webhook_payload(notification))
    slack = json.loads(templates.render(Templates.name("slack", event, "json"), context))
    summary = templates.render(Templates.name("pagerduty", event, "summary"), context)
    (section,) = slack["attachments"][0]["blocks"]
    text = section["text"]["text"]
    assert slack["blocks"][1]["elements"][0]["text"] == "oncall · 1 cluster"
    assert "*ERR* :" not in text and text.count("connection refused") == 1, text
    assert summary.count("connection refused") == 1, summary


def test_news_for_an_open_incident_says_which_rules_joined():
    """An escalate at the status already sent (offsets rewound while the group was stopped)
    names the rules it tells of in its headline (PagerDuty's summary lists every finding, the
    new one among them); a status rise still reads "Escalated"."""
    import dataclasses

    templates = Templates()
    base = sample_notification(Event.ESCALATE, alerts=1)
    alert = dataclasses.replace(base.alerts[0], news=["rewound"])
    notification = dataclasses.replace(base, alerts=[alert])
    context = templates.context(notification, payload=webhook_payload(notification))
    for name in [Templates.name("slack", Event.ESCALATE, "json"),
                 Templates.name("email", Event.ESCALATE, "txt"),
                 "webhook/text.json.j2"]:  # fmt: skip
        assert "ERR, now also rewound: prod/orders-consumer-0" in templates.render(name, context)
    assert webhook_payload(notification)["alerts"][0]["news"] == ["rewound"]
    plain = templates.context(base, payload=webhook_payload(base))
    text = templates.render(Templates.name("email", Event.ESCALATE, "txt"), plain)
    assert "Escalated to ERR" in text
