"""Inhibition, the Alertmanager way: a firing source alert mutes matching target alerts.

An *alert* here is one finding of an open incident, labelled ``cluster``, ``group``, ``topic``,
``rule``, ``severity`` and its rule's own labels (``team``); a cluster that cannot be scanned
is an incident whose one finding has ``rule="cluster_down"``. An inhibit rule mutes a target
finding when some other firing finding matches its ``source_matchers``, the target matches its
``target_matchers``, and the two have the same value (a missing label counts as empty) for
every ``equal`` label. As in Alertmanager, an alert never mutes itself, and an alert that
matches both sides is not muted by another that matches both sides too.

The dispatcher asks at each flush: an incident whose current findings are all muted is held
back (``inhibited``); one with some muted findings is sent with those set apart
(:attr:`notifier.types.Alert.muted`), and routed without them. The sources are indexed by
rule and ``equal`` values and updated as each incident changes, so a question costs a lookup
per finding, however many incidents are open.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from notifier.config import InhibitRuleConfig, Matcher
from notifier.types import Finding, GroupResult, Incident

_Ident = tuple[str, str, str | None, int | None]
"""An alert: (incident id, rule, topic, partition)."""


def finding_labels(incident: Incident, finding: Finding | None) -> dict[str, str]:
    """The label set of one alert: the incident's cluster and group, the finding's topic,
    rule and severity, and its rule's labels."""
    labels = {"cluster": incident.cluster, "group": incident.group}
    if finding is not None:
        labels.update(finding.labels)
        labels.update(topic=finding.topic or "", rule=finding.rule, severity=finding.severity.value)
    return labels


def current_findings(incident: Incident, result: GroupResult | None) -> list[Finding]:
    """What an open incident fires for now: its latest result's findings, else (a cluster
    that is down, a result without findings) the incident's own."""
    if result is not None and result.findings:
        return list(result.findings)
    return list(incident.findings)


def _ident(incident: Incident, finding: Finding | None) -> _Ident:
    if finding is None:
        return (incident.id, "", None, None)
    return (incident.id, finding.rule, finding.topic, finding.partition)


def _matches(matchers: Sequence[Matcher], labels: Mapping[str, str]) -> bool:
    return all(m.matches(labels.get(m.label)) for m in matchers)


@dataclass(slots=True)
class _Source:
    ident: _Ident
    matches_target: bool


class Inhibitor:
    """The inhibit rules over the incidents that fire at the moment, indexed by rule and
    ``equal`` values and kept up to date one incident at a time (:meth:`update`)."""

    def __init__(self, rules: Iterable[InhibitRuleConfig]) -> None:
        self.rules = list(rules)
        self._index: list[dict[tuple[str, ...], dict[_Ident, _Source]]] = [{} for _ in self.rules]
        self._entries: dict[str, list[tuple[int, tuple[str, ...], _Ident]]] = {}

    def update(self, incident: Incident, result: GroupResult | None) -> None:
        """``incident`` opened, changed or closed: its findings are sources as it now stands
        (none once it is closed)."""
        for r, key, ident in self._entries.pop(incident.id, ()):
            bucket = self._index[r].get(key)
            if bucket is not None:
                bucket.pop(ident, None)
                if not bucket:
                    del self._index[r][key]
        if incident.closed_at is not None or not self.rules:
            return
        entries = []
        alerts: Sequence[Finding | None] = current_findings(incident, result) or [None]
        for finding in alerts:
            labels = finding_labels(incident, finding)
            for r, rule in enumerate(self.rules):
                if not _matches(rule.source_matchers, labels):
                    continue
                key = tuple(labels.get(label, "") for label in rule.equal)
                ident = _ident(incident, finding)
                source = _Source(ident, _matches(rule.target_matchers, labels))
                self._index[r].setdefault(key, {})[ident] = source
                entries.append((r, key, ident))
        if entries:
            self._entries[incident.id] = entries

    def muted(self, incident: Incident, findings: Sequence[Finding]) -> dict[int, str]:
        """Which of ``incident``'s ``findings`` are muted (index → the muting rule's name)."""
        if not self._entries:
            return {}
        out: dict[int, str] = {}
        alerts: Sequence[Finding | None] = findings or [None]
        for position, finding in enumerate(alerts):
            labels = finding_labels(incident, finding)
            ident = _ident(incident, finding)
            for r, rule in enumerate(self.rules):
                if not self._index[r] or not _matches(rule.target_matchers, labels):
                    continue
                both = _matches(rule.source_matchers, labels)
                key = tuple(labels.get(label, "") for label in rule.equal)
                sources = self._index[r].get(key, {})
                if any(
                    source.ident != ident and not (both and source.matches_target)
                    for source in sources.values()
                ):
                    out[position] = rule.label
                    break
        return out
