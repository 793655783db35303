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

from notifier.embedded.apache_kafka import CLASSIC_KAFKA_VERSION, KAFKA_VERSION
from notifier.recorder.stage import COOPERATIVE_STICKY, RANGE, Consumer, Plan, Stage, Timeline

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
    protocol: str = "classic"
    """The Java consumer's ``group.protocol`` (``consumer``: KIP-848, Kafka 4 only)."""

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
            protocol=self.protocol,
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


def _faults(
    stage: Stage, rng: random.Random, settle_s: float = 120.0, lasts_s: float | None = None
) -> list[tuple[float, float]]:
    """A healing fault's rounds (onset, length): one, or one every ``fault_every_s`` of the
    timeline as long as the fault (its length, or ``lasts_s`` for one whose label has a fixed
    span, a rewind) and ``settle_s`` to heal fit before the end."""
    t = stage.timeline
    rounds = [_fault(stage, rng)]
    while t.fault_every_s > 0:
        onset, length = rounds[-1][0] + t.fault_every_s, rng.uniform(*t.fault_length_s)
        if onset + (length if lasts_s is None else lasts_s) + settle_s > t.duration_s:
            break
        rounds.append((onset, length))
    return rounds


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


def _batch_job(every_s: float) -> Script:
    """A job every ``every_s``: joins, reads everything, commits, leaves (the group Empty)."""

    async def script(stage: Stage, plan: Plan, rng: random.Random) -> None:
        await _start(stage, rng)
        while stage.elapsed_s < stage.timeline.duration_s - 30:
            job = stage.member(plan, "--until-caught-up", "--capacity", "400")
            if not await job.wait(120):
                await job.stop()
            await stage.until(stage.elapsed_s + every_s + rng.uniform(-20, 20))

    return script


def _batch_job_missed(every_s: float, fails_after: float, jitter_s: float = 20.0) -> Script:
    """A job every ``every_s`` (:func:`_batch_job`) that stops running: the first run due after
    ``fails_after`` of the recording never comes, nor any after it (a cron job disabled, its
    scheduler down). Labelled ``stopped``: onset when that run was due (the previous run's start +
    ``every_s``), start when it is overdue by its usual margin, the schedule's jitter
    (``jitter_s``) and a minute (the convention's for a stop: a late start is over within a
    minute), i.e. due + ``jitter_s`` + 60 s; end: the end of the recording."""

    async def script(stage: Stage, plan: Plan, rng: random.Random) -> None:
        await _start(stage, rng)
        fails_at = fails_after * stage.timeline.duration_s
        while True:
            run_at = stage.elapsed_s
            job = stage.member(plan, "--until-caught-up", "--capacity", "400")
            if not await job.wait(120):
                await job.stop()
            due = run_at + every_s
            if due > fails_at:
                if due + jitter_s + 60 < stage.timeline.duration_s - 60:
                    stage.label(plan, due, due + jitter_s + 60, stage.timeline.duration_s)
                break
            await stage.until(due + rng.uniform(-jitter_s, jitter_s))
        await _run_out(stage)

    return script


def _java_healthy(**properties: str) -> Script:
    """Kafka's console consumer with ``properties`` (see :meth:`Stage.java_member`)."""

    async def script(stage: Stage, plan: Plan, rng: random.Random) -> None:
        await _start(stage, rng)
        stage.java_member(plan, **properties)
        await _run_out(stage)

    return script


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


def _static_restart(
    count: int = 2, session_ms: int = 45_000, restart_s: tuple[float, float] = (5, 25)
) -> Script:
    """Static members (``group.instance.id``): one killed and back within the session timeout
    under the same instance id, so the group does not rebalance at all."""

    async def script(stage: Stage, plan: Plan, rng: random.Random) -> None:
        await _start(stage, rng)
        ids = [f"{plan.group}-static-{i}" for i in range(count)]

        def start(i: int) -> Consumer:
            return stage.member(plan, "--instance-id", ids[i], "--session-timeout-ms",
                                str(session_ms))  # fmt: skip

        members = [start(i) for i in range(count)]
        for at in _events(stage, rng):
            await stage.until(at)
            victim = rng.randrange(count)
            await members[victim].kill()
            await asyncio.sleep(rng.uniform(*restart_s))
            members[victim] = start(victim)
        await _run_out(stage)

    return script


