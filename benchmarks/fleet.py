"""Benchmark: one `notifier run` instance against a fleet of three, and a `kill -9` in it.

Real processes (``notifier run`` with a ``coordination:`` section) against the embedded
Kafka-protocol broker holding the groups ``benchmarks/scan.py`` builds: 1,000 groups and 50,000
group-partitions with ``--full``. A real HTTP receiver takes the notifications.

0. Today's single process (no ``coordination:``), for reference.
1. One instance of a fleet (it owns every shard): for ``--cycles`` scan intervals, its CPU
   seconds (``/proc/<pid>/stat``, user + system) and every Kafka request it sent (the increase
   of ``notifier_kafka_requests_total`` on its ``/metrics``: the scans', the membership's
   join, heartbeats and reachability probe, the state topic's, the fleet view's), per cycle,
   with the breakdown by client; and, for reference, the last scan's own requests
   (``notifier_scan_requests``, by API). The window runs from the moment one of its scans
   lands (``last_scan`` on ``/readyz``, polled every 0.5 s from 1.5 s before a landing is due)
   to the moment the ``--cycles``-th after it lands, so it holds exactly that many scans and
   intervals.
2. Three instances of another fleet, the same figures for each. Target: each of the three at
   most 0.4 of the one, in CPU and in all requests (the scan work divides by three; what every
   instance repeats: ListGroups, the metadata, the membership, the fleet view).
3. ``--incidents`` groups owned by one of the three fall far behind (ERR) and are paged; that
   instance is killed with SIGKILL; the hand-over time is from the kill to the first scan of
   every group it owned by a survivor (the scan's own timestamp in the group's window on the new
   owner). Target: at most the session timeout plus two scan intervals. Then the groups
   recover. Targets: no incident opened twice (the receiver sees one ``open`` per incident and
   one incident per group), no transition missed (every group's open and resolve arrive).

    python benchmarks/fleet.py          # 100 groups, 2,000 group-partitions, 5 s scans (2 min)
    python benchmarks/fleet.py --full   # 1,000 groups, 50,000 group-partitions, 10 s scans (8 min)

Ends with one JSON line: name, figures, baseline (the one instance), targets and whether each
is met.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from aiokafka.client import AIOKafkaClient  # noqa: E402
from aiokafka.protocol.commit import OffsetCommitRequest  # noqa: E402
from aiokafka.protocol.coordination import FindCoordinatorRequest  # noqa: E402

from notifier.demo import HttpReceiver  # noqa: E402
from notifier.embedded import EmbeddedBroker  # noqa: E402
from notifier.netutil import free_port  # noqa: E402
from tests.fleet_process import FleetProcess  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
from scan import RECORDS_PER_PARTITION, Layout, populate  # noqa: E402

CLUSTER = "bench"
TARGET_SHARE = 0.4
SHARDS = 32
SESSION_S = 10.0
HEARTBEAT_S = 3.0


def rules(layout: Layout) -> str:
    """Only lag rules, and no Burrow: the transitions are exactly the ones the benchmark makes.
    A group's usual lag is about 1.5 per partition (scan.py commits 0 to 3 records behind);
    ERR is everything unread (3 per partition)."""
    return f"""\
window:
  intervals: 30
burrow:
  enabled: false
  minimum_complete: 0
rules:
  - name: far-behind
    kind: lag
    scope: group
    threshold: {int(2.5 * layout.partitions)}
    severity: err
"""


async def scans(instance: FleetProcess) -> float:
    """Successful scans so far."""
    return sum(v for n, _, v in await instance.metrics() if n == "notifier_scans_total")


async def scan_requests(instance: FleetProcess) -> dict[str, int]:
    """The last scan's Kafka requests by API (``notifier_scan_requests``)."""
    metrics = await instance.metrics()
    return {lab["api"]: int(v) for n, lab, v in metrics if n == "notifier_scan_requests"}


