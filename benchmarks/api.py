"""Benchmark: the API under load while the service scans, beside the same scans unloaded.

The service runs as ``notifier run`` runs it (the coordinator and its scheduler, the notifier,
the FastAPI app served by uvicorn in the same event loop) against the embedded Kafka-protocol
broker holding the fleet ``benchmarks/scan.py`` builds: 1,000 groups and 50,000
group-partitions with ``--full``, scanned every ``--interval`` seconds. A cycle is one scan of
the cluster and everything downstream of it (what the service records as the scan's duration
plus its evaluation).

Phases, in turn (unloaded, loaded, unloaded, loaded, unloaded; a machine that gets busier or
quieter during the run weighs on both alike): cycles *unloaded* (the baseline), and cycles
while 200 clients hammer Burrow's ``/v3/kafka/...`` endpoints and the status page (the page,
its script, ``/api/groups``, group pages). The 200 clients are one ``httpx.AsyncClient`` each,
sending the next request as soon as the last is answered, in a process of their own at lower
CPU priority (``nice`` 19: clients are elsewhere in production, and here they would otherwise
take the broker's CPU). Their own latency is mostly waiting for their turn among 200 (Little's
law: 200 / throughput), so the API latency is measured by a probe beside them: one client in a
third process sending the same mix every 20 ms. Requests, by weight: a group's ``/status`` 25
and ``/lag`` 15, its detail 5, the consumer list 5, a topic 5, the cluster list and cluster
2.5 each; ``/api/groups`` 20, a group page's data 5, the page 10, its script 5.

    python benchmarks/api.py           # 100 groups, 2,000 group-partitions (about a minute)
    python benchmarks/api.py --full    # 1,000 groups, 50,000 group-partitions (about 2 min)

Target (the issue's): cycles under load within 10% of the unloaded ones (medians). The API's
latency is printed, per kind of request, without a target: with 200 clients sending without
pause, a request waits its turn behind the others (by Little's law, about 200 / throughput),
and during a scan the API gives way to it by design (:mod:`notifier.api.priority`).
Ends with one JSON line: name, figures, baseline (the unloaded cycles), targets and whether
each is met.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import random
import statistics
import sys
import tempfile
import time
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import httpx  # noqa: E402

from notifier.api import ApiServer, create_app  # noqa: E402
from notifier.config import parse_service_config  # noqa: E402
from notifier.embedded import EmbeddedBroker  # noqa: E402
from notifier.notify import Notifier  # noqa: E402
from notifier.notify.config import parse_notify  # noqa: E402
from notifier.rules import load_rules  # noqa: E402
from notifier.service import Coordinator  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
from scan import Layout, populate  # noqa: E402

TARGET_SLIP = 0.10
CLUSTER = "bench"
PROBE_EVERY_S = 0.02

# (weight, kind, path template): {g} a group, {t} a topic
MIX: list[tuple[float, str, str]] = [
    (25, "burrow status", "/v3/kafka/{c}/consumer/{g}/status"),
    (15, "burrow lag", "/v3/kafka/{c}/consumer/{g}/lag"),
    (5, "burrow consumer", "/v3/kafka/{c}/consumer/{g}"),
    (5, "burrow consumers", "/v3/kafka/{c}/consumer"),
    (5, "burrow topic", "/v3/kafka/{c}/topic/{t}"),
    (2.5, "burrow clusters", "/v3/kafka"),
    (2.5, "burrow cluster", "/v3/kafka/{c}"),
    (20, "api groups", "/api/groups"),
    (5, "api group", "/api/groups/{c}/{g}"),
    (10, "status page", "/"),
    (5, "status page script", "/static/app.js"),
]


def percentile(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q / 100 * (len(ordered) - 1))))]


# --------------------------------------------------------------------------------------------
# The clients (their own process, started as `api.py --clients ...`)


def latency_figures(latencies: dict[str, list[float]]) -> dict[str, Any]:
    every = [v for values in latencies.values() for v in values]
    return {
        "requests": len(every),
        "p50_ms": round(percentile(every, 50) * 1000, 1),
        "p99_ms": round(percentile(every, 99) * 1000, 1),
        "max_ms": round(max(every, default=float("nan")) * 1000, 1),
        "by_kind": {
            kind: {
                "requests": len(values),
                "p50_ms": round(percentile(values, 50) * 1000, 1),
                "p99_ms": round(percentile(values, 99) * 1000, 1),
            }
            for kind, values in sorted(latencies.items())
        },
    }


async def send_requests(url: str, clients: int, layout: Layout, probe: bool) -> None:
    """``clients`` clients, each sending the next request when the last is answered (the
    probe: one client, a request every 20 ms). Reads commands on stdin: ``go`` sends and
    counts, ``pause`` holds the clients, ``stop`` ends and prints the figures as one JSON
    line."""
    weights = [w for w, _k, _p in MIX]
    recording = False
    latencies: dict[str, list[float]] = defaultdict(list)
    statuses: Counter[str] = Counter()
    errors: Counter[str] = Counter()
    stop = asyncio.Event()
    going = asyncio.Event()
    seconds = 0.0
    went = 0.0

    async def client(index: int) -> None:
        rng = random.Random(index + (1000 if probe else 0))
        limits = httpx.Limits(max_connections=1, max_keepalive_connections=1)
        async with httpx.AsyncClient(base_url=url, timeout=60, limits=limits) as http:
            while not stop.is_set():
                await going.wait()
                _w, kind, template = rng.choices(MIX, weights)[0]
                group = layout.group(rng.randrange(layout.groups))
                topic = layout.topic(rng.randrange(layout.topics))
                path = template.format(c=CLUSTER, g=group, t=topic)
                started = time.perf_counter()
                try:
                    response = await http.get(path)
                except httpx.HTTPError as exc:
                    if recording:
                        errors[f"{kind}: {type(exc).__name__}"] += 1
                    continue
                if recording:
                    latencies[kind].append(time.perf_counter() - started)
                    statuses[str(response.status_code)] += 1
                if probe:
                    await asyncio.sleep(max(0.0, started + PROBE_EVERY_S - time.perf_counter()))

    tasks = [asyncio.create_task(client(i)) for i in range(clients)]
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader()
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)
    print("ready", flush=True)
    while command := (await reader.readline()).decode().strip():
        if command == "go":
            recording = True
            went = time.perf_counter()
            going.set()
        elif command in ("pause", "stop") and recording:
            recording = False
            going.clear()
            seconds += time.perf_counter() - went
        if command == "stop":
            break
    stop.set()
    going.set()
    await asyncio.gather(*tasks, return_exceptions=True)
    figures = latency_figures(latencies)
    figures.update(
        seconds=round(seconds, 1),
        requests_per_s=round(figures["requests"] / seconds) if seconds else None,
        statuses=dict(statuses),
        errors=dict(errors),
    )
    print(json.dumps(figures), flush=True)


# --------------------------------------------------------------------------------------------
# The service


async def cycles_of(coordinator: Coordinator, count: int) -> list[float]:
    """The next ``count`` cycles the scheduler runs: each one's scan and evaluation, in
    seconds, as the service records them."""
    metrics = coordinator.clusters[CLUSTER].metrics
    seconds: list[float] = []
    seen = metrics.scans
    while len(seconds) < count:
        await asyncio.sleep(0.01)
        if metrics.failures:
            raise RuntimeError(f"{metrics.failures} scans failed: {metrics.last_error}")
        if metrics.scans != seen:
            seen = metrics.scans
            seconds.append(metrics.last_duration_s + metrics.last_evaluate_s)
    return seconds


def summary(seconds: list[float]) -> dict[str, float]:
    return {
        "median_s": round(statistics.median(seconds), 3),
        "p90_s": round(percentile(seconds, 90), 3),
        "max_s": round(max(seconds), 3),
    }


async def run(layout: Layout, cycles: int, clients: int, interval: float) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="notifier-api-bench-") as tmp:
        broker = EmbeddedBroker(log_dir=Path(tmp) / "broker")
        await broker.astart()
        try:
            started = time.perf_counter()
            await populate(broker.bootstrap_servers, layout)
            print(
                f"set up {layout.groups:,} groups, {layout.group_partitions:,} group-partitions "
                f"in {time.perf_counter() - started:.1f} s; scanned every {interval:g} s",
                flush=True,
            )
            return await measure(
                broker.bootstrap_servers, layout, cycles, clients, interval, Path(tmp)
            )
        finally:
            await broker.astop()


async def start_clients(
    url: str, clients: int, layout: Layout, probe: bool
) -> asyncio.subprocess.Process:
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        __file__,
        "--clients",
        str(clients),
        "--url",
        url,
        *(["--probe"] if probe else []),
        *(["--full"] if layout.groups >= 1000 else []),
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
    )
    assert process.stdout is not None
    if (await process.stdout.readline()).strip() != b"ready":
        raise RuntimeError("the clients did not start")
    return process


async def tell(process: asyncio.subprocess.Process, command: str) -> None:
    assert process.stdin is not None
    process.stdin.write(command.encode() + b"\n")
    await process.stdin.drain()


async def measure(
    bootstrap: str, layout: Layout, cycles: int, clients: int, interval: float, tmp: Path
) -> dict[str, Any]:
    config = parse_service_config(
        {
            "clusters": [
                {
                    "name": CLUSTER,
                    "bootstrap_servers": bootstrap,
                    "scan_interval": interval,
                    "request_timeout": 30,
                    "scan_timeout": 120,
                    "group_allow": ["^bench-"],
                }
            ],
            "history": {"enabled": False},
            "api": {"host": "127.0.0.1", "port": 0},
        },
        "benchmark",
    )
    notify = parse_notify(
        {
            "receivers": {"ops": {"webhook": {"url": "http://127.0.0.1:9/hook"}}},
            "route": {"receiver": "ops"},
        },
        "benchmark",
    )
    notifier = Notifier(notify, tmp / "notify.sqlite")
    coordinator = Coordinator(config, load_rules(ROOT / "rules.yaml"), tmp / "data", notifier)
    server = ApiServer(create_app(coordinator, notifier), "127.0.0.1", 0)
    processes: list[asyncio.subprocess.Process] = []
    await notifier.start()
    await server.start()
    await coordinator.start()
    phases: list[tuple[str, list[float]]] = []
    try:
        await cycles_of(coordinator, 2)  # warm-up: metadata, batch sizes, store rows
        url = f"http://127.0.0.1:{server.port}"
        processes.append(await start_clients(url, clients, layout, probe=False))
        processes.append(await start_clients(url, 1, layout, probe=True))
        cpu_s = 0.0
        # Unloaded and loaded in turn, so that a machine getting busier or quieter during the
        # run weighs on both alike.
        for loaded in (False, True, False, True, False):
            if loaded:
                for process in processes:
                    await tell(process, "go")
                cpu_started = time.process_time()
            seconds = await cycles_of(coordinator, cycles)
            if loaded:
                cpu_s += time.process_time() - cpu_started
                for process in processes:
                    await tell(process, "pause")
            phases.append(("loaded" if loaded else "unloaded", seconds))
            print(f"{phases[-1][0]:<9} {cycles} cycles: {summary(seconds)}", flush=True)
        answers = []
        for process in processes:
            await tell(process, "stop")
            assert process.stdout is not None
            answers.append(json.loads(await process.stdout.readline()))
            await process.wait()
        processes.clear()
    finally:
        for process in processes:
            process.kill()
            await process.wait()
        await coordinator.stop()
        await server.stop()
        await notifier.stop()
    return {
        "unloaded": [x for kind, cycle in phases if kind == "unloaded" for x in cycle],
        "loaded": [x for kind, cycle in phases if kind == "loaded" for x in cycle],
        "phases": [(kind, summary(cycle)["median_s"]) for kind, cycle in phases],
        "hammer": answers[0],
        "probe": answers[1],
        "service_cpu_s": cpu_s,
    }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--full", action="store_true", help="1,000 groups, 50,000 group-partitions")
    parser.add_argument("--cycles", type=int, default=6, help="cycles per phase (default 6)")
    parser.add_argument("--clients", type=int, default=200, help="clients hammering the API")
    parser.add_argument("--interval", type=float, help="scan interval, s (1; 3 with --full)")
    parser.add_argument("--url", help=argparse.SUPPRESS)  # set: be a clients' process
    parser.add_argument("--probe", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    layout = Layout(1000, 50, 50) if args.full else Layout(100, 10, 20)
    if args.url:
        if not args.probe:
            os.nice(19)
        asyncio.run(send_requests(args.url, args.clients, layout, args.probe))
        return
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    logging.getLogger("aiokafka").setLevel(logging.CRITICAL)
    interval = args.interval or (3.0 if args.full else 1.0)
    figures = asyncio.run(run(layout, args.cycles, args.clients, interval))

    loaded = figures["loaded"]
    unloaded = statistics.median(figures["unloaded"])
    under_load = statistics.median(loaded)
    slip = under_load / unloaded - 1
    hammer, probe = figures["hammer"], figures["probe"]
    cpu_per_request_us = 1e6 * figures["service_cpu_s"] / max(1, hammer["requests"])
    print(
        f"cycle     unloaded {unloaded:.3f} s | with {args.clients} clients {under_load:.3f} s: "
        f"{slip:+.1%} (target within {TARGET_SLIP:.0%}; medians of {len(loaded)} cycles each, "
        f"phase by phase {' '.join(f'{m:.3f}' for _kind, m in figures['phases'])} s)"
    )
    print(
        f"clients   {hammer['requests']:,} requests in {hammer['seconds']} s "
        f"({hammer['requests_per_s']:,}/s; service CPU {cpu_per_request_us:.0f} us per request, "
        f"scans included): their p50 {hammer['p50_ms']} ms, p99 {hammer['p99_ms']} ms (200 in "
        f"turn); statuses {hammer['statuses']}, errors {hammer['errors'] or 'none'}"
    )
    print(
        f"probe     {probe['requests']:,} requests beside them: p50 {probe['p50_ms']} ms, "
        f"p99 {probe['p99_ms']} ms, max {probe['max_ms']} ms"
    )
    for kind, by_kind in probe["by_kind"].items():
        print(
            f"          {kind:<20} {by_kind['requests']:>6,} requests, p50 "
            f"{by_kind['p50_ms']} ms, p99 {by_kind['p99_ms']} ms"
        )
    targets = {"cycle_slip": TARGET_SLIP}
    met = {
        "cycle_slip": slip <= TARGET_SLIP,
        "no_errors": all(
            not c["errors"] and set(c["statuses"]) <= {"200"} for c in (hammer, probe)
        ),
        "at_full_size": args.full,
    }
    print(
        json.dumps(
            {
                "name": "api",
                "groups": layout.groups,
                "group_partitions": layout.group_partitions,
                "clients": args.clients,
                "scan_interval_s": interval,
                "cycles": len(loaded),
                "cycle_loaded_s": round(under_load, 3),
                "cycle_slip": round(slip, 3),
                "loaded": summary(loaded),
                "api_p50_ms": probe["p50_ms"],
                "api_p99_ms": probe["p99_ms"],
                "probe": probe,
                "clients_figures": {k: v for k, v in hammer.items() if k != "by_kind"},
                "service_cpu_us_per_request": round(cpu_per_request_us),
                "phases": figures["phases"],
                "baseline": {
                    "name": "the same service's cycles without API clients, in turn with loaded",
                    "cycle_s": round(unloaded, 3),
                    **summary(figures["unloaded"]),
                },
                "targets": targets,
                "met": met,
            }
        )
    )


if __name__ == "__main__":
    main()
