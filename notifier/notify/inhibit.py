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

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

from notifier.config import InhibitRuleConfig, Matcher
from notifier.types import Finding, GroupResult, Incident, Severity

_Ident = tuple[str, str, str | None, int | None]
"""An alert: (incident id, rule, topic, partition)."""

_Label = Callable[[Incident, Finding | None], str]
"""Reads one label of an alert (a missing label reads as empty, as in Alertmanager)."""

_SEVERITY_TEXT = {severity: severity.value for severity in Severity}


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


def _label_reader(label: str) -> _Label:
    """One label of an alert, read straight from the incident and finding: its cluster and
    group, the finding's topic, rule and severity, and its rule's labels (the built-in ones
    win), without building the whole label set for every question."""
    if label in ("cluster", "group"):
        return lambda i, f: (
            getattr(i, label) if f is None else f.labels.get(label, getattr(i, label))
        )
    if label == "topic":
        return lambda i, f: "" if f is None else f.topic or ""
    if label == "rule":
        return lambda i, f: "" if f is None else f.rule
    if label == "severity":
        return lambda i, f: "" if f is None else _SEVERITY_TEXT[f.severity]
    return lambda i, f: "" if f is None else f.labels.get(label, "")


def _test(matcher: Matcher) -> Callable[[str], bool]:
    """``matcher`` as a predicate on the label's text, its constant parts worked out once."""
    if matcher.op in ("=~", "!~"):
        return matcher.matches
    if matcher.label == "severity":  # severities compare without case, as Matcher does
        wanted = matcher.value.lower()
        equal: Callable[[str], bool] = lambda text: text.lower() == wanted  # noqa: E731
    else:
        wanted = matcher.value
        equal = lambda text: text == wanted  # noqa: E731
    if matcher.op == "=":
        return equal
    return lambda text: not equal(text)


_Matchers = tuple[tuple[_Label, Callable[[str], bool]], ...]


def _compile(matchers: Sequence[Matcher]) -> _Matchers:
    return tuple((_label_reader(m.label), _test(m)) for m in matchers)


def _matches(matchers: _Matchers, incident: Incident, finding: Finding | None) -> bool:
    return all(test(read(incident, finding)) for read, test in matchers)


@dataclass(frozen=True, slots=True)
class _CompiledRule:
    label: str
    source: _Matchers
    target: _Matchers
    equal: tuple[_Label, ...]

    @classmethod
    def of(cls, rule: InhibitRuleConfig) -> _CompiledRule:
        return cls(
            rule.label,
            _compile(rule.source_matchers),
            _compile(rule.target_matchers),
            tuple(_label_reader(label) for label in rule.equal),
        )

    def key(self, incident: Incident, finding: Finding | None) -> tuple[str, ...]:
        return tuple(read(incident, finding) for read in self.equal)


@dataclass(slots=True)
class _Source:
    ident: _Ident
    matches_target: bool


class Inhibitor:
    """The inhibit rules over the incidents that fire at the moment, indexed by rule and
    ``equal`` values and kept up to date one incident at a time (:meth:`update`).

    The matchers are compiled once, and an answer of :meth:`muted` is kept until the sources
    change: a flush asks about the same incident more than once (to route it, to hold it
    back, to list what is muted in its message)."""

    def __init__(self, rules: Iterable[InhibitRuleConfig]) -> None:
        self.rules = list(rules)
        self._compiled = [_CompiledRule.of(rule) for rule in self.rules]
        self._index: list[dict[tuple[str, ...], dict[_Ident, _Source]]] = [{} for _ in self.rules]
        self._entries: dict[str, list[tuple[int, tuple[str, ...], _Ident]]] = {}
        self._answers: dict[str, tuple[tuple[Finding, ...], dict[int, str]]] = {}

    def update(self, incident: Incident, result: GroupResult | None) -> None:
        """``incident`` opened, changed or closed: its findings are sources as it now stands
        (none once it is closed)."""
        old = self._entries.pop(incident.id, ())
        self._answers.pop(incident.id, None)  # its own answer, also when no source changes
        for r, key, ident in old:
            bucket = self._index[r].get(key)
            if bucket is not None:
                bucket.pop(ident, None)
                if not bucket:
                    del self._index[r][key]
        if old:
            self._answers.clear()
        if incident.closed_at is not None or not self.rules:
            return
        entries = []
        alerts: Sequence[Finding | None] = current_findings(incident, result) or [None]
        for finding in alerts:
            for r, rule in enumerate(self._compiled):
                if not _matches(rule.source, incident, finding):
                    continue
                key = rule.key(incident, finding)
                ident = _ident(incident, finding)
                source = _Source(ident, _matches(rule.target, incident, finding))
                self._index[r].setdefault(key, {})[ident] = source
                entries.append((r, key, ident))
        if entries:
            self._entries[incident.id] = entries
            self._answers.clear()

    def muted(self, incident: Incident, findings: Sequence[Finding]) -> dict[int, str]:
        """Which of ``incident``'s ``findings`` are muted (index → the muting rule's name)."""
        if not self._entries:
            return {}
        known = self._answers.get(incident.id)
        if (
            known is not None
            and len(known[0]) == len(findings)
            and all(a is b for a, b in zip(known[0], findings, strict=True))
        ):
            return dict(known[1])
        out: dict[int, str] = {}
        alerts: Sequence[Finding | None] = findings or [None]
        for position, finding in enumerate(alerts):
            ident: _Ident | None = None
            for r, rule in enumerate(self._compiled):
                index = self._index[r]
                if not index or not _matches(rule.target, incident, finding):
                    continue
                sources = index.get(rule.key(incident, finding))
                if not sources:
                    continue
                both = _matches(rule.source, incident, finding)
                if ident is None:
                    ident = _ident(incident, finding)
                if any(
                    source.ident != ident and not (both and source.matches_target)
                    for source in sources.values()
                ):
                    out[position] = rule.label
                    break
        self._answers[incident.id] = (tuple(findings), out)
        return dict(out)
