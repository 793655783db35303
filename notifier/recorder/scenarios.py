"""The scripted groups of a recording (:data:`SCENARIOS`): healthy groups at several commit
cadences, the benign patterns of real fleets (../shared/DOMAIN.md §9) and the faults, each on
its own topic, each with real consumers (aiokafka members as processes, Kafka's own console
consumer).

A fault is labelled from when it can no longer be one of the benign patterns (the README's
"Alert quality" convention, the sweep's and the fleet corpus's): a stall from the first missed
commit (onset + the commit interval), a stop and consumers gone a minute after they left (a
restart is over within a minute), falling behind after one commit interval (at least a minute),
records lost to retention from the slowdown that leads to it (the same), a rewind at once. The
script writes the label itself, from the moments it acted.
"""

from __future__ import annotations

import asyncio
import random
import signal
from collections.abc import Callable, Coroutine
from dataclasses import dataclass, field
from typing import Any

from notifier.recorder.stage import COOPERATIVE_STICKY, Consumer, Plan, Stage

Script = Callable[[Stage, Plan, random.Random], Coroutine[Any, Any, None]]


@dataclass(frozen=True)
class Scenario:
    """A named script and how its group is set up."""

    name: str
    description: str
    script: Script
    kind: str = ""
    client: str = "aiokafka"
    commit: str = "auto:5"
    partitions: int = 4
    rate: float = 8.0
    topic_config: dict[str, str] = field(default_factory=dict)
    transactional: bool = False

    def plan(self, prefix: str) -> Plan:
        name = f"{prefix}{self.name}"
        return Plan(
            scenario=self.name,
            kind=self.kind,
            client=self.client,
            group=name,
            topic=name,
            partitions=self.partitions,
            rate=self.rate,
            commit=self.commit,
            description=self.description,
            topic_config=dict(self.topic_config),
            transactional=self.transactional,
        )


# -- shared steps -----------------------------------------------------------------------------


async def _start(stage: Stage, rng: random.Random) -> None:
    """Wait for this group's moment in the staggered start."""
    await stage.until(rng.uniform(0, stage.timeline.start_spread_s))


def _events(stage: Stage, rng: random.Random) -> list[float]:
    """The moments of a benign group's events (every ``event_every_s``, some jitter)."""
    t = stage.timeline
    times, at = [], t.first_event_s + rng.uniform(0, 30)
    while at < t.duration_s - 90:
        times.append(at)
        at += t.event_every_s + rng.uniform(-20, 20)
    return times


def _fault(stage: Stage, rng: random.Random) -> tuple[float, float]:
    t = stage.timeline
    return rng.uniform(*t.onset_s), rng.uniform(*t.fault_length_s)


def _members(stage: Stage, plan: Plan, count: int, *options: str) -> list[Consumer]:
    return [stage.member(plan, *options) for _ in range(count)]


async def _run_out(stage: Stage) -> None:
    await stage.until(stage.timeline.duration_s)


# -- healthy ----------------------------------------------------------------------------------


def _healthy(count: int, *options: str) -> Script:
    async def script(stage: Stage, plan: Plan, rng: random.Random) -> None:
        await _start(stage, rng)
        _members(stage, plan, count, *options)
        await _run_out(stage)

    return script


async def _batch_job(stage: Stage, plan: Plan, rng: random.Random) -> None:
    """A job every 4 minutes: joins, reads everything, commits, leaves (the group Empty)."""
    await _start(stage, rng)
    while stage.elapsed_s < stage.timeline.duration_s - 30:
        job = stage.member(plan, "--until-caught-up", "--capacity", "400")
        if not await job.wait(120):
            await job.stop()
        await stage.until(stage.elapsed_s + 240 + rng.uniform(-20, 20))


async def _java_healthy(stage: Stage, plan: Plan, rng: random.Random) -> None:
    await _start(stage, rng)
    protocol = "consumer" if "consumer" in plan.scenario else "classic"
    stage.java_member(plan, protocol)
    await _run_out(stage)


# -- benign -----------------------------------------------------------------------------------


def _crash_restart(count: int, restart_s: tuple[float, float], *options: str) -> Script:
    """``kill -9`` one member (nothing committed on the way out), a new one after a restart."""

    async def script(stage: Stage, plan: Plan, rng: random.Random) -> None:
        await _start(stage, rng)
        members = _members(stage, plan, count, *options)
        for at in _events(stage, rng):
            await stage.until(at)
            victim = rng.randrange(len(members))
            await members[victim].kill()
            await asyncio.sleep(rng.uniform(*restart_s))
            members[victim] = stage.member(plan, *options)
        await _run_out(stage)

    return script


