"""Several notifier instances as one fleet (issue 10), in one event loop against the embedded
Tansu broker: each instance is a real coordinator, collector, shard state and group membership.

Three instances share a few hundred groups so that each group is scanned by exactly one of
them; a fourth joins and shards move without leaving any group unwatched for longer than one
hand-over; the coordination cluster going away leaves every instance with its shards, watching
them, and saying so in its log, ``/metrics`` and ``/readyz``.
"""

from __future__ import annotations

import asyncio
import logging
import os
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml
from aiokafka import AIOKafkaProducer
from aiokafka.admin import AIOKafkaAdminClient, NewTopic
from aiokafka.client import AIOKafkaClient
from aiokafka.protocol.commit import OffsetCommitRequest
from aiokafka.protocol.coordination import FindCoordinatorRequest
from click.testing import CliRunner

from notifier.api import create_app
from notifier.cli import main
from notifier.collect import ScanResult
from notifier.config import ClusterConfig, ConfigError, ServiceConfig, parse_service_config
from notifier.fleet import by_shard, shard_of
from notifier.fleet.instance import FleetInstance
from notifier.fleet.share import FleetShare
from notifier.resources import rules_or_default
from notifier.rules import load_rules
from notifier.service import Coordinator, LogSink, make_collector
from tests.waiting import until_true

SCAN_S = 2.0
SESSION_S = 6.0
SHARDS = 12
TOPICS = 6
PARTITIONS = 2


# ------------------------------------------------------------------------------------------
# The watched cluster


async def populate(bootstrap: str, prefix: str, groups: int) -> list[str]:
    """``groups`` groups, each with committed offsets on both partitions of one of a few
    topics; returns their names."""
    topics = [f"{prefix}-t{t}" for t in range(TOPICS)]
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=60_000)
    await admin.start()
    try:
        await admin.create_topics([NewTopic(t, PARTITIONS, 1) for t in topics])
    finally:
        await admin.close()
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap)
    await producer.start()
    try:
        for topic in topics:
            for partition in range(PARTITIONS):
                for _ in range(3):
                    await producer.send_and_wait(topic, b"x", partition=partition)
    finally:
        await producer.stop()
    names = [f"{prefix}-g{i:04d}" for i in range(groups)]
    client = AIOKafkaClient(bootstrap_servers=bootstrap, request_timeout_ms=60_000)
    await client.bootstrap()
    gate = asyncio.Semaphore(16)

    async def commit(index: int) -> None:
        async with gate:
            node = next(iter(client.cluster.brokers())).nodeId
            found = await client.send(node, FindCoordinatorRequest(names[index], 0))
            offsets = [(p, 1 + (index + p) % 3, "") for p in range(PARTITIONS)]
            request = OffsetCommitRequest(
                names[index], -1, "", -1, [(topics[index % TOPICS], offsets)]
            )
            response = await client.send(found.coordinator_id, request)
            assert not [e for _, parts in response.topics for _, e in parts if e]

    try:
        await asyncio.gather(*(commit(i) for i in range(groups)))
    finally:
        await client.close()
    return names


