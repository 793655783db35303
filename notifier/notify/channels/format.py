"""How alerts read in messages: the helpers behind the template filters and built bodies.

The alert helpers (:func:`headline_event`, :func:`alert_status`, :func:`alert_findings`,
:func:`worst_status`) pick what a message is about; the rest format values for people
(``47 min``, ``1.23M``, ``2024-05-01 10:00 UTC``) and cut text to a receiver's limits
(:func:`clip`, :func:`clip_lines`). :class:`~notifier.notify.channels.templates.Templates`
registers them as Jinja2 filters.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from notifier.notify import jsonenc
from notifier.types import Alert, Event, Finding, GroupStatus, PartitionResult

_EVENT_PRECEDENCE = (Event.ESCALATE, Event.OPEN, Event.REPEAT, Event.RESOLVE)


def headline_event(alerts: Sequence[Alert]) -> Event:
    """The event a multi-alert message is about: the most urgent one; resolve only if all are."""
    present = {alert.event for alert in alerts}
    for event in _EVENT_PRECEDENCE:
        if event in present:
            return event
    raise ValueError("a notification needs at least one alert")


def is_cluster_alert(alert: Alert) -> bool:
    """Whether the alert is about a whole cluster that cannot be scanned (not about a group)."""
    return any(f.kind == "cluster_down" for f in alert.incident.findings)


def alert_status(alert: Alert) -> GroupStatus:
    """The group's status now: the latest evaluation's; for a vanished group (no result) the
    incident's while it fires and ``NOTFOUND`` once it resolves; for a cluster that cannot be
    scanned, the incident's (ERR, then OK once it can be scanned again)."""
    if alert.result is not None:
        return alert.result.status
    if alert.event is Event.RESOLVE and not is_cluster_alert(alert):
        return GroupStatus.NOTFOUND
    return alert.incident.status


def alert_findings(alert: Alert) -> list[Finding]:
    """Why the alert is what it is: the latest result's findings, else the incident's; the
    findings an inhibit rule mutes (``alert.muted``) are left out."""
    if alert.result is not None and alert.result.findings:
        found = list(alert.result.findings)
    else:
        found = list(alert.incident.findings)
    if alert.muted:
        muted = {finding_key(f) for f in alert.muted}
        found = [f for f in found if finding_key(f) not in muted]
    return found


def finding_key(finding: Finding) -> tuple[str, str | None, int | None]:
    """What tells one finding of an incident from another: its rule and where it applies."""
    return (finding.rule, finding.topic, finding.partition)


def runbooks(alerts: Iterable[Alert]) -> list[tuple[str, str]]:
    """``(url, text)`` for every distinct ``runbook_url`` annotation of the alerts' findings,
    in order; the text names the rule (and the summary, when there is one)."""
    seen: dict[str, str] = {}
    for alert in alerts:
        for finding in alert_findings(alert):
            url = finding.annotations.get("runbook_url", "").strip()
            if url and url not in seen:
                summary = finding.annotations.get("summary", "").strip()
                seen[url] = f"Runbook: {finding.rule}" + (f" ({summary})" if summary else "")
    return list(seen.items())


def worst_status(alerts: Iterable[Alert]) -> GroupStatus:
    """The most severe current status among ``alerts`` (what a message's colour shows)."""
    return max((alert_status(alert) for alert in alerts), key=lambda s: s.rank)


