"""Recording a corpus: scripted groups on a real broker, scanned by the service itself.

:func:`record` creates each scenario's topic, produces its traffic, starts ``notifier run`` (the
service, as a process: its collector scans the broker every ``scan_interval_s`` and its history
writer writes every scan, exactly as in production; the rules it evaluates on the way play no
part in what is recorded), runs every script at once for the timeline's duration (restarting
the broker once on the way when the timeline says so), stops the service (which flushes its
history), and writes the corpus (:mod:`notifier.recorder.corpus`).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import random
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from aiokafka import AIOKafkaProducer
from aiokafka.admin import AIOKafkaAdminClient, NewTopic
from aiokafka.errors import KafkaError

from notifier.embedded.apache_kafka import KafkaTools
from notifier.history import read_history
from notifier.recorder.corpus import CLUSTER, iso_ms, write_corpus
from notifier.recorder.scenarios import Scenario
from notifier.recorder.stage import Plan, Stage, Timeline, now_ms

log = logging.getLogger(__name__)

VALUE = b"r" * 100
"""Every record's value: a hundred bytes."""

COMPACTED_KEYS = 200
"""A compacted topic's records are keyed by one of this many keys, spread over its partitions
(compaction keeps the latest record of each)."""


@dataclass(frozen=True)
class Recording:
    """What :func:`record` wrote."""

    out: Path
    groups: int
    labels: int
    rows: int
    scans: int
    started_ms: int
    ended_ms: int


async def record(
    bootstrap: str,
    tools: KafkaTools | None,
    out: Path,
    scenarios: Sequence[Scenario],
    *,
    kafka_version: str,
    timeline: Timeline | None = None,
    scan_interval_s: float = 10.0,
    prefix: str = "rec-",
    seed: int = 1,
    command: str = "",
    workdir: Path | None = None,
    restart_broker: Callable[[], object] | None = None,
    load_average: Callable[[], tuple[float, float, float]] = os.getloadavg,
    progress: Callable[[str], None] = lambda line: None,
) -> Recording:
    """Record ``scenarios`` on the broker at ``bootstrap`` into the corpus folder ``out``.

    ``tools`` (the broker's :class:`KafkaTools`) runs the Java consumers; ``workdir`` (a temp
    directory by default) keeps the service's data and every client's log. ``restart_broker``
    (blocking: stop the broker, start it again with its data) is called at the timeline's
    ``broker_restart_s``, which needs it. Raises :class:`RuntimeError` when the service does
    not come up or writes no history, :class:`ValueError` when a scenario cannot run on
    ``kafka_version`` or the timeline wants a restart nobody can do.
    """
    timeline = timeline or Timeline()
    plans = [s.plan(prefix) for s in scenarios]
    kafka_4 = int(kafka_version.split(".", 1)[0]) >= 4
    for plan in plans:
        if plan.client == "java" and plan.protocol == "consumer" and not kafka_4:
            raise ValueError(f"scenario {plan.scenario}: group.protocol=consumer (KIP-848) "
                             f"needs Apache Kafka 4 or later, not {kafka_version}")  # fmt: skip
    if timeline.broker_restart_s is not None and restart_broker is None:
        raise ValueError(f"the timeline restarts the broker at {timeline.broker_restart_s:g} "
                         "s, but no restart_broker was given")  # fmt: skip
    own_workdir = workdir is None
    work = Path(tempfile.mkdtemp(prefix="notifier-record-")) if workdir is None else workdir
    work.mkdir(parents=True, exist_ok=True)
    rng = random.Random(seed)
    try:
        await _create_topics(bootstrap, plans)
        progress(f"{len(plans)} topics created; starting the service (scans every "
                 f"{scan_interval_s:g} s)")  # fmt: skip
        service = _Service(work, bootstrap, prefix, scan_interval_s)
        stage = Stage(bootstrap, tools, timeline, work)
        stopping = asyncio.Event()
        producing: asyncio.Task[None] | None = None
        restarts: list[dict[str, object]] = []
        loads: list[tuple[float, float, float]] = [load_average()]
        try:
            await service.start()
            stage.begin()
            started_ms = now_ms()
            producing = asyncio.create_task(_produce(bootstrap, plans, stopping, rng))
            scripts = [
                asyncio.create_task(scenario.script(stage, plan, random.Random(rng.random())))
                for scenario, plan in zip(scenarios, plans)
            ]
            if timeline.broker_restart_s is not None and restart_broker is not None:
                scripts.append(asyncio.create_task(_restart_broker(
                    stage, timeline.broker_restart_s, restart_broker, restarts, progress
                )))  # fmt: skip
            progress(f"{len(scripts)} scripts running for {timeline.duration_s:g} s")
            await _watch(scripts, stage, progress, lambda: loads.append(load_average()))
            ended_ms = stage.end_ms
        finally:
            await service.stop()
            stage.kill_all()
            stopping.set()
            if producing is not None:
                with contextlib.suppress(asyncio.CancelledError, KafkaError):
                    await asyncio.wait_for(producing, 30)
        history = service.history
        if not history.is_dir():
            raise RuntimeError(f"the service wrote no history in {history}; see {service.log}")
        table = read_history(history)
        write_corpus(
            out,
            history,
            plans,
            stage.labels,
            {
                "broker": f"Apache Kafka {kafka_version}",
                "kafka_version": kafka_version,
                "scan_interval_s": scan_interval_s,
                "warmup_s": timeline.warmup_s,
                "duration_s": timeline.duration_s,
                "started_ms": started_ms,
                "ended_ms": ended_ms,
                "seed": seed,
                "command": command,
                "client_failures": sorted(c.name for c in stage.failed()),
                "broker_restarts": restarts,
                "load_average": _load_summary(loads),
            },
        )
        scans = len(set(table.column("ts").cast("int64").to_pylist()))
        return Recording(
            out, len(plans), len(stage.labels), table.num_rows, scans, started_ms, ended_ms
        )
    finally:
        if own_workdir:
            shutil.rmtree(work, ignore_errors=True)


