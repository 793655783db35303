"""Burrow beside the service: Debian's ``burrow`` package (Burrow 1.2.1, the real one) watching
the same Apache Kafka broker, with the ZooKeeper it will not start without (Debian's
``zookeeper`` package), both on free loopback ports with their state in a temp directory.

Burrow reads the group commits from ``__consumer_offsets`` (sarama) and the log-end offsets
every ``offset-refresh`` seconds, and evaluates a group whenever its HTTP API is asked:
:meth:`BurrowBeside.status` is what a Burrow user's dashboard or alert would see at that moment.
Burrow 1.2's sarama speaks protocol versions that Kafka 4 removed (KIP-896), so it watches a
Kafka 3.9 broker (../shared/DOMAIN.md §7).
"""

from __future__ import annotations

import asyncio
import json
import shutil
import socket
import subprocess
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from notifier.demo import SCENARIOS, DemoReport, DemoSettings, run_demo
from notifier.netutil import free_port
from notifier.types import GroupStatus, Transition

BURROW = "/usr/bin/Burrow"
ZOOKEEPER_CLASSPATH = "/usr/share/java/*"
CLUSTER = "local"
POLL_S = 0.5
"""How often :func:`side_by_side` asks Burrow for every group's status."""
BURROW_ATTEMPTS = 3

STATUS_RANK = {"OK": 0, "NOTFOUND": 0, "WARN": 1, "ERR": 2, "STOP": 2, "STALL": 2, "REWIND": 2}
"""How bad each of Burrow's group and partition statuses is (its own order: OK < WARN < ERR)."""


def burrow_missing() -> str | None:
    """Why Burrow cannot run here (None: it can)."""
    if not Path(BURROW).exists():
        return "Burrow is not installed (Debian: apt-get install burrow)"
    if not list(Path("/usr/share/java").glob("zookeeper*.jar")):
        return "ZooKeeper is not installed (Debian: apt-get install zookeeper)"
    if shutil.which("java") is None:
        return "java is not installed"
    return None


def _wait_for_port(port: int, process: subprocess.Popen[bytes], what: str, log: Path) -> None:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"{what} exited with {process.returncode}: see {log}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1):
                return
        except OSError:
            time.sleep(0.1)
    raise TimeoutError(f"{what} did not listen on 127.0.0.1:{port} within 60 s: see {log}")


def _wait_until_zookeeper_serves(port: int, process: subprocess.Popen[bytes], log: Path) -> None:
    """ZooKeeper listens before it serves (Burrow then fails "could not connect"): ask it
    ``ruok`` until it answers ``imok``."""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"ZooKeeper exited with {process.returncode}: see {log}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1) as sock:
                sock.sendall(b"ruok")
                if sock.recv(4) == b"imok":
                    return
        except OSError:
            pass
        time.sleep(0.1)
    raise TimeoutError(f"ZooKeeper on 127.0.0.1:{port} did not answer ruok within 60 s: see {log}")


@dataclass(frozen=True)
class BurrowSettings:
    """Burrow's evaluation settings, set to match the service's where the two have a match."""

    intervals: int = 10
    """Offsets kept per partition (Burrow's ``[storage] intervals``; the service's window)."""
    offset_refresh: int = 10
    """Seconds between Burrow's reads of the log-end offsets (the service's scan interval)."""
    min_distance: int = 1
    """Seconds between two commits Burrow stores (its ``min-distance``)."""


