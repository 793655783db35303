"""The scripted consumer groups (:data:`SCENARIOS`): how each behaves, and what the service is
expected to say about it.

Each scenario behaves well at first, so the windows fill with normal behaviour, and starts
misbehaving a little after the gate opens. Then it tells a story in three stages, each moving on
once the service has reported it (or after a time limit): it *degrades* — falls behind, and
``falling-behind``'s WARN opens an incident; it *fails* in its own way — the incident escalates
to ERR; it *recovers* — catches up, and the incident resolves:

=============== ======================================================= ======================
scenario        what its consumers do once they have fallen behind      expected
=============== ======================================================= ======================
healthy         keep up with bursty traffic (lag jitters, often 0)      no alert at all
lagging         (falling behind is this one's finding) then stop        WARN (falling-behind)
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

The embedded broker shapes some scripts (docs/architecture.md, "The embedded broker"): the
*stopped* and *rebalance-loop* groups have two members, joined one after the other, because the
stopped group must end up Empty and a consumer only sends LeaveGroup after a rebalance; where
DeleteRecords is refused the retention scenario is reported as skipped rather than faked.
Joining in turn takes several seconds here, so those groups start their story only after a
window of scans has seen them settled. The rebalance loop is a crash loop rather than a consumer
slower than ``max.poll.interval``: a member kicked out that way rejoins under its old member id
and, on this broker, the group looks Stable while it makes no progress (Burrow's STALL, not a
rebalance); crash-looping incarnations that each leave as they die change the member set scan
after scan (``rebalance-storm``) and keep the group rebalancing (``stuck-rebalance``), and a
fixed consumer can join afterwards because no ghost member is left.
"""

from __future__ import annotations

import asyncio
import contextlib
import time

from aiokafka import AIOKafkaConsumer, TopicPartition
from aiokafka.errors import NoOffsetForPartitionError, OffsetOutOfRangeError

from notifier.demo.kafka import (
    CLIENT_ERRORS,
    PARTITIONS,
    RATE_PER_TOPIC,
    consume_once,
    delete_old_records,
    delete_records_supported,
    join_in_turn,
    keep_up_until,
    poll_and_commit,
    traffic,
    transient_errors,
)
from notifier.demo.story import Scenario, ScenarioRun, ScriptEnv, at_least, is_ok
from notifier.types import GroupStatus

LAGGING_PER_PARTITION = 2
"""Records the lagging consumer takes per partition per second: a fifth of what arrives."""
SKIPPED_DELETE_RECORDS = "broker does not support DeleteRecords"


def _settled_after_join(env: ScriptEnv, run: ScenarioRun) -> float:
    """When a group that just finished joining in turn may start misbehaving: at its
    scheduled time, but not before a window of scans has seen it keep up with every member
    (joining in turn takes several seconds on the embedded broker, and a story that started
    mid-rebalance would be about the join, not the scenario)."""
    window = (env.settings.intervals + 2) * env.settings.scan_interval
    return max(run.misbehave_at, time.monotonic() + window)


async def _healthy(env: ScriptEnv, run: ScenarioRun) -> None:
    run.finished = True  # nothing to tell: it must simply never alert
    async with traffic(env, run):
        consumer = await env.consumer(run)
        committed: dict[TopicPartition, int] = {}
        while True:
            await consume_once(consumer, committed)


async def _fall_behind(
    env: ScriptEnv,
    run: ScenarioRun,
    consumers: list[AIOKafkaConsumer],
    committed: dict[TopicPartition, int],
    pause: float = 1.0,
) -> None:
    """The degrade stage: consume a fifth of what arrives (``pause`` seconds between polls of
    ``per_partition`` records) until the service reports WARN."""
    per_partition = max(1, round(LAGGING_PER_PARTITION * pause))

    async def slowly() -> None:
        await asyncio.gather(*(consume_once(c, committed, per_partition) for c in consumers))
        await asyncio.sleep(pause)

    env.stage(run, "degrade")
    await env.until_status(run, at_least(GroupStatus.WARN), slowly)


async def _catch_up(
    env: ScriptEnv,
    run: ScenarioRun,
    consumers: list[AIOKafkaConsumer],
    committed: dict[TopicPartition, int],
) -> None:
    """The recover stage: consume everything again until the service reports OK, then keep
    up for good."""

    async def keep_up() -> None:
        await asyncio.gather(*(consume_once(c, committed) for c in consumers))

    env.stage(run, "recover")
    await env.until_status(run, is_ok, keep_up)
    run.finished = True
    while True:
        await keep_up()


async def _stuck_member(env: ScriptEnv, run: ScenarioRun, *, recommit: bool) -> None:
    """One consumer that keeps up, falls behind, then stops moving while it stays in the
    group (still polling; with ``recommit``, committing its last offsets again every second,
    as a consumer stuck on a poison message with auto-commit does), and is fixed."""
    async with traffic(env, run):
        consumer = await env.consumer(run)
        committed: dict[TopicPartition, int] = {}
        await keep_up_until(consumer, committed, run.misbehave_at)
        await _fall_behind(env, run, [consumer], committed)
        frozen = dict(committed)

        async def stuck() -> None:
            async with transient_errors(run.scenario.name):
                await consumer.getmany(timeout_ms=200, max_records=1)
                if recommit and frozen:
                    await consumer.commit(frozen)
            await asyncio.sleep(1.0)

        env.stage(run, "fail")
        await env.until_status(run, at_least(GroupStatus.ERR), stuck)
        # What it fetched while stuck was never processed: start again from its commits.
        for tp, offset in frozen.items():
            consumer.seek(tp, offset)
        await _catch_up(env, run, [consumer], committed)


