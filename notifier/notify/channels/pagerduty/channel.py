"""PagerDuty Events API v2: one event per alert, deduplicated on the incident id.

:func:`pagerduty_events` builds the events within PagerDuty's summary, dedup key and event size
limits; :class:`PagerDuty` sends them.
"""

from __future__ import annotations

import dataclasses
import hashlib
from collections.abc import Mapping
from typing import Any

import httpx

from notifier.config import Rate, Secret
from notifier.notify import jsonenc
from notifier.notify.channels.base import ChannelPolicy, HttpChannel, no_alerts, policy_key
from notifier.notify.channels.delivery import Delivery, classify_http, combine
from notifier.notify.channels.format import (
    alert_findings,
    alert_status,
    clip,
    humanize_seconds,
    iso8601,
    partition_document,
    runbooks,
)
from notifier.notify.channels.pagerduty.settings import PAGERDUTY_SEVERITIES
from notifier.notify.channels.templates import TemplateError, Templates, render_or_fall_back
from notifier.types import Event, Notification

TEMPLATE_FOLDER = "pagerduty"
"""An event's summary is ``pagerduty/<event>.summary.j2``."""

PAGERDUTY_MAX_SUMMARY = 1024
PAGERDUTY_MAX_DEDUP_KEY = 255
PAGERDUTY_MAX_EVENT_BYTES = 512 * 1024


def pagerduty_dedup_key(incident_id: str) -> str:
    """The incident id, or — past PagerDuty's 255 characters — a stable prefix plus a hash."""
    if len(incident_id) <= PAGERDUTY_MAX_DEDUP_KEY:
        return incident_id
    digest = hashlib.sha256(incident_id.encode()).hexdigest()
    return incident_id[: PAGERDUTY_MAX_DEDUP_KEY - len(digest) - 1] + "-" + digest


def _event_size(event: Mapping[str, Any]) -> int:
    return len(jsonenc.dumps_bytes(event))


def _shrink_details(event: dict[str, Any], limit: int) -> None:
    """Trim ``custom_details`` until the event fits: partitions, evidence, then findings."""
    details = event["payload"]["custom_details"]
    if _event_size(event) <= limit:
        return
    details.pop("partitions", None)
    details["trimmed"] = True
    if _event_size(event) <= limit:
        return
    for finding in details.get("findings", []):
        finding["evidence"] = {}
    if _event_size(event) <= limit:
        return
    findings = details.get("findings", [])
    while findings and _event_size(event) > limit:
        keep = len(findings) // 2
        details["findings_omitted"] = details.get("findings_omitted", 0) + len(findings) - keep
        del findings[keep:]
    if _event_size(event) > limit:  # pathological names or messages: keep the essentials
        event["payload"]["custom_details"] = {
            key: details[key] for key in ("incident_id", "status", "trimmed") if key in details
        }


def pagerduty_events(
    notification: Notification,
    routing_key: str,
    *,
    templates: Templates,
    severity_map: Mapping[str, str],
    max_event_bytes: int = PAGERDUTY_MAX_EVENT_BYTES,
) -> list[dict[str, Any]]:
    """One Events API v2 event per alert: ``trigger`` for open/escalate/repeat, else ``resolve``.

    ``dedup_key`` is the incident id, so PagerDuty folds repeats and escalations into one
    incident and the resolve closes it. The summary comes from
    ``pagerduty/<event>.summary.j2`` (cut to 1024 characters); ``custom_details`` holds the
    findings with their evidence and the lagging partitions, trimmed to stay under 512 KB.
    """
    events: list[dict[str, Any]] = []
    for alert in notification.alerts:
        dedup_key = pagerduty_dedup_key(alert.incident.id)
        if alert.event is Event.RESOLVE:
            events.append(
                {"routing_key": routing_key, "event_action": "resolve", "dedup_key": dedup_key}
            )
            continue
        single = dataclasses.replace(notification, alerts=[alert])
        context = templates.context(single)
        summary = templates.render(Templates.name(TEMPLATE_FOLDER, alert.event, "summary"), context)
        status = alert_status(alert)
        severity = severity_map.get(str(status)) or severity_map.get(
            str(alert.incident.peak_status), "error"
        )
        result = alert.result
        details: dict[str, Any] = {
            "incident_id": alert.incident.id,
            "event": alert.event.value,
            "cluster": alert.incident.cluster,
            "group": alert.incident.group,
            "status": str(status),
            "peak_status": str(alert.incident.peak_status),
            "opened_at": iso8601(alert.incident.opened_at),
            "findings": [f.to_dict() for f in alert_findings(alert)],
        }
        if result is not None:
            details.update(
                total_lag=result.total_lag,
                max_lag_seconds=result.max_lag_seconds,
                behind=humanize_seconds(result.max_lag_seconds),
                complete=result.complete,
                group_state=result.group_state,
                members=result.members,
                partitions=[partition_document(p) for p in result.partitions if p.status != "OK"],
            )
        else:
            details["gone"] = True
        event: dict[str, Any] = {
            "routing_key": routing_key,
            "event_action": "trigger",
            "dedup_key": dedup_key,
            "client": "notifier",
            "payload": {
                "summary": clip(" ".join(summary.split()), PAGERDUTY_MAX_SUMMARY),
                "source": alert.incident.cluster,
                "severity": severity,
                "timestamp": iso8601(result.evaluated_at if result else notification.created_at),
                "component": alert.incident.group,
                "group": alert.incident.cluster,
                "class": str(status),
                "custom_details": details,
            },
        }
        links = [{"href": url, "text": clip(text, 256)} for url, text in runbooks([alert])]
        if notification.status_page_url:
            event["client_url"] = notification.status_page_url
            links.append({"href": notification.status_page_url, "text": "Status page"})
        if links:
            event["links"] = links
        _shrink_details(event, max_event_bytes)
        events.append(event)
    return events


