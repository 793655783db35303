"""``notifier demo``: the whole service against real consumer groups on an embedded broker.

A new user should see, in about two minutes and without a Kafka cluster, what the service is
for: consumer groups misbehaving in the ways DOMAIN.md describes and the service noticing each
one. So the demo starts the embedded Tansu broker (:mod:`notifier.collect.broker`), creates one
topic per
scenario, runs real aiokafka producers and consumer groups with scripted behaviours, and runs the
real service (:class:`notifier.service.coordinator.Coordinator`: collector, window store, rules,
gate,
transitions, checkpoints, history) against them. Each scenario behaves well at first, so the
windows fill with normal behaviour, and starts misbehaving a little after the gate opens. Then
it tells a story in three stages, each moving on once the service has reported it (or after a
time limit): it *degrades* — falls behind, and Burrow's WARN opens an incident; it *fails* in
its own way — the incident escalates to ERR; it *recovers* — catches up, and the incident
resolves. So each scenario's incident is opened, escalated and resolved on every channel:

=============== ======================================================= ======================
scenario        what its consumers do once they have fallen behind      expected
=============== ======================================================= ======================
healthy         keep up with bursty traffic (lag jitters, often 0)      no alert at all
lagging         (falling behind is this one's finding) then stop        WARN (Burrow WARN)
                making progress while still in the group
stalled         stay in the group, commit the same offset every second  ERR (STALL)
stopped         stop committing and leave the group                     ERR (STOP)
rewound         seek back and commit the older offset, then replay      ERR (REWIND)
rebalance-loop  crash right after joining and restart, over and over     rebalance-storm (WARN)
                (a crash loop), so the group rebalances again and       or stuck-rebalance
                again                                                   (ERR)
retention-loss  lose the records under them to retention                retention-risk, where
                                                                        DeleteRecords works
=============== ======================================================= ======================

The rules are the default ``rules.yaml`` made to fit a two-minute demo (:func:`demo_rules`): the
window is 6 scans instead of 10 and every ``for``/``keep_firing_for`` is a tenth as long; every
threshold is unchanged. With the default 2 s scans a window spans 12 s.

The embedded broker's gaps shape some scripts (DOMAIN.md §7): producers send one record per
batch, because it reports the log end as the last batch's base offset + 1; the *stopped* and
*rebalance-loop* groups have two members, joined one after the other, because a consumer only
sends LeaveGroup after a rebalance (generation > 0) and the stopped group must end up Empty;
DeleteRecords is probed, and where it is refused the retention scenario is reported as skipped
rather than faked. Joining in turn takes several seconds here, so those groups start their
story only after a window of scans has seen them settled. The rebalance loop is a crash loop
rather than a consumer slower than ``max.poll.interval``: a member kicked out that way rejoins
under its old member id and, on this broker, the group looks Stable while it makes no progress
(Burrow's STALL, not a rebalance); crash-looping incarnations that each leave as they die change
the member set scan after scan (``rebalance-storm``) and keep the group rebalancing
(``stuck-rebalance``), and a fixed consumer can join afterwards because no ghost member is left.

Detection is judged on the service's own results: a scenario is detected at the first scan whose
gated (complete, non-partial) result for its group is not OK and carries the expected finding,
timed from the start of the stage that should produce it; the healthy group, and any group
before it starts misbehaving, must never produce a transition. With ``--local-receivers`` the
demo also checks that every scenario's open, escalation and resolve reached Slack, PagerDuty,
the webhook and the SMTP server. A timed run ends as soon as every story is told.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import logging
import random
import re
import signal
import tempfile
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient, NewTopic, RecordsToDelete
from aiokafka.errors import (
    ConsumerStoppedError,
    KafkaError,
    NoOffsetForPartitionError,
    OffsetOutOfRangeError,
)

from notifier.api import ApiServer, create_app
from notifier.collect import EmbeddedBroker
from notifier.config import (
    RulesConfig,
    ServiceConfig,
    parse_duration,
    parse_notify,
    parse_rules,
    parse_service_config,
    read_yaml,
)
from notifier.demo.receivers import HttpReceiver, SmtpReceiver
from notifier.notify import Notifier
from notifier.service import Coordinator, LogSink
from notifier.types import GroupResult, GroupStatus, Transition

__all__ = [
    "DETECTION_ALLOWANCE_SCANS",
    "SCENARIOS",
    "SKIPPED_DELETE_RECORDS",
    "DemoReport",
    "DemoSettings",
    "ScenarioOutcome",
    "default_rules_path",
    "demo_rules",
    "format_summary",
    "main",
    "run_demo",
]

log = logging.getLogger(__name__)

CLUSTER = "demo"
PARTITIONS = 2
RATE_PER_TOPIC = 20.0
"""Records per second of a misbehaving scenario's steady traffic (over all partitions)."""
LAGGING_PER_PARTITION = 2
"""Records the lagging consumer takes per partition per second: a fifth of what arrives."""
SKIPPED_DELETE_RECORDS = "broker does not support DeleteRecords"
DETECTION_ALLOWANCE_SCANS = 12
"""Scans to allow between a misbehaviour and its alert: a window to slide past the good
samples (``intervals``) and a few more."""
_CLIENT_ERRORS = (KafkaError, ConsumerStoppedError, OSError, TimeoutError)


# --------------------------------------------------------------------------------------------
# Settings, rules, results


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
    """The repository's ``rules.yaml`` (next to the package), else ``./rules.yaml``."""
    bundled = Path(__file__).resolve().parents[2] / "rules.yaml"
    return bundled if bundled.is_file() else Path("rules.yaml")


