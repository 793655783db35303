"""Benchmark: transitions → outbox → webhook deliveries over a real loopback socket.

The Notifier runs as in the service (SQLite outbox in WAL mode, the flush timer, delivery
workers, httpx); the receiver is a minimal HTTP/1.1 server in a separate process, so it does
not share the notifier's event loop. Each transition opens one incident and, with
``group_by: [...]`` and ``group_wait: 0``, makes exactly one delivery; rate limits are off
for the webhook. Transitions are offered at ``--rate`` per second in 10 ms batches (as a
coordinator produces them); latency is from ``handle()`` to the receiver accepting the
request.

Phases, each with a fresh database: *burst* (all transitions at once: the pipeline's capacity
in deliveries/s); *paced* at the target rate (``--rate``, default 1,000/s: p50/p99 latency);
*light* at half the measured capacity (latency when not saturated); *failing*, paced, with
the receiver answering 30% of requests with 500 (retries with backoff; delivered must equal
planned, with no duplicates); *storm*, the same number of transitions grouped the default
way (``group_by: [cluster]``, ``group_wait`` 2 s): 1,000 groups in each of n/1,000 clusters
fail together, a cluster's transitions handed over at once as a scan would, 100 ms apart;
every cluster must become one message with all its alerts, delivered within ``group_wait`` +
1 s of its first transition. Baselines in the same run, with the bodies pre-built and nothing
stored: the naive way, a sequential ``httpx.AsyncClient`` POST loop, and the same client with 4
requests in flight.

    python benchmarks/notify.py            # 2,000 transitions per phase (well under a minute)
    python benchmarks/notify.py --full     # 10,000 (the issue's size)

Targets: >= 3,000 deliveries/s to a healthy local receiver, p99 <= 250 ms at 1,000/s, a storm
delivered within group_wait + 1 s.
Ends with one JSON line: name, figures, baseline, targets and whether each is met.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing
import random
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import httpx  # noqa: E402
import orjson  # noqa: E402

from notifier.notify import Notifier  # noqa: E402
from notifier.notify.channels.webhook import webhook_payload  # noqa: E402
from notifier.notify.config import parse_notify  # noqa: E402
from notifier.types import (  # noqa: E402
    Finding,
    GroupResult,
    GroupStatus,
    PartitionResult,
    PartitionStatus,
    Severity,
    Transition,
)

TARGET_DELIVERIES_PER_S = 3000
TARGET_P99_MS = 250.0
TARGET_RATE = 1000
STORM_GROUP_WAIT_S = 2.0
STORM_SLACK_S = 1.0
STORM_GROUPS_PER_CLUSTER = 1000

# --------------------------------------------------------------------------------------------
# The receiver (its own process)


class _Receiver:
    """Accepts webhook POSTs, failing a fraction with 500; records when each group arrived."""

    def __init__(self, seed: int) -> None:
        self.fail_rate = 0.0
        self.rng = random.Random(seed)
        self.accepted: list[tuple[str, str, float]] = []  # (notification id, group, monotonic)
        self.requests = 0

    async def serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        # As little work per request as HTTP/1.1 allows: on a shared machine the receiver's
        # CPU is taken from the notifier it measures.
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                method, target, _ = head[: head.index(b"\r\n")].decode("latin-1").split(" ", 2)
                at = head.lower().find(b"\r\ncontent-length:")
                length = int(head[at + 17 : head.index(b"\r\n", at + 2)]) if at >= 0 else 0
                body = await reader.readexactly(length) if length else b""
                status, payload = self.answer(method, target, body)
                writer.write(
                    f"HTTP/1.1 {status} X\r\nContent-Type: application/json\r\n"
                    f"Content-Length: {len(payload)}\r\n\r\n".encode()
                    + payload
                )
                await writer.drain()
        except (ConnectionError, asyncio.IncompleteReadError):
            pass
        finally:
            writer.close()

    def answer(self, method: str, target: str, body: bytes) -> tuple[int, bytes]:
        if target.startswith("/__stats"):
            data = {"requests": self.requests, "accepted": self.accepted}
            return 200, json.dumps(data).encode()
        if target.startswith("/__reset"):
            self.fail_rate = float(target.partition("fail=")[2] or 0)
            self.accepted, self.requests = [], 0
            return 200, b"{}"
        self.requests += 1
        if self.rng.random() < self.fail_rate:
            return 500, b'{"status": "unavailable"}'
        now = time.monotonic()
        data = orjson.loads(body)
        for alert in data["alerts"]:
            self.accepted.append((data["notification_id"], alert["incident"]["group"], now))
        return 200, b'{"status": "ok"}'


def _receiver_main(port_queue: Any, seed: int) -> None:
    async def run() -> None:
        receiver = _Receiver(seed)
        server = await asyncio.start_server(receiver.serve, "127.0.0.1", 0, backlog=1024)
        port_queue.put(server.sockets[0].getsockname()[1])
        async with server:
            await server.serve_forever()

    asyncio.run(run())


# --------------------------------------------------------------------------------------------
# Inputs


def transition(group: str, at: int, cluster: str = "prod") -> Transition:
    partitions = [
        PartitionResult(
            topic="orders",
            partition=p,
            status=PartitionStatus.STALL if p == 0 else PartitionStatus.OK,
            complete=1.0,
            burrow_complete=1.0,
            committed_offset=1_000 * p,
            log_end_offset=1_000 * p + (48_000 if p == 0 else 10),
            log_start_offset=0,
            current_lag=48_000 if p == 0 else 10,
            lag_seconds=2820.0 if p == 0 else 1.0,
            start=None,
            end=None,
        )
        for p in range(4)
    ]
    result = GroupResult(
        cluster=cluster,
        group=group,
        status=GroupStatus.ERR,
        complete=1.0,
        burrow_complete=1.0,
        partial=False,
        evaluated_at=at,
        partitions=partitions,
        findings=[
            Finding(
                rule="burrow",
                kind="stall",
                severity=Severity.ERR,
                status="STALL",
                topic="orders",
                partition=0,
                message="committed offset stopped moving while lag grew",
                evidence={"lag_start": 1200, "lag_end": 48_000},
            )
        ],
        total_lag=48_030,
        max_lag=partitions[0],
        max_lag_seconds=2820.0,
        group_state="Stable",
        members=3,
    )
    return Transition(cluster, group, GroupStatus.OK, GroupStatus.ERR, at, result)


def percentile(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    index = min(len(ordered) - 1, max(0, round(q / 100 * (len(ordered) - 1))))
    return ordered[index]


# --------------------------------------------------------------------------------------------
# Phases


async def run_notifier(
    url: str,
    n: int,
    rate: float | None,
    fail_rate: float,
    prefix: str,
    workdir: Path,
    concurrency: int = 4,
) -> dict[str, Any]:
    """Offer ``n`` transitions at ``rate`` per second in 10 ms batches (``None``: all in one
    batch) and measure until everything is delivered."""
    async with httpx.AsyncClient() as control:
        await control.post(f"{url}/__reset?fail={fail_rate}")
    config = parse_notify(
        {
            "receivers": {"bench": {"webhook": {"url": f"{url}/hook", "concurrency": concurrency}}},
            "route": {
                "receiver": "bench",
                "group_by": ["..."],
                "group_wait": 0,
                "group_interval": 0,
                "repeat_interval": "never",
            },
            "delivery": {"retry_initial": "20ms", "retry_max": "500ms"},
        },
        "benchmark",
    )
    notifier = Notifier(config, workdir / f"{prefix}.sqlite")
    await notifier.start()
    handled: dict[str, float] = {}
    batch = n if rate is None else max(1, round(rate / 100))  # one batch every 10 ms
    start = time.monotonic()
    for first in range(0, n, batch):
        if rate is not None:
            delay = start + first / rate - time.monotonic()
            if delay > 0:
                await asyncio.sleep(delay)
        at = int(time.time() * 1000)
        moves = [transition(f"{prefix}-{i:05d}", at) for i in range(first, min(n, first + batch))]
        now = time.monotonic()
        for move in moves:
            handled[move.group] = now
        notifier.handle(moves)
    delivered_all = await notifier.wait_delivered(timeout=600)
    planned = notifier.core.counters.notifications
    counts = notifier.store.outbox_counts()
    metrics = notifier.metrics()
    await notifier.stop()

    async with httpx.AsyncClient() as control:
        stats = (await control.get(f"{url}/__stats")).json()
    accepted = stats["accepted"]
    arrival: dict[str, float] = {}
    for _nid, group, at_s in accepted:
        arrival.setdefault(group, at_s)
    latencies = [(arrival[g] - handled[g]) * 1000 for g in handled if g in arrival]
    ids = [nid for nid, _g, _t in accepted]
    last = max(arrival.values()) if arrival else start
    return {
        "transitions": n,
        "offered_rate": rate,
        "planned": planned,
        "delivered": len(set(ids)),
        "duplicates": len(ids) - len(set(ids)),
        "requests": stats["requests"],
        "retried": sum(metrics["retried"].values()),
        "failed": sum(metrics["failed"].values()),
        "outbox": counts,
        "all_delivered": delivered_all and len(set(ids)) == planned == n,
        "deliveries_per_s": round(len(set(ids)) / max(1e-9, last - start)),
        "p50_ms": round(percentile(latencies, 50), 1),
        "p99_ms": round(percentile(latencies, 99), 1),
    }


async def run_storm(url: str, n: int, workdir: Path) -> dict[str, Any]:
    """``n`` groups fail at once across ``n / 1,000`` clusters, routed the default way
    (``group_by: [cluster]``): each cluster must become one message carrying all its alerts,
    delivered within ``group_wait`` + 1 s of its first transition."""
    async with httpx.AsyncClient() as control:
        await control.post(f"{url}/__reset?fail=0")
    config = parse_notify(
        {
            "receivers": {"bench": {"webhook": {"url": f"{url}/hook"}}},
            "route": {
                "receiver": "bench",
                "group_by": ["cluster"],
                "group_wait": f"{STORM_GROUP_WAIT_S:g}s",
                "group_interval": "5m",
                "repeat_interval": "never",
            },
        },
        "benchmark",
    )
    clusters = max(1, n // STORM_GROUPS_PER_CLUSTER)
    notifier = Notifier(config, workdir / "storm.sqlite")
    await notifier.start()
    handled: dict[str, float] = {}
    start = time.monotonic()
    for c in range(clusters):
        if c:
            await asyncio.sleep(0.1)  # the next cluster's scan
        cluster = f"cluster-{c:02d}"
        at = int(time.time() * 1000)
        size = n // clusters + (1 if c < n % clusters else 0)
        moves = [transition(f"storm-{c:02d}-{i:05d}", at, cluster) for i in range(size)]
        now = time.monotonic()
        for move in moves:
            handled[move.group] = now
        notifier.handle(moves)
    deadline = start + STORM_GROUP_WAIT_S + 120
    while notifier.core.counters.alerts < n and time.monotonic() < deadline:
        await asyncio.sleep(0.02)
    delivered_all = await notifier.wait_delivered(timeout=max(1.0, deadline - time.monotonic()))
    messages_planned = notifier.core.counters.notifications
    await notifier.stop()

    async with httpx.AsyncClient() as control:
        stats = (await control.get(f"{url}/__stats")).json()
    accepted = stats["accepted"]
    arrival = {group: at_s for _nid, group, at_s in accepted}
    delays = [arrival[g] - handled[g] for g in handled if g in arrival]
    messages = len({nid for nid, _g, _t in accepted})
    worst = max(delays, default=float("nan"))
    return {
        "transitions": n,
        "clusters": clusters,
        "group_wait_s": STORM_GROUP_WAIT_S,
        "messages": messages,
        "messages_planned": messages_planned,
        "alerts_delivered": len({g for _nid, g, _t in accepted}),
        "duplicates": len(accepted) - len(arrival),
        "all_delivered": delivered_all and len(arrival) == n,
        "max_delay_s": round(worst, 3),
        "max_over_group_wait_s": round(worst - STORM_GROUP_WAIT_S, 3),
    }


def sample_bodies(n: int) -> list[bytes]:
    """The webhook bodies the notifier would send for ``n`` transitions (for the baselines)."""
    from notifier.notify import Dispatcher

    core = Dispatcher.from_config(
        parse_notify(
            {
                "receivers": {"b": {"webhook": {"url": "http://127.0.0.1:9/"}}},
                "route": {"receiver": "b", "group_by": ["..."], "group_wait": 0},
            }
        )
    )
    at = int(time.time() * 1000)
    core.handle([transition(f"base-{i:05d}", at) for i in range(n)], at)
    return [json.dumps(webhook_payload(n_)).encode() for n_ in core.tick(at)]


async def run_baseline(url: str, bodies: list[bytes]) -> dict[str, Any]:
    """The naive way: one POST after the other, no outbox, no retries, no concurrency."""
    async with httpx.AsyncClient() as control:
        await control.post(f"{url}/__reset?fail=0")
    headers = {"Content-Type": "application/json"}
    async with httpx.AsyncClient() as client:
        start = time.monotonic()
        for body in bodies:
            response = await client.post(f"{url}/hook", content=body, headers=headers)
            response.raise_for_status()
        elapsed = time.monotonic() - start
    return {
        "name": "sequential httpx.AsyncClient POST loop, no outbox",
        "deliveries": len(bodies),
        "deliveries_per_s": round(len(bodies) / elapsed),
    }


async def run_concurrent_client(url: str, bodies: list[bytes], concurrency: int = 4) -> int:
    """``httpx.AsyncClient`` alone, bodies pre-built, ``concurrency`` requests in flight."""
    headers = {"Content-Type": "application/json"}
    gate = asyncio.Semaphore(concurrency)
    async with httpx.AsyncClient() as client:

        async def post(body: bytes) -> None:
            async with gate:
                response = await client.post(f"{url}/hook", content=body, headers=headers)
                response.raise_for_status()

        start = time.monotonic()
        await asyncio.gather(*(post(body) for body in bodies))
        return round(len(bodies) / (time.monotonic() - start))


def _sniffio_missing() -> bool:
    try:
        import sniffio  # noqa: F401
    except ImportError:
        return True
    return False


async def main_async(args: argparse.Namespace, url: str) -> dict[str, Any]:
    n = 10_000 if args.full else args.n
    with tempfile.TemporaryDirectory(prefix="notify-bench-") as tmp:
        workdir = Path(tmp)
        burst = await run_notifier(url, n, None, 0.0, "burst", workdir)
        print(
            f"burst     n={n:,} at once: {burst['deliveries_per_s']:,} deliveries/s "
            f"(p50 {burst['p50_ms']} ms, p99 {burst['p99_ms']} ms while queued), "
            f"delivered {burst['delivered']:,}/{burst['planned']:,}",
            flush=True,
        )
        paced = await run_notifier(url, n, args.rate, 0.0, "paced", workdir)
        print(
            f"paced     n={n:,} at {args.rate:,.0f}/s: {paced['deliveries_per_s']:,} deliveries/s,"
            f" p50 {paced['p50_ms']} ms, p99 {paced['p99_ms']} ms, "
            f"delivered {paced['delivered']:,}/{paced['planned']:,}",
            flush=True,
        )
        light_rate = max(50.0, round(burst["deliveries_per_s"] / 2, -1))
        light_n = min(n, 1_000)
        light = await run_notifier(url, light_n, light_rate, 0.0, "light", workdir)
        print(
            f"light     n={light_n:,} at {light_rate:,.0f}/s (half capacity): "
            f"p50 {light['p50_ms']} ms, p99 {light['p99_ms']} ms",
            flush=True,
        )
        failing = await run_notifier(url, n, args.rate, 0.3, "failing", workdir)
        storm = await run_storm(url, n, workdir)
        print(
            f"30% 500s  n={n:,} at {args.rate:,.0f}/s: {failing['deliveries_per_s']:,} "
            f"deliveries/s, p50 {failing['p50_ms']} ms, p99 {failing['p99_ms']} ms, "
            f"delivered {failing['delivered']:,}/{failing['planned']:,} "
            f"({failing['requests']:,} requests, {failing['retried']:,} retried, "
            f"{failing['duplicates']} duplicates)",
            flush=True,
        )
        print(
            f"storm     n={n:,} in {storm['clusters']} clusters, group_by [cluster], group_wait "
            f"{STORM_GROUP_WAIT_S:g} s: {storm['messages']} messages carrying "
            f"{storm['alerts_delivered']:,} alerts ({storm['duplicates']} duplicates); the "
            f"last alert arrived {storm['max_delay_s']:.2f} s after its transition "
            f"(group_wait + {storm['max_over_group_wait_s']:.2f} s; target + {STORM_SLACK_S:g} s)",
            flush=True,
        )
    bodies = sample_bodies(min(n, 2_000))
    baseline = await run_baseline(url, bodies)
    concurrent = await run_concurrent_client(url, bodies)
    print(
        f"baseline  {baseline['name']}: {baseline['deliveries_per_s']:,} deliveries/s; "
        f"httpx.AsyncClient with 4 in flight: {concurrent:,} requests/s"
        + (
            " (sniffio not installed: httpcore retries that import on every request)"
            if _sniffio_missing()
            else ""
        ),
        flush=True,
    )
    targets = {
        "deliveries_per_s": TARGET_DELIVERIES_PER_S,
        "p99_ms": TARGET_P99_MS,
        "p99_at_rate": TARGET_RATE,
        "storm_within_group_wait_plus_s": STORM_SLACK_S,
    }
    met = {
        "deliveries_per_s": burst["deliveries_per_s"] >= TARGET_DELIVERIES_PER_S,
        "p99_ms": paced["p99_ms"] <= TARGET_P99_MS and args.rate >= TARGET_RATE,
        "storm_grouped_in_time": storm["all_delivered"]
        and storm["duplicates"] == 0
        and storm["messages"] == storm["clusters"]
        and storm["max_over_group_wait_s"] <= STORM_SLACK_S,
        "all_delivered_once": all(
            r["all_delivered"] and r["duplicates"] == 0 for r in (burst, paced, light)
        ),
        "failing_delivered_equals_sent": failing["all_delivered"]
        and failing["delivered"] == failing["planned"]
        and failing["duplicates"] == 0,
    }
    return {
        "name": "notify",
        "transitions": n,
        "deliveries_per_s": burst["deliveries_per_s"],
        "offered_rate": args.rate,
        "paced_deliveries_per_s": paced["deliveries_per_s"],
        "p50_ms": paced["p50_ms"],
        "p99_ms": paced["p99_ms"],
        "half_capacity": {"rate": light_rate, "p50_ms": light["p50_ms"], "p99_ms": light["p99_ms"]},
        "failing": {
            "fail_rate": 0.3,
            **{
                key: failing[key]
                for key in (
                    "planned",
                    "delivered",
                    "duplicates",
                    "requests",
                    "retried",
                    "deliveries_per_s",
                    "p50_ms",
                    "p99_ms",
                )
            },
        },
        "storm": storm,
        "baseline": {
            **baseline,
            "httpx_client_4_in_flight_per_s": concurrent,
            "sniffio": not _sniffio_missing(),
        },
        "targets": targets,
        "met": met,
    }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--full", action="store_true", help="10,000 transitions (the issue's)")
    parser.add_argument("-n", type=int, default=2_000, help="transitions per phase")
    parser.add_argument(
        "--rate",
        type=float,
        default=TARGET_RATE,
        help="transitions offered per second in the paced phases (10 ms batches)",
    )
    args = parser.parse_args()

    ports: Any = multiprocessing.Queue()
    receiver = multiprocessing.Process(target=_receiver_main, args=(ports, 7), daemon=True)
    receiver.start()
    try:
        url = f"http://127.0.0.1:{ports.get(timeout=10)}"
        summary = asyncio.run(main_async(args, url))
    finally:
        receiver.terminate()
        receiver.join(5)
    print(json.dumps(summary))


if __name__ == "__main__":
    main()