class Bench:
    def __init__(self, broker: EmbeddedBroker, http: HttpReceiver, tmp: Path, layout: Layout,
                 interval: float) -> None:  # fmt: skip
        self.bootstrap = broker.bootstrap_servers
        self.http = http
        self.tmp = tmp
        self.layout = layout
        self.interval = interval
        self.instances: list[FleetProcess] = []
        (tmp / "rules.yaml").write_text(rules(layout))
        self.client = AIOKafkaClient(bootstrap_servers=self.bootstrap, request_timeout_ms=60_000)

    def groups(self) -> list[str]:
        return [self.layout.group(i) for i in range(self.layout.groups)]

    async def start(self, fleet: str, count: int, coordinated: bool = True) -> list[FleetProcess]:
        """``count`` instances of ``fleet`` (without ``coordinated``: today's single process)."""
        started = []
        for n in range(count):
            name = f"{fleet}-{n}"
            port = free_port()
            directory = self.tmp / name
            directory.mkdir()
            config = {
                "clusters": [{"name": CLUSTER, "bootstrap_servers": self.bootstrap,
                              "scan_interval": self.interval, "request_timeout": 30,
                              "scan_timeout": 120, "group_allow": ["^bench-"]}],
                "coordination": {"name": fleet, "cluster": CLUSTER, "partitions": SHARDS,
                                 "session_timeout": SESSION_S,
                                 "heartbeat_interval": HEARTBEAT_S, "instance": name},
                "rules": str(self.tmp / "rules.yaml"),
                "data_dir": str(directory / "data"),
                "history": {"enabled": False},
                "api": {"enabled": True, "host": "127.0.0.1", "port": port},
                "logging": {"level": "INFO", "format": "json"},
                "notify": {
                    "receivers": {"oncall": {"webhook": {"url": self.http.url_for("/hook")}}},
                    "route": {"receiver": "oncall", "group_by": ["cluster", "group"],
                              "group_wait": 0, "group_interval": 0},
                },
            }  # fmt: skip
            if not coordinated:
                del config["coordination"]
            path = directory / "service.yaml"
            path.write_text(json.dumps(config))
            instance = FleetProcess(
                name, path, self.tmp / f"{name}.log", port, cluster=CLUSTER, api_timeout=30
            )
            self.instances.append(instance)
            await instance.start()
            started.append(instance)
        return started

    async def owners(self, fleet: list[FleetProcess], timeout: float) -> dict[str, FleetProcess]:
        """Each group's one owner, waiting until every group has exactly one."""
        deadline = time.monotonic() + timeout
        while True:
            owners: dict[str, list[FleetProcess]] = {g: [] for g in self.groups()}
            for instance in fleet:
                for group in await instance.groups() & owners.keys():
                    owners[group].append(instance)
            if all(len(found) == 1 for found in owners.values()):
                return {group: found[0] for group, found in owners.items()}
            if time.monotonic() > deadline:
                lost = sum(1 for found in owners.values() if len(found) != 1)
                raise RuntimeError(f"{lost} groups without exactly one owner after {timeout} s")
            await asyncio.sleep(1)

    async def settle(self, fleet: list[FleetProcess], timeout: float) -> None:
        """Wait until no instance has taken an assignment for a scan interval and two
        heartbeats: the leader asks for a rebalance of its own when the first assignment,
        made before anyone had scanned, left the shards' work uneven."""
        quiet_s = self.interval + 2 * HEARTBEAT_S
        deadline = time.monotonic() + timeout
        seen = [await i.assignments() for i in fleet]
        since = time.monotonic()
        while time.monotonic() - since < quiet_s:
            if time.monotonic() > deadline:
                raise RuntimeError(f"the fleet still rebalancing after {timeout} s")
            await asyncio.sleep(1)
            now = [await i.assignments() for i in fleet]
            if now != seen:
                seen, since = now, time.monotonic()

    async def measure(self, fleet: list[FleetProcess], cycles: int) -> list[dict[str, Any]]:
        """CPU seconds and Kafka requests (all of them, by client) per cycle of each instance
        (all at once, each at its own phase)."""
        return list(await asyncio.gather(*(self._measure(i, cycles) for i in fleet)))

    async def _measure(self, instance: FleetProcess, cycles: int) -> dict[str, Any]:
        """From the moment one of its scans lands to the moment the ``cycles``-th after it
        lands: a window of exactly ``cycles`` scans and ``cycles`` intervals of everything
        else (a fixed window would hold a scan more or less, as the phase falls)."""
        first = await instance.next_scan(await instance.last_scan())
        sent, cpu = await instance.kafka_requests(), instance.cpu_s()
        last = first
        for _ in range(cycles):
            # Polled only near the next landing: every poll is work for the instance measured.
            await asyncio.sleep(max(0.0, self.interval - 1.5))
            last = await instance.next_scan(last)
        cpu_s = instance.cpu_s() - cpu
        sent_now = await instance.kafka_requests()
        by_api = {k: n - sent.get(k, 0) for k, n in sent_now.items() if n > sent.get(k, 0)}
        by_client: dict[str, float] = {}
        for (client, _), count in by_api.items():
            by_client[client] = by_client.get(client, 0) + count
        last_scan = await scan_requests(instance)
        return {
            "instance": instance.name,
            "groups": len(await instance.groups()),
            "cycles": cycles,
            "seconds": round((last - first) / 1000, 1),
            "cpu_s_per_cycle": round(cpu_s / cycles, 3),
            "requests_per_cycle": round(sum(by_client.values()) / cycles, 1),
            "requests_by_client": {c: round(n / cycles, 1) for c, n in by_client.items()},
            "requests_by_api": {
                f"{c}/{a}": round(n / cycles, 1) for (c, a), n in sorted(by_api.items())
            },
            "scan_requests": sum(last_scan.values()),
            "scan_requests_by_api": last_scan,
        }

    async def set_behind(self, group: str, behind: bool) -> None:
        """Commit every partition of ``group`` at 0 (everything unread) or at the log end."""
        index = int(group.rsplit("g", 1)[1])
        offset = 0 if behind else RECORDS_PER_PARTITION
        node = next(iter(self.client.cluster.brokers())).nodeId
        found = await self.client.send(node, FindCoordinatorRequest(group, 0))
        offsets = [(p, offset, "") for p in range(self.layout.partitions)]
        topic = self.layout.topic_of(index)
        response = await self.client.send(
            found.coordinator_id, OffsetCommitRequest(group, -1, "", -1, [(topic, offsets)])
        )
        errors = {e for _, parts in response.topics for _, e in parts if e}
        if errors:
            raise RuntimeError(f"OffsetCommit for {group}: error codes {errors}")

    def alerts(self) -> list[tuple[str, str, str, str]]:
        """(notification id, event, incident id, group) of every alert the receiver got."""
        return [
            (r.json["notification_id"], a["event"], a["incident"]["id"], a["incident"]["group"])
            for r in self.http.to("/hook")
            for a in r.json["alerts"]
        ]

    async def wait_alerts(self, event: str, groups: set[str], timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if groups <= {g for _, e, _, g in self.alerts() if e == event}:
                return True
            await asyncio.sleep(0.5)
        return False

    async def kill_and_hand_over(self, fleet: list[FleetProcess], incidents: int) -> dict[str, Any]:
        owners = await self.owners(fleet, 120)
        victim = fleet[1]
        moved = {g for g, owner in owners.items() if owner is victim}
        paged = set(sorted(moved)[:incidents])
        for group in paged:
            await self.set_behind(group, True)
        opened = await self.wait_alerts("open", paged, 6 * self.interval + 30)
        # Its state after the opens goes out with its next scan: kill after that one.
        scanned = await scans(victim)
        while await scans(victim) < scanned + 1:
            await asyncio.sleep(0.2)
        killed_ms = await victim.kill()
        survivors = [i for i in fleet if i is not victim]

        first_scan: dict[str, int] = {}
        deadline = time.monotonic() + 10 * (SESSION_S + self.interval)
        while first_scan.keys() != moved and time.monotonic() < deadline:
            now = await self.owners(survivors, 10 * (SESSION_S + self.interval))
            for group in sorted(moved - first_scan.keys()):
                fresh = [ts for ts in await now[group].window(group) if ts > killed_ms]
                if fresh:
                    first_scan[group] = min(fresh)
            await asyncio.sleep(0.5)
        handover_s = (max(first_scan.values(), default=killed_ms) - killed_ms) / 1000
        unscanned = len(moved - first_scan.keys())

        for group in paged:
            await self.set_behind(group, False)
        resolved = await self.wait_alerts("resolve", paged, 6 * self.interval + 30)
        await asyncio.sleep(2 * self.interval)  # a late duplicate would come now
        alerts = self.alerts()
        opens: dict[str, set[str]] = {}  # incident -> notification ids that opened it
        incidents_of: dict[str, set[str]] = {}  # group -> incidents opened
        for notification, event, incident, group in alerts:
            if event == "open":
                opens.setdefault(incident, set()).add(notification)
                incidents_of.setdefault(group, set()).add(incident)
        events = {(event, group) for _, event, _, group in alerts}
        opened_twice = sum(len(n) - 1 for n in opens.values()) + sum(
            len(i) - 1 for i in incidents_of.values()
        )
        missed = sum(1 for g in paged for e in ("open", "resolve") if (e, g) not in events)
        return {
            "killed": victim.name,
            "moved_groups": len(moved),
            "handover_s": round(handover_s, 1),
            "unscanned_after_deadline": unscanned,
            "incidents": len(paged),
            "all_opened_before_kill": opened,
            "all_resolved": resolved,
            "opened_twice": opened_twice,
            "transitions_missed": missed,
            "duplicate_requests": len(self.http.to("/hook")) - len({a[0] for a in alerts}),
        }

    async def close(self) -> None:
        for instance in self.instances:
            await instance.close()
        await self.client.close()


async def run(layout: Layout, cycles: int, interval: float, incidents: int) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="notifier-fleet-bench-") as tmp:
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
            async with HttpReceiver() as http:
                bench = Bench(broker, http, Path(tmp), layout, interval)
                await bench.client.bootstrap()
                try:
                    (plain,) = await bench.start("plain", 1, coordinated=False)
                    await bench.owners([plain], 120)
                    await asyncio.sleep(2 * interval)
                    uncoordinated = (await bench.measure([plain], cycles))[0]
                    print(f"no coordination: {_line(uncoordinated)}", flush=True)
                    await plain.close()

                    (one,) = await bench.start("solo", 1)
                    await bench.owners([one], 120)
                    await asyncio.sleep(2 * interval)  # warm-up: metadata, windows
                    single = (await bench.measure([one], cycles))[0]
                    print(f"one instance:    {_line(single)}", flush=True)
                    await one.close()

                    fleet = await bench.start("trio", 3)
                    await bench.owners(fleet, 120)
                    await bench.settle(fleet, 120)
                    await bench.owners(fleet, 120)
                    await asyncio.sleep(interval)
                    three = await bench.measure(fleet, cycles)
                    for figures in three:
                        print(f"three, {figures['instance']}: {_line(figures)}", flush=True)
                    crash = await bench.kill_and_hand_over(fleet, incidents)
                finally:
                    await bench.close()
        finally:
            await broker.astop()
    return {"plain": uncoordinated, "single": single, "three": three, "kill": crash}


