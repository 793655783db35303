"""The generic webhook channel and its documented default JSON body.

:class:`Webhook` sends :func:`webhook_payload` (version ``WEBHOOK_PAYLOAD_VERSION``), built here
rather than templated so that its schema holds by construction; a ``body_template`` can replace
it for receivers that want another shape (checked by :func:`check_body_template`; when it fails
at send time the built-in document goes out instead).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import httpx

from notifier.config import Secret, optional_secret
from notifier.notify.channels.base import (
    ChannelPolicy,
    HttpChannel,
    basic_auth_header,
    no_alerts,
)
from notifier.notify.channels.delivery import Delivery, classify_http
from notifier.notify.channels.format import (
    alert_findings,
    headline_event,
    iso8601,
    partition_document,
)
from notifier.notify.channels.templates import (
    TemplateError,
    TemplateProblem,
    Templates,
    log_template_failure,
    sample_notification,
)
from notifier.types import Event, GroupResult, Incident, Notification

WEBHOOK_PAYLOAD_VERSION = "1"

TEMPLATE_FOLDER = "webhook"
"""Where shipped body templates live (``webhook/text.json.j2``); without one, no template."""


def _incident_document(incident: Incident) -> dict[str, Any]:
    return {
        "id": incident.id,
        "cluster": incident.cluster,
        "group": incident.group,
        "status": str(incident.status),
        "peak_status": str(incident.peak_status),
        "opened_at": iso8601(incident.opened_at),
        "closed_at": iso8601(incident.closed_at),
        "close_reason": incident.close_reason,
        "findings": [f.to_dict() for f in incident.findings],
    }


def _result_document(result: GroupResult, *, partitions: bool = True) -> dict[str, Any]:
    worst = result.max_lag
    document: dict[str, Any] = {
        "status": str(result.status),
        "complete": result.complete,
        "partial": result.partial,
        "evaluated_at": iso8601(result.evaluated_at),
        "group_state": result.group_state,
        "members": result.members,
        "total_lag": result.total_lag,
        "max_lag_seconds": result.max_lag_seconds,
        "max_lag_partition": None
        if worst is None
        else {"topic": worst.topic, "partition": worst.partition, "lag": worst.current_lag},
        "partition_count": result.partition_count,
    }
    if partitions:
        document["partitions"] = [partition_document(p) for p in result.partitions]
    return document


def webhook_payload(notification: Notification) -> dict[str, Any]:
    """The generic webhook's default JSON body (``version`` "1"); see ``templates/README.md``.

    Top level: ``version``, ``notification_id``, ``receiver``, ``group_key``, ``status``
    (``firing`` unless every alert resolves), ``event`` (the headline event), ``created_at``,
    ``status_page_url``, ``alerts``. Each alert: ``event``, ``status``, ``incident`` (id,
    cluster, group, status, peak_status, opened_at, closed_at, close_reason, findings),
    ``result`` (the latest evaluation: status, complete, partial, evaluated_at, group_state,
    members, total_lag, max_lag_seconds, max_lag_partition, partition_count, partitions;
    ``null`` when the group is gone) and ``findings`` (the result's, else the incident's).
    Times are ISO-8601 UTC strings; unknown lags are ``null``, never 0.
    """
    event = headline_event(notification.alerts)
    return {
        "version": WEBHOOK_PAYLOAD_VERSION,
        "notification_id": notification.id,
        "receiver": notification.receiver,
        "group_key": notification.group_key,
        "status": "resolved" if event is Event.RESOLVE else "firing",
        "event": event.value,
        "created_at": iso8601(notification.created_at),
        "status_page_url": notification.status_page_url,
        "alerts": [
            {
                "event": alert.event.value,
                "status": "resolved" if alert.event is Event.RESOLVE else "firing",
                "incident": _incident_document(alert.incident),
                "result": None if alert.result is None else _result_document(alert.result),
                "findings": [f.to_dict() for f in alert_findings(alert)],
                "muted_findings": [f.to_dict() for f in alert.muted],
                "news": list(alert.news),
            }
            for alert in notification.alerts
        ],
    }


def render_body(
    templates: Templates, name: str, notification: Notification, payload: Any = None
) -> Any:
    """A body template's JSON document for ``notification`` (raises :class:`TemplateError`)."""
    if payload is None:
        payload = webhook_payload(notification)
    return templates.render_json(name, templates.context(notification, payload=payload))