async def _restart_broker(
    stage: Stage,
    at_s: float,
    restart: Callable[[], object],
    restarts: list[dict[str, object]],
    progress: Callable[[str], None],
) -> None:
    """Restart the broker at ``at_s`` (in a thread: the clients and the traffic go on meanwhile,
    failing as they would), and note when it went down and when it served again."""
    await stage.until(at_s)
    progress(f"  {stage.elapsed_s:5.0f} s: restarting the broker")
    down_ms = now_ms()
    await asyncio.to_thread(restart)
    up_ms = now_ms()
    restarts.append({"down": iso_ms(down_ms), "up": iso_ms(up_ms), "at_s": round(at_s, 1),
                     "down_s": round((up_ms - down_ms) / 1000, 1)})  # fmt: skip
    progress(f"  {stage.elapsed_s:5.0f} s: the broker serves again after "
             f"{(up_ms - down_ms) / 1000:.0f} s")  # fmt: skip


def _load_summary(loads: list[tuple[float, float, float]]) -> dict[str, object]:
    """The machine's 1-minute load average: before the recording, and over it (every minute)."""
    ones = [one for one, _, _ in loads]
    return {
        "before": list(loads[0]),
        "during_1min_median": round(statistics.median(ones[1:] or ones), 2),
        "during_1min_max": round(max(ones), 2),
        "cores": os.cpu_count(),
    }


async def _watch(
    scripts: list[asyncio.Task[None]],
    stage: Stage,
    progress: Callable[[str], None],
    every_minute: Callable[[], object] = lambda: None,
) -> None:
    """Wait for every script, saying how far the recording is every minute; a script that
    fails fails the recording."""
    pending = set(scripts)
    told: set[str] = set()
    while pending:
        left = stage.timeline.duration_s - stage.elapsed_s
        if left <= 0:  # a script still in a step (a deploy, a restart) ends with the recording
            for task in pending:
                task.cancel()
            await asyncio.gather(*pending, return_exceptions=True)
            return
        done, pending = await asyncio.wait(pending, timeout=min(60.0, left))
        every_minute()
        for task in done:
            task.result()
        for consumer in stage.failed():
            if consumer.name not in told:
                told.add(consumer.name)
                progress(f"  {consumer.name} exited with {consumer.process.returncode}; "
                         f"see {consumer.log_path}")  # fmt: skip
        if pending:
            alive = sum(1 for c in stage.consumers if c.running)
            progress(f"  {stage.elapsed_s:5.0f} s: {alive} consumer processes, "
                     f"{len(stage.labels)} labels so far, "
                     f"load {os.getloadavg()[0]:.1f}")  # fmt: skip


async def _create_topics(bootstrap: str, plans: Sequence[Plan]) -> None:
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=30_000)
    await admin.start()
    try:
        await admin.create_topics(
            [NewTopic(p.topic, p.partitions, 1, topic_configs=p.topic_config) for p in plans]
        )
    finally:
        await admin.close()


async def _produce(
    bootstrap: str, plans: Sequence[Plan], stopping: asyncio.Event, rng: random.Random
) -> None:
    """Every topic's traffic until ``stopping``: about ``rate`` records a second, spread over
    its partitions; transactional topics through their own transactional producer, one
    transaction a second, one in eight aborted."""
    plain = AIOKafkaProducer(bootstrap_servers=bootstrap, linger_ms=20)
    await plain.start()
    tasks = []
    try:
        for plan in plans:
            producer = _Transactional(bootstrap, plan.topic) if plan.transactional else None
            tasks.append(asyncio.create_task(
                _traffic(plain, producer, plan, stopping, random.Random(rng.random()))
            ))  # fmt: skip
        await stopping.wait()
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        with contextlib.suppress(KafkaError, OSError, TimeoutError):
            await asyncio.wait_for(plain.stop(), 10)


