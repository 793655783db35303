"""E-mail over SMTP: multipart text and HTML, threaded per incident.

:class:`Email` renders the ``email/`` templates and sets ``Message-ID``, ``In-Reply-To`` and
``References`` so that every mail about an incident lands in one thread.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence
from datetime import UTC, datetime
from email.message import EmailMessage
from email.utils import format_datetime, parseaddr
from typing import Any, Literal

import aiosmtplib

from notifier.config import Scrubber, Secret, optional_secret
from notifier.notify.channels.base import Channel, ChannelPolicy, no_alerts
from notifier.notify.channels.delivery import Delivery, excerpt
from notifier.notify.channels.format import clip, headline_event
from notifier.notify.channels.templates import TemplateError, Templates, render_or_fall_back
from notifier.types import Event, Notification

TEMPLATE_FOLDER = "email"
"""E-mails render ``email/<event>.subject.j2``, ``.txt.j2`` and ``.html.j2``."""


def _msgid_token(text: str) -> str:
    """Incident ids may hold ``/``, ``@`` or spaces; a Message-ID's left part may not."""
    token = re.sub(r"[^A-Za-z0-9.\-_]+", "-", text).strip("-.")
    if len(token) > 120 or not token:
        token = token[:80] + "." + hashlib.sha256(text.encode()).hexdigest()[:24]
    return token


def _header_text(text: str, limit: int = 250) -> str:
    """One line: a newline in a template's output must not become header injection."""
    return clip(" ".join(text.split()), limit)