def _dead_member_frozen(count: int, frozen_s: tuple[float, float]) -> Script:
    """One of ``count`` members frozen (SIGSTOP) for longer than its 45 s session: the broker
    keeps it, and its partitions stand still, until the session times out and the others take
    them over; thawed (SIGCONT), it finds itself out of the group and joins again."""

    async def script(stage: Stage, plan: Plan, rng: random.Random) -> None:
        await _start(stage, rng)
        members = _members(stage, plan, count, "--session-timeout-ms", "45000")
        for at in _events(stage, rng):
            await stage.until(at)
            victim = members[rng.randrange(count)]
            victim.signal(signal.SIGSTOP)
            await asyncio.sleep(rng.uniform(*frozen_s))
            victim.signal(signal.SIGCONT)
        await _run_out(stage)

    return script


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


def _rolling_java(count: int, assignor: str, surge: bool) -> Script:
    """A rolling deploy of ``count`` Java classic members with ``assignor`` (cooperative-sticky:
    only the moved partitions pause; range: eager, every step revokes everything). With
    ``surge`` the new pod starts before the old one stops; without, it replaces it a few
    seconds after."""

    async def script(stage: Stage, plan: Plan, rng: random.Random) -> None:
        await _start(stage, rng)
        members = [stage.java_member(plan, assignor) for _ in range(count)]
        for at in _events(stage, rng):
            await stage.until(at)
            for i in range(len(members)):
                if surge:
                    replacement = stage.java_member(plan, assignor)
                    await asyncio.sleep(rng.uniform(8, 15))
                    await members[i].stop()
                else:
                    await members[i].stop()
                    await asyncio.sleep(rng.uniform(3, 10))
                    replacement = stage.java_member(plan, assignor)
                members[i] = replacement
                await asyncio.sleep(rng.uniform(10, 20))
        await _run_out(stage)

    return script


async def _java_crash(stage: Stage, plan: Plan, rng: random.Random) -> None:
    """Kafka's consumer killed with ``kill -9`` and restarted: the broker keeps the dead
    member's partitions until its session times out."""
    await _start(stage, rng)
    member = stage.java_member(plan)
    for at in _events(stage, rng):
        await stage.until(at)
        await member.kill()
        await asyncio.sleep(rng.uniform(5, 15))
        member = stage.java_member(plan)
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


async def _slow_downstream(stage: Stage, plan: Plan, rng: random.Random) -> None:
    """The members' processing speed varies batch to batch (half to one and a half times twice
    the traffic: a downstream whose latency varies) and, now and then, slows to a third of the
    traffic for 20-60 s (a slow spell of the downstream, under the minute from which a
    slowdown is labelled ``lagging``): the group falls a little behind and catches up by
    itself."""
    await _start(stage, rng)
    count = 2 if plan.commit_every_s >= 30 else 1
    share = plan.rate / count
    members = _members(stage, plan, count, "--capacity", f"{2 * share:g}", "--capacity-jitter",
                       "0.5", "--slow-rate", f"{share / 3:g}")  # fmt: skip
    for at in _events(stage, rng):
        await _signal_over(stage, members, signal.SIGUSR1, at, at + rng.uniform(20, 60))
    await _run_out(stage)


def _compacted_bootstrap(start_at: float, catch_up_commit_s: float) -> Script:
    """A new group that reads a compacted topic (keyed records, ``cleanup.policy=compact``)
    from its start ``start_at`` of the way into the recording, after the topic has gathered
    records since the recording began (what compaction leaves of them): it loads that state at
    under twice the traffic, committing only every ``catch_up_commit_s`` until it has caught
    up, then at its usual interval."""

    async def script(stage: Stage, plan: Plan, rng: random.Random) -> None:
        await stage.until(start_at * stage.timeline.duration_s + rng.uniform(0, 30))
        stage.member(plan, "--capacity", f"{1.6 * plan.rate:g}",
                     "--catch-up-commit", f"{catch_up_commit_s:g}")  # fmt: skip
        await _run_out(stage)

    return script


