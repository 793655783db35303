"""The generic webhook (``webhook``): a documented JSON document, or a body template's.

- ``channel``: :class:`Webhook`, :func:`webhook_payload`, the body template's checks
- ``settings``: its settings in a receiver's entry
"""

from __future__ import annotations

from pathlib import Path

from notifier.notify.channels.registry import ChannelKind, register
from notifier.notify.channels.templates import Templates
from notifier.notify.channels.webhook.channel import (
    TEMPLATE_FOLDER,
    WEBHOOK_PAYLOAD_VERSION,
    Webhook,
    check_body_template,
    render_body,
    webhook_payload,
)
from notifier.notify.channels.webhook.settings import BasicAuthConfig, WebhookConfig


def _body_template(value: str | None) -> str | Path | None:
    """A path to an existing file is that file; anything else a template name."""
    if value is None:
        return None
    path = Path(value).expanduser()
    return path if path.is_file() else value


def build(settings: WebhookConfig, name: str, templates: Templates) -> Webhook:
    auth = settings.basic_auth
    return Webhook(
        settings.url,
        method=settings.method,
        headers=settings.headers,
        basic_auth=(auth.username, auth.password) if auth else None,
        bearer_token=settings.bearer_token,
        body_template=_body_template(settings.body_template),
        name=name,
        templates=templates,
        timeout=settings.timeout,
    )


WEBHOOK = register(ChannelKind("webhook", WebhookConfig, build, templates=TEMPLATE_FOLDER))

__all__ = [
    "WEBHOOK",
    "WEBHOOK_PAYLOAD_VERSION",
    "BasicAuthConfig",
    "Webhook",
    "WebhookConfig",
    "check_body_template",
    "render_body",
    "webhook_payload",
]
