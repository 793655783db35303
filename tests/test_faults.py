"""Crash safety: ``kill -9`` at random moments, damaged state files, and a history that cannot
be written, each against the real service.

The kill test runs ``notifier run`` as a real process against the embedded broker, delivering to
a real HTTP receiver, while consumer groups move between healthy, lagging and far behind; it
kills the process more than twenty times (seeded) at chosen moments — while it starts, right
after a scan handed transitions over (the outbox write), around a checkpoint, while a delivery
is in flight, at the next scan, at random — and restarts it. What must hold is what a user can
see: the receiver's requests, the outbox, the incidents and the windows the API shows.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import dataclasses
import json
import logging
import os
import random
import signal
import sqlite3
import subprocess
import sys
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml
from aiokafka import AIOKafkaConsumer, TopicPartition

from notifier.api import create_app
from notifier.collect import ScanResult
from notifier.config import parse_service_config
from notifier.demo import HttpReceiver
from notifier.embedded import EmbeddedBroker
from notifier.history import HistoryWriter, read_history
from notifier.netutil import free_port
from notifier.notify import Notifier, NotifyStore, OutboxEntry
from notifier.rules import parse_rules
from notifier.service import Coordinator, LogSink
from notifier.types import Sample
from tests.notify_helpers import config as notify_config
from tests.notify_helpers import full_notification, webhook
from tests.scripted import ScriptedCollector, drive, scan_result, service
from tests.test_collect import _produce
from tests.waiting import until_true

ROOT = Path(__file__).resolve().parents[1]
CLUSTER = "crash"
SCAN_S = 1.0
CHECKPOINT_S = 2.5
RECORDS = 120
"""Records in the topic; a group's lag is what it leaves unread of them."""
LAG_OF = {"OK": 0, "WARN": 20, "ERR": 80}
"""The rules below: lag of at least 10 is WARN, of at least 50 is ERR."""

RULES = """\
window:
  intervals: 8
burrow:
  enabled: false
  minimum_complete: 0  # every restart is a gap: judge at once, or nothing would ever notify
rules:
  - name: some-lag
    kind: lag
    scope: group
    threshold: 10
    severity: warn
  - name: far-behind
    kind: lag
    scope: group
    threshold: 50
    severity: err
"""


def _now_ms() -> int:
    return int(time.time() * 1000)


def _service_config(
    directory: Path, bootstrap: str, prefix: str, port: int, hook: str, **top: Any
) -> Path:
    (directory / "rules.yaml").write_text(RULES)
    config = {
        "clusters": [
            {
                "name": CLUSTER,
                "bootstrap_servers": bootstrap,
                "scan_interval": SCAN_S,
                "request_timeout": 2,
                "scan_timeout": 4,
                "group_allow": [f"^{prefix}"],
            }
        ],
        "rules": "rules.yaml",
        "data_dir": str(directory / "data"),
        "checkpoint_interval": CHECKPOINT_S,
        "history": {"enabled": True, "roll_interval": 2},
        "api": {"enabled": True, "host": "127.0.0.1", "port": port},
        "logging": {"level": "DEBUG", "format": "json"},
        "notify": {
            "receivers": {"oncall": {"webhook": {"url": hook, "timeout": 5}}},
            "route": {
                "receiver": "oncall",
                "group_by": ["cluster", "group"],
                "group_wait": 0,
                "group_interval": 0,
            },
            "delivery": {"retry_initial": "50ms", "retry_max": "500ms", "stop_timeout": "2s"},
        },
        **top,
    }
    path = directory / "service.yaml"
    path.write_text(json.dumps(config))  # JSON is YAML
    return path