def _autoscale(most: int, step_s: tuple[float, float]) -> Script:
    """Scaled out one member at a time from one to ``most`` (a new pod every ``step_s``), at
    the next event scaled back in one graceful stop at a time, and so on: every step is a
    rebalance, and the group reads between them."""

    async def script(stage: Stage, plan: Plan, rng: random.Random) -> None:
        await _start(stage, rng)
        members = [stage.member(plan)]
        for at in _events(stage, rng):
            await stage.until(at)
            growing = len(members) == 1
            for _ in range(most - 1):
                if growing:
                    members.append(stage.member(plan))
                else:
                    await members.pop().stop()
                await asyncio.sleep(rng.uniform(*step_s))
        await _run_out(stage)

    return script


# -- faults -----------------------------------------------------------------------------------


async def _stalled(stage: Stage, plan: Plan, rng: random.Random) -> None:
    """Every member ``pause()``s for minutes: members present and Stable, nothing read, the
    committed offset frozen while records arrive; then it resumes and drains."""
    await _start(stage, rng)
    members = _members(stage, plan, 2 if plan.commit_every_s >= 30 else 1)
    for onset, length in _faults(stage, rng):
        await _signal_over(stage, members, signal.SIGUSR2, onset, onset + length)
        stage.label(plan, onset, onset + plan.commit_every_s, onset + length)
    await _run_out(stage)


def _stopped(java: bool) -> Script:
    """Every member stopped gracefully (committed, left): the group Empty while records
    arrive; started again minutes later."""

    async def script(stage: Stage, plan: Plan, rng: random.Random) -> None:
        await _start(stage, rng)

        def start() -> Consumer:
            return stage.java_member(plan) if java else stage.member(plan)

        count = 1 if java else 2
        members = [start() for _ in range(count)]
        for onset, length in _faults(stage, rng):
            await stage.until(onset)
            await asyncio.gather(*(m.stop() for m in members))
            await stage.until(onset + length)
            members = [start() for _ in range(count)]
            stage.label(plan, onset, onset + 60, onset + length)
        await _run_out(stage)

    return script


def _consumers_gone(
    killed: bool, java: bool = False, count: int | None = None, static: bool = False
) -> Script:
    """Every member gone for good (stopped, or killed: then kept until its session times
    out); the group Empty to the end. ``static`` members (``group.instance.id``) do not
    leave the group when stopped: the broker keeps them until their session times out."""

    async def script(stage: Stage, plan: Plan, rng: random.Random) -> None:
        await _start(stage, rng)
        if java:
            members = [stage.java_member(plan)]
        else:
            many = count or (1 if killed else 2)
            ids = [f"{plan.group}-static-{i}" for i in range(many)]
            members = [stage.member(plan, *(("--instance-id", i) if static else ())) for i in ids]
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
    for onset, length in _faults(stage, rng):
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
        for onset, _ in _faults(stage, rng, settle_s=0.0, lasts_s=600.0):
            await stage.until(onset)
            for m in members:
                m.signal(signal.SIGHUP)
            stage.label(plan, onset, onset, onset + 600)
        await _run_out(stage)

    return script


async def _retention_loss(stage: Stage, plan: Plan, rng: random.Random) -> None:
    """The member slows to an eighth of the traffic on a topic that keeps 90 s: the log start
    overtakes its committed offset within a few minutes and records it never read are
    deleted; it resets to the earliest offset and is overtaken again, to the end (or, when
    the timeline repeats faults, until its speed is back after the fault's length, when it
    catches up; then again)."""
    await _start(stage, rng)
    (member,) = _members(stage, plan, 1, "--slow-rate", f"{plan.rate / 8:g}")
    rounds = _faults(stage, rng)
    heals = stage.timeline.fault_every_s > 0
    for onset, length in rounds:
        end = onset + length if heals else stage.timeline.duration_s
        if heals:
            await _signal_over(stage, [member], signal.SIGUSR1, onset, end)
        else:
            await stage.until(onset)
            member.signal(signal.SIGUSR1)
        stage.label(plan, onset, onset + max(60.0, plan.commit_every_s), end)
    await _run_out(stage)


