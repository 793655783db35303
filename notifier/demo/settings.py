"""How the demo runs (:class:`DemoSettings`, the options of ``notifier demo``) and the rules it
runs with.

The rules are the default ``rules.yaml`` made to fit a two-minute demo (:func:`demo_rules`): the
window is 6 scans instead of 10, and every duration that says how long to wait before judging
(``for``/``keep_firing_for``, how long a stall, a stop or a storm must last, the commit interval
assumed before a habit is learned, the lag in seconds that counts as falling behind) is a tenth
as long; every lag threshold is unchanged. With the default 2 s scans a window spans 12 s.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from notifier import resources
from notifier.config import parse_duration, read_yaml
from notifier.rules import RulesConfig, parse_rules

CLUSTER = "demo"


@dataclass(frozen=True)
class DemoSettings:
    """How the demo runs. The defaults are ``notifier demo``'s; tests shorten the timings."""

    duration: float | None = None
    """Seconds of scripted timeline, then stop and judge; ``None``: until Ctrl-C (or ``stop``)."""
    port: int | None = None
    """Port of the embedded broker (a free one when not given)."""
    data_dir: Path | None = None
    """Transitions, checkpoint, history and logs; a fresh temporary directory when not given."""
    scan_interval: float = 2.0
    intervals: int = 6
    """Samples per window (rules.yaml says 10: too slow to watch in a two-minute demo)."""
    time_scale: float = 0.1
    """Factor applied to every ``for`` and ``keep_firing_for`` of the rules."""
    misbehave_after: float | None = None
    """Seconds of good behaviour before the first scenario misbehaves; default: long enough for
    the windows to fill (``intervals + 4`` scans), so the gate is open when trouble starts."""
    stagger: float | None = None
    """Seconds between the scenarios' misbehaviour starts (default: one scan interval)."""
    scenarios: tuple[str, ...] | None = None
    """Which scenarios to run (default: all of :data:`SCENARIOS`)."""
    prefix: str = "demo"
    """Topic and group name prefix; the service watches only groups that start with it."""
    rules_path: Path | None = None
    api_port: int = 0
    """Port of the status page and API on 127.0.0.1 (0: a free one)."""
    notify: dict[str, Any] | None = None
    """A notification config (the service config's ``notify:`` section): transitions also go
    through the notification pipeline to the channels it names."""
    min_stage: float = 0.0
    """Seconds each stage of a story lasts at least, once the service has reported it: a tool
    watching beside the service (benchmarks/vs_burrow.py) gets as long to see it."""
    kafka: str | None = None
    """Run the stories on Apache Kafka instead of the embedded broker: a version (resolved
    from Maven Central with ``mvn`` and cached) or a folder of Kafka jars."""
    local_receivers: bool = False
    """Start loopback stand-ins for Slack, PagerDuty, a webhook receiver and an SMTP server,
    notify them, and report what each received."""

    @property
    def misbehave_offset(self) -> float:
        if self.misbehave_after is not None:
            return self.misbehave_after
        return (self.intervals + 4) * self.scan_interval

    @property
    def stagger_s(self) -> float:
        return self.scan_interval if self.stagger is None else self.stagger


def default_rules_path() -> Path:
    """The default ``rules.yaml`` shipped with notifier (the demo's timings are its own, so a
    ``./rules.yaml`` is not picked up: ``--rules`` names another file)."""
    return resources.default_rules()


_WAITS = (
    "for",
    "keep_firing_for",
    "stall_after",
    "stop_after",
    "grace",
    "crash_grace",
    "surge_for",
    "lasting",
    "min_lag_seconds",
    "assumed_commit_interval",
    "churn_gap",
)
"""The durations :func:`demo_rules` shortens: how long to wait before judging, not how far
behind is too far."""


def demo_rules(path: Path, intervals: int = 6, time_scale: float = 0.1) -> RulesConfig:
    """The rules of ``path`` with a ``intervals``-scan window and the waits of :data:`_WAITS`
    scaled by ``time_scale``; lag thresholds unchanged.

    A ``stuck_rebalance`` rule asking for more samples than the window holds is lowered to the
    window size, so it can still fire (the rules file would be rejected otherwise).
    """
    data = read_yaml(path) or {}
    window = data.setdefault("window", {})
    window["intervals"] = intervals
    sections = [window, data.setdefault("burrow", {}), *data.get("rules", [])]
    for section in sections:
        for key in _WAITS:
            if key in section:
                section[key] = parse_duration(section[key]) * time_scale
        if section.get("kind") == "stuck_rebalance":
            section["samples"] = min(int(section.get("samples", 6)), intervals)
    return parse_rules(data, f"{path} (demo timings)")