class PagerDuty(HttpChannel):
    """PagerDuty Events API v2: one event per alert, deduplicated on the incident id.

    202 is success; 400 (an invalid event) is never retried; 429 and 5xx are. Events are sent in
    order and a retryable failure stops the batch — a retry resends all of them, which
    PagerDuty's dedup_key makes harmless.
    """

    def __init__(
        self,
        routing_key: str | Secret,
        *,
        url: str = "https://events.pagerduty.com/v2/enqueue",
        severity_map: Mapping[str, str] | None = None,
        name: str = "pagerduty",
        templates: Templates | None = None,
        timeout: float = 10.0,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        self.routing_key = Secret(routing_key)
        self.url = url
        self.severity_map = dict(severity_map or {"WARN": "warning", "ERR": "error"})
        wrong = {v for v in self.severity_map.values() if v not in PAGERDUTY_SEVERITIES}
        if wrong:
            raise ValueError(
                f"PagerDuty severities must be one of {sorted(PAGERDUTY_SEVERITIES)}, "
                f"not {sorted(wrong)}"
            )
        self.templates = templates or Templates()
        super().__init__(
            name=name, timeout=timeout, secrets=[self.routing_key], transport=transport
        )

    resolve_after_test = True  # the test would otherwise leave an open PagerDuty incident

    def policy(self) -> ChannelPolicy:
        """About 120 events a minute per routing key: one bucket per URL and key."""
        key = policy_key(self.url, self.routing_key.reveal())
        return ChannelPolicy(Rate(120, 60), 4, "pagerduty:" + key)

    def request_cost(self, notification: Notification) -> float:
        """One event per alert."""
        return float(len(notification.alerts))

    def build_events(self, notification: Notification) -> list[dict[str, Any]]:
        def build(templates: Templates) -> list[dict[str, Any]]:
            return pagerduty_events(
                notification,
                self.routing_key.reveal(),
                templates=templates,
                severity_map=self.severity_map,
            )

        return render_or_fall_back(self.name, self.templates, build)

    async def send(self, notification: Notification) -> Delivery:
        if not notification.alerts:
            return no_alerts()
        try:
            events = self.build_events(notification)
        except TemplateError as exc:
            return self._template_failure(exc)
        results: list[Delivery] = []
        sent: list[dict[str, Any]] = []
        for event in events:
            response = await self._request("POST", self.url, body=event)
            delivery = (
                response if isinstance(response, Delivery) else classify_http(response, self._scrub)
            )
            if not delivery.ok and delivery.error:
                delivery.error = f"{event['event_action']} {event['dedup_key']}: {delivery.error}"
            results.append(delivery)
            sent.append(
                {
                    "dedup_key": event["dedup_key"],
                    "event_action": event["event_action"],
                    "ok": delivery.ok,
                    "status_code": delivery.status_code,
                }
            )
            if not delivery.ok and delivery.retryable:
                break
        return combine(results, events=sent)