class BurrowBeside:
    """``with BurrowBeside(bootstrap, directory) as burrow:`` then ``burrow.status(group)``."""

    def __init__(
        self, bootstrap: str, directory: Path, settings: BurrowSettings | None = None
    ) -> None:
        self.bootstrap = bootstrap
        self.directory = directory
        self.settings = settings or BurrowSettings()
        self.zookeeper_port = free_port()
        self.http_port = free_port()
        self._processes: list[subprocess.Popen[bytes]] = []

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.http_port}"

    def __enter__(self) -> BurrowBeside:
        try:
            self.start()
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def start(self) -> None:
        d = self.directory
        (d / "zookeeper").mkdir(parents=True, exist_ok=True)
        (d / "zk.cfg").write_text(
            f"dataDir={d / 'zookeeper'}\nclientPort={self.zookeeper_port}\n"
            "clientPortAddress=127.0.0.1\nadmin.enableServer=false\ntickTime=2000\n"
            "4lw.commands.whitelist=ruok\n"
        )
        zk_log = d / "zookeeper.log"
        zookeeper = self._spawn(
            ["java", "-Xmx128m", "-cp", ZOOKEEPER_CLASSPATH,
             "org.apache.zookeeper.server.ZooKeeperServerMain", str(d / "zk.cfg")],
            zk_log,
        )  # fmt: skip
        _wait_for_port(self.zookeeper_port, zookeeper, "ZooKeeper", zk_log)
        _wait_until_zookeeper_serves(self.zookeeper_port, zookeeper, zk_log)
        self._write_burrow_config()
        burrow_log = d / "burrow.log"
        # Burrow gives up at once when its first ZooKeeper request finds no session yet, which
        # a busy machine's ZooKeeper can take a few seconds to give even after "imok".
        for attempt in range(1, BURROW_ATTEMPTS + 1):
            burrow = self._spawn([BURROW, "--config-dir", str(d)], burrow_log)
            try:
                _wait_for_port(self.http_port, burrow, "Burrow", burrow_log)
                break
            except RuntimeError:
                if attempt == BURROW_ATTEMPTS or "could not connect" not in burrow_log.read_text():
                    raise
                time.sleep(attempt)
        deadline = time.monotonic() + 60
        while self._get("/v3/kafka").get("clusters") != [CLUSTER]:
            if time.monotonic() > deadline:
                raise TimeoutError(f"Burrow did not list cluster {CLUSTER!r}: see {burrow_log}")
            time.sleep(0.2)

    def _spawn(self, argv: list[str], log: Path) -> subprocess.Popen[bytes]:
        with log.open("ab") as out:
            process = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT)
        self._processes.append(process)
        return process

    def _write_burrow_config(self) -> None:
        s = self.settings
        servers = json.dumps(self.bootstrap.split(","))
        # kafka-version 2.0.0: the newest protocol Burrow 1.2's sarama knows that Kafka 3.9
        # still answers. The group lists are Burrow 1.2's names (whitelist/blacklist).
        (self.directory / "burrow.toml").write_text(f"""
[general]
pidfile="{self.directory / "burrow.pid"}"
[logging]
level="warn"
[zookeeper]
servers=["127.0.0.1:{self.zookeeper_port}"]
timeout=30
root-path="/burrow"
[client-profile.kafka]
client-id="burrow"
kafka-version="2.0.0"
[cluster.{CLUSTER}]
class-name="kafka"
servers={servers}
client-profile="kafka"
topic-refresh=5
offset-refresh={s.offset_refresh}
[consumer.{CLUSTER}]
class-name="kafka"
cluster="{CLUSTER}"
servers={servers}
client-profile="kafka"
start-latest=false
[httpserver.default]
address="127.0.0.1:{self.http_port}"
[storage.default]
class-name="inmemory"
workers=4
intervals={s.intervals}
expire-group=604800
min-distance={s.min_distance}
""")

    def stop(self) -> None:
        for process in reversed(self._processes):
            if process.poll() is None:
                process.terminate()
                try:
                    process.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    process.kill()
                    process.wait()
        self._processes.clear()

    def _get(self, path: str) -> dict[str, Any]:
        try:
            with urllib.request.urlopen(self.url + path, timeout=5) as response:
                body: dict[str, Any] = json.load(response)
                return body
        except urllib.error.HTTPError as exc:
            body = json.load(exc)
            return body

    def groups(self) -> list[str]:
        return list(self._get(f"/v3/kafka/{CLUSTER}/consumer").get("consumers") or [])

    def status(self, group: str) -> BurrowStatus:
        """The group's status as Burrow's ``/status`` endpoint reports it now."""
        body = self._get(f"/v3/kafka/{CLUSTER}/consumer/{group}/status")
        status = body.get("status") or {}
        partitions = [str(p.get("status")) for p in status.get("partitions") or []]
        return BurrowStatus(
            status=str(status.get("status") or "NOTFOUND"),
            complete=float(status.get("complete") or 0.0),
            partition_statuses=tuple(sorted(set(partitions) - {"OK"})),
            total_lag=int(status.get("totallag") or 0),
        )