def _crash_loop(count: int, session_ms: int, up_s: tuple[float, float],
                back_s: tuple[float, float]) -> Script:  # fmt: skip
    """One of ``count`` members crash-loops for the fault's length: killed (kill -9) after
    ``up_s`` of work, back ``back_s`` later, again and again (a poison record that kills it at
    every start, a pod whose back-off stays short). Each crash is two member changes: the new
    member joining, the dead one dropped when its session times out. Labelled
    ``rebalance_storm`` from the third change (two are one crash restart) until the last
    change."""

    async def script(stage: Stage, plan: Plan, rng: random.Random) -> None:
        await _start(stage, rng)
        options = ("--session-timeout-ms", str(session_ms))
        members = _members(stage, plan, count, *options)
        onset, length = _fault(stage, rng)
        await stage.until(onset)
        changes: list[float] = []
        while stage.elapsed_s < onset + length:
            await members[-1].kill()
            killed = stage.elapsed_s
            await asyncio.sleep(rng.uniform(*back_s))
            members[-1] = stage.member(plan, *options)
            changes += [killed + session_ms / 1000, stage.elapsed_s]
            await asyncio.sleep(rng.uniform(*up_s))
        changes.sort()
        stage.label(plan, onset, changes[min(2, len(changes) - 1)], changes[-1] + 10)
        await _run_out(stage)

    return script


def _poll_timeout_loop(max_poll_s: float, batch_s: tuple[float, float]) -> Script:
    """One of two members takes ``batch_s`` over every batch (a downstream call that hangs)
    for the fault's length, longer than its ``max.poll.interval.ms`` (``max_poll_s``): aiokafka
    leaves the group once the interval has passed and joins again at its next poll, two
    rebalances a batch. Labelled ``rebalance_storm`` from the third change (the second batch's
    leave) until it has rejoined after its last slow batch."""

    async def script(stage: Stage, plan: Plan, rng: random.Random) -> None:
        await _start(stage, rng)
        took = rng.uniform(*batch_s)
        stage.member(plan)
        looping = stage.member(plan, "--max-poll-interval-ms", str(round(max_poll_s * 1000)),
                               "--session-timeout-ms", "10000", "--slow-rate", f"{plan.rate:g}",
                               "--slow-batch-s", f"{took:g}")  # fmt: skip
        onset, length = _fault(stage, rng)
        await _signal_over(stage, [looping], signal.SIGUSR1, onset, onset + length)
        stage.label(plan, onset, onset + took + max_poll_s, onset + length + took)
        await _run_out(stage)

    return script


def _stuck_behind_frozen(session_ms: int, frozen_s: tuple[float, float]) -> Script:
    """A rolling deploy's rebalance held by a hung member: one of three members frozen
    (SIGSTOP: a hung process, a container throttled to nothing) whose session and rebalance
    timeout (``session_ms``) outlast the freeze; another is then stopped gracefully and
    replaced. The classic protocol waits for the frozen member to rejoin, so the group stays
    rebalancing, reading nothing, until it is thawed. Labelled ``stuck_rebalance`` from a
    minute after the graceful leave until the thaw."""

    async def script(stage: Stage, plan: Plan, rng: random.Random) -> None:
        await _start(stage, rng)
        options = ("--session-timeout-ms", str(session_ms), "--max-poll-interval-ms",
                   str(session_ms))  # fmt: skip
        members = _members(stage, plan, 3, *options)
        onset, _ = _fault(stage, rng)
        await stage.until(onset)
        members[0].signal(signal.SIGSTOP)
        await asyncio.sleep(15)
        left = stage.elapsed_s
        await members[1].stop()
        await asyncio.sleep(rng.uniform(3, 8))
        members[1] = stage.member(plan, *options)
        thaw = left + rng.uniform(*frozen_s)
        await stage.until(thaw)
        members[0].signal(signal.SIGCONT)
        stage.label(plan, left, left + 60, thaw)
        await _run_out(stage)

    return script