@dataclass
class ServiceProcess:
    """``notifier run`` as a child process; its JSON log lines are kept as they arrive."""

    config: Path
    log_path: Path
    lines: list[dict[str, Any]] = field(default_factory=list)
    process: asyncio.subprocess.Process | None = None
    spawned_ms: int = 0
    scans: int = 0
    """Scans logged by every process so far (the test's clock: moves and kills follow it)."""
    _reader: asyncio.Task[None] | None = None
    _arrived: asyncio.Event = field(default_factory=asyncio.Event)

    async def start(self) -> None:
        self.lines = []
        self.spawned_ms = _now_ms()
        self.process = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "notifier.cli", "run", "--config", str(self.config),
            cwd=ROOT, stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.PIPE,
            env={**os.environ, "PYTHONPATH": str(ROOT)}, limit=1 << 24,
        )  # fmt: skip
        self._reader = asyncio.create_task(self._read(self.process))

    async def _read(self, process: asyncio.subprocess.Process) -> None:
        assert process.stderr is not None
        with self.log_path.open("a") as log:
            log.write(f"--- started at {self.spawned_ms}\n")
            async for raw in process.stderr:
                text = raw.decode(errors="replace")
                log.write(text)
                try:
                    line = json.loads(text)
                except ValueError:
                    line = {"msg": text.strip()}
                line["_at"] = time.monotonic()
                self.lines.append(line)
                if line.get("event") == "scan":
                    self.scans += 1
                self._arrived.set()

    def seen(self, event: str, since: int = 0) -> list[dict[str, Any]]:
        return [line for line in self.lines[since:] if line.get("event", line.get("msg")) == event]

    async def wait_for(self, event: str, timeout: float, since: int = 0) -> dict[str, Any] | None:
        deadline = time.monotonic() + timeout
        while True:
            found = self.seen(event, since)
            if found:
                return found[0]
            remaining = deadline - time.monotonic()
            if remaining <= 0 or self.process is None or self.process.returncode is not None:
                return None
            self._arrived.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._arrived.wait(), min(remaining, 0.2))

    async def wait_until(self, condition: Callable[[], bool], timeout: float) -> bool:
        """Wait for a log line after which ``condition`` holds; False when it did not within
        ``timeout`` (or the process ended)."""
        deadline = time.monotonic() + timeout
        while not condition():
            remaining = deadline - time.monotonic()
            if remaining <= 0 or self.process is None or self.process.returncode is not None:
                return False
            self._arrived.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._arrived.wait(), min(remaining, 0.2))
        return True

    async def wait_lines(self, count: int, timeout: float, since: int = 0) -> bool:
        """Wait until the process has logged ``count`` lines after the first ``since``."""
        return await self.wait_until(lambda: len(self.lines) >= since + count, timeout)

    async def kill(self) -> int:
        """SIGKILL; returns the wall time of the kill (ms)."""
        assert self.process is not None
        killed_at = _now_ms()
        self.process.send_signal(signal.SIGKILL)
        await self.process.wait()
        if self._reader is not None:
            await self._reader
        return killed_at

    async def terminate(self) -> int:
        assert self.process is not None
        self.process.send_signal(signal.SIGTERM)
        code = await asyncio.wait_for(self.process.wait(), 30)
        if self._reader is not None:
            await self._reader
        return code


class Groups:
    """Consumer groups whose lag the test sets by committing offsets (no members)."""

    def __init__(self, bootstrap: str, topic: str, names: list[str]) -> None:
        self.bootstrap = bootstrap
        self.topic = topic
        self.state = dict.fromkeys(names, "OK")
        self.consumers: dict[str, AIOKafkaConsumer] = {}

    async def start(self) -> None:
        for name in self.state:
            consumer = AIOKafkaConsumer(
                bootstrap_servers=self.bootstrap, group_id=name, enable_auto_commit=False
            )
            await consumer.start()
            consumer.assign([TopicPartition(self.topic, 0)])
            self.consumers[name] = consumer
            await self.set(name, "OK")

    async def set(self, name: str, status: str) -> None:
        offset = RECORDS - LAG_OF[status]
        await self.consumers[name].commit({TopicPartition(self.topic, 0): offset})
        self.state[name] = status

    async def stop(self) -> None:
        for consumer in self.consumers.values():
            await consumer.stop()


async def _drive(
    groups: Groups,
    names: list[str],
    rng: random.Random,
    stop: asyncio.Event,
    service: ServiceProcess,
) -> int:
    """Move a random group to another status after each scan the service logs (whichever
    process it is), until ``stop``; returns the moves."""
    moves = 0
    seen = service.scans
    while not stop.is_set():
        if service.scans == seen:
            service._arrived.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(service._arrived.wait(), 0.2)
            continue
        seen = service.scans
        name = rng.choice(names)
        await groups.set(name, rng.choice([s for s in LAG_OF if s != groups.state[name]]))
        moves += 1
    return moves


