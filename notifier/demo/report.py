"""What a demo run found and how it is shown: the banner, each scenario's outcome, the summary
table with its verdict, and the table of what the local receivers got."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from notifier.demo.receiving import CHANNELS, Received, told_the_whole_story
from notifier.demo.scenarios import SCENARIOS
from notifier.demo.settings import CLUSTER, DemoSettings
from notifier.demo.story import DETECTION_ALLOWANCE_SCANS, ScenarioRun
from notifier.types import Transition


@dataclass
class ScenarioOutcome:
    """One row of the summary table."""

    name: str
    group: str
    expected: str
    detected: str
    seconds: float | None
    ok: bool
    skipped: str | None = None
    path: str = ""
    """The statuses its transitions went through, e.g. ``OK → WARN → ERR → OK``."""
    reached: str = "-"
    """The worst status it reached and why, e.g. ``ERR (STALL)`` for a group first detected
    as falling behind (WARN) that then stalled."""
    misbehaving_since_ms: int | None = None
    """Wall-clock start of its misbehaviour: an alert before it is a false alarm."""
    detect_from_ms: int | None = None
    """Wall-clock start of the stage its detection is timed from (``seconds``)."""


def scenario_outcome(run: ScenarioRun) -> ScenarioOutcome:
    """The summary row of a scenario whose run is over."""
    scenario = run.scenario
    base: dict[str, Any] = {
        "name": scenario.name,
        "group": run.group,
        "expected": scenario.expected,
        "path": " → ".join(["OK", *(status.value for status in run.statuses)])
        if run.statuses
        else "",
        "reached": "-" if run.skipped is not None else run.reached or "OK",
        "misbehaving_since_ms": run.misbehaving_since_ms,
        "detect_from_ms": run.detect_from_ms,
    }
    if run.skipped is not None:
        return ScenarioOutcome(
            **base, detected=f"skipped: {run.skipped}", seconds=None, ok=True, skipped=run.skipped
        )
    if run.failure is not None:
        return ScenarioOutcome(**base, detected=run.failure, seconds=None, ok=False)
    if run.early_alert is not None:
        what = "alerted" if not scenario.wanted else "alerted before misbehaving"
        return ScenarioOutcome(
            **base, detected=f"{what}: {run.early_alert}", seconds=None, ok=False
        )
    if not scenario.wanted:
        return ScenarioOutcome(**base, detected="OK (no alert)", seconds=None, ok=True)
    if run.detected_at_ms is None or run.detect_from_ms is None:
        started = "never misbehaved" if run.detect_from_ms is None else "not detected"
        return ScenarioOutcome(**base, detected=started, seconds=None, ok=False)
    seconds = (run.detected_at_ms - run.detect_from_ms) / 1000
    return ScenarioOutcome(**base, detected=run.detected or "", seconds=seconds, ok=True)


@dataclass
class DemoReport:
    """What a demo run found, for the summary table, the exit code and the tests."""

    outcomes: list[ScenarioOutcome]
    transitions: list[Transition]
    data_dir: Path
    bootstrap_servers: str
    interrupted: bool = False
    received: Received = dataclasses.field(default_factory=dict)
    """What the local receivers got, per group and channel (with ``local_receivers``)."""

    @property
    def untold(self) -> list[str]:
        """With local receivers: scenarios whose open, escalation and resolve did not all
        reach every channel, as ``"name: channel, channel"``."""
        if not self.received:
            return []
        missing = []
        for o in self.outcomes:
            if o.skipped is not None or o.name not in SCENARIOS or not SCENARIOS[o.name].wanted:
                continue
            channels = self.received.get(o.group, {})
            short = [c for c in CHANNELS if not told_the_whole_story(channels.get(c, []))]
            if short:
                missing.append(f"{o.name}: {', '.join(short)}")
        return missing

    @property
    def ok(self) -> bool:
        return all(o.ok for o in self.outcomes) and not self.untold

    def outcome(self, name: str) -> ScenarioOutcome:
        return next(o for o in self.outcomes if o.name == name)


def print_banner(
    out: Callable[[str], None],
    settings: DemoSettings,
    broker: str,
    data_dir: Path,
    status_page: str,
    runs: dict[str, ScenarioRun],
) -> None:
    """``broker``: which broker the stories run on and where, e.g. ``Apache Kafka 3.9.1 at
    127.0.0.1:9092``."""
    out(f"notifier demo: {broker}")
    out(f"  status page:  {status_page}  (Burrow API: {status_page}v3/kafka/{CLUSTER}/consumer)")
    out(f"  transitions:  {data_dir / 'transitions.jsonl'} (JSON lines)")
    out(f"  history:      {data_dir / 'history'} (Parquet)")
    out(
        f"  scans every {settings.scan_interval:g}s; windows of {settings.intervals} scans; "
        f"rules.yaml with its waits (for, stall_after, ...) x{settings.time_scale:g}"
    )
    first = settings.misbehave_offset
    last = first + max(r.scenario.order for r in runs.values()) * settings.stagger_s
    until = f"for {settings.duration:g}s" if settings.duration is not None else "until Ctrl-C"
    out(
        f"  {len(runs)} scenarios behave until {first:g}s, misbehave from {first:g}-{last:g}s; "
        f"running {until}"
    )
    enough = last + DETECTION_ALLOWANCE_SCANS * settings.scan_interval
    if settings.duration is not None and settings.duration < enough:
        out(f"  note: under {enough:g}s is too short for every scenario to be detected")


def format_summary(report: DemoReport) -> str:
    """The summary table: scenario, expected, detected, seconds from misbehaviour to alert,
    the worst status reached and the statuses it went through."""
    header = ("scenario", "expected", "detected", "seconds to detect", "reached", "statuses")
    rows = [
        (
            o.name,
            o.expected,
            o.detected,
            "-" if o.seconds is None else f"{o.seconds:.1f}",
            o.reached,
            o.path or "-",
        )
        for o in report.outcomes
    ]
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
    lines = ["  ".join(cell.ljust(w) for cell, w in zip(header, widths)).rstrip()]
    lines.append("  ".join("-" * w for w in widths))
    lines += ["  ".join(cell.ljust(w) for cell, w in zip(row, widths)).rstrip() for row in rows]
    failed = [f"{o.name}: {o.detected}" for o in report.outcomes if not o.ok]
    verdict = (
        "every scenario detected, nothing else alerted"
        if not failed
        else "FAILED: " + "; ".join(failed)
    )
    lines.append(verdict)
    return "\n".join(lines)


def delivery_lines(received: Received) -> list[str]:
    """The table of :func:`received_events`: one row per group, one column per channel."""
    cells = {
        group: ["→".join(channels[c]) or "-" for c in CHANNELS]
        for group, channels in received.items()
    }
    width = max((len(g) for g in received), default=5)
    columns = [
        max([len(name)] + [len(row[i]) for row in cells.values()])
        for i, name in enumerate(CHANNELS)
    ]
    rows = [("group", list(CHANNELS)), *cells.items()]
    lines = [
        (f"{group:<{width}}  " + "  ".join(c.ljust(w) for c, w in zip(row, columns))).rstrip()
        for group, row in rows
    ]
    return lines


def print_summary(out: Callable[[str], None], report: DemoReport) -> None:
    """The summary table, then (with local receivers) what each channel got and whether every
    story reached every channel."""
    out("")
    out(format_summary(report))
    if report.received:
        out("")
        out("notifications the local receivers got (Slack, PagerDuty, webhook, SMTP on loopback):")
        for line in delivery_lines(report.received):
            out("  " + line)
        untold = report.untold
        out(
            "  every scenario's open, escalation and resolve reached all four channels"
            if not untold
            else "  MISSING open/escalate/resolve: " + "; ".join(untold)
        )
