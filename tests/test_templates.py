"""The message templates: every shipped one renders with sample data, a broken one is named with
its line (at check time and as a final delivery error), an override directory wins.
"""

from __future__ import annotations

from pathlib import Path

from notifier.notify.channels import SlackWebhook, Templates, sample_notification
from notifier.types import Event

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


def test_every_template_file_is_documented_in_the_naming_scheme():
    names = Templates().names()
    assert "slack/open.json.j2" in names
    assert all(Path(name).name.count(".") >= 2 for name in names)