async def _window_after(api: httpx.AsyncClient, group: str, spawned_ms: int, timeout: float):
    """The steady group's window once it holds a sample of this process (None if not in time):
    ``(sample before the restart or None, first sample of this process)``."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            answer = await api.get(f"/api/groups/{CLUSTER}/{group}")
        except httpx.TransportError:
            answer = None
        if answer is not None and answer.status_code == 200:
            window = [s["ts"] for s in answer.json()["partitions"][0]["window"]]
            fresh = [i for i, ts in enumerate(window) if ts >= spawned_ms]
            if fresh:
                first = fresh[0]
                return (window[first - 1] if first else None), window[first]
        await asyncio.sleep(0.1)
    return None


KILL_MOMENTS = ("startup", "outbox-write", "checkpoint", "delivery", "next-scan", "random")


@dataclass
class KillSoak:
    """What a kill -9 soak left (:func:`kill_soak`): what the receiver got, what the outbox
    holds, and where the groups ended."""

    seed: int
    kills: collections.Counter[str]
    moves: int
    received: list[dict[str, Any]]
    outbox: list[dict[str, Any]]
    final: dict[str, str]
    open_now: set[str]
    gaps: list[tuple[int, int]]
    """(gap in the window, downtime) after each restart, ms."""
    exit_code: int


async def kill_soak(
    bootstrap: str, http: HttpReceiver, directory: Path, *, seed: int = 15,
    moments: list[str] | None = None,
) -> KillSoak:  # fmt: skip
    """``notifier run`` killed with SIGKILL at each of ``moments`` (default: each moment four
    times and two random ones, shuffled) while groups move between statuses, restarted each
    time; then a last run where everything settles and a clean stop. The fault suite
    (``benchmarks/faults.py``) runs it too."""
    rng = random.Random(seed)
    prefix = f"crash-{uuid.uuid4().hex[:6]}"
    topic = f"{prefix}-t"
    movers = [f"{prefix}-g{i}" for i in range(6)]
    steady = f"{prefix}-steady"
    await _produce(bootstrap, topic, [RECORDS])
    groups = Groups(bootstrap, topic, [*movers, steady])
    await groups.start()

    port = free_port()
    config = _service_config(directory, bootstrap, prefix, port, http.url_for("/hook"))
    service = ServiceProcess(config, directory / "service.log")
    api = httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=2)
    if moments is None:
        moments = [*KILL_MOMENTS[:-1] * 4, "random", "random"]
    moments = list(moments)
    rng.shuffle(moments)
    stop_driving = asyncio.Event()
    driver = asyncio.create_task(
        _drive(groups, movers, random.Random(seed + 1), stop_driving, service)
    )

    kills: collections.Counter[str] = collections.Counter()
    gaps: list[tuple[int, int]] = []
    last_scanning_kill: int | None = None
    try:
        for moment in moments:
            await service.start()
            if moment == "startup":
                # Some of its start-up said: the checkpoint, the history, the API, the first
                # scan under way.
                await service.wait_lines(rng.randint(1, 4), 10)
            else:
                window = await _window_after(api, steady, service.spawned_ms, 15)
                assert window is not None, "the service did not scan after a restart"
                before, first = window
                if before is not None and last_scanning_kill is not None:
                    gaps.append((first - before, first - last_scanning_kill))
                await _wait_for_moment(service, moment, http, rng)
            scanned = bool(service.seen("scan"))
            killed_at = await service.kill()
            kills[moment] += 1
            if scanned:
                last_scanning_kill = killed_at

        # The last run: everything settles, then a clean stop.
        stop_driving.set()
        moves = await driver
        final = {name: rng.choice(list(LAG_OF)) for name in movers}
        for name, status in final.items():
            await groups.set(name, status)
        await service.start()
        window = await _window_after(api, steady, service.spawned_ms, 15)
        assert window is not None
        if window[0] is not None and last_scanning_kill is not None:
            gaps.append((window[1] - window[0], window[1] - last_scanning_kill))
        open_now = await _settle(api, final)
        exit_code = await service.terminate()
    finally:
        stop_driving.set()
        if not driver.done():
            await driver
        if service.process is not None and service.process.returncode is None:
            await service.kill()
        await api.aclose()
        await groups.stop()
    return KillSoak(
        seed=seed, kills=kills, moves=moves, received=[r.json for r in http.to("/hook")],
        outbox=_outbox_rows(directory / "data" / "notify.sqlite"), final=final,
        open_now=open_now, gaps=gaps, exit_code=exit_code,
    )  # fmt: skip


@pytest.mark.broker
@pytest.mark.slow
async def test_kill_minus_9_at_random_moments_loses_no_committed_notification(
    kafka_broker: EmbeddedBroker, http: HttpReceiver, tmp_path: Path
) -> None:
    soak = await kill_soak(kafka_broker.bootstrap_servers, http, tmp_path, seed=15)
    kills, received, outbox, final = soak.kills, soak.received, soak.outbox, soak.final
    open_now, gaps = soak.open_now, soak.gaps
    assert soak.exit_code == 0
    report = _delivery_report(received)
    print(
        f"\nkill -9 x{sum(kills.values())} (seed {soak.seed}): {dict(kills)}; {soak.moves} group "
        f"moves; {len(outbox)} notifications committed to the outbox, {report.distinct} "
        f"delivered ({len(received)} requests), {report.duplicated} duplicated "
        f"({report.duplicate_requests} repeat requests); window gaps after restarts "
        f"(gap/downtime ms): {gaps}"
    )

    assert sum(kills.values()) >= 20
    # Every notification committed to the outbox was delivered, none is still pending.
    assert {row["notification_id"] for row in outbox} <= report.ids
    assert {row["state"] for row in outbox} == {"sent"}
    # A repeat is the same notification: same id, same alerts, same incident ids.
    assert report.inconsistent_repeats == []
    # Per group, incidents open and resolve in turn: never two open, never a resolve first.
    assert report.sequence_errors == [], report.sequence_errors
    assert report.opens > 10 and report.resolves > 5
    # The incidents that stayed open are exactly the groups left behind.
    assert open_now == {name for name, status in final.items() if status != "OK"}
    # Windows resume: the gap a restart leaves is the downtime (plus the scan cut off by the
    # kill), not the time since the last checkpoint.
    assert len(gaps) >= 15
    too_long = [(gap, down) for gap, down in gaps if gap > down + 1.5 * SCAN_S * 1000]
    assert too_long == [], too_long


async def _wait_for_moment(
    service: ServiceProcess, moment: str, http: HttpReceiver, rng: random.Random
) -> None:
    """Return at the chosen moment to kill (or after a few seconds if it did not come): each
    moment is an event in the process's log, or a seeded number of log lines after one."""
    since = len(service.lines)
    if moment == "outbox-write":
        # Transitions were handed over: the incident is written, the outbox rows follow.
        deadline = time.monotonic() + 8
        while time.monotonic() < deadline:
            line = await service.wait_for("scan", 1.5, since)
            since = len(service.lines)
            if line is not None and line.get("transitions"):
                break
        await service.wait_lines(rng.randint(0, 2), 2, since)
    elif moment == "checkpoint":
        if await service.wait_for("checkpoint saved", CHECKPOINT_S + 1, since) is not None:
            since = len(service.lines)  # the next one, just written
            await service.wait_for("checkpoint saved", CHECKPOINT_S + 1, since)
    elif moment == "delivery":
        sent = len(http.to("/hook"))
        http.reply("/hook", hang=3.0, times=1)  # the next notification hangs in flight
        deadline = time.monotonic() + 8
        while len(http.to("/hook")) == sent and time.monotonic() < deadline:
            await asyncio.sleep(0.02)
    elif moment == "next-scan":
        if await service.wait_for("scan", 2, since) is not None:
            since = len(service.lines)
            await service.wait_for("scan", 2 * SCAN_S, since)
    else:
        await service.wait_lines(rng.randint(1, 20), 5, since)


