"""The whole service against real consumer groups on the embedded broker (Tansu).

One shared run of the demo's scripted groups (:mod:`notifier.demo.run`, as ``make demo`` runs it)
checks that each misbehaviour is detected with the right status within a bounded number of
scans, that the healthy group never alerts, and that every scenario's incident is opened,
escalated and resolved on each local channel. The other tests run the coordinator as
``notifier run`` does (APScheduler, real collector): a broker that goes away mid-run, a warm
restart, and the number of Kafka requests per scan as partitions grow.

A Tansu restart loses every topic, group and offset (it keeps them in memory), so the outage test
checks what must hold across one: no transition during the outage, readiness false, then scans
succeeding again and readiness true once the broker is back.
"""

from __future__ import annotations

import asyncio
import json
import re
import threading
import time
import urllib.request
import uuid
from collections.abc import Callable
from pathlib import Path

import pytest
from apscheduler.events import EVENT_JOB_ERROR, EVENT_JOB_EXECUTED, JobExecutionEvent

from notifier.config import ServiceConfig, parse_service_config
from notifier.demo import (
    CHANNELS,
    DETECTION_ALLOWANCE_SCANS,
    REBALANCE_ALLOWANCE_SCANS,
    SCENARIOS,
    SKIPPED_DELETE_RECORDS,
    DemoReport,
    DemoSettings,
    default_rules_path,
    delivery_lines,
    demo_rules,
    format_summary,
    run_demo,
)
from notifier.embedded import EmbeddedBroker
from notifier.rules import RulesConfig, with_parameters
from notifier.service import Coordinator, LogSink
from notifier.types import GroupStatus, Transition
from tests.test_collect import _commit, _produce
from tests.waiting import until_true

pytestmark = pytest.mark.broker

SCAN_S = 1.0
DEMO_SCAN_S = 2.0
"""The shared demo run uses the demo's own scan interval: the rebalance loop runs on the
broker's clock (join delays, session timeouts), and at faster scans its storm is spread over
more scans than a window holds."""