class Email(Channel):
    """Multipart (text + HTML) e-mail over SMTP, threaded per incident.

    Templates: ``email/<event>.subject.j2``, ``.txt.j2``, ``.html.j2``. The built-in subject is
    the same for every event of an incident (``[notifier] cluster/group``; for a multi-alert
    notification ``[notifier] consumer lag: <group_key>``), and the headers thread the
    messages: the ``open`` mail's ``Message-ID`` is ``<incident.ID@domain>``, and every later
    mail about the incident carries it in ``In-Reply-To``/``References``. Multi-alert mails
    thread on ``<group.HASH@domain>`` of the receiver and group key and reference each incident.

    ``tls``: ``"starttls"`` (port 587 by default), ``"implicit"`` (465), ``"none"`` (25).
    """

    def __init__(
        self,
        host: str,
        port: int | None = None,
        *,
        sender: str,
        recipients: Sequence[str],
        username: str | None = None,
        password: str | Secret | None = None,
        tls: Literal["starttls", "implicit", "none"] = "starttls",
        name: str = "email",
        templates: Templates | None = None,
        timeout: float = 10.0,
        validate_certs: bool = True,
    ) -> None:
        if tls not in ("starttls", "implicit", "none"):
            raise ValueError(f"tls must be 'starttls', 'implicit' or 'none', not {tls!r}")
        if not recipients:
            raise ValueError("an e-mail channel needs at least one recipient")
        self.name = name
        self.host = host
        self.port = port or {"starttls": 587, "implicit": 465, "none": 25}[tls]
        self.sender = sender
        self.recipients = list(recipients)
        self.username = username
        self.password = optional_secret(password)
        self.tls = tls
        self.timeout = timeout
        self.validate_certs = validate_certs
        self.templates = templates or Templates()
        self._scrub = Scrubber([self.password])
        domain = parseaddr(sender)[1].rpartition("@")[2]
        self.domain = _msgid_token(domain) if domain else "notifier.invalid"

    def policy(self) -> ChannelPolicy:
        """Unlimited (the SMTP server queues), four lanes."""
        return ChannelPolicy(None, 4, "email:" + self.name)

    def accepted_detail(self, delivery: Delivery) -> str:
        refused = delivery.meta.get("refused")
        also = f"; refused for {', '.join(sorted(refused))}" if refused else ""
        return f"accepted by the SMTP server {self.host}{also}"

    def thread_ids(self, notification: Notification) -> tuple[str, str | None, list[str]]:
        """``(Message-ID, In-Reply-To, References)`` for ``notification``."""
        alerts = notification.alerts
        event = headline_event(alerts)
        if len(alerts) == 1:
            incident = alerts[0].incident.id
            root = f"<incident.{_msgid_token(incident)}@{self.domain}>"
            if event is Event.OPEN:
                return root, None, []
            own = (
                f"<incident.{_msgid_token(incident)}.{event.value}"
                f".{_msgid_token(notification.id)}@{self.domain}>"
            )
            return own, root, [root]
        digest = hashlib.sha256(
            f"{notification.receiver}\x00{notification.group_key}".encode()
        ).hexdigest()[:24]
        root = f"<group.{digest}@{self.domain}>"
        own = f"<notification.{_msgid_token(notification.id)}@{self.domain}>"
        incidents = [f"<incident.{_msgid_token(a.incident.id)}@{self.domain}>" for a in alerts]
        return own, root, [root, *incidents[:50]]

    def build_message(self, notification: Notification) -> EmailMessage:
        """Render the templates into a ready-to-send message (raises :class:`TemplateError`)."""
        event = headline_event(notification.alerts).value

        def build(templates: Templates) -> tuple[str, str, str]:
            context = templates.context(notification)
            return (
                templates.render(Templates.name(TEMPLATE_FOLDER, event, "subject"), context),
                templates.render(Templates.name(TEMPLATE_FOLDER, event, "txt"), context),
                templates.render(Templates.name(TEMPLATE_FOLDER, event, "html"), context),
            )

        subject, text, html = render_or_fall_back(self.name, self.templates, build)
        message_id, in_reply_to, references = self.thread_ids(notification)

        message = EmailMessage()
        message["Subject"] = _header_text(subject)
        message["From"] = self.sender
        message["To"] = ", ".join(self.recipients)
        message["Date"] = format_datetime(
            datetime.fromtimestamp(notification.created_at / 1000, UTC)
        )
        message["Message-ID"] = message_id
        if in_reply_to:
            message["In-Reply-To"] = in_reply_to
        if references:
            message["References"] = " ".join(references)
        # RFC 3834: tells vacation responders not to answer an alert.
        message["Auto-Submitted"] = "auto-generated"
        message["X-Notifier-Event"] = event
        message["X-Notifier-Group-Key"] = _header_text(notification.group_key)
        message.set_content(text)
        message.add_alternative(html, subtype="html")
        return message

    async def send(self, notification: Notification) -> Delivery:
        if not notification.alerts:
            return no_alerts()
        try:
            message = self.build_message(notification)
        except TemplateError as exc:
            return Delivery.failure(str(exc), retryable=False, template=exc.template)
        try:
            refused, _reply = await aiosmtplib.send(
                message,
                sender=parseaddr(self.sender)[1] or self.sender,
                recipients=self.recipients,
                hostname=self.host,
                port=self.port,
                username=self.username,
                password=self.password.reveal() if self.password else None,
                use_tls=self.tls == "implicit",
                start_tls=self.tls == "starttls",
                validate_certs=self.validate_certs,
                timeout=self.timeout,
            )
        except aiosmtplib.SMTPRecipientsRefused as exc:
            codes = [r.code for r in exc.recipients]
            detail = ", ".join(f"{r.recipient}: {r.code} {r.message}" for r in exc.recipients)
            return Delivery.failure(
                self._scrub(f"all recipients refused ({detail})"),
                retryable=any(400 <= c < 500 for c in codes),
                status_code=codes[0] if codes else None,
            )
        except aiosmtplib.SMTPResponseException as exc:
            return Delivery.failure(
                self._scrub(f"SMTP {exc.code}: {excerpt(exc.message)}"),
                retryable=400 <= exc.code < 500,
                status_code=exc.code,
            )
        except (aiosmtplib.SMTPTimeoutError, TimeoutError):
            return Delivery.failure(f"SMTP timed out after {self.timeout:g} s", retryable=True)
        except (aiosmtplib.SMTPConnectError, aiosmtplib.SMTPServerDisconnected, OSError) as exc:
            return Delivery.failure(
                self._scrub(f"SMTP connection failed ({type(exc).__name__}): {exc}"),
                retryable=True,
            )
        except aiosmtplib.SMTPException as exc:  # e.g. STARTTLS or AUTH not offered: config
            return Delivery.failure(
                self._scrub(f"SMTP error ({type(exc).__name__}): {exc}"), retryable=False
            )
        meta: dict[str, Any] = {"message_id": message["Message-ID"]}
        if refused:
            meta["refused"] = {rcpt: f"{r.code} {r.message}" for rcpt, r in refused.items()}
        return Delivery.success(250, **meta)