def demo_rules(path: Path, intervals: int = 6, time_scale: float = 0.1) -> RulesConfig:
    """The rules of ``path`` with a ``intervals``-scan window and ``for``/``keep_firing_for``
    scaled by ``time_scale``; thresholds unchanged.

    A ``stuck_rebalance`` rule asking for more samples than the window holds is lowered to the
    window size, so it can still fire (the rules file would be rejected otherwise).
    """
    data = read_yaml(path) or {}
    data.setdefault("window", {})["intervals"] = intervals
    sections = [data.setdefault("burrow", {}), *data.get("rules", [])]
    for section in sections:
        for key in ("for", "keep_firing_for"):
            if key in section:
                section[key] = parse_duration(section[key]) * time_scale
        if section.get("kind") == "stuck_rebalance":
            section["samples"] = min(int(section.get("samples", 6)), intervals)
    return parse_rules(data, f"{path} (demo timings)")


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


# --------------------------------------------------------------------------------------------
# Scenarios


@dataclass(frozen=True)
class Scenario:
    """A scripted consumer group and what the service is expected to say about it.

    A misbehaving scenario tells a story in three stages, each moving on once the service has
    reported it (or after a time limit): it *degrades* (falls behind: Burrow's WARN opens an
    incident), *fails* in its own way (the incident escalates to ERR) and *recovers* (catches
    up: the incident resolves). ``stories`` are the console lines for those stages.
    """

    name: str
    expected: str
    stories: tuple[str, str, str]
    """Printed as the degrade, fail and recover stages start (empty for the healthy group)."""
    wanted: frozenset[tuple[str, str | None]]
    """``(rule kind, finding status or None)`` pairs; any one of them counts as detected.
    Empty: the scenario must never alert."""
    script: Callable[[_Env, _Run], Awaitable[None]]
    order: int
    """Position in the misbehaviour schedule (× the stagger)."""
    detect_in: str = "fail"
    """The stage whose start the detection time is measured from (``degrade`` or ``fail``)."""
    allowance_scans: int = 0
    """Scans each stage may take before the script moves on anyway (0: the default)."""


@dataclass
class _Run:
    """A scenario's state during the run."""

    scenario: Scenario
    group: str
    topic: str
    misbehave_at: float
    """Monotonic time at which the script starts degrading."""
    stage_started_ms: dict[str, int] = dataclasses.field(default_factory=dict)
    """Wall-clock start of each stage the script reached (degrade, fail, recover)."""
    status: GroupStatus = GroupStatus.OK
    """The group's status after its latest transition."""
    statuses: list[GroupStatus] = dataclasses.field(default_factory=list)
    """Every status the group's transitions went to, in order."""
    finished: bool = False
    """The story is over: recovered (or skipped, or failed, or there is no story)."""
    steady: bool = False
    """Steady traffic (while misbehaving) instead of bursts."""
    detected_at_ms: int | None = None
    detected: str | None = None
    early_alert: str | None = None
    skipped: str | None = None
    failure: str | None = None

    @property
    def misbehaving_since_ms(self) -> int | None:
        """When trouble started (the degrade stage): alerts before it are false alarms."""
        return self.stage_started_ms.get("degrade")

    @property
    def detect_from_ms(self) -> int | None:
        return self.stage_started_ms.get(self.scenario.detect_in)


STAGES = ("degrade", "fail", "recover")
HOLD_SCANS = 2
"""Scans a reached status is held before the next stage, so the status page and the
notifications show it."""


class _Env:
    """What the scripts share: the broker address, the clock, the console, and cleanup."""

    def __init__(self, bootstrap: str, settings: DemoSettings, out: Callable[[str], None]):
        self.bootstrap = bootstrap
        self.settings = settings
        self.out = out
        self.started = time.time()
        self._closers: list[Callable[[], Awaitable[None]]] = []

    def stamp(self, epoch_s: float | None = None) -> str:
        """Seconds since the timeline started, for console lines."""
        return f"[{(epoch_s if epoch_s is not None else time.time()) - self.started:6.1f}s]"

    def stage(self, run: _Run, stage: str) -> None:
        """Enter a stage of the story: note when, tell the console, set the traffic."""
        run.stage_started_ms[stage] = int(time.time() * 1000)
        run.steady = stage != "recover"
        story = run.scenario.stories[STAGES.index(stage)]
        self.out(f"{self.stamp()} {run.scenario.name}: {story}")

    async def until_status(
        self,
        run: _Run,
        reached: Callable[[GroupStatus], bool],
        step: Callable[[], Awaitable[Any]],
    ) -> bool:
        """Repeat ``step`` (the stage's behaviour) until the service has reported a status
        that ``reached`` accepts, then for :data:`HOLD_SCANS` more scans; give up after the
        scenario's allowance. True when the status was reached."""
        scans = run.scenario.allowance_scans or DETECTION_ALLOWANCE_SCANS
        deadline = time.monotonic() + scans * self.settings.scan_interval
        while not reached(run.status):
            if time.monotonic() > deadline:
                log.warning("%s: no such status within %d scans; moving on", run.group, scans)
                return False
            await step()
        hold = time.monotonic() + HOLD_SCANS * self.settings.scan_interval
        while time.monotonic() < hold:
            await step()
        return True

    async def producer(self) -> AIOKafkaProducer:
        # linger_ms=0 and one send_and_wait at a time: one record per batch (see module doc).
        producer = AIOKafkaProducer(
            bootstrap_servers=self.bootstrap, linger_ms=0, client_id="notifier-demo"
        )
        await producer.start()
        self._closers.append(producer.stop)
        return producer

    async def consumer(self, run: _Run, **overrides: Any) -> AIOKafkaConsumer:
        options: dict[str, Any] = {
            "bootstrap_servers": self.bootstrap,
            "group_id": run.group,
            "client_id": run.group,
            "enable_auto_commit": False,
            "auto_offset_reset": "earliest",
            "session_timeout_ms": 6000,
            "heartbeat_interval_ms": 500,
            "fetch_max_wait_ms": 200,
        }
        options.update(overrides)
        consumer = AIOKafkaConsumer(run.topic, **options)
        await consumer.start()
        self._closers.append(consumer.stop)
        return consumer

    async def close(self, timeout: float = 5.0) -> None:
        """Stop every client the scripts started (consumers leave their groups)."""
        closers, self._closers = self._closers[::-1], []

        async def one(close: Callable[[], Awaitable[None]]) -> None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(close(), timeout)

        await asyncio.gather(*(one(c) for c in closers))


