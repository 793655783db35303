"""Benchmark: the API under load while the service scans, beside the same scans unloaded.

The service is wired as ``notifier run`` wires it (the coordinator, the notifier with a
webhook receiver, the FastAPI app served by uvicorn in the same event loop) against the
embedded Kafka-protocol broker holding the fleet ``benchmarks/scan.py`` builds: 1,000 groups
and 50,000 group-partitions with ``--full``. Scans run back to back (``Coordinator.scan_once``,
what the scheduler runs every ``scan_interval``), so every cycle overlaps the load; a cycle is
one scan of the cluster and everything downstream of it.

Phases: cycles *unloaded* (the baseline), then the same number of cycles while 200 clients in
another process (one ``httpx.AsyncClient`` each, a request as soon as the last one is
answered) hammer Burrow's ``/v3/kafka/...`` endpoints and the status page (the page, its
script, ``/api/groups`` and group pages), then unloaded again (so a machine that got busier
during the run shows as drift, not as slip). Requests, by weight: a group's ``/status`` 25 and
``/lag`` 15, its detail 5, the consumer list 5, a topic 5, the cluster list and cluster 2.5
each; ``/api/groups`` 20, a group page's data 5, the page 10, its script 5.

    python benchmarks/api.py           # 100 groups, 2,000 group-partitions (about a minute)
    python benchmarks/api.py --full    # 1,000 groups, 50,000 group-partitions

Targets: cycles under load within 10% of the unloaded ones (medians), and API p99 <= 250 ms
over all requests (a person reading the status page or a script polling Burrow's endpoints
notices a quarter of a second; 200 clients without pause are far more than either sends).
Ends with one JSON line: name, figures, baseline (the unloaded cycles), targets and whether
each is met.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
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
from notifier.collect import EmbeddedBroker  # noqa: E402
from notifier.config import load_rules, parse_notify, parse_service_config  # noqa: E402
from notifier.notify import Notifier  # noqa: E402
from notifier.service import Coordinator, make_collector  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
from scan import Layout, populate  # noqa: E402

TARGET_SLIP = 0.10
TARGET_P99_MS = 250.0
CLUSTER = "bench"

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


async def hammer(url: str, clients: int, layout: Layout) -> None:
    """``clients`` clients, each sending the next request when the last is answered. Reads
    commands on stdin: ``record`` starts counting, ``stop`` ends and prints the figures."""
    weights = [w for w, _k, _p in MIX]
    recording = False
    latencies: dict[str, list[float]] = defaultdict(list)
    statuses: Counter[str] = Counter()
    errors: Counter[str] = Counter()
    stop = asyncio.Event()
    window: list[float] = []

    async def client(index: int) -> None:
        rng = random.Random(index)
        limits = httpx.Limits(max_connections=1, max_keepalive_connections=1)
        async with httpx.AsyncClient(base_url=url, timeout=60, limits=limits) as http:
            while not stop.is_set():
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

    tasks = [asyncio.create_task(client(i)) for i in range(clients)]
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader()
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)
    print("ready", flush=True)
    while command := (await reader.readline()).decode().strip():
        if command == "record":
            recording = True
            window.append(time.perf_counter())
        elif command == "stop":
            window.append(time.perf_counter())
            break
    stop.set()
    await asyncio.gather(*tasks, return_exceptions=True)
    seconds = window[-1] - window[0] if len(window) == 2 else float("nan")
    every = [v for values in latencies.values() for v in values]
    print(
        json.dumps(
            {
                "requests": len(every),
                "seconds": seconds,
                "requests_per_s": round(len(every) / seconds) if seconds else None,
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
                "statuses": dict(statuses),
                "errors": dict(errors),
            }
        ),
        flush=True,
    )


# --------------------------------------------------------------------------------------------
# The service


async def cycles_of(coordinator: Coordinator, count: int) -> list[float]:
    """``count`` back-to-back cycles (scan and everything downstream), in seconds each."""
    state = coordinator.clusters[CLUSTER]
    seconds = []
    for _ in range(count):
        state.retry_at = 0.0
        started = time.perf_counter()
        await coordinator.scan_once(CLUSTER)
        seconds.append(time.perf_counter() - started)
    if state.metrics.failures:
        raise RuntimeError(f"{state.metrics.failures} scans failed: {state.metrics.last_error}")
    return seconds


def summary(seconds: list[float]) -> dict[str, float]:
    return {
        "median_s": round(statistics.median(seconds), 3),
        "p90_s": round(percentile(seconds, 90), 3),
        "max_s": round(max(seconds), 3),
    }


async def run(layout: Layout, cycles: int, clients: int) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="notifier-api-bench-") as tmp:
        broker = EmbeddedBroker(log_dir=Path(tmp) / "broker")
        await broker.astart()
        try:
            started = time.perf_counter()
            await populate(broker.bootstrap_servers, layout)
            print(
                f"set up {layout.groups:,} groups, {layout.group_partitions:,} group-partitions "
                f"in {time.perf_counter() - started:.1f} s",
                flush=True,
            )
            return await measure(broker.bootstrap_servers, layout, cycles, clients, Path(tmp))
        finally:
            await broker.astop()


async def measure(
    bootstrap: str, layout: Layout, cycles: int, clients: int, tmp: Path
) -> dict[str, Any]:
    config = parse_service_config(
        {
            "clusters": [
                {
                    "name": CLUSTER,
                    "bootstrap_servers": bootstrap,
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
    state = coordinator.clusters[CLUSTER]
    state.collector = make_collector(state.config)
    server = ApiServer(create_app(coordinator, notifier), "127.0.0.1", 0)
    await notifier.start()
    await server.start()
    load: asyncio.subprocess.Process | None = None
    try:
        await cycles_of(coordinator, 2)  # warm-up: metadata, batch sizes, store rows
        before = await cycles_of(coordinator, cycles)
        print(f"unloaded  {cycles} cycles: {summary(before)}", flush=True)

        load = await asyncio.create_subprocess_exec(
            sys.executable,
            __file__,
            "--clients",
            str(clients),
            "--url",
            f"http://127.0.0.1:{server.port}",
            *(["--full"] if layout.groups >= 1000 else []),
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
        )
        assert load.stdin is not None and load.stdout is not None
        if (await load.stdout.readline()).strip() != b"ready":
            raise RuntimeError("the clients did not start")
        await cycles_of(coordinator, 1)  # the clients' connections and first requests
        load.stdin.write(b"record\n")
        await load.stdin.drain()
        loaded = await cycles_of(coordinator, cycles)
        load.stdin.write(b"stop\n")
        await load.stdin.drain()
        api = json.loads(await load.stdout.readline())
        await load.wait()
        load = None
        print(f"loaded    {cycles} cycles: {summary(loaded)}", flush=True)

        after = await cycles_of(coordinator, cycles)
        print(f"unloaded  {cycles} cycles again: {summary(after)}", flush=True)
    finally:
        if load is not None:
            load.kill()
            await load.wait()
        await server.stop()
        await notifier.stop()
        await state.collector.close()
    return {"before": before, "loaded": loaded, "after": after, "api": api}


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--full", action="store_true", help="1,000 groups, 50,000 group-partitions")
    parser.add_argument("--cycles", type=int, default=None, help="timed cycles per phase")
    parser.add_argument("--clients", type=int, default=200, help="concurrent API clients")
    parser.add_argument("--url", help=argparse.SUPPRESS)  # set: be the clients' process
    args = parser.parse_args()
    layout = Layout(1000, 50, 50) if args.full else Layout(100, 10, 20)
    if args.url:
        asyncio.run(hammer(args.url, args.clients, layout))
        return
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    logging.getLogger("aiokafka").setLevel(logging.CRITICAL)
    cycles = args.cycles or (10 if args.full else 20)
    figures = asyncio.run(run(layout, cycles, args.clients))

    before, loaded, after = figures["before"], figures["loaded"], figures["after"]
    unloaded = statistics.median(before + after)
    under_load = statistics.median(loaded)
    slip = under_load / unloaded - 1
    api = figures["api"]
    print(
        f"cycle     unloaded {unloaded:.3f} s (median of {len(before) + len(after)}: "
        f"{statistics.median(before):.3f} s before, {statistics.median(after):.3f} s after) | "
        f"with {args.clients} clients {under_load:.3f} s: {slip:+.1%} (target within "
        f"{TARGET_SLIP:.0%})"
    )
    print(
        f"api       {api['requests']:,} requests in {api['seconds']:.1f} s "
        f"({api['requests_per_s']:,}/s): p50 {api['p50_ms']} ms, p99 {api['p99_ms']} ms, max "
        f"{api['max_ms']} ms; statuses {api['statuses']}, errors {api['errors'] or 'none'}"
    )
    for kind, figures_ in api["by_kind"].items():
        print(
            f"          {kind:<20} {figures_['requests']:>7,} requests, p50 "
            f"{figures_['p50_ms']} ms, p99 {figures_['p99_ms']} ms"
        )
    targets = {"cycle_slip": TARGET_SLIP, "api_p99_ms": TARGET_P99_MS}
    met = {
        "cycle_slip": slip <= TARGET_SLIP,
        "api_p99_ms": api["p99_ms"] <= TARGET_P99_MS,
        "no_errors": not api["errors"] and set(api["statuses"]) <= {"200"},
        "at_full_size": args.full,
    }
    print(
        json.dumps(
            {
                "name": "api",
                "groups": layout.groups,
                "group_partitions": layout.group_partitions,
                "clients": args.clients,
                "cycles": len(loaded),
                "cycle_loaded_s": round(under_load, 3),
                "cycle_slip": round(slip, 3),
                "loaded": summary(loaded),
                "api": api,
                "baseline": {
                    "name": "the same cycles without API clients, before and after",
                    "cycle_s": round(unloaded, 3),
                    "before": summary(before),
                    "after": summary(after),
                },
                "targets": targets,
                "met": met,
            }
        )
    )


if __name__ == "__main__":
    main()