async def _static_restart(stage: Stage, plan: Plan, rng: random.Random) -> None:
    """Static members (``group.instance.id``): one killed and back within the session timeout
    under the same instance id, so the group does not rebalance at all."""
    await _start(stage, rng)
    ids = [f"{plan.group}-static-{i}" for i in range(2)]

    def start(i: int) -> Consumer:
        return stage.member(plan, "--instance-id", ids[i], "--session-timeout-ms", "45000")

    members = [start(i) for i in range(2)]
    for at in _events(stage, rng):
        await stage.until(at)
        victim = rng.randrange(2)
        await members[victim].kill()
        await asyncio.sleep(rng.uniform(5, 25))
        members[victim] = start(victim)
    await _run_out(stage)


async def _rolling_eager(stage: Stage, plan: Plan, rng: random.Random) -> None:
    """A rolling deploy of three aiokafka members (eager: every step revokes everything):
    each stopped gracefully (it commits and leaves), its replacement started a few seconds
    later."""
    await _start(stage, rng)
    members = _members(stage, plan, 3)
    for at in _events(stage, rng):
        await stage.until(at)
        for i in range(len(members)):
            await members[i].stop()
            await asyncio.sleep(rng.uniform(3, 10))
            members[i] = stage.member(plan)
            await asyncio.sleep(rng.uniform(10, 20))
    await _run_out(stage)


async def _rolling_cooperative(stage: Stage, plan: Plan, rng: random.Random) -> None:
    """A rolling deploy of two Java classic members with the cooperative-sticky assignor
    (only the moved partitions pause); the new pod starts before the old one stops."""
    await _start(stage, rng)
    members = [stage.java_member(plan, "classic", COOPERATIVE_STICKY) for _ in range(2)]
    for at in _events(stage, rng):
        await stage.until(at)
        for i in range(len(members)):
            replacement = stage.java_member(plan, "classic", COOPERATIVE_STICKY)
            await asyncio.sleep(rng.uniform(8, 15))
            await members[i].stop()
            members[i] = replacement
            await asyncio.sleep(rng.uniform(10, 20))
    await _run_out(stage)


async def _java_crash(stage: Stage, plan: Plan, rng: random.Random) -> None:
    """Kafka's consumer (KIP-848 protocol) killed with ``kill -9`` and restarted: the broker
    keeps the dead member's partitions until its session times out."""
    await _start(stage, rng)
    member = stage.java_member(plan, "consumer")
    for at in _events(stage, rng):
        await stage.until(at)
        await member.kill()
        await asyncio.sleep(rng.uniform(5, 15))
        member = stage.java_member(plan, "consumer")
    await _run_out(stage)


async def _signal_over(
    stage: Stage, members: list[Consumer], sig: signal.Signals, start: float, end: float
) -> None:
    """Signal every member at ``start`` and again at ``end``: each signal toggles a mode of the
    member (``pause()``, slow reading), so the mode lasts from one to the other."""
    await stage.until(start)
    for m in members:
        m.signal(sig)
    await stage.until(end)
    for m in members:
        m.signal(sig)


async def _backpressure(stage: Stage, plan: Plan, rng: random.Random) -> None:
    """Both members ``pause()`` every partition for 20-45 s (back-pressure), then resume."""
    await _start(stage, rng)
    members = _members(stage, plan, 2)
    for at in _events(stage, rng):
        await _signal_over(stage, members, signal.SIGUSR2, at, at + rng.uniform(20, 45))
    await _run_out(stage)


async def _frozen_process(stage: Stage, plan: Plan, rng: random.Random) -> None:
    """The member's process frozen (SIGSTOP, a long GC or a throttled container) for 10-25 s,
    within its session timeout, then thawed (SIGCONT)."""
    await _start(stage, rng)
    (member,) = _members(stage, plan, 1, "--session-timeout-ms", "45000")
    for at in _events(stage, rng):
        await stage.until(at)
        member.signal(signal.SIGSTOP)
        await asyncio.sleep(rng.uniform(10, 25))
        member.signal(signal.SIGCONT)
    await _run_out(stage)


# -- faults -----------------------------------------------------------------------------------


async def _stalled(stage: Stage, plan: Plan, rng: random.Random) -> None:
    """Every member ``pause()``s for minutes: members present and Stable, nothing read, the
    committed offset frozen while records arrive; then it resumes and drains."""
    await _start(stage, rng)
    members = _members(stage, plan, 2 if plan.commit_every_s >= 30 else 1)
    onset, length = _fault(stage, rng)
    await _signal_over(stage, members, signal.SIGUSR2, onset, onset + length)
    stage.label(plan, onset, onset + plan.commit_every_s, onset + length)
    await _run_out(stage)