def _at_least(status: GroupStatus) -> Callable[[GroupStatus], bool]:
    return lambda current: current.rank >= status.rank


def _is_ok(current: GroupStatus) -> bool:
    return current is GroupStatus.OK


async def _until(deadline: float) -> None:
    await asyncio.sleep(max(0.0, deadline - time.monotonic()))


async def _produce(env: _Env, run: _Run) -> None:
    """The scenario's traffic, forever: bursts while it behaves, a steady stream while it
    misbehaves (``run.steady``).

    Bursts of random size at random moments leave a consumer that keeps up with a lag that is
    mostly 0 and sometimes not. A steady stream would leave even a perfect consumer a record or
    two behind at most scans, and Burrow's WARN fires on a lag that never decreases: good
    behaviour on steady traffic can look like falling behind. Misbehaviour gets the steady
    stream so that "falling behind" is unambiguous.
    """
    producer = await env.producer()
    rng = random.Random(run.group)
    step = PARTITIONS / RATE_PER_TOPIC  # one record per partition per step
    sent = 0
    task = asyncio.current_task()
    while task is None or not task.cancelling():
        if run.steady:
            started = time.monotonic()
            for partition in range(PARTITIONS):
                await _send(producer, run.topic, b"%d" % sent, partition)
                sent += 1
            await asyncio.sleep(max(0.0, step - (time.monotonic() - started)))
        else:
            for _ in range(rng.randint(4, 30)):
                await _send(producer, run.topic, b"%d" % sent, rng.randrange(PARTITIONS))
                sent += 1
            await asyncio.sleep(rng.uniform(0.3, 1.5))


async def _send(producer: AIOKafkaProducer, topic: str, value: bytes, partition: int) -> None:
    """One record, as its own batch; a failure is logged and the script goes on."""
    try:
        # asyncio.timeout, not wait_for: in Python 3.11 wait_for can swallow a cancellation
        # that arrives as the send completes, and the producer task would never stop.
        async with asyncio.timeout(10):
            await producer.send_and_wait(topic, value, partition=partition)
    except (TimeoutError, KafkaError) as exc:
        log.warning("produce to %s/%d failed: %r", topic, partition, exc)
        await asyncio.sleep(0.5)


@contextlib.asynccontextmanager
async def _traffic(env: _Env, run: _Run) -> AsyncIterator[None]:
    """The scenario's producer runs for as long as the block does."""
    producing = asyncio.create_task(_produce(env, run))
    try:
        yield
    finally:
        producing.cancel()
        await asyncio.gather(producing, return_exceptions=True)


@contextlib.asynccontextmanager
async def _transient_errors(what: str) -> AsyncIterator[None]:
    """Swallow what a consumer in a rebalancing group meets: failed commits, a lost member id,
    and the CancelledError aiokafka raises from ``getmany`` when it drops an assignment
    waiter (only a cancellation of the task itself propagates)."""
    try:
        yield
    except _CLIENT_ERRORS as exc:
        log.debug("%s: %r", what, exc)
        await asyncio.sleep(0.1)
    except asyncio.CancelledError:
        task = asyncio.current_task()
        if task is not None and task.cancelling():
            raise
        log.debug("%s: aiokafka cancelled a wait", what)
        await asyncio.sleep(0.1)


async def _poll_and_commit(
    consumer: AIOKafkaConsumer,
    committed: dict[TopicPartition, int],
    per_partition: int | None = None,
) -> None:
    """One poll (one per partition with ``per_partition``, so a slow consumer still moves on
    every partition); commit what it returned."""
    if per_partition is None:
        batches = [await consumer.getmany(timeout_ms=200)]
    else:
        batches = [
            await consumer.getmany(tp, timeout_ms=50, max_records=per_partition)
            for tp in sorted(consumer.assignment())
        ]
    offsets = {
        tp: records[-1].offset + 1 for batch in batches for tp, records in batch.items() if records
    }
    if offsets:
        await consumer.commit(offsets)
        committed.update(offsets)


async def _consume_once(
    consumer: AIOKafkaConsumer,
    committed: dict[TopicPartition, int],
    per_partition: int | None = None,
) -> None:
    """:func:`_poll_and_commit`, riding out rebalances."""
    async with _transient_errors("consume"):
        await _poll_and_commit(consumer, committed, per_partition)


async def _keep_up_until(
    consumer: AIOKafkaConsumer, committed: dict[TopicPartition, int], deadline: float
) -> None:
    """Behave: consume everything and commit after every poll, until ``deadline``."""
    while time.monotonic() < deadline:
        await _consume_once(consumer, committed)


async def _join_in_turn(
    env: _Env, run: _Run, members: int, **overrides: Any
) -> list[AIOKafkaConsumer]:
    """Start ``members`` consumers one after the other, each once the previous one owns
    partitions, each consuming from the start. Joining in turn makes the group rebalance, so
    its generation is above 0 and a member that leaves sends LeaveGroup."""
    consumers: list[AIOKafkaConsumer] = []
    committed: dict[TopicPartition, int] = {}
    for _ in range(members):
        consumer = await env.consumer(run, **overrides)
        consumers.append(consumer)
        deadline = time.monotonic() + 30
        while not consumer.assignment():
            if time.monotonic() > deadline:
                raise RuntimeError(f"{run.group}: a member got no partitions within 30 s")
            await asyncio.gather(*(_consume_once(c, committed) for c in consumers))
    return consumers