async def _settle(api: httpx.AsyncClient, final: dict[str, str]) -> set[str]:
    """Wait until the outbox is empty and the open incidents match the groups' final state;
    returns the groups with an open incident."""
    wanted = {name for name, status in final.items() if status != "OK"}
    deadline = time.monotonic() + 30
    open_groups: set[str] = set()
    while time.monotonic() < deadline:
        incidents = (await api.get("/api/incidents")).json()["incidents"]
        open_groups = {i["group"] for i in incidents if i["closed_at"] is None}
        metrics = (await api.get("/metrics")).text
        depth = next(
            float(line.split()[-1])
            for line in metrics.splitlines()
            if line.startswith("notifier_outbox_depth ")
        )
        if open_groups == wanted and depth == 0:
            await asyncio.sleep(2 * SCAN_S)  # nothing more comes
            return open_groups
        await asyncio.sleep(0.25)
    return open_groups


def _outbox_rows(path: Path) -> list[dict[str, Any]]:
    db = sqlite3.connect(path)
    try:
        cursor = db.execute("SELECT notification_id, state FROM outbox ORDER BY id")
        return [{"notification_id": n, "state": s} for n, s in cursor]
    finally:
        db.close()


@dataclass
class DeliveryReport:
    ids: set[str]
    distinct: int
    duplicated: int
    duplicate_requests: int
    inconsistent_repeats: list[str]
    sequence_errors: list[str]
    opens: int
    resolves: int