def humanize_seconds(seconds: float | None) -> str:
    """``2820`` → ``"47 min"``; ``None`` → ``"unknown"`` (never pretend an unknown lag is 0)."""
    if seconds is None:
        return "unknown"
    s = max(0, round(float(seconds)))
    if s < 60:
        return f"{s} s"
    if s < 3600:
        return f"{s // 60} min"
    if s < 86400:
        hours, minutes = divmod(s // 60, 60)
        return f"{hours} h {minutes} min" if minutes else f"{hours} h"
    days, hours = divmod(s // 3600, 24)
    return f"{days} d {hours} h" if hours else f"{days} d"


_LAG_UNITS = ("", "k", "M", "G", "T", "P")


def humanize_lag(messages: float | None) -> str:
    """``1234567`` → ``"1.23M"`` (three significant digits); ``None`` → ``"unknown"``."""
    if messages is None:
        return "unknown"
    value = float(messages)
    if abs(value) < 1000:
        return str(int(value))
    unit = 0
    while unit < len(_LAG_UNITS) - 1 and abs(float(f"{value:.3g}")) >= 1000:
        value /= 1000
        unit += 1
    return f"{float(f'{value:.3g}'):g}{_LAG_UNITS[unit]}"


_STATUS_EMOJI = {
    "OK": ":white_check_mark:",
    "WARN": ":warning:",
    "ERR": ":rotating_light:",
    "NOTFOUND": ":grey_question:",
    "RESOLVE": ":white_check_mark:",
}
_STATUS_COLOR = {"OK": "#2eb886", "WARN": "#daa038", "ERR": "#a30200", "NOTFOUND": "#9e9e9e"}


def status_emoji(status: object) -> str:
    return _STATUS_EMOJI.get(str(status).upper(), ":grey_question:")


def status_color(status: object) -> str:
    return _STATUS_COLOR.get(str(status).upper(), "#9e9e9e")


@functools.lru_cache(maxsize=4096)  # a message repeats its times; a storm repeats them a lot
def iso8601(ms: int | None) -> str | None:
    """Epoch milliseconds → ``2024-05-01T12:00:00Z`` (milliseconds kept when non-zero)."""
    if ms is None:
        return None
    when = datetime.fromtimestamp(ms / 1000, UTC)
    text = when.isoformat(timespec="milliseconds" if ms % 1000 else "seconds")
    return text.replace("+00:00", "Z")


def utc(ms: int | None) -> str:
    """Epoch milliseconds → ``2024-05-01 10:00 UTC`` for people; ``"-"`` when unknown."""
    if ms is None:
        return "-"
    return datetime.fromtimestamp(ms / 1000, UTC).strftime("%Y-%m-%d %H:%M UTC")


def to_json(value: Any, indent: int | None = None) -> str:
    """JSON for templates and bodies: dataclasses, enums and datetimes serialise; non-ASCII
    kept readable."""
    return jsonenc.dumps(value, indent)


def format_evidence(evidence: Mapping[str, Any] | None) -> str:
    """``{"lag_start": 10, "lag_end": 900}`` → ``"lag_start=10, lag_end=900"``."""
    if not evidence:
        return ""
    parts = []
    for key, value in evidence.items():
        shown = value if isinstance(value, str) else to_json(value)
        parts.append(f"{key}={shown}")
    return ", ".join(parts)


def slack_escape(text: object) -> str:
    """Slack mrkdwn control characters (``&``, ``<``, ``>``) must be entity-escaped."""
    return str(text).replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def clip(text: object, limit: int, marker: str = "…") -> str:
    """Cut ``text`` to at most ``limit`` characters, marking the cut."""
    text = str(text)
    if len(text) <= limit:
        return text
    return text[: max(0, limit - len(marker))] + marker


def clip_lines(text: str, limit: int) -> str:
    """Cut at a line boundary to at most ``limit`` characters, ending ``… and N more``."""
    if len(text) <= limit:
        return text
    lines = text.split("\n")
    kept: list[str] = []
    size = 0
    for index, line in enumerate(lines):
        note = f"… and {len(lines) - index} more"
        if size + len(line) + 1 + len(note) > limit:
            if not kept:  # a single huge line: cut inside it
                return clip(line, limit - len(note) - 1) + "\n" + note
            return "\n".join(kept) + "\n" + note
        kept.append(line)
        size += len(line) + 1
    return "\n".join(kept)


def partition_document(p: PartitionResult) -> dict[str, Any]:
    """A partition's result as JSON documents show it (the webhook's payload, PagerDuty's
    details)."""
    return {
        "topic": p.topic,
        "partition": p.partition,
        "status": str(p.status),
        "committed_offset": p.committed_offset,
        "log_end_offset": p.log_end_offset,
        "log_start_offset": p.log_start_offset,
        "lag": p.current_lag,
        "lag_seconds": p.lag_seconds,
        "complete": p.complete,
        "owner": p.owner,
        "client_id": p.client_id,
    }