def _line(figures: dict[str, Any]) -> str:
    return (
        f"{figures['groups']:,} groups, {figures['cycles']} cycles, "
        f"{figures['cpu_s_per_cycle']:.3f} CPU s/cycle, {figures['requests_per_cycle']:g} "
        f"Kafka requests/cycle {figures['requests_by_client']}; the last scan's own: "
        f"{figures['scan_requests']} {figures['scan_requests_by_api']}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--full", action="store_true", help="1,000 groups, 50,000 group-partitions")
    parser.add_argument("--cycles", type=int, default=4, help="measured cycles (default 4)")
    parser.add_argument("--interval", type=float, help="scan interval, s (5; 10 with --full)")
    parser.add_argument("--incidents", type=int, default=10, help="groups paged before the kill")
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    logging.getLogger("aiokafka").setLevel(logging.CRITICAL)
    layout = Layout(1000, 50, 50) if args.full else Layout(100, 10, 20)
    interval = args.interval or (10.0 if args.full else 5.0)
    figures = asyncio.run(run(layout, args.cycles, interval, args.incidents))

    single, three, crash = figures["single"], figures["three"], figures["kill"]
    cpu_share = max(f["cpu_s_per_cycle"] for f in three) / max(single["cpu_s_per_cycle"], 1e-9)
    request_share = max(f["requests_per_cycle"] for f in three) / max(
        single["requests_per_cycle"], 1
    )
    # For reference: the scans' own requests, the only ones the fleet divides.
    scan_request_share = max(f["scan_requests"] for f in three) / max(single["scan_requests"], 1)
    handover_target = SESSION_S + 2 * interval
    print(
        f"each of three vs one: CPU {cpu_share:.2f}, Kafka requests {request_share:.2f} (target "
        f"<= {TARGET_SHARE}; the last scan's own requests alone {scan_request_share:.2f})"
    )
    print(
        f"kill -9 of {crash['killed']} ({crash['moved_groups']} groups): every moved group "
        f"scanned again after {crash['handover_s']} s (target <= {handover_target:g} s); "
        f"{crash['incidents']} incidents: opened twice {crash['opened_twice']}, transitions "
        f"missed {crash['transitions_missed']}, repeated requests {crash['duplicate_requests']}"
    )
    targets = {
        "cpu_share": TARGET_SHARE,
        "request_share": TARGET_SHARE,
        "handover_s": handover_target,
        "opened_twice": 0,
        "transitions_missed": 0,
    }
    met = {
        "cpu_share": cpu_share <= TARGET_SHARE,
        "request_share": request_share <= TARGET_SHARE,
        "handover_s": crash["unscanned_after_deadline"] == 0
        and crash["handover_s"] <= handover_target,
        "opened_twice": crash["opened_twice"] == 0,
        "transitions_missed": crash["transitions_missed"] == 0,
        "at_full_size": args.full,
    }
    print(
        json.dumps(
            {
                "name": "fleet",
                "groups": layout.groups,
                "group_partitions": layout.group_partitions,
                "scan_interval_s": interval,
                "session_timeout_s": SESSION_S,
                "shards": SHARDS,
                "cpu_share": round(cpu_share, 3),
                "request_share": round(request_share, 3),
                "scan_request_share": round(scan_request_share, 3),
                "three": three,
                **crash,
                "without_coordination": figures["plain"],
                "baseline": {"name": "one instance of a fleet (every shard)", **single},
                "targets": targets,
                "met": met,
            }
        )
    )


if __name__ == "__main__":
    main()