def _delivery_report(bodies: list[dict[str, Any]]) -> DeliveryReport:
    by_id: dict[str, list[dict[str, Any]]] = collections.defaultdict(list)
    for body in bodies:
        by_id[body["notification_id"]].append(body)

    def alerts(body: dict[str, Any]) -> list[tuple[str, str, str]]:
        return [(a["event"], a["incident"]["id"], a["incident"]["group"]) for a in body["alerts"]]

    inconsistent = [n for n, copies in by_id.items() if len({str(alerts(b)) for b in copies}) > 1]
    # Distinct notifications in the order they first arrived (one lane per group keeps order).
    open_incident: dict[str, str] = {}
    seen_incidents: set[str] = set()
    errors: list[str] = []
    opens = resolves = 0
    for notification_id, copies in by_id.items():
        for event, incident, group in alerts(copies[0]):
            if event == "open":
                opens += 1
                if incident in seen_incidents:
                    errors.append(f"{notification_id}: incident {incident} opened twice")
                if group in open_incident:
                    errors.append(f"{notification_id}: {group} opened while {incident} is open")
                open_incident[group] = incident
                seen_incidents.add(incident)
            elif event == "resolve":
                resolves += 1
                if open_incident.get(group) != incident:
                    errors.append(f"{notification_id}: {incident} resolved but not open")
                open_incident.pop(group, None)
            elif open_incident.get(group) != incident:
                errors.append(f"{notification_id}: {event} for {incident}, which is not open")
    repeats = sum(len(c) - 1 for c in by_id.values())
    return DeliveryReport(
        ids=set(by_id),
        distinct=len(by_id),
        duplicated=sum(1 for c in by_id.values() if len(c) > 1),
        duplicate_requests=repeats,
        inconsistent_repeats=inconsistent,
        sequence_errors=errors,
        opens=opens,
        resolves=resolves,
    )


# --------------------------------------------------------------------------------------------
# Restarts in process: exact about what a restart resumes from

T0 = 1_800_000_000_000
INTERVAL_S = 10


def _lag_scan(i: int, lags: dict[str, int], cluster: str = "c", t0: int = T0) -> ScanResult:
    """Scan ``i`` (taken at ``t0`` + i intervals): each group's lag on partition 0 of topic t
    (100 records, one member)."""
    ts = t0 + i * INTERVAL_S * 1000
    samples = [
        Sample(ts=ts, cluster=cluster, group=g, topic="t", partition=0,
               committed_offset=100 - lag, log_end_offset=100, log_start_offset=0,
               group_state="Stable", members=1, member_hash=1)
        for g, lag in lags.items()
    ]  # fmt: skip
    return scan_result(samples, cluster, ts)


def _lag_rules():
    return parse_rules(yaml.safe_load(RULES), "test_faults.RULES")


async def _started_and_stopped(coord: Coordinator, scans: int = 1) -> None:
    """Start (restore, then the scheduler scans at once), wait for ``scans`` scans, stop."""
    await coord.start()
    state = coord.clusters["c"]
    deadline = time.monotonic() + 10
    while state.metrics.scans < scans:
        assert time.monotonic() < deadline, "no scan after the start"
        await asyncio.sleep(0.01)
    await coord.stop()


async def test_a_restart_resumes_from_the_notifiers_incidents_not_an_older_checkpoint(
    tmp_path: Path, http: HttpReceiver
) -> None:
    cfg = notify_config(webhook(http.url_for("/hook")))
    db = tmp_path / "notify.sqlite"
    first = Notifier(cfg, db)
    before = [_lag_scan(0, {"falls": 0, "heals": 80}), _lag_scan(1, {"falls": 80, "heals": 0})]
    coord, _ = service(tmp_path, before, _lag_rules(), interval_s=INTERVAL_S, sink=first)
    await drive(coord, 1)
    coord.save_checkpoints()  # it knows "heals" as ERR and "falls" as OK
    await drive(coord, 1)  # "falls" opens an incident, "heals" resolves its own
    healed = next(i for i in first.incidents(open_only=False) if i.group == "heals")
    first.store.db.close()  # kill -9: nothing after the scan is written, no checkpoint

    # While the service was down, "falls" recovered and "heals" fell behind again.
    second = Notifier(cfg, db)
    again, _ = service(
        tmp_path, [_lag_scan(2, {"falls": 0, "heals": 80})] * 3, _lag_rules(),
        interval_s=INTERVAL_S, sink=second,
    )  # fmt: skip
    await _started_and_stopped(again)
    incidents = second.incidents(open_only=False)
    second.store.close()
    falls = [i for i in incidents if i.group == "falls"]
    heals = [i for i in incidents if i.group == "heals"]
    assert [i.closed_at is not None for i in falls] == [True]  # resolved, not left open
    (reopened,) = [i for i in heals if i.closed_at is None]  # a new incident, not missed
    assert reopened.id != healed.id