@dataclass(frozen=True)
class BurrowStatus:
    status: str
    """The group's status: OK, WARN, ERR or NOTFOUND."""
    complete: float
    partition_statuses: tuple[str, ...]
    """The distinct non-OK partition statuses (WARN, STOP, STALL, REWIND), e.g. ``("STALL",)``."""
    total_lag: int

    @property
    def alerting(self) -> bool:
        return self.status in ("WARN", "ERR")

    @property
    def described(self) -> str:
        """``ERR (STALL)``, ``WARN``, ``OK``: as the demo's summary names a worst status."""
        if self.partition_statuses and self.alerting:
            return f"{self.status} ({', '.join(self.partition_statuses)})"
        return self.status

    @property
    def rank(self) -> int:
        return max(STATUS_RANK.get(s, 0) for s in (self.status, *self.partition_statuses))


@dataclass
class BurrowTimeline:
    """What Burrow's API said about one group, poll by poll."""

    polls: list[tuple[int, BurrowStatus]] = field(default_factory=list)

    def first(self, since_ms: int | None, wanted: set[str] | None = None) -> int | None:
        """Wall-clock ms of the first poll at or after ``since_ms`` that alerts (and names one
        of ``wanted`` when given)."""
        if since_ms is None:
            return None
        for at, status in self.polls:
            if at < since_ms or not status.alerting:
                continue
            if wanted is None or wanted & {status.status, *status.partition_statuses}:
                return at
        return None

    def alerts_before(self, until_ms: int | None) -> list[tuple[int, BurrowStatus]]:
        return [
            (at, s) for at, s in self.polls if s.alerting and (until_ms is None or at < until_ms)
        ]

    def worst(self) -> str:
        alerting = [s for _, s in self.polls if s.alerting]
        return max(alerting, key=lambda s: s.rank).described if alerting else "OK"


async def watch_burrow(
    burrow: BurrowBeside, groups: list[str], timelines: dict[str, BurrowTimeline]
) -> None:
    while True:
        for group in groups:
            status = await asyncio.to_thread(burrow.status, group)
            timelines[group].polls.append((int(time.time() * 1000), status))
        await asyncio.sleep(POLL_S)


def _seconds(at_ms: int | None, since_ms: int | None) -> float | None:
    if at_ms is None or since_ms is None:
        return None
    return round((at_ms - since_ms) / 1000, 1)


def _fmt(seconds: float | None) -> str:
    return "-" if seconds is None else f"{seconds:.1f}"


