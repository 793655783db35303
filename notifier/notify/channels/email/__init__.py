"""E-mail (``email``): multipart text and HTML over SMTP, threaded per incident, rendering
``templates/email/``.

- ``channel``: :class:`Email`
- ``settings``: its settings in a receiver's entry
"""

from __future__ import annotations

from notifier.notify.channels.email.channel import TEMPLATE_FOLDER, Email
from notifier.notify.channels.email.settings import EmailConfig
from notifier.notify.channels.registry import ChannelKind, register
from notifier.notify.channels.templates import Templates


def build(settings: EmailConfig, name: str, templates: Templates) -> Email:
    return Email(
        settings.host,
        settings.port,
        sender=settings.sender,
        recipients=settings.recipients,
        username=settings.username,
        password=settings.password,
        tls=settings.tls,
        name=name,
        templates=templates,
        timeout=settings.timeout,
        validate_certs=settings.validate_certs,
    )


EMAIL = register(ChannelKind("email", EmailConfig, build, templates=TEMPLATE_FOLDER))

__all__ = ["EMAIL", "Email", "EmailConfig"]