def _stopped(java: bool) -> Script:
    """Every member stopped gracefully (committed, left): the group Empty while records
    arrive; started again minutes later."""

    async def script(stage: Stage, plan: Plan, rng: random.Random) -> None:
        await _start(stage, rng)

        def start() -> Consumer:
            return stage.java_member(plan, "consumer") if java else stage.member(plan)

        count = 1 if java else 2
        members = [start() for _ in range(count)]
        onset, length = _fault(stage, rng)
        await stage.until(onset)
        await asyncio.gather(*(m.stop() for m in members))
        await stage.until(onset + length)
        members = [start() for _ in range(count)]
        stage.label(plan, onset, onset + 60, onset + length)
        await _run_out(stage)

    return script


def _consumers_gone(killed: bool, java: bool = False) -> Script:
    """Every member gone for good (stopped, or killed: then kept until its session times
    out); the group Empty to the end."""

    async def script(stage: Stage, plan: Plan, rng: random.Random) -> None:
        await _start(stage, rng)
        if java:
            members = [stage.java_member(plan, "consumer")]
        else:
            members = _members(stage, plan, 1 if killed else 2)
        onset, _ = _fault(stage, rng)
        await stage.until(onset)
        await asyncio.gather(*(m.kill() if killed else m.stop() for m in members))
        stage.label(plan, onset, onset + 60, stage.timeline.duration_s)
        await _run_out(stage)

    return script


async def _lagging(stage: Stage, plan: Plan, rng: random.Random) -> None:
    """Every member slows to a quarter of the traffic (a slow downstream): it keeps
    committing, but falls further behind; then its speed is back and it drains."""
    await _start(stage, rng)
    count = 2
    slow = f"{plan.rate / 4 / count:g}"
    members = _members(stage, plan, count, "--slow-rate", slow)
    onset, length = _fault(stage, rng)
    await _signal_over(stage, members, signal.SIGUSR1, onset, onset + length)
    stage.label(plan, onset, onset + max(60.0, plan.commit_every_s), onset + length)
    await _run_out(stage)


def _rewound(rewind_to: float, count: int) -> Script:
    """Every member seeks back (to ``rewind_to`` of the way from the log start) and commits
    that at once, then re-reads at three times the traffic until it has caught up."""

    async def script(stage: Stage, plan: Plan, rng: random.Random) -> None:
        await _start(stage, rng)
        capacity = f"{3 * plan.rate / count:g}"
        options = ("--capacity", capacity, "--rewind-to", f"{rewind_to:g}")
        members = _members(stage, plan, count, *options)
        onset, _ = _fault(stage, rng)
        await stage.until(onset)
        for m in members:
            m.signal(signal.SIGHUP)
        stage.label(plan, onset, onset, onset + 600)
        await _run_out(stage)

    return script


async def _retention_loss(stage: Stage, plan: Plan, rng: random.Random) -> None:
    """The member slows to an eighth of the traffic on a topic that keeps 90 s: the log start
    overtakes its committed offset within a few minutes and records it never read are
    deleted; it resets to the earliest offset and is overtaken again, to the end."""
    await _start(stage, rng)
    (member,) = _members(stage, plan, 1, "--slow-rate", f"{plan.rate / 8:g}")
    onset, _ = _fault(stage, rng)
    await stage.until(onset)
    member.signal(signal.SIGUSR1)
    stage.label(plan, onset, onset + max(60.0, plan.commit_every_s), stage.timeline.duration_s)
    await _run_out(stage)


SHORT_RETENTION = {"retention.ms": "90000", "segment.ms": "10000"}

