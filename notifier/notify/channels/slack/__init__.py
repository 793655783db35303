"""Slack: the incoming webhook (``slack_webhook``) and the bot that follows up on an incident's
first message (``slack_bot``), rendering ``templates/slack/``.

- ``channel``: :class:`SlackWebhook`, :class:`SlackBot`, Slack's message limits
- ``settings``: their settings in a receiver's entry
"""

from __future__ import annotations

from notifier.notify.channels.registry import ChannelKind, register
from notifier.notify.channels.slack.channel import (
    TEMPLATE_FOLDER,
    SlackBot,
    SlackLookup,
    SlackMessageRef,
    SlackWebhook,
    check_slack_shape,
    fit_slack_message,
)
from notifier.notify.channels.slack.settings import SlackBotConfig, SlackWebhookConfig
from notifier.notify.channels.templates import Templates


def build_webhook(settings: SlackWebhookConfig, name: str, templates: Templates) -> SlackWebhook:
    return SlackWebhook(
        settings.url,
        name=name,
        templates=templates,
        timeout=settings.timeout,
        max_alerts=settings.max_alerts,
    )


def build_bot(settings: SlackBotConfig, name: str, templates: Templates) -> SlackBot:
    return SlackBot(
        settings.token,
        settings.channel,
        api_url=settings.api_url,
        name=name,
        templates=templates,
        timeout=settings.timeout,
        followup=settings.followup,
        max_alerts=settings.max_alerts,
    )


SLACK_WEBHOOK = register(
    ChannelKind(
        "slack_webhook",
        SlackWebhookConfig,
        build_webhook,
        templates=TEMPLATE_FOLDER,
        check_message=check_slack_shape,
    )
)
SLACK_BOT = register(
    ChannelKind(
        "slack_bot",
        SlackBotConfig,
        build_bot,
        templates=TEMPLATE_FOLDER,
        check_message=check_slack_shape,
    )
)

__all__ = [
    "SLACK_BOT",
    "SLACK_WEBHOOK",
    "SlackBot",
    "SlackBotConfig",
    "SlackLookup",
    "SlackMessageRef",
    "SlackWebhook",
    "SlackWebhookConfig",
    "check_slack_shape",
    "fit_slack_message",
]
