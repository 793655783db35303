"""Label matching: whether an incident is selected by a list of matchers.

Routes, silences and inhibit rules select incidents the same way. ``cluster`` and ``group`` are
labels of the incident itself; ``topic``, ``rule``, ``severity`` and the labels a rule sets
(``team``) are labels of its findings, so those matchers must all hold for one and the same
finding. A label a finding does not have compares as the empty string, as in Alertmanager.
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
    if label == "severity":
        return finding.severity.value
    return finding.labels.get(label)


def matches_incident(matchers: Sequence[Matcher], incident: Incident) -> bool:
    """Cluster/group matchers against the incident; the others (topic, rule, severity, a
    rule's labels) against any one of its findings (all of them against the same finding)."""
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