def _settled_after_join(env: _Env, run: _Run) -> float:
    """When a group that just finished joining in turn may start misbehaving: at its
    scheduled time, but not before a window of scans has seen it keep up with every member
    (joining in turn takes several seconds on the embedded broker, and a story that started
    mid-rebalance would be about the join, not the scenario)."""
    window = (env.settings.intervals + 2) * env.settings.scan_interval
    return max(run.misbehave_at, time.monotonic() + window)


async def _healthy(env: _Env, run: _Run) -> None:
    run.finished = True  # nothing to tell: it must simply never alert
    async with _traffic(env, run):
        consumer = await env.consumer(run)
        committed: dict[TopicPartition, int] = {}
        while True:
            await _consume_once(consumer, committed)


async def _fall_behind(
    env: _Env,
    run: _Run,
    consumers: list[AIOKafkaConsumer],
    committed: dict[TopicPartition, int],
    pause: float = 1.0,
) -> None:
    """The degrade stage: consume a fifth of what arrives (``pause`` seconds between polls of
    ``per_partition`` records) until the service reports WARN."""
    per_partition = max(1, round(LAGGING_PER_PARTITION * pause))

    async def slowly() -> None:
        await asyncio.gather(*(_consume_once(c, committed, per_partition) for c in consumers))
        await asyncio.sleep(pause)

    env.stage(run, "degrade")
    await env.until_status(run, _at_least(GroupStatus.WARN), slowly)


async def _catch_up(
    env: _Env,
    run: _Run,
    consumers: list[AIOKafkaConsumer],
    committed: dict[TopicPartition, int],
) -> None:
    """The recover stage: consume everything again until the service reports OK, then keep
    up for good."""

    async def keep_up() -> None:
        await asyncio.gather(*(_consume_once(c, committed) for c in consumers))

    env.stage(run, "recover")
    await env.until_status(run, _is_ok, keep_up)
    run.finished = True
    while True:
        await keep_up()


async def _stuck_member(env: _Env, run: _Run, *, recommit: bool) -> None:
    """One consumer that keeps up, falls behind, then stops moving while it stays in the
    group (still polling; with ``recommit``, committing its last offsets again every second,
    as a consumer stuck on a poison message with auto-commit does), and is fixed."""
    async with _traffic(env, run):
        consumer = await env.consumer(run)
        committed: dict[TopicPartition, int] = {}
        await _keep_up_until(consumer, committed, run.misbehave_at)
        await _fall_behind(env, run, [consumer], committed)
        frozen = dict(committed)

        async def stuck() -> None:
            async with _transient_errors(run.scenario.name):
                await consumer.getmany(timeout_ms=200, max_records=1)
                if recommit and frozen:
                    await consumer.commit(frozen)
            await asyncio.sleep(1.0)

        env.stage(run, "fail")
        await env.until_status(run, _at_least(GroupStatus.ERR), stuck)
        # What it fetched while stuck was never processed: start again from its commits.
        for tp, offset in frozen.items():
            consumer.seek(tp, offset)
        await _catch_up(env, run, [consumer], committed)


async def _lagging(env: _Env, run: _Run) -> None:
    await _stuck_member(env, run, recommit=False)


async def _stalled(env: _Env, run: _Run) -> None:
    await _stuck_member(env, run, recommit=True)


async def _two_members_leave(env: _Env, run: _Run) -> dict[TopicPartition, int]:
    """Two members join in turn, keep up until settled, fall behind; then, as the fail stage
    starts, both stop and leave the group (Empty, no members, offsets kept). Returns the
    group's commits."""
    consumers = await _join_in_turn(env, run, members=2)
    committed: dict[TopicPartition, int] = {}
    settled = _settled_after_join(env, run)
    await asyncio.gather(*(_keep_up_until(c, committed, settled) for c in consumers))
    await _fall_behind(env, run, consumers, committed)
    env.stage(run, "fail")
    for consumer in consumers:
        await consumer.stop()
    return committed


async def _stopped(env: _Env, run: _Run) -> None:
    async with _traffic(env, run):
        committed = await _two_members_leave(env, run)
        await env.until_status(run, _at_least(GroupStatus.ERR), lambda: asyncio.sleep(0.5))
        # A replacement starts from the group's commits and catches up.
        await _catch_up(env, run, [await env.consumer(run)], committed)


async def _rewound(env: _Env, run: _Run) -> None:
    async with _traffic(env, run):
        consumer = await env.consumer(run)
        committed: dict[TopicPartition, int] = {}
        await _keep_up_until(consumer, committed, run.misbehave_at)
        await _fall_behind(env, run, [consumer], committed)
        env.stage(run, "fail")
        back = int(RATE_PER_TOPIC / PARTITIONS * 30)  # about 30 s of records
        before = dict(committed)
        rewound = {tp: max(0, offset - back) for tp, offset in before.items()}
        for tp, offset in rewound.items():
            consumer.seek(tp, offset)
        await consumer.commit(rewound)
        committed.update(rewound)

        async def replay() -> None:
            # Replay at about 1.5x the produce rate (the rewind stays visible a while).
            await _consume_once(consumer, committed, per_partition=REPLAY_PER_PARTITION)
            await asyncio.sleep(0.5)

        await env.until_status(run, _at_least(GroupStatus.ERR), replay)
        await _catch_up(env, run, [consumer], committed)