SHORT_RETENTION = {"retention.ms": "90000", "segment.ms": "10000"}
COMPACTED = {
    "cleanup.policy": "compact",
    "segment.ms": "60000",
    "min.cleanable.dirty.ratio": "0.01",
    "delete.retention.ms": "60000",
}
"""A compacted topic whose segments roll every minute, cleaned as soon as the broker's log
cleaner comes by (every 15 s)."""

SCENARIOS: tuple[Scenario, ...] = (
    # healthy
    Scenario("healthy-auto5", "two members, aiokafka's auto-commit every 5 s", _healthy(2)),
    Scenario("healthy-every30", "two members committing by hand every 30 s", _healthy(2),
             commit="every:30"),
    Scenario("healthy-every150", "one member committing every 2.5 minutes", _healthy(1),
             commit="every:150", rate=2.0),
    Scenario("batch-job", "a job every 4 minutes: reads everything, commits, leaves",
             _batch_job(240), commit="every:3600", rate=2.0),
    Scenario("java-consumer-healthy", "Kafka's console consumer, group.protocol=consumer",
             _java_healthy(), client="java", commit="auto:5", protocol="consumer"),
    Scenario("java-classic-healthy", "Kafka's console consumer, group.protocol=classic",
             _java_healthy(), client="java", commit="auto:5"),
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
             "30 s; one killed and back within the session timeout", _static_restart(),
             commit="every:30"),
    Scenario("rolling-eager", "a rolling deploy of three aiokafka members (eager)",
             _rolling_eager, partitions=6),
    Scenario("rolling-cooperative", "a rolling deploy of two Java classic members "
             "(cooperative-sticky), surge first", _rolling_java(2, COOPERATIVE_STICKY, surge=True),
             client="java"),
    Scenario("java-consumer-crash", "Kafka's consumer (KIP-848) killed (kill -9) and "
             "restarted after 5-15 s", _java_crash, client="java", protocol="consumer"),
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
             _stopped(java=True), kind="stopped", client="java", protocol="consumer"),
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
             _consumers_gone(killed=False, java=True), kind="consumers_gone", client="java",
             protocol="consumer"),
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

_KAFKA_4 = {s.name: s for s in SCENARIOS}

