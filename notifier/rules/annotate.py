"""Labels and annotations on the findings a step hands on.

A rule's ``labels`` are copied onto each of its findings and its ``annotations`` rendered over
each (Jinja2, the variables of :data:`notifier.config.annotations.VARIABLES`), as Prometheus
does for an alerting rule's alert. An override that matches the finding's cluster, group and
topic may set other labels or annotations (a ``team`` per group, say).

Only the findings of transitions are annotated: they are what notifications carry, and a step
has few of them, so a fleet of healthy groups costs nothing here. A template that fails on one
finding (a key that finding's evidence lacks) leaves the error in the annotation, as
Prometheus does, and logs it once per rule and annotation: the notification still goes out.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from typing import Any

import jinja2

from notifier.config.annotations import environment
from notifier.rules.rulesfile import RulesConfig
from notifier.types import Finding, Transition

log = logging.getLogger(__name__)


class Annotator:
    """Renders one rules config's labels and annotations onto findings."""

    def __init__(self, rules: RulesConfig) -> None:
        self.rules = rules
        self._env = environment()
        self._compiled: dict[str, jinja2.Template] = {}
        self._reported: set[tuple[str, str]] = set()

    def annotate(self, transitions: Iterable[Transition]) -> None:
        """Label and annotate every finding the transitions' results carry (in place)."""
        for transition in transitions:
            if transition.result is None:
                continue
            for finding in transition.result.findings:
                self.finding(transition.cluster, transition.group, finding)

    def finding(self, cluster: str, group: str, finding: Finding) -> None:
        try:
            rule = self.rules.rule(finding.rule)
        except KeyError:
            return  # a rule renamed or removed since: nothing to add
        rule = rule.resolved_for(cluster, group, finding.topic or "")
        if not rule.labels and not rule.annotations:
            return
        labels = {
            "cluster": cluster,
            "group": group,
            "topic": finding.topic or "",
            "rule": finding.rule,
            "severity": finding.severity.value,
            **rule.labels,
        }
        finding.labels = dict(rule.labels)
        if not rule.annotations:
            return
        context: dict[str, Any] = {
            "cluster": cluster,
            "group": group,
            "topic": finding.topic or "",
            "partition": finding.partition,
            "rule": finding.rule,
            "kind": finding.kind,
            "status": finding.status,
            "severity": finding.severity.value,
            "message": finding.message,
            "evidence": finding.evidence,
            "since": finding.since,
            "labels": labels,
        }
        finding.annotations = {
            name: self._render(finding.rule, name, template, context)
            for name, template in rule.annotations.items()
        }

    def _render(self, rule: str, name: str, template: str, context: dict[str, Any]) -> str:
        compiled = self._compiled.get(template)
        if compiled is None:
            compiled = self._compiled[template] = self._env.from_string(template)
        try:
            return compiled.render(context).strip()
        except Exception as exc:
            if (rule, name) not in self._reported:
                self._reported.add((rule, name))
                log.warning(
                    "annotation %s of rule %s failed to render: %s", name, rule, exc,
                    extra={"event": "annotation_failed", "rule": rule, "annotation": name,
                           "error": str(exc)},
                )  # fmt: skip
            return f"<error rendering annotation {name}: {exc}>"


_BY_CONFIG: dict[int, tuple[RulesConfig, Annotator]] = {}


def annotator_for(rules: RulesConfig) -> Annotator:
    """The annotator of ``rules`` (one per config object, kept while it is in use: the live
    service has one per reload, a backtest one per configuration)."""
    entry = _BY_CONFIG.get(id(rules))
    if entry is not None and entry[0] is rules:
        return entry[1]
    if len(_BY_CONFIG) >= 256:
        _BY_CONFIG.clear()
    annotator = Annotator(rules)
    _BY_CONFIG[id(rules)] = (rules, annotator)
    return annotator
