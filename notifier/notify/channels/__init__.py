"""Channels: the last step of notify, turning one notification into one delivery attempt.

Each channel renders a message, sends it once and reports a :class:`Delivery` (ok, or a
retryable or final failure); the retry loop belongs to the caller (:mod:`notifier.notify`).

- ``base``: the abstract :class:`Channel` and the HTTP channel base (proxies, basic auth).
- ``delivery``: :class:`Delivery`, HTTP status classification, ``Retry-After``.
- ``format``: humanized values, status emoji/colour, clipping: the template filters.
- ``templates``: the Jinja2 loader, :class:`Templates`, template checks, sample data.
- ``slack``, ``email``, ``webhook``, ``pagerduty``: one module per receiver kind.
- ``transport``: the httpx transport on asyncio streams under the HTTP channels.

Imports only :mod:`notifier.types`, :mod:`notifier.config`, :mod:`notifier.notify.jsonenc`
and ``notifier.__version__``.
"""

from notifier.notify.channels.base import Channel, environment_proxy
from notifier.notify.channels.delivery import Delivery, parse_retry_after
from notifier.notify.channels.email import Email
from notifier.notify.channels.format import humanize_lag, humanize_seconds
from notifier.notify.channels.pagerduty import PagerDuty
from notifier.notify.channels.slack import (
    SlackBot,
    SlackMessageRef,
    SlackWebhook,
    fit_slack_message,
)
from notifier.notify.channels.templates import TemplateProblem, Templates, sample_notification
from notifier.notify.channels.transport import AsyncioTransport
from notifier.notify.channels.webhook import Webhook, webhook_payload

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