async def test_the_scans_after_the_checkpoint_are_replayed_from_the_history(
    tmp_path: Path,
) -> None:
    config = parse_service_config(
        {"clusters": [{"name": "c", "bootstrap_servers": "127.0.0.1:1",
                       "scan_interval": INTERVAL_S}],
         "history": {"roll_interval": 3600}},
        "test",
    )  # fmt: skip
    lags = {f"g{i}": 0 for i in range(3)}
    first = Coordinator(config, _lag_rules(), tmp_path, LogSink(), collector_factory=None)
    first.clusters["c"].collector = ScriptedCollector([_lag_scan(i, lags) for i in range(7)])
    first.history = HistoryWriter(tmp_path / "history", roll_interval_s=3600)
    await drive(first, 3)
    first.save_checkpoints()
    await drive(first, 4)  # journaled, not in the checkpoint; then kill -9
    deadline = time.monotonic() + 5
    while first.history.journaled_rows < 7 * len(lags):
        assert time.monotonic() < deadline
        await asyncio.sleep(0.01)

    again = Coordinator(
        config, _lag_rules(), tmp_path, LogSink(),
        collector_factory=lambda _: ScriptedCollector([_lag_scan(9, lags)] * 3),
    )  # fmt: skip
    await _started_and_stopped(again)
    state = again.clusters["c"]
    row = state.store.row("c", "g0", "t", 0)
    assert row is not None
    window = [s["ts"] for s in state.store.samples(row)]
    # Scans 0-6 from before the crash, then the first one after it: the gap is the downtime.
    assert window == [T0 + i * INTERVAL_S * 1000 for i in (*range(7), 9)]


async def test_a_kill_before_the_first_checkpoint_replays_the_history(tmp_path: Path) -> None:
    config = parse_service_config(
        {"clusters": [{"name": "c", "bootstrap_servers": "127.0.0.1:1",
                       "scan_interval": INTERVAL_S}],
         "history": {"roll_interval": 3600}},
        "test",
    )  # fmt: skip
    lags = {f"g{i}": 0 for i in range(3)}
    # Scans of the last minutes: without a checkpoint, the span the windows hold is replayed.
    t0 = round(time.time() * 1000) - 10 * INTERVAL_S * 1000
    first = Coordinator(config, _lag_rules(), tmp_path, LogSink(), collector_factory=None)
    first.clusters["c"].collector = ScriptedCollector([_lag_scan(i, lags, t0=t0) for i in range(7)])
    first.history = HistoryWriter(tmp_path / "history", roll_interval_s=3600)
    await drive(first, 7)  # journaled; then kill -9 before any checkpoint was saved
    deadline = time.monotonic() + 5
    while first.history.journaled_rows < 7 * len(lags):
        assert time.monotonic() < deadline
        await asyncio.sleep(0.01)
    assert not first.checkpoint_path("c").exists()

    again = Coordinator(
        config, _lag_rules(), tmp_path, LogSink(),
        collector_factory=lambda _: ScriptedCollector([_lag_scan(9, lags, t0=t0)] * 3),
    )  # fmt: skip
    await _started_and_stopped(again)
    state = again.clusters["c"]
    row = state.store.row("c", "g0", "t", 0)
    assert row is not None
    window = [s["ts"] for s in state.store.samples(row)]
    # Scans 0-6 from before the crash, then the first one after it: the windows start warm.
    assert window == [t0 + i * INTERVAL_S * 1000 for i in (*range(7), 9)]


# --------------------------------------------------------------------------------------------
# Damaged state files


def _truncate(path: Path, size: int) -> None:
    with path.open("r+b") as handle:
        handle.truncate(size)


def _garble(path: Path, offset: int, length: int) -> None:
    with path.open("r+b") as handle:
        handle.seek(offset)
        handle.write(random.Random(offset).randbytes(length))


def _moved_aside(path: Path) -> list[Path]:
    found = path.parent.glob(f"{path.name}.corrupt-*")
    return [p for p in found if not p.name.endswith(("-wal", "-shm", "-journal"))]


