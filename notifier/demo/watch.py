"""Watching the service: the sink that records and prints its transitions, and the watcher that
notes when each scenario was detected.

Detection is judged on the service's own results: a scenario is detected at the first scan whose
gated (complete, non-partial) result for its group is not OK and carries the expected finding,
timed from the start of the stage that should produce it; the healthy group, and any group
before it starts misbehaving, must never produce a transition.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from pathlib import Path

from notifier.demo.settings import CLUSTER
from notifier.demo.story import ScenarioRun, ScriptEnv
from notifier.notify import Notifier
from notifier.service import Coordinator, LogSink
from notifier.types import Finding, GroupResult, GroupStatus, Transition

_STATUS_KINDS = frozenset({"burrow", "progress", "rewind"})
"""Rule kinds whose finding status (STALL, STOP, REWIND, ...) says more than the rule's name."""


def _label(finding: Finding) -> str:
    """STALL, STOP, REWIND for the rules that name a status; else the rule's name (a bare WARN
    or ERR would only repeat the group's status)."""
    if finding.kind in _STATUS_KINDS and finding.status not in _GROUP_LEVELS:
        return finding.status
    return finding.rule


_GROUP_LEVELS = frozenset(status.value for status in GroupStatus)


def _labels(findings: Iterable[Finding]) -> list[str]:
    return list(dict.fromkeys(_label(finding) for finding in findings))


def _matches(result: GroupResult, wanted: Iterable[tuple[str, str | None]]) -> list[str]:
    """Labels of the findings of ``result`` that are among the ``wanted`` ones."""
    wanted = set(wanted)
    return _labels(
        f for f in result.findings if (f.kind, f.status) in wanted or (f.kind, None) in wanted
    )


def _note_reached(run: ScenarioRun, t: Transition) -> None:
    """Keep the worst status the group's transitions reached, with the findings behind it."""
    if t.current.rank <= run.reached_status.rank:
        return
    run.reached_status = t.current
    findings = t.result.findings if t.result is not None else []
    behind = [f for f in findings if f.severity.group_status is t.current] or findings
    labels = _labels(behind)
    run.reached = f"{t.current.value} ({', '.join(labels)})" if labels else t.current.value


class DemoSink(LogSink):
    """The coordinator's sink for the demo: the JSON-lines file and log of :class:`LogSink`,
    plus one console line per transition, and a record of them for the summary."""

    def __init__(
        self,
        path: Path,
        env: ScriptEnv,
        runs: dict[str, ScenarioRun],
        notifier: Notifier | None = None,
    ):
        super().__init__(path)
        self.env = env
        self.runs = runs
        self.notifier = notifier
        self.transitions: list[Transition] = []

    def handle(self, transitions: list[Transition], now: int) -> None:
        super().handle(transitions, now)
        if self.notifier is not None:
            self.notifier.handle(transitions, now)
        for t in transitions:
            self.transitions.append(t)
            self.env.out(f"{self.env.stamp(t.at / 1000)} {_transition_line(t)}")
            run = self.runs.get(t.group)
            if run is None:
                continue
            run.status = t.current
            run.statuses.append(t.current)
            _note_reached(run, t)
            if t.current in (GroupStatus.OK, GroupStatus.NOTFOUND):
                continue
            before = run.misbehaving_since_ms is None or t.at < run.misbehaving_since_ms
            if (before or not run.scenario.wanted) and run.early_alert is None:
                run.early_alert = f"{t.current.value} at {t.at / 1000 - self.env.started:.0f}s"

    def cluster_down(self, cluster: str, now: int, reason: str) -> None:
        super().cluster_down(cluster, now, reason)
        if self.notifier is not None:
            self.notifier.cluster_down(cluster, now, reason)
        self.env.out(f"{self.env.stamp(now / 1000)} cluster {cluster} DOWN: {reason}")

    def cluster_up(self, cluster: str, now: int) -> None:
        super().cluster_up(cluster, now)
        if self.notifier is not None:
            self.notifier.cluster_up(cluster, now)
        self.env.out(f"{self.env.stamp(now / 1000)} cluster {cluster} back UP")


def _transition_line(t: Transition) -> str:
    head = f"{t.group:<28} {t.previous.value:>4} -> {t.current.value:<8}"
    if t.gone:
        return f"{head} gone (the group or its topics vanished)"
    findings = t.result.findings if t.result is not None else []
    if not findings:
        lag = t.result.total_lag if t.result is not None else 0
        return f"{head} recovered (total lag {lag})"
    # The finding that made the status (an ERR's reason, not a WARN listed before it), or the
    # news: a rule that began firing at the status the group already stood at.
    news = [f for f in findings if f.rule in t.news]
    first = news[0] if news else max(findings, key=lambda f: f.severity.group_status.rank)
    where = f" {first.topic}/{first.partition}" if first.topic is not None else ""
    more = f" (+{len(findings) - 1} more)" if len(findings) > 1 else ""
    return f"{head} {first.rule} {first.status}{where}: {first.message}{more}"


async def watch_detections(
    coordinator: Coordinator, runs: dict[str, ScenarioRun], poll_s: float
) -> None:
    """After every scan, note each misbehaving scenario's first gated, expected finding."""
    state = coordinator.clusters[CLUSTER]
    seen = None
    while True:
        await asyncio.sleep(poll_s)
        evaluation = state.evaluation
        if evaluation is None or evaluation is seen:
            continue
        seen = evaluation
        for group, run in runs.items():
            if run.detected_at_ms is not None or run.detect_from_ms is None:
                continue
            if not run.scenario.wanted:
                continue
            result = evaluation.result(CLUSTER, group)
            if result.partial or result.status.rank <= GroupStatus.OK.rank:
                continue
            labels = _matches(result, run.scenario.wanted)
            if labels:
                run.detected_at_ms = evaluation.now
                run.detected = f"{result.status.value} ({', '.join(labels)})"
