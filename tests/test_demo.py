"""The demo's notification wiring, without Kafka: the local receivers the demo starts, the
notify config it gives them, and how it reads back what each channel received."""

from __future__ import annotations

import asyncio
import time

from notifier.demo import (
    CHANNELS,
    SCENARIOS,
    DemoReport,
    DemoSettings,
    HttpReceiver,
    SmtpReceiver,
    delivery_lines,
    format_summary,
    local_notify_config,
    received_events,
    told_the_whole_story,
)
from notifier.demo.report import scenario_outcome
from notifier.demo.story import ScenarioRun, ScriptEnv
from notifier.demo.watch import DemoSink
from notifier.notify import Notifier
from notifier.notify.config import parse_notify
from notifier.types import Finding, GroupStatus, Severity

from .notify_helpers import move

OK, WARN, ERR = GroupStatus.OK, GroupStatus.WARN, GroupStatus.ERR


def test_the_whole_story_is_an_open_then_an_escalation_then_a_resolve():
    assert told_the_whole_story(["open", "escalate", "resolve"])
    assert told_the_whole_story(["open", "repeat", "escalate", "repeat", "resolve"])
    assert not told_the_whole_story(["open", "resolve"])
    assert not told_the_whole_story(["escalate", "open", "resolve"])
    assert not told_the_whole_story([])


async def test_every_local_channel_receives_the_open_escalation_and_resolve(tmp_path):
    async with HttpReceiver() as http, SmtpReceiver() as smtp:
        notifier = Notifier(parse_notify(local_notify_config(http, smtp), "demo"), tmp_path / "n")
        await notifier.start()
        at = int(time.time() * 1000)
        steps = [(OK, WARN), (WARN, ERR), (ERR, OK)]
        for offset, (before, after) in enumerate(steps):
            notifier.handle([move("demo-stalled", before, after, at + offset)], at + offset)
            assert await notifier.wait_delivered(10)
            await asyncio.sleep(1.1)  # the demo route's group_interval: one message per step
        await notifier.stop()
        received = received_events(http, smtp, ["demo-stalled", "demo-healthy"])

    assert received["demo-stalled"] == {c: ["open", "escalate", "resolve"] for c in CHANNELS}
    assert received["demo-healthy"] == {c: [] for c in CHANNELS}
    table = delivery_lines(received)
    assert table[0].split() == ["group", *CHANNELS]
    assert table[1].split() == ["demo-stalled", *["open→escalate→resolve"] * 4]
    assert table[2].split() == ["demo-healthy", "-", "-", "-", "-"]


def _finding(rule: str, kind: str, status: str, severity: Severity) -> Finding:
    return Finding(rule=rule, kind=kind, severity=severity, status=status, topic="t", partition=0)


def test_the_summary_says_what_each_scenario_reached_not_only_what_was_detected(tmp_path):
    lagging = ScenarioRun(SCENARIOS["lagging"], "demo-lagging", "demo-lagging", misbehave_at=0)
    healthy = ScenarioRun(SCENARIOS["healthy"], "demo-healthy", "demo-healthy", misbehave_at=0)
    env = ScriptEnv("127.0.0.1:9092", DemoSettings(), out=lambda line: None)
    sink = DemoSink(tmp_path / "transitions.jsonl", env, {"demo-lagging": lagging,
                                                          "demo-healthy": healthy})  # fmt: skip
    at = int(time.time() * 1000)
    lagging.stage_started_ms["degrade"] = at
    lagging.detected_at_ms, lagging.detected = at + 8000, "WARN (falling-behind)"
    falling = _finding("falling-behind", "falling_behind", "WARN", Severity.WARN)
    stall = _finding("stalled-or-stopped", "progress", "STALL", Severity.ERR)
    story = [(OK, WARN, [falling]), (WARN, ERR, [falling, stall]), (ERR, WARN, [falling]),
             (WARN, OK, [])]  # fmt: skip
    for offset, (before, after, findings) in enumerate(story):
        moved = move("demo-lagging", before, after, at + offset, findings=findings)
        sink.handle([moved], at + offset)

    outcomes = [scenario_outcome(lagging), scenario_outcome(healthy)]
    summary = format_summary(DemoReport(outcomes, sink.transitions, tmp_path, ""))
    header, _, lagging_row, healthy_row, verdict = summary.splitlines()
    column = header.index("reached")
    assert lagging_row.startswith("lagging ") and "WARN (falling-behind)" in lagging_row
    assert lagging_row[column:].split("  ")[0] == "ERR (STALL)"
    assert lagging_row.endswith("OK → WARN → ERR → WARN → OK")
    assert healthy_row[column:].split("  ")[0] == "OK"
    assert verdict == "every scenario detected, nothing else alerted"


def test_the_watch_line_of_news_names_the_rule_that_joined():
    from notifier.demo.watch import _transition_line
    from notifier.types import GroupResult, Transition

    def finding(rule: str, status: str) -> Finding:
        return Finding(rule=rule, kind=rule, severity=Severity.ERR, status=status,
                       topic="t", partition=0, message=f"{rule} happened")  # fmt: skip

    findings = [finding("stalled-or-stopped", "STOP"), finding("rewound", "REWIND")]
    result = GroupResult(cluster="c", group="g", status=GroupStatus.ERR, complete=1.0,
                         burrow_complete=1.0, partial=False, evaluated_at=0,
                         findings=findings)  # fmt: skip
    err = GroupStatus.ERR
    news = Transition("c", "g", err, err, 0, result, news=("rewound",))
    assert "rewound REWIND t/0: rewound happened" in _transition_line(news)
    plain = Transition("c", "g", GroupStatus.OK, err, 0, result)
    assert "stalled-or-stopped STOP" in _transition_line(plain)