def _name(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


# --------------------------------------------------------------------------------------------
# The scripted scenarios, one shared run


class StatusPageProbe:
    """Reads the status page and the Burrow API the demo announces, while the demo runs."""

    def __init__(self, delay_s: float):
        self.delay_s = delay_s
        self.answers: dict[str, tuple[int, bytes]] = {}
        self.thread: threading.Thread | None = None

    def watch(self, line: str) -> None:
        match = re.search(r"status page:\s+(http://\S+/)", line)
        if match and self.thread is None:
            self.thread = threading.Thread(target=self._fetch, args=(match.group(1),))
            self.thread.start()

    def _fetch(self, base: str) -> None:
        time.sleep(self.delay_s)
        for path in ("", "v3/kafka/demo/consumer"):
            with urllib.request.urlopen(base + path, timeout=5) as answer:
                self.answers[path] = (answer.status, answer.read())


@pytest.fixture(scope="module")
def scenario_run(
    kafka_broker: EmbeddedBroker, tmp_path_factory: pytest.TempPathFactory
) -> tuple[DemoReport, list[str], StatusPageProbe]:
    lines: list[str] = []
    probe = StatusPageProbe(delay_s=20)

    def out(line: str) -> None:
        lines.append(line)
        probe.watch(line)

    settings = DemoSettings(
        duration=120,  # at most: the run ends once every scenario has told its story
        data_dir=tmp_path_factory.mktemp("scenarios"),
        scan_interval=DEMO_SCAN_S,
        prefix=_name("it"),
        local_receivers=True,
    )
    report = asyncio.run(run_demo(settings, out=out, bootstrap=kafka_broker.bootstrap_servers))
    if probe.thread is not None:
        probe.thread.join(10)
    return report, lines, probe


EXPECTED = {
    "lagging": "WARN (falling-behind)",
    "stalled": "ERR (STALL)",
    "stopped": "ERR (STOP)",
    "rewound": "ERR (REWIND)",
}


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_each_misbehaviour_is_detected_with_its_status(scenario_run, name):
    report, lines, _ = scenario_run
    outcome = report.outcome(name)
    assert outcome.ok, (outcome, lines)
    assert outcome.detected == EXPECTED[name]
    assert outcome.seconds is not None
    assert 0 <= outcome.seconds <= DETECTION_ALLOWANCE_SCANS * DEMO_SCAN_S


def test_the_rebalance_loop_is_detected_as_a_stuck_rebalance_or_a_storm(scenario_run):
    report, lines, _ = scenario_run
    outcome = report.outcome("rebalance-loop")
    assert outcome.ok, (outcome, lines)
    assert outcome.detected.startswith(("ERR (", "WARN ("))
    assert "stuck-rebalance" in outcome.detected or "rebalance-storm" in outcome.detected
    assert outcome.seconds is not None
    assert 0 <= outcome.seconds <= REBALANCE_ALLOWANCE_SCANS * DEMO_SCAN_S


def test_the_healthy_group_never_alerts(scenario_run):
    report, lines, _ = scenario_run
    healthy = report.outcome("healthy")
    assert healthy.ok and healthy.detected == "OK (no alert)", lines
    assert [t for t in report.transitions if t.group == healthy.group] == []


def test_retention_loss_is_skipped_where_the_broker_cannot_delete_records(scenario_run):
    report, _, _ = scenario_run
    outcome = report.outcome("retention-loss")
    if outcome.skipped is not None:
        assert outcome.skipped == SKIPPED_DELETE_RECORDS
        assert outcome.detected == f"skipped: {SKIPPED_DELETE_RECORDS}"
    else:
        assert outcome.ok and "retention" in outcome.detected


def test_transitions_are_written_as_json_lines_and_every_scenario_ran(scenario_run):
    report, lines, _ = scenario_run
    assert {o.name for o in report.outcomes} == set(SCENARIOS)
    written = (report.data_dir / "transitions.jsonl").read_text().splitlines()
    assert len(written) == len(report.transitions) > 0
    assert any(" -> " in line for line in lines)
    assert report.ok


def test_the_announced_status_page_and_api_answer_during_the_run(scenario_run):
    report, _, probe = scenario_run
    assert probe.answers[""][0] == 200 and b"<html" in probe.answers[""][1].lower()
    status, body = probe.answers["v3/kafka/demo/consumer"]
    assert status == 200
    watched = {o.group for o in report.outcomes if o.skipped is None}
    assert watched <= set(json.loads(body)["consumers"])


# --------------------------------------------------------------------------------------------
# The service as `notifier run` runs it


class RecordingSink(LogSink):
    """Keeps what the coordinator hands over, for the assertions."""

    def __init__(self) -> None:
        super().__init__()
        self.transitions: list[Transition] = []
        self.events: list[str] = []

    def handle(self, transitions: list[Transition], now: int) -> None:
        super().handle(transitions, now)
        self.transitions.extend(transitions)

    def cluster_down(self, cluster: str, now: int, reason: str) -> None:
        self.events.append("down")

    def cluster_up(self, cluster: str, now: int) -> None:
        self.events.append("up")


def _service(bootstrap: str, prefix: str, data_dir: Path, scan_interval: float) -> ServiceConfig:
    return parse_service_config(
        {
            "clusters": [
                {
                    "name": "it",
                    "bootstrap_servers": bootstrap,
                    "scan_interval": scan_interval,
                    "request_timeout": 2,
                    "scan_timeout": 4,
                    "group_allow": [f"^{prefix}"],
                }
            ],
            "data_dir": str(data_dir),
            "history": {"enabled": False},
        },
        "test",
    )


def _rules() -> RulesConfig:
    return demo_rules(default_rules_path(), intervals=6, time_scale=0.1)


def _result(coordinator: Coordinator, group: str):
    evaluation = coordinator.clusters["it"].evaluation
    return None if evaluation is None else evaluation.result("it", group)


async def test_broker_outage_is_no_alert_and_not_ready_then_recovers(
    broker_factory: Callable[..., EmbeddedBroker], tmp_path: Path
):
    broker = broker_factory()
    bootstrap = broker.bootstrap_servers
    topic, group = _name("outage"), _name("outage")
    await _produce(bootstrap, topic, [3, 3])
    await _commit(bootstrap, group, {(topic, 0): 3, (topic, 1): 3})  # caught up: OK
    sink = RecordingSink()
    service = _service(bootstrap, "outage-", tmp_path, scan_interval=0.5)
    coordinator = Coordinator(service, _rules(), tmp_path, sink)
    await coordinator.start()
    try:

        def judged() -> bool:
            result = _result(coordinator, group)
            return result is not None and result.status is GroupStatus.OK and not result.partial

        await until_true(judged, 15, "a complete, OK window")
        assert coordinator.ready()

        await broker.astop()
        await until_true(lambda: not coordinator.ready() and "down" in sink.events, 20, "down")
        assert sink.transitions == []
        assert coordinator.clusters["it"].metrics.failures >= 1

        await broker.astart()  # same port; Tansu comes back empty
        await until_true(lambda: coordinator.ready() and "up" in sink.events, 30, "recovery")
        scans = coordinator.clusters["it"].metrics.scans
        await _produce(bootstrap, topic, [3, 3])
        await _commit(bootstrap, group, {(topic, 0): 3, (topic, 1): 3})
        await until_true(
            lambda: (r := _result(coordinator, group)) is not None and r.partition_count == 2,
            15,
            "the group scanned again",
        )
        assert coordinator.clusters["it"].metrics.scans > scans
        assert sink.events == ["down", "up"]
        assert sink.transitions == []  # neither the outage nor the empty broker alerted
    finally:
        await coordinator.stop()


@pytest.mark.parametrize(
    "interval_s", [2.0, pytest.param(10.0, marks=pytest.mark.slow)], ids=["2s", "10s"]
)
async def test_a_cluster_answering_again_is_scanned_at_the_first_tick_after(
    broker_factory: Callable[..., EmbeddedBroker], tmp_path: Path, interval_s: float
):
    """However long the outage, every tick tries a cluster that does not answer (each try is
    a connection attempt, no more than a probe), so the first tick after it answers again
    scans it: recovery within one interval (it took up to three)."""
    broker = broker_factory()
    sink = RecordingSink()
    service = _service(broker.bootstrap_servers, "back-", tmp_path, scan_interval=interval_s)
    coordinator = Coordinator(service, _rules(), tmp_path, sink)
    metrics = coordinator.clusters["it"].metrics
    ticks: list[tuple[float, int, int]] = []  # (when it was due, scans, failures) after each

    def tick_done(event: JobExecutionEvent) -> None:
        if event.job_id == "scan:it":
            due = event.scheduled_run_time.timestamp()
            ticks.append((due, metrics.scans, metrics.failures))

    await coordinator.start()
    try:
        assert coordinator.scheduler is not None
        coordinator.scheduler.add_listener(tick_done, EVENT_JOB_EXECUTED | EVENT_JOB_ERROR)
        await until_true(lambda: metrics.scans >= 1, 15, "a first scan")
        await broker.astop()
        down_from = len(ticks)
        # Four failures in a row: the back-off for a cluster that answers would be at its cap.
        await until_true(lambda: metrics.consecutive_failures >= 4, 8 * interval_s, "failures")
        await broker.astart()
        answered_at = time.time()
        await until_true(lambda: any(due >= answered_at for due, *_ in ticks),
                         3 * interval_s, "the first tick after the cluster answered")  # fmt: skip
        recovered_at = time.time()
        assert "up" in sink.events, ticks
        assert sink.events == ["down", "up"]
        outage = [failures for _, scans, failures in ticks[down_from:] if scans == 1]
        assert outage == list(range(outage[0], outage[0] + len(outage))), ticks  # none skipped
        print(f"recovered {recovered_at - answered_at:.2f}s after the cluster answered again "
              f"(scan interval {interval_s:g}s)")  # fmt: skip
    finally:
        await coordinator.stop()


async def test_service_restart_keeps_windows_and_open_alerts(
    kafka_broker: EmbeddedBroker, tmp_path: Path
):
    bootstrap = kafka_broker.bootstrap_servers
    topic, group = _name("restart"), _name("restart")
    await _produce(bootstrap, topic, [6, 6])
    await _commit(bootstrap, group, {(topic, 0): 1, (topic, 1): 2})  # no members, behind: STOP
    service = _service(bootstrap, "restart-", tmp_path, scan_interval=SCAN_S)
    # A group gone with records unread and none arriving: Burrow's STOP (ours waits for data).
    rules = with_parameters(_rules(), {"burrow.enabled": True})

    first_sink = RecordingSink()
    first = Coordinator(service, rules, tmp_path, first_sink)
    await first.start()
    try:
        await until_true(lambda: bool(first_sink.transitions), 20, "the alert to open")
    finally:
        await first.stop()  # checkpoints
    (opened,) = first_sink.transitions
    assert (opened.group, opened.current) == (group, GroupStatus.ERR)

    second_sink = RecordingSink()
    second = Coordinator(service, rules, tmp_path, second_sink)
    await second.start()  # loads the checkpoint, then scans at once
    try:
        state = second.clusters["it"]
        assert state.tracker.statuses == {("it", group): GroupStatus.ERR}
        await until_true(lambda: state.metrics.scans >= 1, 10, "the first scan")
        result = _result(second, group)
        assert result is not None
        assert (result.status, result.partial, result.complete) == (GroupStatus.ERR, False, 1.0)
        await until_true(lambda: state.metrics.scans >= 5, 15, "more scans")
        assert second_sink.transitions == []  # still open, not re-fired
        assert _result(second, group).status is GroupStatus.ERR
    finally:
        await second.stop()


async def test_requests_per_scan_do_not_grow_with_partitions(
    kafka_broker: EmbeddedBroker, tmp_path: Path
):
    bootstrap = kafka_broker.bootstrap_servers
    requests: dict[int, dict[str, int]] = {}
    for partitions in (4, 64):
        prefix = _name(f"req{partitions}")
        topic, group = f"{prefix}-t", f"{prefix}-g"
        await _produce(bootstrap, topic, [1] * partitions)
        await _commit(bootstrap, group, {(topic, p): 1 for p in range(partitions)})
        data_dir = tmp_path / str(partitions)
        coordinator = Coordinator(
            _service(bootstrap, prefix, data_dir, scan_interval=0.3), _rules(), data_dir, LogSink()
        )
        await coordinator.start()
        try:
            state = coordinator.clusters["it"]
            await until_true(lambda s=state: s.metrics.scans >= 3, 15, "three scans")
            assert _result(coordinator, group).partition_count == partitions
            requests[partitions] = state.metrics.last_requests
        finally:
            await coordinator.stop()

    assert (
        requests[4]
        == requests[64]
        == {
            "ListGroups": 1,
            "DescribeGroups": 1,
            "OffsetFetch": 1,
            "ListOffsets": 2,
        }
    )


def test_each_scenario_opens_escalates_and_resolves_on_every_local_channel(scenario_run):
    report, lines, _ = scenario_run
    received = report.received
    told = {o.group: o for o in report.outcomes if SCENARIOS[o.name].wanted and not o.skipped}
    assert len(told) >= 5
    for group, outcome in told.items():
        assert outcome.path.startswith("OK → WARN → ERR") and outcome.path.endswith("→ OK"), (
            outcome,
            lines,
        )
        for channel in CHANNELS:
            events = [e for e in received[group][channel] if e != "repeat"]
            assert events == ["open", "escalate", "resolve"], (group, channel, received[group])
    assert report.untold == []
    healthy = next(o.group for o in report.outcomes if o.name == "healthy")
    assert received[healthy] == {channel: [] for channel in CHANNELS}


def test_the_summary_shows_each_story_and_what_every_channel_got(scenario_run):
    report, _, _ = scenario_run
    summary = format_summary(report)
    assert "OK → WARN → ERR" in summary
    table = delivery_lines(report.received)
    assert table[0].split() == ["group", *CHANNELS]
    stalled = next(line for line in table if line.split()[0].endswith("-stalled"))
    assert stalled.split()[1:] == ["open→escalate→resolve"] * len(CHANNELS)