CLASSIC_SCENARIOS: tuple[Scenario, ...] = (
    # healthy
    *(_KAFKA_4[n] for n in ("healthy-auto5", "healthy-every30", "healthy-every150",
                            "batch-job", "java-classic-healthy")),
    Scenario("healthy-trickle", "one member, auto-commit 5 s, one partition at 0.2 records/s",
             _healthy(1), partitions=1, rate=0.2),
    Scenario("healthy-16p-fast", "three members, auto-commit 5 s, 16 partitions at 50 "
             "records/s", _healthy(3), partitions=16, rate=50.0),
    Scenario("batch-job-7min", "a job every 7 minutes on 8 partitions: reads everything, "
             "commits, leaves", _batch_job(420), commit="every:3600", partitions=8, rate=4.0),
    # benign
    *(_KAFKA_4[n] for n in ("crash-restart-auto5", "crash-restart-every30", "dead-member",
                            "static-restart", "rolling-eager", "backpressure-pause",
                            "frozen-process", "standalone-assign", "transactional")),
    Scenario("crash-restart-every60", "two members committing every 60 s on 8 partitions; one "
             "killed (kill -9) and restarted after 5-20 s", _crash_restart(2, (5, 20)),
             commit="every:60", partitions=8, rate=4.0),
    Scenario("dead-member-frozen", "three members committing every 30 s; one frozen (SIGSTOP) "
             "for 55-80 s, past its 45 s session, kept until it times out, then thawed",
             _dead_member_frozen(3, (55, 80)), commit="every:30", partitions=6),
    Scenario("static-restart-three", "three static members (auto-commit 5 s, session 60 s) on "
             "12 partitions; one killed, back after 10-40 s", _static_restart(3, 60_000, (10, 40)),
             partitions=12, rate=12.0),
    Scenario("rolling-eager-java", "a rolling deploy of three Java classic members (range "
             "assignor: eager), each stopped before its replacement starts",
             _rolling_java(3, RANGE, surge=False), client="java", partitions=6),
    Scenario("rolling-cooperative-three", "a rolling deploy of three Java classic members "
             "(cooperative-sticky), surge first", _rolling_java(3, COOPERATIVE_STICKY, surge=True),
             client="java", partitions=6),
    Scenario("standalone-assign-16p", "assign() of 16 partitions at 30 records/s, commits "
             "every 30 s, no members", _healthy(1, "--assign", "16"), commit="every:30",
             partitions=16, rate=30.0),
    Scenario("transactional-java", "a transactional producer (1 in 8 aborted) and Kafka's "
             "console consumer (classic) with isolation.level=read_committed",
             _java_healthy(isolation_level="read_committed"), client="java",
             transactional=True),
    Scenario("batch-job-11min", "a job every 11.5 minutes: reads everything, commits, "
             "leaves; the lag waits in between", _batch_job(690), commit="every:3600",
             rate=2.0),
    Scenario("slow-downstream", "one member (auto-commit 5 s) whose processing speed varies "
             "batch to batch and slows to a third of the traffic for 20-60 s at times",
             _slow_downstream),
    Scenario("slow-downstream-every30", "two members committing every 30 s on 8 partitions, "
             "the same slow spells", _slow_downstream, commit="every:30", partitions=8),
    Scenario("compacted-bootstrap", "a new group reading a compacted topic from its start "
             "after 6 minutes, committing every 120 s until caught up, then every 10 s",
             _compacted_bootstrap(0.13, 120), commit="every:10", rate=20.0,
             topic_config=COMPACTED),
    Scenario("compacted-bootstrap-late", "the same after 27 minutes on 8 partitions, "
             "committing every 180 s until caught up, then every 5 s",
             _compacted_bootstrap(0.58, 180), commit="every:5", partitions=8, rate=30.0,
             topic_config=COMPACTED),
    # faults: the kinds that heal come twice (the timeline's fault_every_s)
    *(_KAFKA_4[n] for n in ("stalled-auto5", "stalled-every30", "stalled-every60",
                            "stopped-aiokafka", "stopped-every60",
                            "consumers-gone-stopped", "consumers-gone-killed",
                            "lagging-auto5", "lagging-every30", "lagging-every10",
                            "rewound-quarter", "rewound-start", "rewound-half",
                            "retention-loss-auto5", "retention-loss-every10",
                            "retention-loss-every30")),
    Scenario("stopped-java-classic", "Kafka's console consumer (classic) stopped, back minutes "
             "later", _stopped(java=True), kind="stopped", client="java"),
    Scenario("consumers-gone-java-classic", "Kafka's console consumer (classic) stopped, never "
             "back", _consumers_gone(killed=False, java=True), kind="consumers_gone",
             client="java"),
    Scenario("consumers-gone-every60", "two members committing every 60 s on 8 partitions, "
             "both killed (kill -9), never back", _consumers_gone(killed=True, count=2),
             kind="consumers_gone", commit="every:60", partitions=8, rate=4.0),
    Scenario("consumers-gone-static", "two static members (group.instance.id) stopped: no "
             "LeaveGroup, kept until their session times out, never back",
             _consumers_gone(killed=False, static=True), kind="consumers_gone"),
    Scenario("batch-job-missed", "a job every 5 minutes that stops running after 40% of the "
             "recording (its next run never comes)", _batch_job_missed(300, 0.4), kind="stopped",
             commit="every:3600", rate=2.0),
    Scenario("batch-job-missed-8min", "a job every 8 minutes on 8 partitions that stops "
             "running after 60% of the recording", _batch_job_missed(480, 0.6), kind="stopped",
             commit="every:3600", partitions=8, rate=4.0),
)  # fmt: skip