async def _lagging(env: ScriptEnv, run: ScenarioRun) -> None:
    await _stuck_member(env, run, recommit=False)


async def _stalled(env: ScriptEnv, run: ScenarioRun) -> None:
    await _stuck_member(env, run, recommit=True)


async def _two_members_leave(env: ScriptEnv, run: ScenarioRun) -> dict[TopicPartition, int]:
    """Two members join in turn, keep up until settled, fall behind; then, as the fail stage
    starts, both stop and leave the group (Empty, no members, offsets kept). Returns the
    group's commits."""
    consumers = await join_in_turn(env, run, members=2)
    committed: dict[TopicPartition, int] = {}
    settled = _settled_after_join(env, run)
    await asyncio.gather(*(keep_up_until(c, committed, settled) for c in consumers))
    await _fall_behind(env, run, consumers, committed)
    env.stage(run, "fail")
    for consumer in consumers:
        await consumer.stop()
    return committed


async def _stopped(env: ScriptEnv, run: ScenarioRun) -> None:
    async with traffic(env, run):
        committed = await _two_members_leave(env, run)
        await env.until_status(run, at_least(GroupStatus.ERR), lambda: asyncio.sleep(0.5))
        # A replacement starts from the group's commits and catches up.
        await _catch_up(env, run, [await env.consumer(run)], committed)


async def _rewound(env: ScriptEnv, run: ScenarioRun) -> None:
    async with traffic(env, run):
        consumer = await env.consumer(run)
        committed: dict[TopicPartition, int] = {}
        await keep_up_until(consumer, committed, run.misbehave_at)
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
            await consume_once(consumer, committed, per_partition=REPLAY_PER_PARTITION)
            await asyncio.sleep(0.5)

        await env.until_status(run, at_least(GroupStatus.ERR), replay)
        await _catch_up(env, run, [consumer], committed)


REPLAY_PER_PARTITION = max(1, int(RATE_PER_TOPIC * 1.5 / 2 / PARTITIONS) + 2)
CRASH_JOIN_TIMEOUT_S = 30.0
CRASH_AFTER_JOIN_S = 0.5
"""How long each incarnation of a crash-looping consumer lives once it has its partitions."""
REBALANCE_ALLOWANCE_SCANS = 25
"""The rebalance loop runs on the broker's clock (join delays, session timeouts), not the
scanner's: its stages get more scans than the window-driven Burrow statuses."""


async def _rebalance_loop(env: ScriptEnv, run: ScenarioRun) -> None:
    async with traffic(env, run):
        committed = await _two_members_leave(env, run)
        fixed = asyncio.Event()
        looping = asyncio.create_task(_crash_loop(env, run, fixed))
        try:
            # A storm is WARN, a rebalance that never completes ERR: give the loop time for
            # the second.
            await env.until_status(run, at_least(GroupStatus.ERR), lambda: asyncio.sleep(0.5))
            # The fix ships: the incarnation running now is the last; it leaves as it dies.
            fixed.set()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(asyncio.shield(looping), CRASH_JOIN_TIMEOUT_S + 5)
        finally:
            looping.cancel()
            await asyncio.gather(looping, return_exceptions=True)
        await _catch_up(env, run, [await env.consumer(run)], committed)


async def _crash_loop(env: ScriptEnv, run: ScenarioRun, fixed: asyncio.Event) -> None:
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
                async with transient_errors("crash-looping member"):
                    await consumer.getmany(timeout_ms=200)
            await asyncio.sleep(CRASH_AFTER_JOIN_S)
        finally:
            with contextlib.suppress(*CLIENT_ERRORS):
                await consumer.stop()


async def _retention_loss(env: ScriptEnv, run: ScenarioRun) -> None:
    """Only where the broker deletes records: a consumer falling behind while retention,
    fast-forwarded, deletes all but the newest records under it."""
    if not await delete_records_supported(env.bootstrap, run.topic):
        run.skipped = SKIPPED_DELETE_RECORDS
        env.out(f"{env.stamp()} {run.scenario.name}: skipped: {SKIPPED_DELETE_RECORDS}")
        return
    async with traffic(env, run):
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
        await env.until_status(run, at_least(GroupStatus.WARN), slowly)
        env.stage(run, "fail")
        deleting = asyncio.create_task(delete_old_records(env, consumer, keep=20))
        try:
            await env.until_status(run, at_least(GroupStatus.ERR), slowly)
        finally:
            deleting.cancel()
            await asyncio.gather(deleting, return_exceptions=True)
        # Accept the loss: skip to what is still there, then keep up.
        await consumer.seek_to_beginning()
        await _catch_up(env, run, [consumer], committed)


async def _consume_guarded(
    consumer: AIOKafkaConsumer, committed: dict[TopicPartition, int], per_partition: int | None
) -> None:
    async with transient_errors("retention-loss"):
        try:
            await poll_and_commit(consumer, committed, per_partition)
        except NoOffsetForPartitionError:
            await consumer.seek_to_beginning()
        except OffsetOutOfRangeError:
            await asyncio.sleep(1.0)  # stuck below the log start: the loss stays visible


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
            "WARN (falling-behind)",
            (
                _SLOW,
                "then stops making progress at all, though still in the group",
                _CATCH_UP,
            ),
            frozenset({("falling_behind", "WARN"), ("burrow", "WARN")}),
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
            frozenset({("progress", "STALL"), ("burrow", "STALL")}),
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
            frozenset({("progress", "STOP"), ("burrow", "STOP")}),
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
            frozenset({("rewind", "REWIND"), ("burrow", "REWIND")}),
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
