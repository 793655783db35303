"""The demo's notifications on the local receivers: the notify config that points every channel
kind at them (:func:`local_notify_config`), and what each channel received per scenario group,
read back as open, escalate, repeat and resolve (:func:`received_events`).

With ``--local-receivers`` every scenario's open, escalation and resolve must reach Slack,
PagerDuty, the webhook and the SMTP server (:func:`told_the_whole_story`).
"""

from __future__ import annotations

import json
import re
from typing import Any

from notifier.demo.receivers import HttpReceiver, SmtpReceiver


def local_notify_config(http: HttpReceiver, smtp: SmtpReceiver) -> dict[str, Any]:
    """Every channel kind, pointed at the loopback receivers; one message per incident, sent at
    once, resolves included."""
    return {
        "receivers": {
            "local": [
                {"slack_webhook": {"url": http.url_for("/services/demo")}},
                {"pagerduty": {"routing_key": "demo-routing-key",
                               "url": http.url_for("/v2/enqueue")}},
                {"webhook": {"url": http.url_for("/hooks/demo")}},
                {"email": {"host": "127.0.0.1", "port": smtp.port, "tls": "none",
                           "sender": "notifier-demo@localhost",
                           "recipients": ["oncall@localhost"]}},
            ]
        },
        "route": {"receiver": "local", "threshold": "warn", "group_by": ["..."],
                  "group_wait": "0s", "group_interval": "1s", "repeat_interval": "never",
                  "send_resolved": True},
    }  # fmt: skip


CHANNELS = ("webhook", "slack", "pagerduty", "e-mail")
STORY_EVENTS = ("open", "escalate", "resolve")
_SLACK_EVENT = re.compile(r"·\s+(opened|escalated|still firing|resolved)\b")
_SLACK_EVENTS = {
    "opened": "open",
    "escalated": "escalate",
    "still firing": "repeat",
    "resolved": "resolve",
}

Received = dict[str, dict[str, list[str]]]
"""group → channel → the events it received for that group, in order."""


def received_events(http: HttpReceiver, smtp: SmtpReceiver, groups: list[str]) -> Received:
    """What each local receiver got, per scenario group, as notification events (open,
    escalate, repeat, resolve): the webhook's ``event`` field, the event label in the Slack
    message, PagerDuty's trigger (open, then escalate when the severity rises) and resolve
    matched to the group by ``dedup_key``, the e-mail's ``X-Notifier-Event`` header."""
    got: Received = {g: {c: [] for c in CHANNELS} for g in groups}
    incident_groups: dict[str, str] = {}
    pd_severity: dict[str, str] = {}
    for request in http.requests:
        if request.path.startswith("/hooks/"):
            for alert in request.json.get("alerts", []):
                group = alert.get("incident", {}).get("group")
                if group in got:
                    got[group]["webhook"].append(alert.get("event", "?"))
        elif request.path.startswith("/services/"):
            text = json.dumps(request.json, ensure_ascii=False)
            label = _SLACK_EVENT.search(text)
            for group in groups:
                if f"*{group}*" in text:
                    got[group]["slack"].append(_SLACK_EVENTS[label[1]] if label else "?")
        elif request.path.startswith("/v2/enqueue"):
            # A resolve carries only the dedup key (the incident id) its trigger named.
            data = request.json
            key = str(data.get("dedup_key"))
            group = incident_groups.get(key)
            if group is None:
                body = request.text
                group = next((g for g in groups if g in body), None)
                if group is None:
                    continue
                incident_groups[key] = group
            action = data.get("event_action", "?")
            if action == "trigger":
                severity = str(data.get("payload", {}).get("severity"))
                previous = pd_severity.get(key)
                pd_severity[key] = severity
                action = (
                    "open"
                    if previous is None
                    else ("repeat" if previous == severity else "escalate")
                )
            got[group]["pagerduty"].append(action)
    for envelope in smtp.messages:
        subject = str(envelope.message.get("Subject", ""))
        event = str(envelope.message.get("X-Notifier-Event", "?"))
        for group in groups:
            if group in subject:
                got[group]["e-mail"].append(event)
    return got


def told_the_whole_story(events: list[str]) -> bool:
    """An open, then an escalation, then a resolve (repeats and flaps aside)."""
    remaining = iter(events)
    return all(any(event == wanted for event in remaining) for wanted in STORY_EVENTS)
