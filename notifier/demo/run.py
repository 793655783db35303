"""``notifier demo``: the whole service against real consumer groups on an embedded broker.

A new user should see, in about two minutes and without a Kafka cluster, what the service is
for: consumer groups misbehaving in the ways docs/architecture.md describes and the service
noticing each one. So :func:`run_demo` starts the embedded Tansu broker
(:mod:`notifier.embedded.broker`), creates one topic per scenario, runs the scenarios' real
aiokafka producers and consumer groups with scripted behaviours
(:mod:`notifier.demo.scenarios`), and runs the real service
(:class:`notifier.service.coordinator.Coordinator`: collector, window store, rules, gate,
transitions, checkpoints, history; the status page; notifications) against them, watching what
it reports (:mod:`notifier.demo.watch`). A timed run ends as soon as every story is told;
:func:`main` then prints the summary (:mod:`notifier.demo.report`).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import re
import signal
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from notifier.api import ApiServer, create_app
from notifier.config import ServiceConfig, parse_service_config
from notifier.demo.kafka import create_topics
from notifier.demo.receivers import HttpReceiver, SmtpReceiver
from notifier.demo.receiving import Received, local_notify_config, received_events
from notifier.demo.report import DemoReport, print_banner, print_summary, scenario_outcome
from notifier.demo.scenarios import SCENARIOS
from notifier.demo.settings import CLUSTER, DemoSettings, default_rules_path, demo_rules
from notifier.demo.story import ScenarioRun, ScriptEnv
from notifier.demo.watch import DemoSink, watch_detections
from notifier.embedded import EmbeddedBroker
from notifier.embedded.apache_kafka import ApacheKafkaBroker
from notifier.notify import Notifier
from notifier.notify.config import parse_notify
from notifier.service import Coordinator

# The CLI imports this module and reaches DemoSettings and main through it.
__all__ = ["DemoSettings", "main", "run_demo"]

log = logging.getLogger(__name__)


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

    broker: EmbeddedBroker | ApacheKafkaBroker | None = None
    if bootstrap is not None:
        broker_label = f"Kafka broker at {bootstrap}"
    elif settings.kafka is not None:
        broker = apache_kafka_broker(settings.kafka, data_dir / "kafka")
        out(f"starting Apache Kafka {broker.version} (jars in {broker.jars})")
        await broker.astart()
        bootstrap = broker.bootstrap_servers
        broker_label = f"Apache Kafka {broker.version} at {bootstrap}"
    else:
        broker = EmbeddedBroker(port=settings.port, log_dir=data_dir / "broker")
        await broker.astart()
        bootstrap = broker.bootstrap_servers
        broker_label = f"embedded Kafka-protocol broker (Tansu) at {bootstrap}"
    env = ScriptEnv(bootstrap, settings, out)
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
            f"{settings.prefix}-{name}": ScenarioRun(
                SCENARIOS[name], f"{settings.prefix}-{name}", f"{settings.prefix}-{name}", 0.0
            )
            for name in names
        }
        await create_topics(bootstrap, [run.topic for run in runs.values()])
        service = _service_config(settings, bootstrap, data_dir)
        sink = DemoSink(transitions_path, env, runs, notifier)
        coordinator = Coordinator(service, rules, data_dir, sink)
        # As `notifier run` does it: the API first, then the scans.
        api = ApiServer(create_app(coordinator, notifier), service.api.host, service.api.port)
        await api.start()
        await coordinator.start()
        print_banner(
            out, settings, broker_label, data_dir, f"http://{service.api.host}:{api.port}/", runs
        )

        env.started = time.time()
        start = time.monotonic()
        for run in runs.values():
            order = run.scenario.order
            run.misbehave_at = start + settings.misbehave_offset + order * settings.stagger_s
            tasks.append(asyncio.create_task(_guard(env, run), name=run.group))
        tasks.append(
            asyncio.create_task(watch_detections(coordinator, runs, settings.scan_interval / 8))
        )

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
        outcomes=[scenario_outcome(run) for run in runs.values()],
        transitions=sink.transitions,
        data_dir=data_dir,
        bootstrap_servers=bootstrap,
        interrupted=interrupted,
        received=received,
    )


def apache_kafka_broker(kafka: str, data_dir: Path) -> ApacheKafkaBroker:
    """``--kafka``: a folder of Kafka jars (a Kafka download's ``libs/``, or the download
    itself), or a version resolved from Maven Central into the cache on first use."""
    path = Path(kafka).expanduser()
    if path.is_dir():
        jars = path / "libs" if (path / "libs").is_dir() else path
        found = sorted(jars.glob("kafka_2.13-*.jar")) or sorted(jars.glob("kafka_*.jar"))
        if not found:
            raise ValueError(f"--kafka {kafka}: no kafka_2.13-<version>.jar in {jars}")
        version = found[0].name.removeprefix("kafka_2.13-").removesuffix(".jar")
        return ApacheKafkaBroker(version, jars=jars, data_dir=data_dir)
    if path.exists() or "/" in kafka:
        raise ValueError(f"--kafka {kafka}: not a folder of Kafka jars, nor a version like 4.4.0")
    return ApacheKafkaBroker(kafka, data_dir=data_dir)


async def _all_finished(runs: dict[str, ScenarioRun], scan_interval: float) -> None:
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


async def _guard(env: ScriptEnv, run: ScenarioRun) -> None:
    """Run a script; a script that breaks is reported in the summary, not a crash."""
    try:
        await run.scenario.script(env, run)
    except asyncio.CancelledError:
        raise
    except Exception as exc:
        log.exception("scenario %s failed", run.scenario.name)
        run.failure = f"script failed: {exc!r}"[:120]
        env.out(f"{env.stamp()} {run.scenario.name}: {run.failure}")


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
    print_summary(out, report)
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