REPLAY_PER_PARTITION = max(1, int(RATE_PER_TOPIC * 1.5 / 2 / PARTITIONS) + 2)
CRASH_JOIN_TIMEOUT_S = 30.0
CRASH_AFTER_JOIN_S = 0.5
"""How long each incarnation of a crash-looping consumer lives once it has its partitions."""
REBALANCE_ALLOWANCE_SCANS = 25
"""The rebalance loop runs on the broker's clock (join delays, session timeouts), not the
scanner's: its stages get more scans than the window-driven Burrow statuses."""


async def _rebalance_loop(env: _Env, run: _Run) -> None:
    async with _traffic(env, run):
        committed = await _two_members_leave(env, run)
        fixed = asyncio.Event()
        looping = asyncio.create_task(_crash_loop(env, run, fixed))
        try:
            # A storm is WARN, a rebalance that never completes ERR: give the loop time for
            # the second.
            await env.until_status(run, _at_least(GroupStatus.ERR), lambda: asyncio.sleep(0.5))
            # The fix ships: the incarnation running now is the last; it leaves as it dies.
            fixed.set()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(asyncio.shield(looping), CRASH_JOIN_TIMEOUT_S + 5)
        finally:
            looping.cancel()
            await asyncio.gather(looping, return_exceptions=True)
        await _catch_up(env, run, [await env.consumer(run)], committed)


async def _crash_loop(env: _Env, run: _Run, fixed: asyncio.Event) -> None:
    """A consumer that crashes and is restarted, over and over (a crash-looping pod): each
    incarnation joins the group with a new member id, dies soon after it gets its partitions
    and before it commits anything, and the next one joins: the group rebalances again and
    again. Each incarnation leaves the group as it dies (as a consumer closed by its pod's
    shutdown hook does), so none lingers as a ghost member; once ``fixed`` is set, the one
    running finishes its life that way and no other starts."""
    while not fixed.is_set():
        consumer = await env.consumer(run)
        try:
            joined_by = time.monotonic() + CRASH_JOIN_TIMEOUT_S
            while not consumer.assignment() and time.monotonic() < joined_by:
                async with _transient_errors("crash-looping member"):
                    await consumer.getmany(timeout_ms=200)
            await asyncio.sleep(CRASH_AFTER_JOIN_S)
        finally:
            with contextlib.suppress(*_CLIENT_ERRORS):
                await consumer.stop()


async def _delete_records_supported(bootstrap: str, topic: str) -> bool:
    """Ask the broker to delete nothing (records before offset 0): refused or a dropped
    connection means it cannot enforce retention for the demo."""
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=5000)
    try:
        await admin.start()
        await asyncio.wait_for(
            admin.delete_records({TopicPartition(topic, 0): RecordsToDelete(0)}, timeout_ms=5000),
            10,
        )
    except (*_CLIENT_ERRORS, NotImplementedError) as exc:
        log.info("DeleteRecords probe failed: %r", exc)
        return False
    finally:
        with contextlib.suppress(Exception):
            await admin.close()
    return True


async def _retention_loss(env: _Env, run: _Run) -> None:
    """Only where the broker deletes records: a consumer falling behind while retention,
    fast-forwarded, deletes all but the newest records under it."""
    if not await _delete_records_supported(env.bootstrap, run.topic):
        run.skipped = SKIPPED_DELETE_RECORDS
        env.out(f"{env.stamp()} {run.scenario.name}: skipped: {SKIPPED_DELETE_RECORDS}")
        return
    async with _traffic(env, run):
        # auto_offset_reset "none": after the loss the consumer is stuck below the log start,
        # as one configured not to skip data would be, instead of jumping ahead silently.
        consumer = await env.consumer(run, auto_offset_reset="none")
        committed: dict[TopicPartition, int] = {}
        while time.monotonic() < run.misbehave_at:
            await _consume_guarded(consumer, committed, None)

        async def slowly() -> None:
            await _consume_guarded(consumer, committed, LAGGING_PER_PARTITION)
            await asyncio.sleep(1.0)

        env.stage(run, "degrade")
        await env.until_status(run, _at_least(GroupStatus.WARN), slowly)
        env.stage(run, "fail")
        deleting = asyncio.create_task(_delete_old_records(env, consumer, keep=20))
        try:
            await env.until_status(run, _at_least(GroupStatus.ERR), slowly)
        finally:
            deleting.cancel()
            await asyncio.gather(deleting, return_exceptions=True)
        # Accept the loss: skip to what is still there, then keep up.
        await consumer.seek_to_beginning()
        await _catch_up(env, run, [consumer], committed)


async def _consume_guarded(
    consumer: AIOKafkaConsumer, committed: dict[TopicPartition, int], per_partition: int | None
) -> None:
    async with _transient_errors("retention-loss"):
        try:
            await _poll_and_commit(consumer, committed, per_partition)
        except NoOffsetForPartitionError:
            await consumer.seek_to_beginning()
        except OffsetOutOfRangeError:
            await asyncio.sleep(1.0)  # stuck below the log start: the loss stays visible


async def _delete_old_records(env: _Env, consumer: AIOKafkaConsumer, keep: int) -> None:
    """Retention, fast-forwarded: keep only the newest ``keep`` records of each partition."""
    admin = AIOKafkaAdminClient(bootstrap_servers=env.bootstrap)
    await admin.start()
    try:
        while True:
            await asyncio.sleep(env.settings.scan_interval)
            ends = await consumer.end_offsets(list(consumer.assignment()))
            doomed = {tp: RecordsToDelete(end - keep) for tp, end in ends.items() if end > keep}
            if doomed:
                await admin.delete_records(doomed)
    finally:
        await admin.close()


_SLOW = (
    f"falls behind: consumes about {LAGGING_PER_PARTITION * PARTITIONS} records/s while "
    f"{RATE_PER_TOPIC:g}/s arrive"
)
_CATCH_UP = "fixed: consumes at full speed again and catches up"