PAGE = 4096
DAMAGE = {
    "emptied": lambda p: _truncate(p, 0),
    "cut to 100 bytes": lambda p: _truncate(p, 100),
    "cut mid-file": lambda p: _truncate(p, p.stat().st_size * 6 // 10 + 123),
    "garbled header": lambda p: _garble(p, 0, 100),
    "garbled pages": lambda p: _garble(p, p.stat().st_size // 2 // PAGE * PAGE, 3 * PAGE),
}


@pytest.mark.parametrize("damage", sorted(DAMAGE))
async def test_a_damaged_checkpoint_is_moved_aside_and_the_cluster_starts_cold(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, damage: str
) -> None:
    lags = {f"group-{i:03d}": 80 * (i % 2) for i in range(200)}
    coord, _ = service(tmp_path, [_lag_scan(i, lags) for i in range(3)], _lag_rules(),
                       interval_s=INTERVAL_S)  # fmt: skip
    await drive(coord, 3)
    coord.save_checkpoints()
    path = coord.checkpoint_path("c")
    assert path.stat().st_size > 5 * PAGE
    DAMAGE[damage](path)

    caplog.set_level(logging.INFO, logger="notifier.service")
    again, sink = service(tmp_path, [_lag_scan(i, lags) for i in range(3, 6)], _lag_rules(),
                          interval_s=INTERVAL_S)  # fmt: skip
    await _started_and_stopped(again)  # starts, scans, stops: no crash

    (line,) = [r for r in caplog.records if getattr(r, "event", "") == "checkpoint_unreadable"]
    assert line.levelno == logging.ERROR
    message = line.getMessage()
    assert str(path) in message and "Starting cold" in message and "last saved at" in message
    (aside,) = _moved_aside(path)
    assert line.moved_to == str(aside)
    assert again.clusters["c"].metrics.scans >= 1
    # Cold: the open statuses were lost with the file, so the lagging groups fire again
    # (the notifier's incidents would have kept them: see the test above).
    assert len(sink.transitions) == 100
    # The checkpoint written at the stop is whole again.
    caplog.clear()
    third, _ = service(tmp_path, [_lag_scan(6, lags)] * 3, _lag_rules(), interval_s=INTERVAL_S)
    await _started_and_stopped(third)
    assert not [r for r in caplog.records if getattr(r, "event", "") == "checkpoint_unreadable"]
    assert any(getattr(r, "warm_restart", False) for r in caplog.records)


@pytest.mark.broker
@pytest.mark.parametrize("damage", sorted(DAMAGE))
async def test_a_damaged_notification_store_is_moved_aside_and_what_can_be_read_is_sent(
    tmp_path: Path, http: HttpReceiver, damage: str
) -> None:
    db = tmp_path / "data" / "notify.sqlite"
    store = NotifyStore(db)
    notifications = [
        dataclasses.replace(full_notification(), id=f"before-{i:03d}") for i in range(300)
    ]
    store.save(outbox=[OutboxEntry(n, "oncall/webhook", "lane") for n in notifications])
    store.close()
    assert db.stat().st_size > 20 * PAGE
    DAMAGE[damage](db)

    config = _service_config(
        tmp_path, "127.0.0.1:1", "none-", free_port(), http.url_for("/hook"),
        history={"enabled": False},
    )  # fmt: skip
    service = ServiceProcess(config, tmp_path / "service.log")
    await service.start()
    try:
        line = await service.wait_for("notify_store_damaged", 20)
        assert line is not None, service.log_path.read_text()
        assert line["level"] == "error" and "last written at" in line["msg"]
        kept = line["pending"]
        assert await service.wait_for("cluster_starting", 20) is not None  # started all the same
        before = {n.id for n in notifications}

        def sent() -> set[str]:
            return {r.json["notification_id"] for r in http.to("/hook")} & before

        deadline = time.monotonic() + 20
        while len(sent()) < kept and time.monotonic() < deadline:
            await asyncio.sleep(0.05)
        assert len(sent()) == kept  # every readable pending row is delivered
        assert service.process is not None and service.process.returncode is None
    finally:
        assert await service.terminate() == 0
    (aside,) = _moved_aside(db)
    assert line["moved_to"] == str(aside)
    if damage in ("cut mid-file", "garbled pages"):
        assert 0 < kept < 300, line["msg"]  # the pages before (and after) the damage are kept
    if damage == "garbled header":
        # Only the header is lost: rebuilt from the pages, every row is read.
        assert kept == 300 and "header was rebuilt" in line["msg"], line["msg"]
    # The new store is whole: the next start says nothing about damage.
    await service.start()
    try:
        assert await service.wait_for("cluster_starting", 20) is not None
        assert service.seen("notify_store_damaged") == []
    finally:
        assert await service.terminate() == 0


# --------------------------------------------------------------------------------------------
# A history that cannot be written


def _mount_tmpfs(where: Path, size: str) -> None:
    where.mkdir(parents=True, exist_ok=True)
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(where)],
                          capture_output=True, text=True, check=False)  # fmt: skip
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here ({done.stderr.strip()}): needs root")


def _fill(where: Path) -> Path:
    filler = where / "filler"
    with filler.open("wb", buffering=0) as handle, contextlib.suppress(OSError):
        while True:
            handle.write(b"\0" * 4096)
    return filler


