"""What the client commands print for people: aligned tables of groups, incidents and
silences, with lags, ages and times written the way the notifications write them."""

from __future__ import annotations

import time
from collections.abc import Iterable, Sequence
from datetime import UTC, datetime
from typing import Any

from notifier.notify.channels import humanize_lag, humanize_seconds

NONE = "-"

INCIDENT_ID_SHOWN = 12
"""Characters of an incident id a table shows (the whole id is in ``--json``, logs and
notifications; a prefix finds it there)."""


def render_table(header: Sequence[str], rows: Iterable[Sequence[str]]) -> list[str]:
    """Columns as wide as their widest cell, two spaces apart, no trailing blanks."""
    rows = [list(header), *(list(row) for row in rows)]
    widths = [max(len(row[i]) for row in rows) for i in range(len(header))]
    return ["  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip()
            for row in rows]  # fmt: skip


def now_ms() -> int:
    return int(time.time() * 1000)


def at(ms: int | None) -> str:
    """``2026-11-23 14:05 UTC`` (the minute is enough for people)."""
    if ms is None:
        return NONE
    return datetime.fromtimestamp(ms / 1000, UTC).strftime("%Y-%m-%d %H:%M UTC")


def relative(ms: int | None, now: int) -> str:
    """``in 2 h``, ``5 min ago``."""
    if ms is None:
        return NONE
    seconds = (ms - now) / 1000
    if seconds >= 0:
        return f"in {humanize_seconds(seconds)}"
    return f"{humanize_seconds(-seconds)} ago"


def status_label(group: dict[str, Any]) -> str:
    """``ERR``, or ``ERR (partial)`` while the window is still filling (its status cannot
    notify yet), ``ERR (stale)`` when the cluster has not been scanned lately. The status is
    the open incident's (what the pager said); where the last evaluation says otherwise, or the
    status is only kept by ``keep_firing_for``, the label says so: ``ERR (evaluated OK:
    recovering, partial)``, ``WARN (keep_firing_for)``."""
    marks = [m for m in ("stale", "partial") if group.get(m)]
    reason = group.get("status_reason")
    if reason:
        evaluated = group.get("evaluated_status")
        differs = evaluated is not None and evaluated != group["status"]
        marks.insert(0, f"evaluated {evaluated}: {reason['kind']}" if differs else reason["kind"])
    return f"{group['status']} ({', '.join(marks)})" if marks else group["status"]


def status_notes(groups: Iterable[dict[str, Any]]) -> list[str]:
    """A line for each group whose status is not the last evaluation's, or is kept: why."""
    return [
        f"{g['cluster']}/{g['group']}: {g['status']}, {g['status_reason']['kind']}: "
        f"{g['status_reason']['message']}"
        for g in groups
        if g.get("status_reason")
    ]


def groups_table(groups: Iterable[dict[str, Any]]) -> list[str]:
    """One row per group (as ``/api/groups`` lists them)."""
    header = ("cluster", "group", "status", "lag", "behind", "partitions", "complete", "rules",
              "incident")  # fmt: skip
    rows = []
    for g in groups:
        seconds = g.get("max_lag_seconds")
        incident = NONE
        if g.get("incident_id"):
            incident = "open, silenced" if g.get("silenced") else "open"
        rows.append(
            (
                g["cluster"],
                g["group"],
                status_label(g),
                humanize_lag(g.get("total_lag")),
                NONE if seconds is None else humanize_seconds(seconds),
                str(g.get("partitions", 0)),
                f"{round(100 * float(g.get('complete') or 0))}%",
                ", ".join(g.get("rules") or []) or NONE,
                incident,
            )
        )
    return render_table(header, rows)


def cluster_notes(clusters: Iterable[dict[str, Any]]) -> list[str]:
    """A line for each cluster that is down or whose data is stale."""
    notes = []
    for c in clusters:
        if c.get("down"):
            failures = c.get("consecutive_failures", 0)
            notes.append(
                f"cluster {c['cluster']}: DOWN after {failures} failed scans "
                f"({c.get('last_error') or 'no answer'}); its groups show their last results"
            )
        elif c.get("stale"):
            age = c.get("data_age_seconds")
            old = "never scanned" if age is None else f"data {humanize_seconds(age)} old"
            notes.append(f"cluster {c['cluster']}: stale ({old})")
    return notes


def incidents_table(incidents: Iterable[dict[str, Any]], now: int) -> list[str]:
    header = ("id", "cluster", "group", "status", "peak", "opened", "closed", "silenced", "why")
    rows = []
    for i in incidents:
        # The finding behind the incident's status first: an ERR's reason, not a WARN beside it.
        findings = sorted(i.get("findings") or [], key=lambda f: f.get("severity") != "err")
        closed = NONE
        if i.get("closed_at") is not None:
            reason = f" ({i['close_reason']})" if i.get("close_reason") else ""
            closed = f"{relative(i['closed_at'], now)}{reason}"
        rows.append(
            (
                i["id"][:INCIDENT_ID_SHOWN],
                i["cluster"],
                i["group"],
                "resolved" if i.get("closed_at") is not None else i["status"],
                i["peak_status"],
                relative(i["opened_at"], now),
                closed,
                "yes" if i.get("silenced") else "no",
                _clip(findings[0]["message"]) if findings else NONE,
            )
        )
    return render_table(header, rows)


def silences_table(silences: Iterable[dict[str, Any]], now: int) -> list[str]:
    header = ("id", "state", "matchers", "ends at", "author", "comment")
    rows = []
    for s in silences:
        state = s.get("state") or NONE
        if s.get("source") == "config":
            state += " (config)"
        rows.append(
            (
                s["id"],
                state,
                " ".join(s["matchers"]),
                f"{at(s['ends_at'])} ({relative(s['ends_at'], now)})",
                s["author"],
                _clip(s["comment"]),
            )
        )
    return render_table(header, rows)


def _clip(text: str, width: int = 60) -> str:
    text = " ".join(text.split())
    return text if len(text) <= width else text[: width - 1] + "…"