SCENARIOS: dict[str, Scenario] = {
    s.name: s
    for s in (
        Scenario("healthy", "OK (no alert)", ("", "", ""), frozenset(), _healthy, 0),
        Scenario(
            "rebalance-loop",
            "ERR/WARN (stuck-rebalance or rebalance-storm)",
            (
                _SLOW,
                "its consumer now crashes right after joining and is restarted, over and "
                "over (a crash loop): the group rebalances again and again",
                "fixed: one healthy consumer joins and catches up",
            ),
            frozenset({("stuck_rebalance", None), ("rebalance_storm", None)}),
            _rebalance_loop,
            0,
            allowance_scans=REBALANCE_ALLOWANCE_SCANS,
        ),
        Scenario(
            "lagging",
            "WARN (WARN)",
            (
                _SLOW,
                "then stops making progress at all, though still in the group",
                _CATCH_UP,
            ),
            frozenset({("burrow", "WARN")}),
            _lagging,
            1,
            detect_in="degrade",
        ),
        Scenario(
            "stalled",
            "ERR (STALL)",
            (
                _SLOW,
                "still a member, now commits the same offset every second while data arrives",
                _CATCH_UP,
            ),
            frozenset({("burrow", "STALL")}),
            _stalled,
            2,
        ),
        Scenario(
            "stopped",
            "ERR (STOP)",
            (
                _SLOW,
                "both consumers stopped and left the group while data keeps arriving",
                "a replacement consumer starts from the group's commits and catches up",
            ),
            frozenset({("burrow", "STOP")}),
            _stopped,
            3,
        ),
        Scenario(
            "rewound",
            "ERR (REWIND)",
            (
                _SLOW,
                "sought back about 30 s of records, committed that offset, replays from there",
                "replays at full speed until it is back where it was, then keeps up",
            ),
            frozenset({("burrow", "REWIND")}),
            _rewound,
            4,
        ),
        Scenario(
            "retention-loss",
            "ERR/WARN (retention-risk)",
            (
                _SLOW,
                "records older than the newest 20 are deleted under it",
                "gives up the lost records: skips to the log start and catches up",
            ),
            frozenset({("retention", None)}),
            _retention_loss,
            1,
        ),
    )
}


# --------------------------------------------------------------------------------------------
# Watching the service


def _matches(result: GroupResult, wanted: Iterable[tuple[str, str | None]]) -> list[str]:
    """Labels of the findings of ``result`` that are among the ``wanted`` ones."""
    wanted = set(wanted)
    labels: list[str] = []
    for finding in result.findings:
        if (finding.kind, finding.status) in wanted or (finding.kind, None) in wanted:
            label = finding.status if finding.kind == "burrow" else finding.rule
            if label not in labels:
                labels.append(label)
    return labels


