"""The channel seam, kept honest: a channel kind defined in this file alone (no edit under
notifier/) is registered once, configured in a notify YAML file, checked with the other
templates, shown by the Burrow config view, and delivered to through the real pipeline: the
dispatcher, the outbox, the delivery workers and their retries. README's "A channel" walks
through the same steps.
"""

from __future__ import annotations

import asyncio
import re
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any, ClassVar

import pytest

from notifier.api.burrow_admin import channel_module, channel_modules
from notifier.config import ChannelSettings, ConfigError, Rate, RateValue
from notifier.notify import channel_policies, check_templates
from notifier.notify.channels import (
    Channel,
    ChannelKind,
    ChannelPolicy,
    Delivery,
    Templates,
    channel_kinds,
    register,
    unregister,
)
from notifier.notify.config import load_notify
from notifier.types import Notification

from .notify_helpers import ERR, OK, eventually, move, now_ms

ROOT = Path(__file__).resolve().parent.parent

INBOXES: dict[str, list[str]] = {}
"""What each toy inbox received: the rendered text of every delivered notification."""


class InboxConfig(ChannelSettings):
    """The toy's settings: which inbox, and how many attempts it refuses first."""

    inbox: str
    refuse_first: int = 0
    rate: RateValue = Rate(50, 1)

    burrow_class: ClassVar[str] = "http"

    def burrow_fields(self) -> dict[str, Any]:
        return {"inbox": self.inbox}


class Inbox(Channel):
    """Renders ``inbox/<event>.txt.j2`` and appends it to an in-process inbox, after refusing
    the first ``refuse_first`` attempts as a receiver that is briefly down would."""

    def __init__(self, settings: InboxConfig, name: str, templates: Templates) -> None:
        self.name = name
        self.inbox = settings.inbox
        self.refusals_left = settings.refuse_first
        self.templates = templates
        self.attempts = 0
        self.received = asyncio.Event()

    def policy(self) -> ChannelPolicy:
        return ChannelPolicy(Rate(50, 1), 2, "inbox:" + self.inbox)

    async def send(self, notification: Notification) -> Delivery:
        self.attempts += 1
        if self.refusals_left > 0:
            self.refusals_left -= 1
            return Delivery.failure("inbox is down", retryable=True, retry_after=0.01)
        context = self.templates.context(notification)
        text = self.templates.render(Templates.name("inbox", context["event"], "txt"), context)
        INBOXES.setdefault(self.inbox, []).append(text)
        self.received.set()
        return Delivery.success()


@pytest.fixture
def inbox_kind() -> Iterator[ChannelKind[InboxConfig]]:
    """The toy kind registered for one test: the one line a channel folder has."""
    kind = register(ChannelKind("inbox", InboxConfig, Inbox, templates="inbox"))
    INBOXES.clear()
    yield kind
    unregister("inbox")


def write_templates(directory: Path, text: str = "{{ alert.incident.group }} is {{ status }}"):
    (directory / "inbox").mkdir(parents=True)
    for event in ("open", "escalate", "repeat", "resolve"):
        (directory / "inbox" / f"{event}.txt.j2").write_text(text)


def write_notify_yaml(path: Path, templates: Path, inbox: str, refuse_first: int) -> Path:
    path.write_text(
        textwrap.dedent(
            f"""\
            receivers:
              team:
                - inbox: {{inbox: {inbox}, refuse_first: {refuse_first}, concurrency: 3}}
            route:
              receiver: team
              group_wait: 0s
              group_interval: 0s
            templates: {templates}
            delivery: {{retry_initial: 10ms, retry_max: 50ms, stop_timeout: 2s}}
            """
        )
    )
    return path


async def test_a_registered_channel_gets_a_transition_through_outbox_and_retries(
    inbox_kind, tmp_path, notifiers
):
    write_templates(tmp_path / "templates")
    path = write_notify_yaml(tmp_path / "notify.yaml", tmp_path / "templates", "ops", 2)
    config = load_notify(path)
    [entry] = config.receivers["team"]
    assert (entry.kind, entry.inbox, entry.webhook) == ("inbox", entry.config, None)
    assert check_templates(config) == []

    notifier = await notifiers(config, tmp_path / "n.sqlite")
    inbox = notifier.channels["team"][0]
    assert isinstance(inbox, Inbox) and inbox.name == "team/inbox"
    assert channel_policies(config, notifier.channels)["team/inbox"] == ChannelPolicy(
        Rate(50, 1), 3, "inbox:ops"
    )

    notifier.handle([move("orders", OK, ERR, now_ms())])
    notifier.flush_due()
    await asyncio.wait_for(inbox.received.wait(), 5)

    assert INBOXES["ops"] == ["orders is firing"]
    assert inbox.attempts == 3  # refused twice, retried from the outbox, then delivered
    await eventually(lambda: bool(notifier.store.outbox_rows("sent")))
    [row] = [r for r in notifier.store.outbox_rows() if r["channel"] == "team/inbox"]
    assert (row["state"], row["attempts"]) == ("sent", 3)


def test_its_settings_errors_name_the_file_and_field(inbox_kind, tmp_path):
    write_templates(tmp_path / "templates")
    path = write_notify_yaml(tmp_path / "notify.yaml", tmp_path / "templates", "ops", -1)
    path.write_text(path.read_text().replace("refuse_first: -1", "refuse_first: often"))
    with pytest.raises(ConfigError) as exc:
        load_notify(path)
    assert str(path) in str(exc.value)
    [(field, message)] = exc.value.problems
    assert field == "receivers.team[0].inbox.refuse_first"
    assert "valid integer" in message


def test_unknown_kinds_list_it_and_forgetting_it_refuses_its_entries(inbox_kind, tmp_path):
    write_templates(tmp_path / "templates")
    path = write_notify_yaml(tmp_path / "notify.yaml", tmp_path / "templates", "ops", 0)
    load_notify(path)
    assert "inbox" in channel_kinds()

    unregister("inbox")
    with pytest.raises(ConfigError) as exc:
        load_notify(path)
    [(field, message)] = exc.value.problems
    assert field == "receivers.team[0]"
    assert message.startswith("unknown channel kind 'inbox'; expected one of: slack_webhook")


def test_its_templates_are_checked_with_the_others(inbox_kind, tmp_path):
    write_templates(tmp_path / "templates", text="{{ alert.incident.gruop }}")
    path = write_notify_yaml(tmp_path / "notify.yaml", tmp_path / "templates", "ops", 0)
    problems = {p.template: p for p in check_templates(load_notify(path))}
    assert "gruop" in problems["inbox/open.txt.j2"].message


def test_the_burrow_view_shows_it_from_its_settings(inbox_kind, tmp_path):
    write_templates(tmp_path / "templates")
    config = load_notify(
        write_notify_yaml(tmp_path / "notify.yaml", tmp_path / "templates", "ops", 0)
    )
    receiver, entry = channel_modules(config)["team.inbox"]
    module = channel_module(config, receiver, entry)
    assert (module["class-name"], module["kind"], module["inbox"]) == ("http", "inbox", "ops")


def test_the_readme_walks_through_what_this_file_does():
    readme = (ROOT / "README.md").read_text()
    section = readme.split("### A channel", 1)[1].split("\n#", 1)[0]
    for name in ("ChannelSettings", "Channel", "ChannelKind", "register(", "templates/"):
        assert name in section, name
    for method in re.findall(r"`(\w+)\(\)`", section):
        assert hasattr(Channel, method) or hasattr(ChannelSettings, method), method
    for folder in re.findall(r"`(notifier/[\w/]+/)`", section):
        assert (ROOT / folder).is_dir(), folder
