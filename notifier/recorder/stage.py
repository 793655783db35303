"""What a scenario script works with: its group's plan, the recording's timeline, and the stage
that starts its consumers (aiokafka members and Kafka's own Java console consumer, each a
process), signals them, and writes its labels.

Times in a script are seconds since the recording began (:meth:`Stage.until`); labels carry
wall-clock milliseconds, the clock the service stamps its scans with.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

from notifier.embedded.apache_kafka import KafkaTools

COOPERATIVE_STICKY = "org.apache.kafka.clients.consumer.CooperativeStickyAssignor"
RANGE = "org.apache.kafka.clients.consumer.RangeAssignor"
"""The eager assignor: every rebalance revokes every partition of every member."""


@dataclass(frozen=True)
class Timeline:
    """When things happen in a recording (seconds from its start).

    Benign events come every ``event_every_s`` from ``first_event_s`` on (a little jitter
    each); a fault begins at a random moment of ``onset_s`` and lasts a random length of
    ``fault_length_s`` (the kinds that do not heal last to the end). Alerts opened in the
    first ``warmup_s`` do not count when the corpus is scored.
    """

    duration_s: float = 1560.0
    warmup_s: float = 300.0
    first_event_s: float = 330.0
    event_every_s: float = 210.0
    onset_s: tuple[float, float] = (540.0, 780.0)
    fault_length_s: tuple[float, float] = (360.0, 540.0)
    start_spread_s: float = 150.0
    """Members start spread over this long, so that forty processes do not start at once."""
    fault_every_s: float = 0.0
    """When set, a fault that heals (a stall, a stop, a slowdown, a rewind, a retention loss)
    comes back this long after its previous onset, as many times as it fits before the end;
    0: one fault per group (those of the kinds that heal last only ``fault_length_s``)."""
    broker_restart_s: float | None = None
    """When set, the broker is restarted (a controlled shutdown, then started again with its
    data) this far into the recording, if the recorder can restart it."""


@dataclass(frozen=True)
class Plan:
    """One scripted group: its own topic, its traffic and how its consumers are set up."""

    scenario: str
    kind: str
    """The incident kind its fault is labelled with; empty for a healthy or benign group."""
    client: str
    """``aiokafka`` or ``java`` (Kafka's console consumer)."""
    group: str
    topic: str
    partitions: int
    rate: float
    """Records per second produced to the topic (over all its partitions)."""
    commit: str
    """How it commits: ``auto:5``, ``every:30`` (seconds), as :mod:`notifier.recorder.member`
    takes it (the Java consumer auto-commits every 5 s)."""
    description: str
    topic_config: dict[str, str] = field(default_factory=dict)
    transactional: bool = False
    protocol: str = "classic"
    """The Java consumer's ``group.protocol``: ``classic`` or ``consumer`` (KIP-848, Kafka 4
    brokers); aiokafka members are always classic."""

    @property
    def commit_every_s(self) -> float:
        return float(self.commit.partition(":")[2])

    @property
    def compacted(self) -> bool:
        """A ``cleanup.policy=compact`` topic: its records need keys (the broker refuses
        records without one)."""
        return "compact" in self.topic_config.get("cleanup.policy", "")


@dataclass(frozen=True)
class Label:
    """A labelled fault: when it began (``onset``), when a person would want to know
    (``start``, by the README's convention) and the last moment it acts (``end``); epoch ms."""

    group: str
    kind: str
    scenario: str
    onset_ms: int
    start_ms: int
    end_ms: int


class Stage:
    """Starts and steers the consumers of every script of one recording."""

    def __init__(
        self,
        bootstrap: str,
        tools: KafkaTools | None,
        timeline: Timeline,
        workdir: Path,
        python: str = sys.executable,
    ) -> None:
        self.bootstrap = bootstrap
        self.tools = tools
        self.timeline = timeline
        self.logs = workdir / "clients"
        self.logs.mkdir(parents=True, exist_ok=True)
        self.python = python
        self.labels: list[Label] = []
        self.consumers: list[Consumer] = []
        self._started = time.monotonic()
        self._started_ms = now_ms()
        self._count = itertools.count()

    def begin(self) -> None:
        """Time 0 of the recording is now."""
        self._started = time.monotonic()
        self._started_ms = now_ms()

    @property
    def elapsed_s(self) -> float:
        return time.monotonic() - self._started

    @property
    def end_ms(self) -> int:
        """The wall-clock moment the recording ends."""
        return self._started_ms + round(self.timeline.duration_s * 1000)

    async def until(self, at_s: float) -> None:
        """Sleep until ``at_s`` seconds into the recording (at once when already past)."""
        await asyncio.sleep(max(0.0, at_s - self.elapsed_s))

    def wall_ms(self, at_s: float) -> int:
        """The wall-clock ms of ``at_s`` seconds into the recording."""
        return self._started_ms + round(at_s * 1000)

    # -- consumers ---------------------------------------------------------------------------

    def member(self, plan: Plan, *options: str, commit: str | None = None) -> Consumer:
        """Start an aiokafka member of ``plan``'s group (:mod:`notifier.recorder.member`)."""
        n = next(self._count)
        command = [
            self.python, "-m", "notifier.recorder.member", "--bootstrap", self.bootstrap,
            "--group", plan.group, "--topic", plan.topic, "--commit", commit or plan.commit,
            "--client-id", f"{plan.group}-{n}", *options,
        ]  # fmt: skip
        return self._spawn(plan, n, command)

    def java_member(self, plan: Plan, assignor: str | None = None, **properties: str) -> Consumer:
        """Start Kafka's own console consumer in ``plan``'s group, ``group.protocol`` =
        ``plan.protocol`` (``consumer``: KIP-848; ``classic``), auto-committing at
        ``plan``'s interval (``auto:5``: every 5 s); ``properties`` are more consumer
        settings (``isolation_level="read_committed"``: ``isolation.level=read_committed``)."""
        if self.tools is None:
            raise RuntimeError(f"{plan.scenario}: Java consumers need the broker's Kafka tools")
        n = next(self._count)
        settings = {
            "group.protocol": plan.protocol,
            "client.id": f"{plan.group}-{n}",
            "auto.offset.reset": "earliest",
            "auto.commit.interval.ms": str(round(plan.commit_every_s * 1000)),
            **{key.replace("_", "."): value for key, value in properties.items()},
        }
        if assignor:
            settings["partition.assignment.strategy"] = assignor
        args = ["--bootstrap-server", self.bootstrap, "--topic", plan.topic, "--group", plan.group]
        # Kafka 4.1 renamed the console consumer's --consumer-property (KIP-1147).
        kafka_4 = int(self.tools.version.split(".", 1)[0]) >= 4
        option = "--command-property" if kafka_4 else "--consumer-property"
        for key, value in settings.items():
            args += [option, f"{key}={value}"]
        return self._spawn(plan, n, self.tools.java_command("console-consumer", *args))

    def _spawn(self, plan: Plan, n: int, command: list[str]) -> Consumer:
        log: IO[bytes]
        log_path = self.logs / f"{plan.group}-{n}.log"
        with open(log_path, "ab") as log:
            process = subprocess.Popen(
                command,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=log,
                env={**os.environ, "PYTHONUNBUFFERED": "1"},
            )
        consumer = Consumer(process, f"{plan.group}-{n}", log_path)
        self.consumers.append(consumer)
        return consumer

    def label(self, plan: Plan, onset_s: float, start_s: float, end_s: float) -> None:
        """Label ``plan``'s fault (its kind): began at ``onset_s``, a person wants to know from
        ``start_s``, it acts until ``end_s`` (recording seconds; capped at the end)."""
        end_s = min(end_s, self.timeline.duration_s)
        self.labels.append(
            Label(
                plan.group,
                plan.kind,
                plan.scenario,
                self.wall_ms(onset_s),
                self.wall_ms(min(start_s, end_s)),
                self.wall_ms(end_s),
            )
        )

    def kill_all(self) -> None:
        """Kill every consumer still running (the end of the recording)."""
        for consumer in self.consumers:
            if consumer.running:
                consumer.process.kill()
        for consumer in self.consumers:
            with contextlib.suppress(subprocess.TimeoutExpired):
                consumer.process.wait(10)

    def failed(self) -> list[Consumer]:
        """Consumers that exited by themselves with an error (not killed, not stopped)."""
        return [c for c in self.consumers if not c.told_to_end and (c.process.poll() or 0) > 0]


class Consumer:
    """One consumer process."""

    def __init__(self, process: subprocess.Popen[bytes], name: str, log_path: Path) -> None:
        self.process = process
        self.name = name
        self.log_path = log_path
        self.told_to_end = False
        """Whether it was stopped or killed on purpose (an exit code is then no failure)."""

    @property
    def running(self) -> bool:
        return self.process.poll() is None

    def signal(self, sig: signal.Signals) -> None:
        if sig in (signal.SIGTERM, signal.SIGKILL):
            self.told_to_end = True
        if self.running:
            self.process.send_signal(sig)

    async def kill(self) -> None:
        """``kill -9``: nothing committed on the way out, no LeaveGroup."""
        self.signal(signal.SIGKILL)
        await self.wait(10)

    async def stop(self) -> None:
        """SIGTERM, as a deploy stops it: it commits, leaves the group and exits."""
        self.signal(signal.SIGTERM)
        if not await self.wait(40):
            await self.kill()

    async def wait(self, timeout: float) -> bool:
        """Wait for the process to end; whether it did within ``timeout`` seconds."""
        deadline = time.monotonic() + timeout
        while self.running:
            if time.monotonic() > deadline:
                return False
            await asyncio.sleep(0.2)
        return True


def now_ms() -> int:
    return int(time.time() * 1000)