def compare(report: DemoReport, timelines: dict[str, BurrowTimeline]) -> list[dict[str, Any]]:
    """One row per scenario: each tool's first report, expected report, worst status and false
    alarms."""
    by_group: dict[str, list[Transition]] = {}
    for t in report.transitions:
        by_group.setdefault(t.group, []).append(t)
    rows = []
    for outcome in report.outcomes:
        scenario = SCENARIOS[outcome.name]
        since = outcome.misbehaving_since_ms
        alerts = [t for t in by_group.get(outcome.group, []) if t.current is not GroupStatus.OK]
        if scenario.wanted:
            first_alert = next((t.at for t in alerts if since is not None and t.at >= since), None)
            false_alarms = [t for t in alerts if since is None or t.at < since]
        else:
            first_alert, false_alarms = None, alerts
        burrow_wanted = {status for rule, status in scenario.wanted if rule == "burrow" and status}
        timeline = timelines[outcome.group]
        burrow_false = timeline.alerts_before(since if scenario.wanted else None)
        rows.append(
            {
                "scenario": outcome.name,
                "expected": outcome.expected,
                "notifier_first_s": _seconds(first_alert, since),
                "notifier_expected_s": outcome.seconds,
                "notifier_detected": outcome.detected,
                "notifier_worst": outcome.reached,
                "notifier_false_alarms": len(false_alarms),
                "burrow_first_s": _seconds(timeline.first(since), since)
                if scenario.wanted
                else None,
                "burrow_expected_s": _seconds(
                    timeline.first(outcome.detect_from_ms, burrow_wanted or None),
                    outcome.detect_from_ms,
                )
                if scenario.wanted
                else None,
                "burrow_expects": "/".join(sorted(burrow_wanted)) or "any non-OK",
                "burrow_worst": timeline.worst(),
                "burrow_false_alarms": len(burrow_false),
                "burrow_polls": len(timeline.polls),
            }
        )
    return rows


def format_table(rows: list[dict[str, Any]]) -> str:
    header = (
        "scenario",
        "notifier: first / expected (s)",
        "notifier worst",
        "Burrow: first / expected (s)",
        "Burrow worst",
        "false alarms n/B",
    )
    cells = [
        (
            r["scenario"],
            f"{_fmt(r['notifier_first_s'])} / {_fmt(r['notifier_expected_s'])}",
            r["notifier_worst"],
            f"{_fmt(r['burrow_first_s'])} / {_fmt(r['burrow_expected_s'])} ({r['burrow_expects']})",
            r["burrow_worst"],
            f"{r['notifier_false_alarms']}/{r['burrow_false_alarms']}",
        )
        for r in rows
    ]
    widths = [max(len(c[i]) for c in [header, *cells]) for i in range(len(header))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(header, widths)).rstrip()]
    lines.append("  ".join("-" * w for w in widths))
    lines += ["  ".join(c.ljust(w) for c, w in zip(row, widths)).rstrip() for row in cells]
    return "\n".join(lines)


def no_later_than_burrow(row: dict[str, Any], slack_s: float) -> bool:
    """Whether notifier reported a scenario no later than Burrow (give or take ``slack_s``, a
    scan interval): where Burrow has a status of its own for it, both are timed to that status;
    where it has none (a rebalance loop, retention loss), to each tool's first alert."""
    if row["burrow_expects"] == "any non-OK":
        ours, theirs = row["notifier_first_s"], row["burrow_first_s"]
    else:
        ours, theirs = row["notifier_expected_s"], row["burrow_expected_s"]
    if theirs is None:
        return True
    return ours is not None and bool(ours <= theirs + slack_s)


async def side_by_side(
    bootstrap: str, settings: DemoSettings, burrow_settings: BurrowSettings, work: Path
) -> tuple[DemoReport, list[dict[str, Any]]]:
    """Run the demo's stories on the broker at ``bootstrap`` with Burrow watching it too;
    the demo's report and :func:`compare`'s rows."""
    with BurrowBeside(bootstrap, work / "burrow", burrow_settings) as burrow:
        groups = [f"{settings.prefix}-{name}" for name in settings.scenarios or SCENARIOS]
        timelines = {group: BurrowTimeline() for group in groups}
        watcher = asyncio.create_task(watch_burrow(burrow, groups, timelines))
        try:
            report = await run_demo(settings, bootstrap=bootstrap, out=lambda line: None)
        finally:
            watcher.cancel()
            await asyncio.gather(watcher, return_exceptions=True)
    return report, compare(report, timelines)
