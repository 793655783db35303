"""E-mail, against a real loopback SMTP server (notifier/demo/receivers.py): multipart text and
HTML, threading per incident and per group key, SMTP refusals classified 4xx retryable and 5xx
final, and a password that never shows.
"""

from __future__ import annotations

import pytest

from notifier.demo import SmtpReceiver
from notifier.notify.channels.email import Email
from notifier.types import Event, GroupStatus

from .channel_helpers import make_alert, make_notification, many_alerts


@pytest.fixture
async def smtp():
    async with SmtpReceiver() as receiver:
        yield receiver


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