class Outage:
    """A TCP relay in front of the coordination broker (which advertises the relay's port) that
    can cut every connection and refuse new ones, then let them through again: the cluster
    becomes unreachable without losing its data, as a network partition does."""

    def __init__(self) -> None:
        self.down = False
        self.target = ("127.0.0.1", 0)
        self._server: asyncio.Server | None = None
        self._open: set[asyncio.StreamWriter] = set()

    async def start(self) -> int:
        self._server = await asyncio.start_server(self._relay, "127.0.0.1", 0)
        return int(self._server.sockets[0].getsockname()[1])

    def cut(self) -> None:
        self.down = True
        for writer in list(self._open):
            writer.close()

    def restore(self) -> None:
        self.down = False

    async def close(self) -> None:
        self.cut()
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()

    async def _relay(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if self.down:
            writer.close()
            return
        try:
            up_reader, up_writer = await asyncio.open_connection(*self.target)
        except OSError:
            writer.close()
            return
        self._open |= {writer, up_writer}

        async def pipe(src: asyncio.StreamReader, dst: asyncio.StreamWriter) -> None:
            try:
                while data := await src.read(65536):
                    dst.write(data)
                    await dst.drain()
            except (ConnectionError, OSError):
                pass
            finally:
                dst.close()

        await asyncio.gather(pipe(reader, up_writer), pipe(up_reader, writer))
        self._open -= {writer, up_writer}


# ------------------------------------------------------------------------------------------
# Instances


@dataclass
class Scan:
    at: float
    """When the scan ended (monotonic)."""
    groups: frozenset[str]
    """The groups whose committed offsets it fetched."""


class RecordingCollector:
    """The real collector; every scan's groups are kept so the test can count them."""

    def __init__(self, cluster: ClusterConfig, scans: list[Scan]) -> None:
        self.inner = make_collector(cluster)
        self.scans = scans

    @property
    def group_filter(self) -> Callable[[str], bool] | None:
        return self.inner.group_filter

    @group_filter.setter
    def group_filter(self, value: Callable[[str], bool] | None) -> None:
        self.inner.group_filter = value

    async def scan(self) -> ScanResult:
        result = await self.inner.scan()
        fetched = set(result.samples.column("group").to_pylist()) | set(result.group_states)
        self.scans.append(Scan(time.monotonic(), frozenset(fetched)))
        return result

    async def close(self) -> None:
        await self.inner.close()


@dataclass
class Instance:
    name: str
    coordinator: Coordinator
    fleet: FleetInstance
    scans: list[Scan] = field(default_factory=list)

    @property
    def owned(self) -> frozenset[int]:
        return self.fleet.membership.owned

    def scans_since(self, at: float) -> list[Scan]:
        return [s for s in self.scans if s.at > at]


def service_config(bootstrap: str, prefix: str, coordination: dict[str, Any]) -> ServiceConfig:
    return parse_service_config(
        {
            "clusters": [
                {
                    "name": "prod",
                    "bootstrap_servers": bootstrap,
                    "scan_interval": f"{SCAN_S}s",
                    "group_allow": [f"^{prefix}-"],
                }
            ],
            "history": {"enabled": False},
            "api": {"enabled": False},
            "coordination": {
                "name": prefix,
                "partitions": SHARDS,
                "session_timeout": f"{SESSION_S}s",
                "heartbeat_interval": "1s",
                **coordination,
            },
        },
        "fleet.yaml",
    )


async def behind_a_relay(kafka_broker, broker_factory, prefix: str) -> tuple[Outage, ServiceConfig]:
    """A coordination broker of its own behind an :class:`Outage` relay, and the config of a
    fleet coordinating through the relay while it watches ``kafka_broker``."""
    outage = Outage()
    port = await outage.start()
    coordination = await asyncio.to_thread(broker_factory, advertised_port=port)
    outage.target = ("127.0.0.1", coordination.port)
    service = service_config(
        kafka_broker.bootstrap_servers,
        prefix,
        {"kafka": {"bootstrap_servers": f"127.0.0.1:{port}"}},
    )
    return outage, service


async def start_instance(service: ServiceConfig, data_dir: Path, name: str) -> Instance:
    scans: list[Scan] = []
    coordinator = Coordinator(
        service,
        load_rules(rules_or_default(None)),
        data_dir / name,
        LogSink(),
        collector_factory=lambda cluster: RecordingCollector(cluster, scans),
    )
    fleet = FleetInstance(service, coordinator, None, instance=name)
    await fleet.start()  # as `notifier run` does: companions first, then the scans
    await coordinator.start()
    return Instance(name, coordinator, fleet, scans)


async def stop_instance(instance: Instance) -> None:
    await instance.coordinator.stop()
    await instance.fleet.stop()


def settled(instances: list[Instance], since: float) -> bool:
    """Every shard owned by exactly one instance, each instance has scanned since, and the
    leader is not about to ask for a rebalance of uneven work."""
    owned = [i.owned for i in instances]
    every = frozenset().union(*owned)
    return (
        every == frozenset(range(SHARDS))
        and sum(len(o) for o in owned) == SHARDS
        and all(i.scans_since(since) for i in instances)
        and all(i.fleet.membership.rebalance_due() is None for i in instances)
    )


def last_scans(instances: list[Instance]) -> dict[str, frozenset[str]]:
    return {i.name: i.scans[-1].groups for i in instances}


def assert_each_group_scanned_once(scans: dict[str, frozenset[str]], groups: list[str]) -> None:
    seen: dict[str, list[str]] = {}
    for name, scanned in scans.items():
        for group in scanned:
            seen.setdefault(group, []).append(name)
    twice = {g: names for g, names in seen.items() if len(names) > 1}
    missing = sorted(set(groups) - set(seen))
    assert not twice, f"scanned by more than one instance: {dict(list(twice.items())[:5])}"
    assert not missing, f"scanned by no instance: {missing[:5]} ({len(missing)} in all)"


# ------------------------------------------------------------------------------------------
# Tests

CLUSTERS = "clusters:\n  - {name: prod, bootstrap_servers: 'localhost:9092'}\n"


def test_a_coordination_section_is_checked_and_accepted(tmp_path):
    path = tmp_path / "service.yaml"
    path.write_text(CLUSTERS + "coordination: {name: prod-eu, cluster: prod}\n")
    result = CliRunner().invoke(main, ["check", "--config", str(path)])
    assert result.exit_code == 0, result.output
    fleet = parse_service_config({"clusters": [{"name": "prod",
                                                "bootstrap_servers": "k:9092"}],
                                  "coordination": {"name": "prod-eu", "cluster": "prod"}},
                                 "s.yaml").coordination  # fmt: skip
    assert fleet is not None
    assert (fleet.topic, fleet.view_topic, fleet.group_id, fleet.partitions) == (
        "notifier-fleet.prod-eu.state",
        "notifier-fleet.prod-eu.state.view",
        "notifier-fleet.prod-eu",
        32,
    )
    assert fleet.instance_name({"HOSTNAME": "notifier-7d9c"}) == "notifier-7d9c"
    assert fleet.instance_name({}).endswith(f"-{os.getpid()}")


@pytest.mark.parametrize(
    ("section", "field", "expected"),
    [
        ("{name: prod eu, cluster: prod}", "coordination.name", "should match pattern"),
        ("{name: eu, cluster: nope}", "coordination.cluster", "'nope' is not a configured"),
        ("{name: eu}", "coordination", "exactly one of cluster"),
        ("{name: eu, cluster: prod, kafka: {bootstrap_servers: 'k:1'}}", "coordination",
         "exactly one of cluster"),
        ("{name: eu, cluster: prod, partitions: 0}", "coordination.partitions",
         "greater than or equal to 1"),
        ("{name: eu, cluster: prod, heartbeat_interval: 10s, session_timeout: 10s}",
         "coordination", "less than session_timeout"),
        ("{name: eu, kafka: {bootstrap_servers: 'nohost'}}",
         "coordination.kafka.bootstrap_servers", "expected host:port"),
    ],
)  # fmt: skip
def test_a_bad_coordination_section_names_the_field(section, field, expected):
    data = yaml.safe_load(CLUSTERS + f"coordination: {section}\n")
    with pytest.raises(ConfigError) as caught:
        parse_service_config(data, "service.yaml")
    assert "service.yaml" in str(caught.value)
    assert any(
        where == field and expected in problem for where, problem in caught.value.problems
    ), caught.value.problems


def test_a_reload_cannot_change_the_fleet(tmp_path):
    alone = yaml.safe_load(CLUSTERS)
    fleet = yaml.safe_load(CLUSTERS + "coordination: {name: eu, cluster: prod}\n")
    rules = load_rules(rules_or_default(None))
    coordinator = Coordinator(parse_service_config(alone, "s.yaml"), rules, tmp_path, LogSink())
    problems = coordinator.check_reload(parse_service_config(fleet, "s.yaml"), rules)
    assert [field for field, _ in problems] == ["coordination"]
    assert "on restart only" in problems[0][1]


def test_a_group_belongs_to_the_same_shard_everywhere():
    # Fixed values: every instance, whatever its Python or machine, must agree.
    assert shard_of("prod", "billing", 32) == 1
    assert shard_of("staging", "billing", 32) == 26  # the cluster is part of the key
    spread = by_shard("prod", [f"g{i}" for i in range(3200)], 32)
    assert sorted(spread) == list(range(32))
    assert min(len(g) for g in spread.values()) > 50  # about 100 each


async def test_three_instances_split_the_groups_and_a_fourth_takes_shards_without_a_gap(
    kafka_broker, tmp_path, caplog
):
    caplog.set_level(logging.INFO, logger="notifier.fleet")
    prefix = f"fleet-{uuid.uuid4().hex[:6]}"
    groups = await populate(kafka_broker.bootstrap_servers, prefix, 300)
    service = service_config(kafka_broker.bootstrap_servers, prefix, {"cluster": "prod"})
    instances = [await start_instance(service, tmp_path, f"i{n}") for n in range(3)]
    try:
        started = time.monotonic()
        await until_true(lambda: settled(instances, started), 90, "three instances settled")
        # A scan that began before the last hand-over may still list a moved shard: judge the
        # next round, which began after it.
        settled_at = time.monotonic()
        await until_true(
            lambda: all(i.scans_since(settled_at) for i in instances), 30, "a round of scans"
        )
        round_one = last_scans(instances)
        assert_each_group_scanned_once(round_one, groups)
        shares = {name: len(g) for name, g in round_one.items()}
        assert all(share > 0 for share in shares.values()), shares
        before = {i.name: i.owned for i in instances}

        joined = time.monotonic()
        instances.append(await start_instance(service, tmp_path, "i3"))
        await until_true(
            lambda: settled(instances, joined) and len(instances[3].owned) > 0,
            90,
            "four instances settled",
        )
        settled_at = time.monotonic()
        await until_true(
            lambda: all(i.scans_since(settled_at) for i in instances), 30, "a round of scans"
        )
        round_two = last_scans(instances)
        assert_each_group_scanned_once(round_two, groups)
        assert round_two["i3"], "the new instance scans groups"
        # Warm: the shards it took came with their groups' state from the state topic.
        taken = [r for r in caplog.records
                 if getattr(r, "event", "") == "fleet_assigned" and r.instance == "i3"]  # fmt: skip
        assert taken and sum(r.loaded_groups for r in taken) > 0, [r.__dict__ for r in taken]
        # Shards go by their work, so one may also come back in a swap: each of the three gave
        # at least one of its own away.
        assert all(before[f"i{n}"] - instances[n].owned for n in range(3)), (
            "each instance handed shards over",
            before,
            [i.owned for i in instances],
        )

        # No group went unwatched longer than one hand-over: from the join on, the time
        # between two scans of a group (by any instance) stays within the rebalance (a
        # session timeout at most) and two scan intervals, with room for a busy machine.
        bound = SESSION_S + 2 * SCAN_S + 8
        scanned_at: dict[str, list[float]] = {g: [joined] for g in groups}
        for instance in instances:
            for scan in instance.scans_since(joined):
                for group in scan.groups:
                    scanned_at[group].append(scan.at)
        gaps = {g: max(b - a for a, b in zip(sorted(t), sorted(t)[1:], strict=False))
                for g, t in scanned_at.items()}  # fmt: skip
        worst = max(gaps, key=lambda g: gaps[g])
        assert gaps[worst] <= bound, f"{worst} unwatched for {gaps[worst]:.1f}s"
    finally:
        for instance in instances:
            await stop_instance(instance)


async def test_an_unreachable_coordination_cluster_leaves_every_instance_its_shards(
    kafka_broker, broker_factory, tmp_path, caplog
):
    prefix = f"fleet-{uuid.uuid4().hex[:6]}"
    groups = await populate(kafka_broker.bootstrap_servers, prefix, 90)
    outage, service = await behind_a_relay(kafka_broker, broker_factory, prefix)
    caplog.set_level(logging.INFO, logger="notifier.fleet")
    instances = [await start_instance(service, tmp_path, f"i{n}") for n in range(3)]
    try:
        started = time.monotonic()
        await until_true(lambda: settled(instances, started), 90, "three instances settled")
        owned = {i.name: i.owned for i in instances}

        outage.cut()
        down = time.monotonic()
        await until_true(
            lambda: not any(i.fleet.membership.coordination_ok for i in instances),
            30,
            "every instance noticed the outage",
        )
        # Watching goes on: two more scans each, over the same groups as before, from a
        # session timeout after the outage began (when the broker would have expired them).
        await until_true(
            lambda: all(len(i.scans_since(down + SESSION_S)) >= 2 for i in instances),
            60,
            "scans after the outage",
        )
        assert {i.name: i.owned for i in instances} == owned
        assert_each_group_scanned_once(last_scans(instances), groups)

        down_lines = [
            r for r in caplog.records if getattr(r, "event", "") == "fleet_coordination_down"
        ]
        assert sorted(r.instance for r in down_lines) == ["i0", "i1", "i2"]
        for instance in instances:
            ready, metrics = await readiness(instance)
            assert ready.status_code == 200, ready.text
            fleet = ready.json()["fleet"]
            assert fleet["instance"] == instance.name
            assert fleet["shards"] == sorted(owned[instance.name])
            assert fleet["coordination"].startswith("unreachable since ")
            label = f'{{instance="{instance.name}"}}'
            assert f"notifier_fleet_coordination_up{label} 0" in metrics
            shards = len(owned[instance.name])
            assert f"notifier_fleet_shards_owned{label} {shards}" in metrics

        # Back: the broker expired the members meanwhile; they rejoin, each shard is owned
        # once again, and every group is still scanned by exactly one instance.
        outage.restore()
        back = time.monotonic()
        await until_true(
            lambda: all(i.fleet.membership.coordination_ok for i in instances),
            30,
            "every instance saw coordination come back",
        )
        await until_true(lambda: settled(instances, back), 90, "settled after the outage")
        again = time.monotonic()
        await until_true(
            lambda: all(i.scans_since(again) for i in instances), 30, "a round of scans"
        )
        assert_each_group_scanned_once(last_scans(instances), groups)
        up_lines = [r for r in caplog.records if getattr(r, "event", "") == "fleet_coordination_up"]
        assert sorted(r.instance for r in up_lines) == ["i0", "i1", "i2"]
        for instance in instances:
            ready, metrics = await readiness(instance)
            assert ready.json()["fleet"]["coordination"] == "ok"
            assert f'notifier_fleet_coordination_up{{instance="{instance.name}"}} 1' in metrics
    finally:
        outage.cut()
        stopping = time.monotonic()
        for instance in instances:
            await stop_instance(instance)
        await outage.close()
        # Leaving cannot wait for a cluster that is gone: a bounded shutdown.
        assert time.monotonic() - stopping < 3 * (SESSION_S + 10)


async def readiness(instance: Instance) -> tuple[httpx.Response, str]:
    """The instance's ``/readyz`` answer and ``/metrics`` text."""
    transport = httpx.ASGITransport(app=create_app(instance.coordinator, None))
    async with httpx.AsyncClient(transport=transport, base_url="http://notifier") as client:
        return await client.get("/readyz"), (await client.get("/metrics")).text


async def test_an_instance_that_cannot_reach_the_coordination_cluster_at_start_up_keeps_trying(
    kafka_broker, broker_factory, tmp_path, caplog
):
    """No crash loop: the process starts owning nothing, says why, and joins once the
    coordination cluster answers; then it owns every shard and watches every group."""
    prefix = f"fleet-{uuid.uuid4().hex[:6]}"
    groups = await populate(kafka_broker.bootstrap_servers, prefix, 30)
    outage, service = await behind_a_relay(kafka_broker, broker_factory, prefix)
    caplog.set_level(logging.INFO, logger="notifier.fleet")
    outage.cut()
    instance = await start_instance(service, tmp_path, "late")
    try:
        assert instance.owned == frozenset()
        [failed] = [r for r in caplog.records if getattr(r, "event", "") == "fleet_join_failed"]
        assert "cannot be reached" in failed.getMessage()
        ready, metrics = await readiness(instance)
        assert ready.json()["fleet"]["shards"] == []
        assert ready.json()["fleet"]["coordination"].startswith("unreachable since ")
        assert 'notifier_fleet_coordination_up{instance="late"} 0' in metrics

        outage.restore()
        back = time.monotonic()
        await until_true(lambda: settled([instance], back), 90, "joined and scanned")
        again = time.monotonic()
        await until_true(lambda: instance.scans_since(again), 30, "a scan with every shard")
        assert_each_group_scanned_once(last_scans([instance]), groups)
        ready, metrics = await readiness(instance)
        assert ready.json()["fleet"]["coordination"] == "ok"
        assert ready.json()["fleet"]["shards"] == list(range(SHARDS))
        assert 'notifier_fleet_coordination_up{instance="late"} 1' in metrics
        assert [r for r in caplog.records if getattr(r, "event", "") == "fleet_joined_late"]
    finally:
        await stop_instance(instance)
        await outage.close()


# ------------------------------------------------------------------------------------------
# Shards taken over: the next scan is brought forward


@dataclass
class Shares:
    """The shards an instance owns, as its membership would say (set by the test)."""

    owned: frozenset[int]
    partitions: int = SHARDS
    coordination_ok: bool = True

    def owns(self, cluster: str, group: str) -> bool:
        return shard_of(cluster, group, self.partitions) in self.owned


class Unpublished:
    """A shard publisher that keeps nothing (this test is about when scans happen)."""

    async def publish_scan(self, cluster, groups_by_shard, coordinator, notifier) -> None:
        return None


async def test_shards_taken_over_are_scanned_soon_but_never_crowd_a_window(kafka_broker, tmp_path):
    interval = 8.0
    prefix = f"fleet-{uuid.uuid4().hex[:6]}"
    groups = await populate(kafka_broker.bootstrap_servers, prefix, 40)
    service = parse_service_config(
        {
            "clusters": [
                {
                    "name": "prod",
                    "bootstrap_servers": kafka_broker.bootstrap_servers,
                    "scan_interval": f"{interval:g}s",
                    "group_allow": [f"^{prefix}-"],
                }
            ],
            "history": {"enabled": False},
            "api": {"enabled": False},
        },
        "fleet.yaml",
    )
    coordinator = Coordinator(service, load_rules(rules_or_default(None)), tmp_path, LogSink())
    kept, new = frozenset(range(SHARDS // 2)), frozenset(range(SHARDS // 2, SHARDS))
    shares = Shares(kept)
    coordinator.join_fleet(FleetShare(coordinator, shares, Unpublished()))
    state = coordinator.clusters["prod"]
    await coordinator.start()
    try:
        await until_true(lambda: state.metrics.scans == 1, 30, "the first scheduled scan")
        first_ts = state.store.last_scan_ts["prod"]
        job = coordinator.scheduler.get_job("scan:prod")
        tick = job.next_run_time

        # Taken over a moment after a scan: the next one comes a quarter interval after it,
        # not at the tick (most of an interval away) and not at once (a crowded pair).
        shares.owned = kept | new
        coordinator.shards_taken_over(new)
        await until_true(lambda: state.metrics.scans == 2, interval, "the scan brought forward")
        gap_s = (state.store.last_scan_ts["prod"] - first_ts) / 1000
        assert interval / 4 - 0.1 <= gap_s < interval / 2, gap_s
        assert set(state.groups) == set(groups), "the new shards' groups were scanned"
        assert job.next_run_time > tick, "the schedule goes on from the scan brought forward"

        # Taken over when the latest sample is older than that: the scan comes at once.
        await asyncio.sleep(interval / 4 + 0.5)
        taken_over = time.monotonic()
        coordinator.shards_taken_over(new)
        await until_true(lambda: state.metrics.scans == 3, interval, "a scan at once")
        assert time.monotonic() - taken_over < interval / 4, "scanned at once"
    finally:
        await coordinator.stop()