class _DemoSink(LogSink):
    """The coordinator's sink for the demo: the JSON-lines file and log of :class:`LogSink`,
    plus one console line per transition, and a record of them for the summary."""

    def __init__(
        self, path: Path, env: _Env, runs: dict[str, _Run], notifier: Notifier | None = None
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
    # The finding that made the status (an ERR's reason, not a WARN listed before it).
    first = max(findings, key=lambda f: f.severity.group_status.rank)
    where = f" {first.topic}/{first.partition}" if first.topic is not None else ""
    more = f" (+{len(findings) - 1} more)" if len(findings) > 1 else ""
    return f"{head} {first.rule} {first.status}{where}: {first.message}{more}"


async def _watch(coordinator: Coordinator, runs: dict[str, _Run], poll_s: float) -> None:
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


# --------------------------------------------------------------------------------------------
# The run


def _service_config(settings: DemoSettings, bootstrap: str, data_dir: Path) -> ServiceConfig:
    return parse_service_config(
        {
            "clusters": [
                {
                    "name": CLUSTER,
                    "bootstrap_servers": bootstrap,
                    "client_id": "notifier-demo",
                    "scan_interval": settings.scan_interval,
                    "request_timeout": 5,
                    "scan_timeout": max(5.0, 2 * settings.scan_interval),
                    "group_allow": [f"^{re.escape(settings.prefix)}-"],
                }
            ],
            "data_dir": str(data_dir),
            "checkpoint_interval": 30,
            "history": {"enabled": True, "roll_interval": 60},
            "api": {"host": "127.0.0.1", "port": settings.api_port},
        },
        "demo",
    )


async def _create_topics(bootstrap: str, topics: list[str]) -> None:
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    await admin.start()
    try:
        await admin.create_topics([NewTopic(t, PARTITIONS, 1) for t in topics])
    finally:
        await admin.close()


def _fresh_outputs(data_dir: Path) -> Path:
    """The broker starts empty every time, so an earlier demo's checkpoint would describe
    offsets that no longer exist (and look like rewinds): start from a clean state."""
    data_dir.mkdir(parents=True, exist_ok=True)
    (data_dir / "state" / f"{CLUSTER}.sqlite").unlink(missing_ok=True)
    transitions = data_dir / "transitions.jsonl"
    transitions.unlink(missing_ok=True)
    for stale in data_dir.glob("notify.sqlite*"):  # an old outbox would re-send old alerts
        stale.unlink()
    return transitions


def local_notify_config(http: HttpReceiver, smtp: SmtpReceiver) -> dict[str, Any]:
    """Every channel kind, pointed at the loopback receivers; one message per incident, sent at
    once, resolves included."""
    return {
        "receivers": {
            "local": [
                {"slack_webhook": {"url": http.url_for("/services/demo")}},
                {"pagerduty": {"routing_key": "demo-routing-key",
                               "url": http.url_for("/v2/enqueue")}},
                {"webhook": {"url": http.url_for("/hooks/demo")}},
                {"email": {"host": "127.0.0.1", "port": smtp.port, "tls": "none",
                           "sender": "notifier-demo@localhost",
                           "recipients": ["oncall@localhost"]}},
            ]
        },
        "route": {"receiver": "local", "threshold": "warn", "group_by": ["..."],
                  "group_wait": "0s", "group_interval": "1s", "repeat_interval": "never",
                  "send_resolved": True},
    }  # fmt: skip


CHANNELS = ("webhook", "slack", "pagerduty", "e-mail")
STORY_EVENTS = ("open", "escalate", "resolve")
_SLACK_EVENT = re.compile(r"·\s+(opened|escalated|still firing|resolved)\b")
_SLACK_EVENTS = {
    "opened": "open",
    "escalated": "escalate",
    "still firing": "repeat",
    "resolved": "resolve",
}

Received = dict[str, dict[str, list[str]]]
"""group → channel → the events it received for that group, in order."""


def received_events(http: HttpReceiver, smtp: SmtpReceiver, groups: list[str]) -> Received:
    """What each local receiver got, per scenario group, as notification events (open,
    escalate, repeat, resolve): the webhook's ``event`` field, the event label in the Slack
    message, PagerDuty's trigger (open, then escalate when the severity rises) and resolve
    matched to the group by ``dedup_key``, the e-mail's ``X-Notifier-Event`` header."""
    got: Received = {g: {c: [] for c in CHANNELS} for g in groups}
    incident_groups: dict[str, str] = {}
    pd_severity: dict[str, str] = {}
    for request in http.requests:
        if request.path.startswith("/hooks/"):
            for alert in request.json.get("alerts", []):
                group = alert.get("incident", {}).get("group")
                if group in got:
                    got[group]["webhook"].append(alert.get("event", "?"))
        elif request.path.startswith("/services/"):
            text = json.dumps(request.json, ensure_ascii=False)
            label = _SLACK_EVENT.search(text)
            for group in groups:
                if f"*{group}*" in text:
                    got[group]["slack"].append(_SLACK_EVENTS[label[1]] if label else "?")
        elif request.path.startswith("/v2/enqueue"):
            # A resolve carries only the dedup key (the incident id) its trigger named.
            data = request.json
            key = str(data.get("dedup_key"))
            group = incident_groups.get(key)
            if group is None:
                body = request.text
                group = next((g for g in groups if g in body), None)
                if group is None:
                    continue
                incident_groups[key] = group
            action = data.get("event_action", "?")
            if action == "trigger":
                severity = str(data.get("payload", {}).get("severity"))
                previous = pd_severity.get(key)
                pd_severity[key] = severity
                action = (
                    "open"
                    if previous is None
                    else ("repeat" if previous == severity else "escalate")
                )
            got[group]["pagerduty"].append(action)
    for envelope in smtp.messages:
        subject = str(envelope.message.get("Subject", ""))
        event = str(envelope.message.get("X-Notifier-Event", "?"))
        for group in groups:
            if group in subject:
                got[group]["e-mail"].append(event)
    return got


def told_the_whole_story(events: list[str]) -> bool:
    """An open, then an escalation, then a resolve (repeats and flaps aside)."""
    remaining = iter(events)
    return all(any(event == wanted for event in remaining) for wanted in STORY_EVENTS)


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


async def run_demo(
    settings: DemoSettings,
    *,
    out: Callable[[str], None] = print,
    bootstrap: str | None = None,
    stop: asyncio.Event | None = None,
) -> DemoReport:
    """Run the demo and return what it found.

    ``bootstrap``: use this broker instead of starting the embedded one (tests share theirs);
    ``stop``: end early when set (Ctrl-C). Everything started here is stopped before returning.
    """
    data_dir = settings.data_dir or Path(tempfile.mkdtemp(prefix="notifier-demo-"))
    transitions_path = _fresh_outputs(data_dir)
    rules = demo_rules(
        settings.rules_path or default_rules_path(), settings.intervals, settings.time_scale
    )
    names = settings.scenarios or tuple(SCENARIOS)
    unknown = [n for n in names if n not in SCENARIOS]
    if unknown:
        raise ValueError(f"unknown scenario(s) {unknown}; known: {', '.join(SCENARIOS)}")

    broker: EmbeddedBroker | None = None
    if bootstrap is None:
        broker = EmbeddedBroker(port=settings.port, log_dir=data_dir / "broker")
        await broker.astart()
        bootstrap = broker.bootstrap_servers
    env = _Env(bootstrap, settings, out)
    coordinator: Coordinator | None = None
    api: ApiServer | None = None
    notifier: Notifier | None = None
    receivers = contextlib.AsyncExitStack()
    http = smtp = None
    received: Received = {}
    tasks: list[asyncio.Task[None]] = []
    interrupted = False
    try:
        notify_config = settings.notify
        if settings.local_receivers:
            http = await receivers.enter_async_context(HttpReceiver())
            smtp = await receivers.enter_async_context(SmtpReceiver())
            notify_config = local_notify_config(http, smtp)
        if notify_config:
            notifier = Notifier(parse_notify(notify_config, "demo: notify"),
                                data_dir / "notify.sqlite")  # fmt: skip
            await notifier.start()
        runs = {
            f"{settings.prefix}-{name}": _Run(
                SCENARIOS[name], f"{settings.prefix}-{name}", f"{settings.prefix}-{name}", 0.0
            )
            for name in names
        }
        await _create_topics(bootstrap, [run.topic for run in runs.values()])
        service = _service_config(settings, bootstrap, data_dir)
        sink = _DemoSink(transitions_path, env, runs, notifier)
        coordinator = Coordinator(service, rules, data_dir, sink)
        # As `notifier run` does it: the API first, then the scans.
        api = ApiServer(create_app(coordinator, notifier), service.api.host, service.api.port)
        await api.start()
        await coordinator.start()
        _print_banner(
            out, settings, bootstrap, data_dir, f"http://{service.api.host}:{api.port}/", runs
        )

        env.started = time.time()
        start = time.monotonic()
        for run in runs.values():
            order = run.scenario.order
            run.misbehave_at = start + settings.misbehave_offset + order * settings.stagger_s
            tasks.append(asyncio.create_task(_guard(env, run), name=run.group))
        tasks.append(asyncio.create_task(_watch(coordinator, runs, settings.scan_interval / 8)))

        waiters: list[asyncio.Task[Any]] = []
        if stop is not None:
            waiters.append(asyncio.create_task(stop.wait()))
        if settings.duration is not None:
            # A timed run ends early once every story is told: no need to watch healthy
            # groups stay healthy for the rest of the two minutes.
            waiters.append(asyncio.create_task(asyncio.sleep(settings.duration)))
            waiters.append(asyncio.create_task(_all_finished(runs, settings.scan_interval)))
        if waiters:
            _, pending = await asyncio.wait(waiters, return_when=asyncio.FIRST_COMPLETED)
            for waiter in pending:
                waiter.cancel()
            interrupted = stop is not None and stop.is_set()
        else:
            await asyncio.Event().wait()
        out(f"{env.stamp()} stopping: service, consumers, producers, broker")
    finally:
        stopping = time.monotonic()
        if coordinator is not None:
            await coordinator.stop()
        if api is not None:
            await _bounded("the API server", api.stop())
        if notifier is not None:
            await notifier.wait_delivered(timeout=15)
            await _bounded("the notifier", notifier.stop())
        if http is not None and smtp is not None:
            received = received_events(http, smtp, list(runs))
        await _bounded("the local receivers", receivers.aclose())
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        await env.close()
        if broker is not None:
            await broker.astop()
        log.info("demo stopped in %.1fs", time.monotonic() - stopping)

    return DemoReport(
        outcomes=[_outcome(run) for run in runs.values()],
        transitions=sink.transitions,
        data_dir=data_dir,
        bootstrap_servers=bootstrap,
        interrupted=interrupted,
        received=received,
    )


async def _all_finished(runs: dict[str, _Run], scan_interval: float) -> None:
    """Return once every scenario has finished its story (then one scan more, so the last
    transitions are handed to the notifier)."""
    while not all(run.finished or run.skipped or run.failure for run in runs.values()):
        await asyncio.sleep(0.25)
    await asyncio.sleep(scan_interval)


async def _bounded(what: str, step: Awaitable[Any], seconds: float = 20.0) -> None:
    """One shutdown step, never allowed to hold the demo's exit hostage."""
    try:
        await asyncio.wait_for(step, seconds)
    except TimeoutError:
        log.error("stopping %s took longer than %.0fs; moving on", what, seconds)


async def _guard(env: _Env, run: _Run) -> None:
    """Run a script; a script that breaks is reported in the summary, not a crash."""
    try:
        await run.scenario.script(env, run)
    except asyncio.CancelledError:
        raise
    except Exception as exc:
        log.exception("scenario %s failed", run.scenario.name)
        run.failure = f"script failed: {exc!r}"[:120]
        env.out(f"{env.stamp()} {run.scenario.name}: {run.failure}")


def _outcome(run: _Run) -> ScenarioOutcome:
    scenario = run.scenario
    base = {
        "name": scenario.name,
        "group": run.group,
        "expected": scenario.expected,
        "path": " → ".join(["OK", *(status.value for status in run.statuses)])
        if run.statuses
        else "",
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


def _print_banner(
    out: Callable[[str], None],
    settings: DemoSettings,
    bootstrap: str,
    data_dir: Path,
    status_page: str,
    runs: dict[str, _Run],
) -> None:
    out(f"notifier demo: embedded Kafka-protocol broker at {bootstrap}")
    out(f"  status page:  {status_page}  (Burrow API: {status_page}v3/kafka/{CLUSTER}/consumer)")
    out(f"  transitions:  {data_dir / 'transitions.jsonl'} (JSON lines)")
    out(f"  history:      {data_dir / 'history'} (Parquet)")
    out(
        f"  scans every {settings.scan_interval:g}s; windows of {settings.intervals} scans; "
        f"rules.yaml with for/keep_firing_for x{settings.time_scale:g}"
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
    """The summary table: scenario, expected, detected, seconds from misbehaviour to alert."""
    header = ("scenario", "expected", "detected", "seconds to detect", "statuses")
    rows = [
        (
            o.name,
            o.expected,
            o.detected,
            "-" if o.seconds is None else f"{o.seconds:.1f}",
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


def main(settings: DemoSettings, out: Callable[[str], None] = print) -> int:
    """``notifier demo``: run, print the summary; 0 when everything went as expected (or the
    user interrupted an open-ended run), 1 otherwise."""
    from notifier.service import logs

    data_dir = settings.data_dir or Path(tempfile.mkdtemp(prefix="notifier-demo-"))
    data_dir.mkdir(parents=True, exist_ok=True)
    settings = dataclasses.replace(settings, data_dir=data_dir)
    # The console is for the demo's story; the service's structured logs go to a file.
    log_path = data_dir / "demo.log"
    out(f"notifier demo: service logs in {log_path}")
    with log_path.open("a") as log_file:
        logs.configure("INFO", "keyvalue", stream=log_file)
        report = asyncio.run(_main_async(settings, out))
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
    if settings.duration is None and report.interrupted:
        return 0
    return 0 if report.ok else 1


async def _main_async(settings: DemoSettings, out: Callable[[str], None]) -> DemoReport:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    try:
        return await run_demo(settings, out=out, stop=stop)
    finally:
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.remove_signal_handler(sig)