REBALANCE_SCENARIOS: tuple[Scenario, ...] = (
    # healthy and benign
    *(_KAFKA_4[n] for n in ("healthy-auto5", "healthy-every30", "crash-restart-auto5",
                            "crash-restart-every30", "rolling-eager")),
    Scenario("autoscale-auto5", "scaled out from one member to four, one every 20-40 s, and "
             "back in at the next event (auto-commit 5 s, 8 partitions)",
             _autoscale(4, (20, 40)), partitions=8, rate=16.0),
    Scenario("autoscale-every120", "the same, committing every 2 minutes", _autoscale(4, (20, 40)),
             commit="every:120", partitions=8, rate=8.0),
    # faults
    Scenario("storm-crash-loop", "three members, session 10 s; one killed (kill -9) after "
             "10-30 s of work and back 3-8 s later, for minutes", _crash_loop(3, 10_000, (10, 30),
             (3, 8)), kind="rebalance_storm", partitions=6),
    Scenario("storm-crash-loop-every30", "two members committing every 30 s, session 45 s; "
             "one killed after 20-60 s of work and back 5-15 s later, for minutes",
             _crash_loop(2, 45_000, (20, 60), (5, 15)), kind="rebalance_storm",
             commit="every:30"),
    Scenario("storm-poll-timeout", "two members; one takes 20-30 s over every batch, past its "
             "15 s max.poll.interval.ms, for minutes: it leaves and rejoins at every batch",
             _poll_timeout_loop(15.0, (20, 30)), kind="rebalance_storm"),
    Scenario("stuck-rebalance-frozen", "three members (session and rebalance timeout 10 min); "
             "one frozen (SIGSTOP), another then replaced: the rebalance waits 4-6 minutes for "
             "the frozen one", _stuck_behind_frozen(600_000, (240, 360)), kind="stuck_rebalance",
             partitions=6),
)  # fmt: skip


@dataclass(frozen=True)
class ScenarioSet:
    """The scenarios of one recording, the broker they are written for and its timeline."""

    name: str
    description: str
    kafka_version: str
    timeline: Timeline
    scenarios: tuple[Scenario, ...]


SETS: dict[str, ScenarioSet] = {
    s.name: s
    for s in (
        ScenarioSet(
            "kafka-4.4",
            "35 groups for 26 minutes, KIP-848 and classic groups, one fault per fault group",
            KAFKA_VERSION,
            Timeline(),
            SCENARIOS,
        ),
        ScenarioSet(
            "kafka-3.9",
            "51 groups for 46 minutes, classic groups only, the faults that heal twice, "
            "five groups gone for good, two batch jobs that miss their runs, a broker "
            "restart between the two rounds",
            CLASSIC_KAFKA_VERSION,
            Timeline(
                duration_s=2760.0,
                fault_every_s=1200.0,
                broker_restart_s=1440.0,
            ),
            CLASSIC_SCENARIOS,
        ),
        ScenarioSet(
            "kafka-4.4-rebalance",
            "11 classic groups for 26 minutes: rebalance storms (crash loops, poll timeouts), a "
            "rebalance held by a frozen member, autoscaling, crash restarts and a rolling deploy",
            KAFKA_VERSION,
            Timeline(),
            REBALANCE_SCENARIOS,
        ),
    )
}
"""Scenario sets by name: ``kafka-4.4`` (the default, the first corpus), ``kafka-3.9``,
``kafka-4.4-rebalance``."""

BY_NAME = {
    s.name: s
    for scenarios in (SCENARIOS, CLASSIC_SCENARIOS, REBALANCE_SCENARIOS)
    for s in scenarios
}