def check_body_template(templates: Templates, name: str) -> list[TemplateProblem]:
    """Render a body template with a sample notification of every event (with ``payload``,
    as at send time); the first failure, if any."""
    for event in Event:
        try:
            render_body(templates, name, sample_notification(event))
        except TemplateError as exc:
            return [exc.problem]
    return []


_CREDENTIAL_HEADER = re.compile(r"auth|token|key|secret|password|cookie|signature", re.I)


class Webhook(HttpChannel):
    """A generic HTTP receiver (Alertmanager-style webhook, chat tools, ticketing glue).

    The body is :func:`webhook_payload` unless ``body_template`` names a template (a name the
    :class:`Templates` resolves, or a :class:`~pathlib.Path` to a file) that renders the JSON
    body from the usual context plus ``payload`` (the default document). A template that
    fails or renders invalid JSON is logged (``template_failed``, naming it) and the built-in
    document is sent instead.
    """

    def __init__(
        self,
        url: str | Secret,
        *,
        method: str = "POST",
        headers: Mapping[str, str | Secret] | None = None,
        basic_auth: tuple[str, str | Secret] | None = None,
        bearer_token: str | Secret | None = None,
        body_template: str | Path | None = None,
        name: str = "webhook",
        templates: Templates | None = None,
        timeout: float = 10.0,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        self.url = Secret(url)
        self.method = method.upper()
        # Header values that look like credentials are held as secrets even when given as str.
        self.headers: dict[str, str | Secret] = {
            k: Secret(v) if _CREDENTIAL_HEADER.search(k) else v for k, v in (headers or {}).items()
        }
        self.basic_auth = None if basic_auth is None else (basic_auth[0], Secret(basic_auth[1]))
        self.bearer_token = optional_secret(bearer_token)
        self.templates = templates or Templates()
        if isinstance(body_template, Path):
            template_name = body_template.as_posix()
            self.templates.add(template_name, body_template)
            self.body_template: str | None = template_name
        else:
            self.body_template = body_template
        secrets: list[Secret | None] = [self.url, self.bearer_token]
        secrets += [v for v in self.headers.values() if isinstance(v, Secret)]
        if self.basic_auth:
            secrets.append(self.basic_auth[1])
        super().__init__(name=name, timeout=timeout, secrets=secrets, transport=transport)

    def build_body(self, notification: Notification) -> Any:
        """The JSON document to send: the body template's, or the built-in document when
        there is none or it fails (the failure is logged as ``template_failed``)."""
        payload = webhook_payload(notification)
        if self.body_template is None:
            return payload
        try:
            return render_body(self.templates, self.body_template, notification, payload)
        except TemplateError as exc:
            log_template_failure(self.name, exc, "built-in")
            return payload

    def policy(self) -> ChannelPolicy:
        """Unlimited, four lanes: more lanes in flight do not raise throughput
        (benchmarks/notify.py), only the burst a receiver gets at once."""
        return ChannelPolicy(None, 4, "webhook:" + self.name)

    def own_templates(self) -> list[str]:
        """The body template: it sees ``payload`` besides the usual context."""
        return [self.body_template] if self.body_template else []

    def check(self) -> list[TemplateProblem]:
        """Render the body template with sample data, as it is rendered at send time."""
        if self.body_template is None:
            return []
        return check_body_template(self.templates, self.body_template)

    async def send(self, notification: Notification) -> Delivery:
        if not notification.alerts:
            return no_alerts()
        body = self.build_body(notification)
        headers = {k: v.reveal() if isinstance(v, Secret) else v for k, v in self.headers.items()}
        if self.bearer_token:
            headers["Authorization"] = f"Bearer {self.bearer_token.reveal()}"
        if self.basic_auth:
            headers["Authorization"] = basic_auth_header(
                self.basic_auth[0], self.basic_auth[1].reveal()
            )
        response = await self._request(self.method, self.url.reveal(), body=body, headers=headers)
        if isinstance(response, Delivery):
            return response
        return classify_http(response, self._scrub)
