"""One consumer-group member written with aiokafka, as its own process, steered by signals the
way a real one is steered by what happens to it.

``python -m notifier.recorder.member --bootstrap HOST:PORT --group G --topic T [options]``
reads ``T`` in group ``G`` (or, with ``--assign N``, partitions 0..N-1 of ``T`` assigned by hand,
committing in ``G`` as Spark or Connect-style tools do) at most ``--capacity`` records per
second (what its processing allows), and commits either with aiokafka's auto-commit
(``--commit auto:5``) or by hand every N seconds (``--commit every:30``).

What the recorder's scripts do to it:

* ``SIGTERM``: a graceful stop, as a deploy does: commit what it has read, leave the group, exit.
* ``SIGKILL``: a crash (an OOM kill, a node lost): nothing committed on the way out, no
  LeaveGroup; the broker keeps the member until its session times out.
* ``SIGSTOP``/``SIGCONT``: the whole process frozen (a long GC pause, a throttled container).
* ``SIGUSR1``: toggles slow mode: ``--slow-rate`` records per second (a slow downstream), and
  with ``--slow-batch-s S`` every batch taking at least ``S`` seconds (a record whose handling
  outlasts ``max.poll.interval.ms``: aiokafka then leaves the group and rejoins at its next
  poll).
* ``SIGUSR2``: toggles ``pause()`` of every assigned partition (back-pressure): it stays in the
  group and keeps polling, reading nothing.
* ``SIGHUP``: rewinds: seeks every assigned partition back to ``--rewind-to`` of the way from
  its log start to its position, and commits that at once (a reprocessing request).

With ``--until-caught-up`` it is a batch job: it reads until its position reaches the log end
of every partition, commits, leaves and exits. With ``--capacity-jitter F`` each batch is
processed at ``--capacity`` times a random factor of 1 - F to 1 + F (a downstream whose
latency varies). With ``--catch-up-commit S`` (by-hand commits only) it commits every ``S``
seconds until it first reaches the log end, then every ``--commit`` interval (a bootstrap that
commits rarely while it loads a compacted topic's state).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import random
import signal
import sys
import time

from aiokafka import AIOKafkaConsumer, ConsumerRebalanceListener, TopicPartition
from aiokafka.coordinator.assignors.roundrobin import RoundRobinPartitionAssignor
from aiokafka.errors import KafkaError

log = logging.getLogger("notifier.recorder.member")

CLIENT_ERRORS = (KafkaError, OSError, TimeoutError)


def parse_commit(text: str) -> tuple[str, float]:
    """``auto:5`` (aiokafka's auto-commit every 5 s) or ``every:30`` (by hand every 30 s)."""
    mode, _, seconds = text.partition(":")
    try:
        interval = float(seconds)
    except ValueError:
        interval = -1.0
    if mode not in ("auto", "every") or interval <= 0:
        raise argparse.ArgumentTypeError(
            f"--commit {text!r}: expected auto:<seconds> or every:<seconds>, e.g. auto:5"
        )
    return mode, interval


class Member:
    """The member's loop and the state the signals toggle."""

    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.mode, self.commit_every_s = args.commit
        self.slow = False
        self.paused = False
        self.rewind_requested = False
        self.stopping = asyncio.Event()
        self.consumed: dict[TopicPartition, int] = {}
        self.bootstrapping = args.catch_up_commit > 0
        """Reading a backlog it has never caught up with (``--catch-up-commit``)."""
        self.consumer = self._new_consumer()

    def _new_consumer(self) -> AIOKafkaConsumer:
        args = self.args
        return AIOKafkaConsumer(
            bootstrap_servers=args.bootstrap,
            group_id=args.group,
            group_instance_id=args.instance_id,
            client_id=args.client_id or f"{args.group}-member",
            auto_offset_reset="earliest",
            enable_auto_commit=self.mode == "auto",
            auto_commit_interval_ms=round(self.commit_every_s * 1000),
            session_timeout_ms=args.session_timeout_ms,
            heartbeat_interval_ms=min(3000, args.session_timeout_ms // 3),
            max_poll_interval_ms=args.max_poll_interval_ms,
            partition_assignment_strategy=(RoundRobinPartitionAssignor,),
            isolation_level="read_committed" if args.read_committed else "read_uncommitted",
            fetch_max_wait_ms=500,
        )

    def install_signals(self) -> None:
        loop = asyncio.get_running_loop()
        loop.add_signal_handler(signal.SIGTERM, self.stopping.set)
        loop.add_signal_handler(signal.SIGINT, self.stopping.set)
        loop.add_signal_handler(signal.SIGUSR1, self._toggle_slow)
        loop.add_signal_handler(signal.SIGUSR2, self._toggle_pause)
        loop.add_signal_handler(signal.SIGHUP, self._request_rewind)

    def _toggle_slow(self) -> None:
        self.slow = not self.slow

    def _toggle_pause(self) -> None:
        self.paused = not self.paused

    def _request_rewind(self) -> None:
        self.rewind_requested = True

    @property
    def rate(self) -> float:
        """Records per second the next batch is processed at."""
        if self.slow:
            return float(self.args.slow_rate)
        jitter = self.args.capacity_jitter
        return float(self.args.capacity) * random.uniform(1 - jitter, 1 + jitter)

    @property
    def commit_interval_s(self) -> float:
        return float(self.args.catch_up_commit) if self.bootstrapping else self.commit_every_s

    async def _start(self) -> bool:
        """Start the consumer; while the broker cannot be reached (a broker restart), try again
        every two seconds, as a supervisor restarts a pod that crashed at start. False when
        told to stop first."""
        while not self.stopping.is_set():
            try:
                await self.consumer.start()
                return True
            except CLIENT_ERRORS as exc:
                log.warning("start failed, again in 2 s: %r", exc)
                with contextlib.suppress(*CLIENT_ERRORS):
                    await asyncio.wait_for(self.consumer.stop(), 10)
                self.consumer = self._new_consumer()
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self.stopping.wait(), 2.0)
        return False

    async def run(self) -> None:
        if not await self._start():
            return
        if not self.args.assign:
            self.consumer.subscribe([self.args.topic], listener=_Revoked(self))
        else:
            self.consumer.assign(
                [TopicPartition(self.args.topic, p) for p in range(self.args.assign)]
            )
        try:
            await self._loop()
            await self._commit()  # a graceful stop commits what it read
        finally:
            with contextlib.suppress(*CLIENT_ERRORS):
                await asyncio.wait_for(self.consumer.stop(), 30)

    async def _loop(self) -> None:
        next_commit = time.monotonic() + self.commit_interval_s
        next_catch_up_check = time.monotonic()
        while not self.stopping.is_set():
            assigned = self.consumer.assignment()
            if self.paused:
                self.consumer.pause(*assigned)
            elif self.consumer.paused():
                self.consumer.resume(*self.consumer.paused())
            if self.rewind_requested:
                self.rewind_requested = False
                await self._rewind(assigned)
            rate = self.rate
            budget = max(1, round(rate))
            started = time.monotonic()
            try:
                batches = await self.consumer.getmany(timeout_ms=500, max_records=budget)
            except CLIENT_ERRORS as exc:
                log.info("poll failed: %r", exc)
                await asyncio.sleep(0.5)
                continue
            read = 0
            for tp, records in batches.items():
                if records:
                    self.consumed[tp] = records[-1].offset + 1
                    read += len(records)
            if read:  # processing takes time: at most ``rate`` records a second
                busy_s = read / rate
                if self.slow:
                    busy_s = max(busy_s, float(self.args.slow_batch_s))
                await asyncio.sleep(max(0.0, busy_s - (time.monotonic() - started)))
            if self.bootstrapping and time.monotonic() >= next_catch_up_check:
                next_catch_up_check = time.monotonic() + 5.0
                if await self._caught_up():
                    self.bootstrapping = False
                    next_commit = min(next_commit, time.monotonic() + self.commit_every_s)
            if self.mode == "every" and time.monotonic() >= next_commit:
                next_commit = time.monotonic() + self.commit_interval_s
                await self._commit()
            if self.args.until_caught_up and await self._caught_up():
                return

    async def _commit(self) -> None:
        if self.mode == "auto" or not self.consumed:
            return
        assigned = self.consumer.assignment()
        offsets = {tp: o for tp, o in self.consumed.items() if tp in assigned}
        if not offsets:
            return
        try:
            await self.consumer.commit(offsets)
        except CLIENT_ERRORS as exc:  # a rebalance under way: the next commit carries it
            log.info("commit failed: %r", exc)

    async def _rewind(self, assigned: set[TopicPartition]) -> None:
        if not assigned:
            return
        try:
            starts = await self.consumer.beginning_offsets(list(assigned))
            offsets = {}
            for tp in assigned:
                position = await self.consumer.position(tp)
                target = starts[tp] + int((position - starts[tp]) * self.args.rewind_to)
                self.consumer.seek(tp, target)
                offsets[tp] = target
                self.consumed[tp] = target
            await self.consumer.commit(offsets)
        except CLIENT_ERRORS as exc:
            log.warning("rewind failed: %r", exc)

    async def _caught_up(self) -> bool:
        assigned = self.consumer.assignment()
        if not assigned:
            return False
        try:
            ends = await self.consumer.end_offsets(list(assigned))
            positions = [await self.consumer.position(tp) for tp in assigned]
        except CLIENT_ERRORS as exc:  # the broker away: not known to be caught up yet
            log.info("end offsets failed: %r", exc)
            return False
        return all(p >= ends[tp] for p, tp in zip(positions, assigned))


class _Revoked(ConsumerRebalanceListener):
    """Partitions taken away in a rebalance: commit what was read of them (by hand; the
    auto-commit does it itself) and forget them, so that a later commit never carries an
    offset from before another member read on (a backwards commit)."""

    def __init__(self, member: Member) -> None:
        self.member = member

    async def on_partitions_revoked(self, revoked: set[TopicPartition]) -> None:
        await self.member._commit()
        for tp in revoked:
            self.member.consumed.pop(tp, None)

    async def on_partitions_assigned(self, assigned: set[TopicPartition]) -> None:
        return None


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m notifier.recorder.member", description=__doc__)
    p.add_argument("--bootstrap", required=True)
    p.add_argument("--group", required=True)
    p.add_argument("--topic", required=True)
    p.add_argument("--client-id")
    p.add_argument("--commit", type=parse_commit, default=("auto", 5.0))
    p.add_argument("--capacity", type=float, default=200.0, help="records/s it can process")
    p.add_argument("--capacity-jitter", type=float, default=0.0, metavar="F",
                   help="each batch at --capacity times 1-F to 1+F (0: steady)")  # fmt: skip
    p.add_argument("--catch-up-commit", type=float, default=0.0, metavar="SECONDS",
                   help="commit every SECONDS until first caught up (by-hand commits)")  # fmt: skip
    p.add_argument("--slow-rate", type=float, default=1.0, help="records/s in slow mode")
    p.add_argument("--slow-batch-s", type=float, default=0.0, metavar="SECONDS",
                   help="in slow mode, every batch takes at least SECONDS")  # fmt: skip
    p.add_argument(
        "--rewind-to",
        type=float,
        default=0.0,
        help="where SIGHUP seeks: 0 the log start, 0.5 halfway",
    )
    p.add_argument("--instance-id", help="group.instance.id: static membership")
    p.add_argument("--session-timeout-ms", type=int, default=45_000)
    p.add_argument("--max-poll-interval-ms", type=int, default=300_000)
    p.add_argument("--assign", type=int, metavar="PARTITIONS", default=0,
                   help="assign() partitions 0..PARTITIONS-1 by hand, no subscription")  # fmt: skip
    p.add_argument("--read-committed", action="store_true")
    p.add_argument("--until-caught-up", action="store_true", help="a batch job: read, exit")
    return p


async def _main(args: argparse.Namespace) -> None:
    member = Member(args)
    member.install_signals()
    await member.run()


def main(argv: list[str] | None = None) -> None:
    p = parser()
    args = p.parse_args(argv)
    if not 0 <= args.capacity_jitter < 1:
        p.error(f"--capacity-jitter {args.capacity_jitter:g}: expected 0 <= F < 1")
    if args.catch_up_commit and args.commit[0] != "every":
        p.error("--catch-up-commit needs by-hand commits (--commit every:<seconds>)")
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr,
                        format="%(asctime)s %(levelname)s %(name)s %(message)s")  # fmt: skip
    asyncio.run(_main(args))


if __name__ == "__main__":
    main()
