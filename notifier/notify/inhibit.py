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
(:attr:`notifier.types.Alert.muted`). The sources are indexed by rule and ``equal`` values,
rebuilt only after an incident changed, so a flush costs a lookup per finding.
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
    """The inhibit rules over the incidents that are open at the moment."""

    def __init__(self, rules: Iterable[InhibitRuleConfig]) -> None:
        self.rules = list(rules)
        self._index: list[dict[tuple[str, ...], list[_Source]]] | None = None

    def invalidate(self) -> None:
        """An incident opened, changed or closed: rebuild the sources at the next question."""
        self._index = None

    def _build(
        self, incidents: Iterable[tuple[Incident, GroupResult | None]]
    ) -> list[dict[tuple[str, ...], list[_Source]]]:
        index: list[dict[tuple[str, ...], list[_Source]]] = [{} for _ in self.rules]
        for incident, result in incidents:
            if incident.closed_at is not None:
                continue
            alerts: Sequence[Finding | None] = current_findings(incident, result) or [None]
            for finding in alerts:
                labels = finding_labels(incident, finding)
                for r, rule in enumerate(self.rules):
                    if not _matches(rule.source_matchers, labels):
                        continue
                    key = tuple(labels.get(label, "") for label in rule.equal)
                    index[r].setdefault(key, []).append(
                        _Source(_ident(incident, finding), _matches(rule.target_matchers, labels))
                    )
        return index

    def muted(
        self,
        incident: Incident,
        findings: Sequence[Finding],
        firing: Iterable[tuple[Incident, GroupResult | None]],
    ) -> dict[int, str]:
        """Which of ``incident``'s ``findings`` are muted (index → the muting rule's name),
        given every incident that fires (read only when the index is out of date)."""
        if not self.rules:
            return {}
        if self._index is None:
            self._index = self._build(firing)
        out: dict[int, str] = {}
        alerts: Sequence[Finding | None] = findings or [None]
        for position, finding in enumerate(alerts):
            labels = finding_labels(incident, finding)
            ident = _ident(incident, finding)
            for r, rule in enumerate(self.rules):
                if not _matches(rule.target_matchers, labels):
                    continue
                both = _matches(rule.source_matchers, labels)
                key = tuple(labels.get(label, "") for label in rule.equal)
                for source in self._index[r].get(key, ()):
                    if source.ident == ident or (both and source.matches_target):
                        continue
                    out[position] = rule.label
                    break
                if position in out:
                    break
        return out
