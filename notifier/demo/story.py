"""The frame every scenario script runs in.

A :class:`Scenario` is a scripted consumer group and what the service should say about it, a
:class:`ScenarioRun` its state during one run (kept by its script and by the sink that watches
the service), and :class:`ScriptEnv` what the scripts share: Kafka clients, the console, and
the stages of a story (degrade, fail, recover), each held until the service has reported it or
its allowance of scans has passed.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer

from notifier.demo.settings import DemoSettings
from notifier.types import GroupStatus

log = logging.getLogger(__name__)

DETECTION_ALLOWANCE_SCANS = 18
"""Scans to allow between a misbehaviour and its alert: a window to slide past the good
samples (``intervals``), and for ``falling-behind`` the speed averaged over six scans to show
the slowdown, with room to spare on a busy machine."""


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
    script: Callable[[ScriptEnv, ScenarioRun], Awaitable[None]]
    order: int
    """Position in the misbehaviour schedule (× the stagger)."""
    detect_in: str = "fail"
    """The stage whose start the detection time is measured from (``degrade`` or ``fail``)."""
    allowance_scans: int = 0
    """Scans each stage may take before the script moves on anyway (0: the default)."""


@dataclass
class ScenarioRun:
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
    reached: str | None = None
    """The worst status its transitions reached and why, e.g. ``ERR (STALL)``."""
    reached_status: GroupStatus = GroupStatus.OK
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


class ScriptEnv:
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

    def stage(self, run: ScenarioRun, stage: str) -> None:
        """Enter a stage of the story: note when, tell the console, set the traffic."""
        run.stage_started_ms[stage] = int(time.time() * 1000)
        run.steady = stage != "recover"
        story = run.scenario.stories[STAGES.index(stage)]
        self.out(f"{self.stamp()} {run.scenario.name}: {story}")

    async def until_status(
        self,
        run: ScenarioRun,
        reached: Callable[[GroupStatus], bool],
        step: Callable[[], Awaitable[Any]],
    ) -> bool:
        """Repeat ``step`` (the stage's behaviour) until the service has reported a status
        that ``reached`` accepts, then for :data:`HOLD_SCANS` more scans (and until the stage has
        lasted ``min_stage``); give up after the scenario's allowance. True when the status was
        reached."""
        scans = run.scenario.allowance_scans or DETECTION_ALLOWANCE_SCANS
        entered = time.monotonic()
        deadline = entered + scans * self.settings.scan_interval
        while not reached(run.status):
            if time.monotonic() > deadline:
                log.warning("%s: no such status within %d scans; moving on", run.group, scans)
                return False
            await step()
        hold = max(
            time.monotonic() + HOLD_SCANS * self.settings.scan_interval,
            entered + self.settings.min_stage,
        )
        while time.monotonic() < hold:
            await step()
        return True

    async def producer(self) -> AIOKafkaProducer:
        # linger_ms=0 and one send_and_wait at a time: one record per batch (the embedded
        # broker needs it, see :mod:`notifier.demo.kafka`).
        producer = AIOKafkaProducer(
            bootstrap_servers=self.bootstrap, linger_ms=0, client_id="notifier-demo"
        )
        await producer.start()
        self._closers.append(producer.stop)
        return producer

    async def consumer(self, run: ScenarioRun, **overrides: Any) -> AIOKafkaConsumer:
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


def at_least(status: GroupStatus) -> Callable[[GroupStatus], bool]:
    return lambda current: current.rank >= status.rank


def is_ok(current: GroupStatus) -> bool:
    return current is GroupStatus.OK
