"""notify/channels"""

from notifier.notify.channels.base import (
    Channel,
    Delivery,
    Email,
    PagerDuty,
    SlackBot,
    SlackMessageRef,
    SlackWebhook,
    TemplateProblem,
    Templates,
    Webhook,
    environment_proxy,
    fit_slack_message,
    humanize_lag,
    humanize_seconds,
    parse_retry_after,
    sample_notification,
    webhook_payload,
)
from notifier.notify.channels.transport import AsyncioTransport

__all__ = [
    "AsyncioTransport",
    "Channel",
    "Delivery",
    "Email",
    "PagerDuty",
    "SlackBot",
    "SlackMessageRef",
    "SlackWebhook",
    "TemplateProblem",
    "Templates",
    "Webhook",
    "environment_proxy",
    "fit_slack_message",
    "humanize_lag",
    "humanize_seconds",
    "parse_retry_after",
    "sample_notification",
    "webhook_payload",
]