class _Transactional:
    """A topic's transactional producer, started anew (same ``transactional.id``: the new one
    fences the old and aborts its open transaction) after a failure such as a broker restart,
    from which an aiokafka transactional producer does not recover by itself."""

    def __init__(self, bootstrap: str, topic: str) -> None:
        self.bootstrap = bootstrap
        self.transactional_id = f"{topic}-tx"
        self.producer: AIOKafkaProducer | None = None

    async def get(self) -> AIOKafkaProducer:
        if self.producer is None:
            producer = AIOKafkaProducer(
                bootstrap_servers=self.bootstrap, transactional_id=self.transactional_id
            )
            try:
                await producer.start()
            except BaseException:
                with contextlib.suppress(KafkaError, OSError, TimeoutError):
                    await asyncio.wait_for(producer.stop(), 10)
                raise
            self.producer = producer
        return self.producer

    async def discard(self) -> None:
        producer, self.producer = self.producer, None
        if producer is not None:
            with contextlib.suppress(KafkaError, OSError, TimeoutError):
                await asyncio.wait_for(producer.stop(), 10)


async def _traffic(
    plain: AIOKafkaProducer,
    transactional: _Transactional | None,
    plan: Plan,
    stopping: asyncio.Event,
    rng: random.Random,
) -> None:
    sent = 0
    try:
        while not stopping.is_set():
            started = time.monotonic()
            count = max(0, round(rng.gauss(plan.rate, plan.rate**0.5)))
            try:
                if transactional is not None:
                    aborted = rng.random() < 1 / 8
                    producer = await transactional.get()
                    await producer.begin_transaction()
                    await _send(producer, plan, count, sent)
                    if aborted:
                        await producer.abort_transaction()
                    else:
                        await producer.commit_transaction()
                else:
                    await _send(plain, plan, count, sent)
                sent += count
            except (KafkaError, TimeoutError, OSError) as exc:
                log.warning("producing to %s failed: %r", plan.topic, exc)
                if transactional is not None:
                    await transactional.discard()
            await asyncio.sleep(max(0.0, 1.0 - (time.monotonic() - started)))
    finally:
        if transactional is not None:
            await transactional.discard()


async def _send(producer: AIOKafkaProducer, plan: Plan, count: int, sent: int) -> None:
    futures = [
        await producer.send(
            plan.topic, VALUE, key=_key(plan, sent + i), partition=(sent + i) % plan.partitions
        )
        for i in range(count)
    ]
    async with asyncio.timeout(30):
        await asyncio.gather(*futures)


def _key(plan: Plan, n: int) -> bytes | None:
    """The ``n``-th record's key: none, but on a compacted topic one of
    :data:`COMPACTED_KEYS`, each always on the same partition."""
    return f"key-{n % COMPACTED_KEYS}".encode() if plan.compacted else None


class _Service:
    """``notifier run`` as a process, watching the recorder's groups, its history on."""

    def __init__(self, work: Path, bootstrap: str, prefix: str, scan_interval_s: float) -> None:
        self.data = work / "service"
        self.config = work / "service.json"
        self.log = work / "service.log"
        self.config.write_text(
            json.dumps(
                {
                    "clusters": [
                        {
                            "name": CLUSTER,
                            "bootstrap_servers": bootstrap,
                            "client_id": "notifier-recorder",
                            "scan_interval": f"{scan_interval_s:g}s",
                            "group_allow": [f"^{prefix}"],
                        }
                    ],
                    "data_dir": str(self.data),
                    "history": {"enabled": True, "roll_interval": "60s", "retention_days": 3650},
                    "api": {"enabled": False},
                    "logging": {"level": "INFO", "format": "json"},
                },
                indent=2,
            )
        )
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def history(self) -> Path:
        return self.data / "history"

    async def start(self, timeout: float = 120.0) -> None:
        """Start it and wait for its first successful scan."""
        with open(self.log, "ab") as log_file:
            self.process = subprocess.Popen(
                [sys.executable, "-m", "notifier.cli", "run", "--config", str(self.config)],
                stdin=subprocess.DEVNULL,
                stdout=log_file,
                stderr=log_file,
            )
        deadline = time.monotonic() + timeout
        while not self._logged("cluster_ready"):
            if self.process.poll() is not None:
                raise RuntimeError(f"the service exited at start:\n{self._tail()}")
            if time.monotonic() > deadline:
                raise RuntimeError(f"the service did not scan within {timeout:g} s:\n"
                                   f"{self._tail()}")  # fmt: skip
            await asyncio.sleep(0.5)

    async def stop(self) -> None:
        """SIGTERM, as a supervisor stops it: it flushes its history, then exits."""
        process, self.process = self.process, None
        if process is None or process.poll() is not None:
            return
        process.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + 90
        while process.poll() is None and time.monotonic() < deadline:
            await asyncio.sleep(0.2)
        if process.poll() is None:
            process.kill()
            process.wait(10)

    def _logged(self, event: str) -> bool:
        try:
            text = self.log.read_text(errors="replace")
        except OSError:
            return False
        return f'"event": "{event}"' in text or f'"event":"{event}"' in text

    def _tail(self) -> str:
        try:
            return self.log.read_text(errors="replace")[-4000:]
        except OSError:
            return "(no log)"