SCENARIOS: tuple[Scenario, ...] = (
    # healthy
    Scenario("healthy-auto5", "two members, aiokafka's auto-commit every 5 s", _healthy(2)),
    Scenario("healthy-every30", "two members committing by hand every 30 s", _healthy(2),
             commit="every:30"),
    Scenario("healthy-every150", "one member committing every 2.5 minutes", _healthy(1),
             commit="every:150", rate=2.0),
    Scenario("batch-job", "a job every 4 minutes: reads everything, commits, leaves",
             _batch_job, commit="every:3600", rate=2.0),
    Scenario("java-consumer-healthy", "Kafka's console consumer, group.protocol=consumer",
             _java_healthy, client="java", commit="auto:5"),
    Scenario("java-classic-healthy", "Kafka's console consumer, group.protocol=classic",
             _java_healthy, client="java", commit="auto:5"),
    # benign
    Scenario("crash-restart-every30", "two members committing every 30 s; one killed "
             "(kill -9) and restarted after 5-20 s", _crash_restart(2, (5, 20)),
             commit="every:30"),
    Scenario("crash-restart-auto5", "one member, auto-commit 5 s, session 10 s; killed "
             "(kill -9) and restarted after 5-15 s",
             _crash_restart(1, (5, 15), "--session-timeout-ms", "10000")),
    Scenario("dead-member", "three members committing every 10 s; one killed (kill -9), "
             "kept until its 45 s session times out, back after 60-90 s",
             _crash_restart(3, (60, 90)), commit="every:10", partitions=6),
    Scenario("static-restart", "two static members (group.instance.id) committing every "
             "30 s; one killed and back within the session timeout", _static_restart,
             commit="every:30"),
    Scenario("rolling-eager", "a rolling deploy of three aiokafka members (eager)",
             _rolling_eager, partitions=6),
    Scenario("rolling-cooperative", "a rolling deploy of two Java classic members "
             "(cooperative-sticky), surge first", _rolling_cooperative, client="java"),
    Scenario("java-consumer-crash", "Kafka's consumer (KIP-848) killed (kill -9) and "
             "restarted after 5-15 s", _java_crash, client="java"),
    Scenario("backpressure-pause", "two members committing every 30 s pause() every "
             "partition for 20-45 s", _backpressure, commit="every:30"),
    Scenario("frozen-process", "one member's process frozen (SIGSTOP) for 10-25 s",
             _frozen_process),
    Scenario("standalone-assign", "assign() of every partition, commits every 10 s, no "
             "members (the group Empty forever)", _healthy(1, "--assign", "4"), commit="every:10"),
    Scenario("transactional", "a transactional producer (1 in 8 aborted) and a "
             "read_committed member", _healthy(1, "--read-committed"), transactional=True),
    # faults
    Scenario("stalled-auto5", "one member (auto-commit 5 s) pause()s for minutes",
             _stalled, kind="stalled"),
    Scenario("stalled-every30", "two members (commits every 30 s) pause() for minutes",
             _stalled, kind="stalled", commit="every:30"),
    Scenario("stopped-aiokafka", "both members stopped gracefully, back minutes later",
             _stopped(java=False), kind="stopped"),
    Scenario("stopped-java", "the Java (KIP-848) member stopped, back minutes later",
             _stopped(java=True), kind="stopped", client="java"),
    Scenario("consumers-gone-stopped", "both members stopped gracefully, never back",
             _consumers_gone(killed=False), kind="consumers_gone", commit="every:30"),
    Scenario("consumers-gone-killed", "the member killed (kill -9), never back",
             _consumers_gone(killed=True), kind="consumers_gone"),
    Scenario("lagging-auto5", "both members slow to a quarter of the traffic for minutes",
             _lagging, kind="lagging"),
    Scenario("lagging-every30", "both members (commits every 30 s) slow to a quarter",
             _lagging, kind="lagging", commit="every:30"),
    Scenario("stalled-every60", "one member (commits every 60 s) pause()s for minutes",
             _stalled, kind="stalled", commit="every:60"),
    Scenario("stopped-every60", "both members (commits every 60 s) stopped, back later",
             _stopped(java=False), kind="stopped", commit="every:60"),
    Scenario("consumers-gone-java", "the Java (KIP-848) member stopped, never back",
             _consumers_gone(killed=False, java=True), kind="consumers_gone", client="java"),
    Scenario("lagging-every10", "both members (commits every 10 s) slow to a quarter",
             _lagging, kind="lagging", commit="every:10", rate=16.0),
    Scenario("rewound-quarter", "both members (commits every 10 s) seek a quarter of the "
             "way from the log start", _rewound(0.25, 2), kind="rewound", commit="every:10"),
    Scenario("retention-loss-every10", "the same, committing every 10 s, twice the traffic",
             _retention_loss, kind="retention_loss", commit="every:10", rate=16.0,
             topic_config=SHORT_RETENTION),
    Scenario("rewound-start", "the member seeks to the log start and commits, re-reads",
             _rewound(0.0, 1), kind="rewound"),
    Scenario("rewound-half", "both members (commits every 30 s) seek halfway back",
             _rewound(0.5, 2), kind="rewound", commit="every:30"),
    Scenario("retention-loss-auto5", "slows to an eighth on a topic keeping 90 s",
             _retention_loss, kind="retention_loss", topic_config=SHORT_RETENTION),
    Scenario("retention-loss-every30", "the same, committing every 30 s",
             _retention_loss, kind="retention_loss", commit="every:30",
             topic_config=SHORT_RETENTION),
)  # fmt: skip

BY_NAME = {s.name: s for s in SCENARIOS}
