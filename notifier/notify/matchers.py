"""Label matching: whether an incident is selected by a list of matchers.

Routes and silences select incidents the same way. ``cluster`` and ``group`` are labels of the
incident itself; ``topic``, ``rule`` and ``severity`` are labels of its findings, so those
matchers must all hold for one and the same finding.
"""

from __future__ import annotations

from collections.abc import Sequence

from notifier.config import Matcher
from notifier.types import Finding, Incident


def _finding_label(finding: Finding | None, label: str) -> str | None:
    if finding is None:
        return None
    if label == "topic":
        return finding.topic
    if label == "rule":
        return finding.rule
    return finding.severity.value


def matches_incident(matchers: Sequence[Matcher], incident: Incident) -> bool:
    """Cluster/group matchers against the incident; topic/rule/severity matchers against any
    one of its findings (all of them against the same finding)."""
    finding_level = []
    for m in matchers:
        if m.label == "cluster":
            if not m.matches(incident.cluster):
                return False
        elif m.label == "group":
            if not m.matches(incident.group):
                return False
        else:
            finding_level.append(m)
    if not finding_level:
        return True
    candidates: Sequence[Finding | None] = incident.findings or [None]
    return any(
        all(m.matches(_finding_label(f, m.label)) for m in finding_level) for f in candidates
    )