def _break_history(kind: str, history: Path) -> Callable[[], None]:
    """Make ``history`` unwritable the way ``kind`` says; returns how to repair it."""
    if kind == "disk full":
        _mount_tmpfs(history, "256k")
        filler = _fill(history)
        return filler.unlink
    if kind == "read-only":
        _mount_tmpfs(history, "1m")
        subprocess.run(["mount", "-o", "remount,ro", str(history)], check=True)
        return lambda: subprocess.run(["mount", "-o", "remount,rw", str(history)], check=True)
    history.parent.mkdir(parents=True, exist_ok=True)
    history.write_text("not a directory")
    return history.unlink


HISTORY_FAULTS = {
    "disk full": ("No space left on device",),
    "read-only": ("Read-only file system",),
    "not a directory": ("Not a directory", "File exists"),  # open() or mkdir() says it
}


@pytest.mark.broker
@pytest.mark.parametrize("kind", sorted(HISTORY_FAULTS))
async def test_a_history_that_cannot_be_written_is_loud_and_nothing_else_stops(
    kafka_broker: EmbeddedBroker, http: HttpReceiver, tmp_path: Path,
    caplog: pytest.LogCaptureFixture, kind: str,
) -> None:  # fmt: skip
    """Real OS errors, not mocks: tests run as root, where permissions stop no write, so a
    full disk is a small tmpfs filled up, a read-only one a tmpfs remounted read-only (both
    skipped where mounting is not allowed), and "not a directory" a file where the history
    directory should be (possible anywhere)."""
    bootstrap = kafka_broker.bootstrap_servers
    prefix = f"hist-{uuid.uuid4().hex[:6]}"
    topic, group = f"{prefix}-t", f"{prefix}-late"
    await _produce(bootstrap, topic, [RECORDS])
    history = tmp_path / "data" / "history"
    try:
        repair = _break_history(kind, history)
        config = parse_service_config(
            {"clusters": [{"name": CLUSTER, "bootstrap_servers": bootstrap,
                           "scan_interval": 0.5, "group_allow": [f"^{prefix}"]}],
             "data_dir": str(tmp_path / "data"), "checkpoint_interval": 3600,
             "history": {"roll_interval": 1}},
            "test",
        )  # fmt: skip
        notifier = Notifier(notify_config(webhook(http.url_for("/hook"))), tmp_path / "n.sqlite")
        coord = Coordinator(config, _lag_rules(), tmp_path / "data", notifier)
        app = create_app(coord, notifier, clock=_now_ms)
        api = httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://t")
        caplog.set_level(logging.INFO)
        await notifier.start()
        await coord.start()
        try:
            groups = Groups(bootstrap, topic, [group])
            await groups.start()
            await groups.set(group, "ERR")
            await groups.stop()
            state = coord.clusters[CLUSTER]
            await until_true(lambda: len(http.to("/hook")) >= 1 and state.metrics.scans >= 8, 20)

            # Notifying and scanning went on; the failure was said once, counted, and shown.
            assert http.to("/hook")[0].json["alerts"][0]["event"] == "open"
            failed = [
                r for r in caplog.records if getattr(r, "event", "") == "history_write_failed"
            ]
            assert len(failed) == 1 and failed[0].levelno == logging.ERROR
            assert any(e in failed[0].getMessage() for e in HISTORY_FAULTS[kind])
            metrics = (await api.get("/metrics")).text
            assert "notifier_history_writing 0.0" in metrics
            errors = _metric(metrics, "notifier_history_write_errors_total")
            assert errors >= 2  # every attempt counts, one line is logged
            ready = await api.get("/readyz")
            assert ready.status_code == 200  # the clusters are watched: still ready
            detail = ready.json()["history"]
            assert detail["writing"] is False
            assert any(e in detail["error"] for e in HISTORY_FAULTS[kind])
            assert detail["queued_rows"] > 0

            repair()
            history_writer = coord.history
            assert history_writer is not None
            await until_true(lambda: not history_writer.failing, 15)
            recovered = [
                r for r in caplog.records if getattr(r, "event", "") == "history_write_recovered"
            ]
            assert len(recovered) == 1
            assert "notifier_history_writing 1.0" in (await api.get("/metrics")).text
            assert (await api.get("/readyz")).json()["history"]["writing"] is True
        finally:
            await coord.stop()
            await notifier.stop()
            await api.aclose()
        # What was queued while it failed is in the history now.
        written = read_history(history, groups=f"^{group}$")
        assert written.num_rows >= 8
    finally:
        if history.is_mount():
            subprocess.run(["umount", "-l", str(history)], check=False)


def _metric(text: str, name: str) -> float:
    return next(
        float(line.split()[-1]) for line in text.splitlines() if line.startswith(name + " ")
    )
