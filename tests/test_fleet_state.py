"""Shard state on the fleet's state topic (issue 10), against the embedded Tansu broker: the
topic is created once with a partition per shard, records go to the partition named, and a read
returns the latest record of each key up to where the partition ended when the read began."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import pytest
from aiokafka import AIOKafkaProducer

from notifier.collect import ScanError, ScanResult, client_security
from notifier.config.kafka_security import SecurityConfig
from notifier.demo import HttpReceiver
from notifier.fleet.state import PublishReport, ShardState, _phase
from notifier.fleet.statetopic import (
    StateReader,
    StateTopicError,
    StateWriter,
    ensure_topic,
    read_partition,
)
from notifier.notify import Notifier, jsonenc
from notifier.notify.codec import result_to_dict
from notifier.rules import with_parameters
from notifier.service import Coordinator
from notifier.service.cluster import ClusterState, make_collector
from notifier.types import GroupStatus
from tests.notify_helpers import config, webhook
from tests.test_collect import _commit, _produce
from tests.test_integration import _name, _rules, _service
from tests.waiting import until_true

SCAN_S = 0.5


def _topic(name: str) -> str:
    return f"notifier-fleet.{name}-{uuid.uuid4().hex[:8]}.state"


async def test_ensure_topic_creates_it_once_with_one_partition_per_shard(kafka_broker, caplog):
    topic = _topic("create")
    bootstrap = kafka_broker.bootstrap_servers
    with caplog.at_level(logging.INFO, logger="notifier.fleet.statetopic"):
        assert await ensure_topic(bootstrap, topic, 4) == 4
        assert await ensure_topic(bootstrap, topic, 4) == 4
    created = [r for r in caplog.records if getattr(r, "event", "") == "state_topic_created"]
    assert len(created) == 1 and topic in created[0].getMessage()


async def test_ensure_topic_refuses_a_topic_with_another_partition_count(kafka_broker):
    topic = _topic("shape")
    await ensure_topic(kafka_broker.bootstrap_servers, topic, 3)
    with pytest.raises(StateTopicError, match=rf"topic {topic} has 3 partitions, expected 8"):
        await ensure_topic(kafka_broker.bootstrap_servers, topic, 8)


async def test_records_go_to_their_partition_and_the_latest_per_key_wins(kafka_broker):
    topic = _topic("rw")
    bootstrap = kafka_broker.bootstrap_servers
    await ensure_topic(bootstrap, topic, 4)
    async with StateWriter(bootstrap, topic) as writer:
        await writer.send(2, "snap/prod/billing", b"v1")
        await writer.send_many(
            2,
            [
                ("chg/prod/billing/0", b"c0"),
                ("inc/prod/billing", b"open"),
                ("snap/prod/billing", b"v2"),
                ("chg/prod/billing/1", b"c1"),
            ],
        )
        await writer.send(2, "inc/prod/billing", None)  # the incident closed
        await writer.send(1, "snap/prod/orders", b"other shard")
    found = await read_partition(bootstrap, topic, 2)
    assert [(r.key, r.value) for r in found] == [
        ("chg/prod/billing/0", b"c0"),
        ("snap/prod/billing", b"v2"),
        ("chg/prod/billing/1", b"c1"),
    ]
    assert [(r.key, r.value) for r in await read_partition(bootstrap, topic, 1)] == [
        ("snap/prod/orders", b"other shard")
    ]
    assert await read_partition(bootstrap, topic, 0) == []


async def test_a_read_stops_at_the_end_seen_when_it_began(kafka_broker):
    topic = _topic("end")
    bootstrap = kafka_broker.bootstrap_servers
    await ensure_topic(bootstrap, topic, 1)
    async with StateWriter(bootstrap, topic) as writer, StateReader(bootstrap, topic) as reader:
        await writer.send_many(0, [(f"k{i}", b"x") for i in range(50)])
        first = await reader.read_partition(0)
        await writer.send(0, "later", b"y")
        second = await reader.read_partition(0)
    assert len(first) == 50 and "later" not in {r.key for r in first}
    assert second[-1].key == "later" and len(second) == 51


async def test_records_without_a_readable_key_are_skipped_and_named(kafka_broker, caplog):
    topic = _topic("badkey")
    bootstrap = kafka_broker.bootstrap_servers
    await ensure_topic(bootstrap, topic, 1)
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap)
    await producer.start()
    try:
        await producer.send_and_wait(topic, b"no key", partition=0)
        await producer.send_and_wait(topic, b"bad key", key=b"\xff\xfe", partition=0)
        await producer.send_and_wait(topic, b"fine", key=b"good", partition=0)
    finally:
        await producer.stop()
    with caplog.at_level(logging.WARNING, logger="notifier.fleet.statetopic"):
        found = await read_partition(bootstrap, topic, 0)
    assert [(r.key, r.value) for r in found] == [("good", b"fine")]
    lines = [r.getMessage() for r in caplog.records]
    assert f"topic {topic} partition 0 offset 0: the record has no key; skipped" in lines
    assert any(f"topic {topic} partition 0 offset 1: the record has a key that is not" in m
               for m in lines)  # fmt: skip


async def test_partitions_read_together_each_get_their_own_records(kafka_broker):
    topic = _topic("many")
    bootstrap = kafka_broker.bootstrap_servers
    await ensure_topic(bootstrap, topic, 8)
    small = (1, 3, 4, 6)
    async with StateWriter(bootstrap, topic) as writer:
        for p in small:
            await writer.send_many(p, [(f"snap/{p}/{i}", bytes([p, i])) for i in range(3)])
            await writer.send(p, f"snap/{p}/0", None)
    async with StateReader(bootstrap, topic) as reader:
        found = await reader.read_partitions(range(8))
        again = await reader.read_partitions([0, 6])  # the reader is ready for the next read
    expected = {
        p: [(f"snap/{p}/1", bytes([p, 1])), (f"snap/{p}/2", bytes([p, 2]))] if p in small else []
        for p in range(8)
    }
    assert {p: [(r.key, r.value) for r in found[p]] for p in found} == expected
    assert {p: [(r.key, r.value) for r in again[p]] for p in again} == {0: [], 6: expected[6]}


def _lost_broker_logged(caplog: pytest.LogCaptureFixture) -> Callable[[], bool]:
    """Whether aiokafka has found the broker gone since now (a reconnect or metadata refresh
    failed): the reader's client has noticed, and is retrying."""
    since = len(caplog.records)
    return lambda: any(
        r.name.startswith("aiokafka") and r.levelno >= logging.ERROR for r in caplog.records[since:]
    )


def _left_behind(before: set[asyncio.Task]) -> list[asyncio.Task]:
    """Tasks started since ``before`` that are still running (other than this one)."""
    return [
        t for t in asyncio.all_tasks() - before if t is not asyncio.current_task() and not t.done()
    ]


def _notifier_warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [
        r.getMessage()
        for r in caplog.records
        if r.name.startswith("notifier") and r.levelno >= logging.WARNING
    ]


async def test_a_reader_stops_quietly_when_its_broker_is_gone(broker_factory, caplog):
    broker = broker_factory()
    bootstrap = broker.bootstrap_servers
    topic = _topic("gone")
    await ensure_topic(bootstrap, topic, 2)
    async with StateWriter(bootstrap, topic) as writer:
        await writer.send(1, "snap/prod/billing", b"v")
    tasks_before = set(asyncio.all_tasks())
    reader = StateReader(bootstrap, topic, timeout=5)
    await reader.start()
    assert [r.key for r in await reader.read_partition(1)] == ["snap/prod/billing"]
    assert await reader.read_partition(0) == []
    noticed = _lost_broker_logged(caplog)
    broker.stop()
    # It retries meanwhile.
    await until_true(noticed, 30, "the reader's client to find the broker gone")
    async with asyncio.timeout(10):  # no waiting out a retry or the read timeout
        await reader.stop()  # aiokafka's fetch in flight was cancelled: not the caller's problem
    assert _left_behind(tasks_before) == [], "the reader left tasks running"
    assert _notifier_warnings(caplog) == []


async def test_a_reader_stops_quietly_when_its_broker_goes_mid_read(broker_factory, caplog):
    broker = broker_factory()
    bootstrap = broker.bootstrap_servers
    topic = _topic("gone-mid-read")
    await ensure_topic(bootstrap, topic, 1)
    async with StateWriter(bootstrap, topic, max_request_size=4_000_000) as writer:
        for batch in range(8):
            await writer.send_many(0, [(f"k{batch}/{i}", bytes(32_768)) for i in range(40)])
    tasks_before = set(asyncio.all_tasks())
    reader = StateReader(bootstrap, topic, timeout=5)
    await reader.start()
    reading = asyncio.create_task(reader.read_partition(0))
    deadline = time.monotonic() + 30
    while not reader._consumer.assignment() and not reading.done():
        assert time.monotonic() < deadline, "the read never started fetching"
        await asyncio.sleep(0.001)
    noticed = _lost_broker_logged(caplog)
    broker.stop()
    await until_true(lambda: noticed() or reading.done(), 30, "the read to find the broker gone")
    async with asyncio.timeout(10):
        await reader.stop()
    reading.cancel()
    with contextlib.suppress(BaseException):
        await reading
    assert _left_behind(tasks_before) == [], "the reader left tasks running"
    assert _notifier_warnings(caplog) == []


def test_state_clients_log_in_as_the_collector_does():
    security = SecurityConfig.model_validate(
        {"protocol": "SASL_PLAINTEXT", "sasl_mechanism": "SCRAM-SHA-512",
         "sasl_username": "fleet", "sasl_password": "s3cret"}
    )  # fmt: skip
    settings = client_security(security)
    assert settings["security_protocol"] == "SASL_PLAINTEXT"
    assert settings["sasl_mechanism"] == "SCRAM-SHA-512"
    assert (settings["sasl_plain_username"], settings["sasl_plain_password"]) == ("fleet", "s3cret")
    assert client_security(SecurityConfig())["security_protocol"] == "PLAINTEXT"


# --------------------------------------------------------------------------------------------
# Shard state moving between instances: real groups, real scans, real notifiers.

SHARD = 0


@dataclass
class Instance:
    """One ``notifier run`` of the fleet as far as shard state goes."""

    coordinator: Coordinator
    notifier: Notifier
    shard_state: ShardState

    @property
    def cluster(self) -> ClusterState:
        return self.coordinator.clusters["it"]

    async def scan(self) -> ScanResult:
        """One real scan of the cluster, processed here. A scan the broker fails (it drops a
        connection now and then) is made again, as the service's next interval would."""
        for attempt in range(3):
            try:
                result = await self.cluster.collector.scan()
                break
            except ScanError:
                if attempt == 2:
                    raise
                await asyncio.sleep(0.5)
        self.coordinator.process(self.cluster, result)
        return result

    async def publish(self, groups: list[str]) -> PublishReport:
        return await self.shard_state.publish_scan(
            "it", {SHARD: groups}, self.coordinator, self.notifier
        )


@pytest.fixture
async def instances(kafka_broker, tmp_path, notifiers, http):
    """Start instances sharing one state topic (``make(name, snapshot_every)``)."""
    topic = _topic("fleet")
    await ensure_topic(kafka_broker.bootstrap_servers, topic, 8)
    made: list[Instance] = []

    async def make(name: str, prefix: str, snapshot_every: int = 4) -> Instance:
        data_dir = tmp_path / name
        service = _service(kafka_broker.bootstrap_servers, prefix, data_dir, SCAN_S)
        # The test paces the scans (a scan, a publish, then a sleep of one interval), not the
        # scheduler: on a busy machine two scans are further apart than 1.5 intervals, which
        # the windows would rightly call a gap. What is tested here is the hand-over.
        rules = with_parameters(_rules(), {"burrow.enabled": True, "window.max_gap_factor": 6.0})
        notifier = await notifiers(
            config(webhook(http.url_for("/hook"))), data_dir / "notify.sqlite"
        )
        coordinator = Coordinator(service, rules, data_dir, notifier)
        coordinator.clusters["it"].collector = make_collector(service.clusters[0])
        shard_state = ShardState(
            kafka_broker.bootstrap_servers,
            topic,
            coordinator,
            notifier,
            snapshot_every=snapshot_every,
        )
        await shard_state.start()
        instance = Instance(coordinator, notifier, shard_state)
        made.append(instance)
        return instance

    yield make
    for instance in made:
        await instance.shard_state.stop()
        collector = instance.cluster.collector
        if collector is not None:
            await collector.close()


async def _groups(bootstrap: str, prefix: str) -> tuple[str, str]:
    """A caught-up group and one left behind with no members (Burrow's STOP: ERR)."""
    topic = f"{prefix}t"
    await _produce(bootstrap, topic, [6, 6])
    ok, behind = f"{prefix}ok", f"{prefix}behind"
    await _commit(bootstrap, ok, {(topic, 0): 6, (topic, 1): 6})
    await _commit(bootstrap, behind, {(topic, 0): 1, (topic, 1): 2})
    return ok, behind


def _results(instance: Instance, groups: list[str]) -> dict[str, str]:
    evaluation = instance.cluster.evaluation
    assert evaluation is not None
    return {g: jsonenc.dumps(result_to_dict(evaluation.result("it", g))) for g in groups}


def _same_windows(a: Instance, b: Instance, group: str) -> None:
    mine = a.cluster.store.export_group("it", group)
    theirs = b.cluster.store.export_group("it", group)
    assert mine is not None and theirs is not None
    assert mine.partitions == theirs.partitions
    for name, values in mine.columns.items():
        np.testing.assert_array_equal(theirs.columns[name], values, err_msg=name)
    for name, values in mine.tables.items():
        np.testing.assert_array_equal(theirs.tables[name], values, err_msg=name)
    gid_a = a.cluster.store.group_id("it", group)
    gid_b = b.cluster.store.group_id("it", group)
    assert gid_a is not None and gid_b is not None
    assert a.cluster.evaluator.export_group(gid_a) == b.cluster.evaluator.export_group(gid_b)


async def _paced(seconds: float) -> None:
    # Scans a scan interval apart, as the scheduler runs them: the windows judge gaps by it.
    await asyncio.sleep(seconds)


def _unsnapshotted(groups: list[str], scans: int = 7, every: int = 4) -> int:
    """How many of ``scans`` scans' changes come after each group's last snapshot (snapshots
    every ``every`` scans, at each group's point of the cycle), summed over ``groups``."""
    last_snapshot = {
        g: max(s for s in range(scans) if s == 0 or (s + _phase(("it", g), every)) % every == 0)
        for g in groups
    }
    return sum(scans - 1 - s for s in last_snapshot.values())


async def test_a_loaded_shard_evaluates_as_its_old_owner_would(kafka_broker, instances):
    # Names whose snapshot points leave some changes to replay (about 1 in 16 would not).
    prefix = next(
        p for p in (_name("move") + "-" for _ in range(200))
        if _unsnapshotted([f"{p}ok", f"{p}behind"]) > 0
    )  # fmt: skip
    groups = list(await _groups(kafka_broker.bootstrap_servers, prefix))
    a = await instances("a", prefix, snapshot_every=4)
    published = []
    for _ in range(7):  # snapshots every 4 scans, at each group's point of the cycle
        await a.scan()
        published.append(await a.publish(groups))
        await _paced(SCAN_S)
    assert published[0].snapshots == 2 and sum(p.snapshots for p in published) >= 4
    assert a.cluster.tracker.statuses == {("it", groups[1]): GroupStatus.ERR}
    # A stops without a final snapshot: what it published since each group's last snapshot
    # are changes, and every one of them must be replayed.
    unsnapshotted = _unsnapshotted(groups)
    assert unsnapshotted > 0

    b = await instances("b", prefix)  # a fresh process: it has never scanned
    report = await b.shard_state.load(SHARD)
    assert (report.groups, report.changes, report.skipped) == (2, unsnapshotted, [])
    assert b.shard_state.groups(SHARD) == {("it", g) for g in groups}
    for group in groups:
        _same_windows(a, b, group)
    assert b.cluster.tracker.statuses == a.cluster.tracker.statuses
    assert b.cluster.store.last_scan_ts == a.cluster.store.last_scan_ts

    result = await a.scan()  # the next scan, seen by both
    b.coordinator.process(b.cluster, result)
    assert _results(b, groups) == _results(a, groups)
    for group in groups:
        _same_windows(a, b, group)

    # A hands the shard over for good (a revoke): a snapshot of each group, then it forgets
    # the groups and their incident, also in its database (a restart does not bring it back).
    assert a.notifier.open_incidents() != {}
    assert (await a.shard_state.snapshot(SHARD)).snapshots == 2
    a.shard_state.drop(SHARD)
    assert a.cluster.store.groups("it") == [] and a.cluster.tracker.statuses == {}
    assert a.notifier.open_incidents() == {}
    assert a.notifier.store.incidents(open_only=True) == []

    c = await instances("c", prefix)  # the next owner reads one snapshot per group
    report = await c.shard_state.load(SHARD)
    assert (report.groups, report.changes, report.incidents) == (2, 0, 1)
    for group in groups:
        _same_windows(b, c, group)


async def test_an_open_incident_continues_on_the_new_owner(kafka_broker, instances, http):
    bootstrap = kafka_broker.bootstrap_servers
    prefix = _name("incident") + "-"
    ok, behind = await _groups(bootstrap, prefix)
    groups = [ok, behind]
    a = await instances("a", prefix)

    deadline = time.monotonic() + 60
    while not a.notifier.open_incidents():
        assert time.monotonic() < deadline, "the lagging group never opened an incident"
        await a.scan()
        await a.publish(groups)
        await _paced(SCAN_S)
    (opened,) = a.notifier.open_incidents().values()
    await until_true(lambda: _events(http) == [("open", opened.id)], 30, "the open to be delivered")
    # The open's notification log went out as it was planned, not with the next scan.
    await a.shard_state.flush()
    # A dies here (kill -9): no further scan, no snapshot, no revoke.

    b = await instances("b", prefix)
    report = await b.shard_state.load(SHARD)
    assert report.incidents == 1
    assert [i.id for i in b.notifier.open_incidents().values()] == [opened.id]
    assert b.cluster.tracker.statuses == {("it", behind): GroupStatus.ERR}

    for _ in range(3):  # still ERR on B: the same incident, nothing re-opened or repeated
        await _paced(SCAN_S)
        await b.scan()
        await b.publish(groups)
    assert b.notifier.open_incidents()[("it", behind)].id == opened.id

    await _commit(bootstrap, behind, {(f"{prefix}t", 0): 6, (f"{prefix}t", 1): 6})
    deadline = time.monotonic() + 60
    while b.notifier.open_incidents():
        assert time.monotonic() < deadline, "the caught-up group never recovered"
        await _paced(SCAN_S)
        await b.scan()
        await b.publish(groups)
    await until_true(
        lambda: ("resolve", opened.id) in _events(http), 30, "the resolve to be delivered"
    )
    await b.notifier.wait_delivered(10)
    assert _events(http) == [("open", opened.id), ("resolve", opened.id)]

    # The closed incident's key is a tombstone: a later owner finds no incident to continue.
    c = await instances("c", prefix)
    assert (await c.shard_state.load(SHARD)).incidents == 0
    assert c.notifier.open_incidents() == {}
    assert c.cluster.tracker.statuses == {}


async def test_a_damaged_record_is_skipped_and_named(kafka_broker, instances, caplog):
    prefix = _name("damaged") + "-"
    groups = list(await _groups(kafka_broker.bootstrap_servers, prefix))
    a = await instances("a", prefix)
    await a.scan()
    await a.publish(groups)
    good = a.shard_state._writer  # the same producer the instance writes with
    await good.send(SHARD, f"snap/it/{prefix}ghost", b"\x00garbage")
    records = await read_partition(kafka_broker.bootstrap_servers, a.shard_state.topic, SHARD)
    offset = max(r.offset for r in records)

    b = await instances("b", prefix)
    with caplog.at_level(logging.WARNING, logger="notifier.fleet.state"):
        report = await b.shard_state.load(SHARD)
    assert report.groups == 2 and len(report.skipped) == 1
    topic = a.shard_state.topic
    assert any(
        r.getMessage().startswith(
            f"topic {topic} partition {SHARD} offset {offset} key snap/it/{prefix}ghost: "
            "the state record cannot be used"
        )
        for r in caplog.records
    )


async def test_a_group_that_left_its_cluster_leaves_the_shard(kafka_broker, instances):
    prefix = _name("gone") + "-"
    ok, behind = await _groups(kafka_broker.bootstrap_servers, prefix)
    a = await instances("a", prefix, snapshot_every=3)
    for _ in range(4):
        await a.scan()
        await a.publish([ok, behind])
    await a.scan()
    report = await a.publish([ok])  # the scan no longer lists the other group
    assert report.tombstones == 1
    assert a.shard_state.groups(SHARD) == {("it", ok)}

    b = await instances("b", prefix)
    loaded = await b.shard_state.load(SHARD)
    assert (loaded.groups, loaded.skipped) == (1, [])
    assert b.cluster.store.groups("it") == [("it", ok)]


async def test_after_a_scan_that_was_not_published_the_next_publish_is_a_snapshot(
    kafka_broker, instances
):
    prefix = _name("unpublished") + "-"
    groups = list(await _groups(kafka_broker.bootstrap_servers, prefix))
    a = await instances("a", prefix, snapshot_every=50)
    for _ in range(2):
        await a.scan()
        await a.publish(groups)
        await _paced(SCAN_S)
    await a.scan()  # e.g. the coordination cluster was unreachable: not published
    await _paced(SCAN_S)
    await a.scan()
    report = await a.publish(groups)
    assert (report.snapshots, report.changes) == (2, 0)

    b = await instances("b", prefix)
    await b.shard_state.load(SHARD)
    for group in groups:
        _same_windows(a, b, group)


def _events(http: HttpReceiver) -> list[tuple[str, str]]:
    return [
        (alert["event"], alert["incident"]["id"])
        for request in http.to("/hook")
        for alert in request.json["alerts"]
    ]


async def test_shards_loaded_together_or_one_by_one_install_the_same(kafka_broker, instances):
    bootstrap = kafka_broker.bootstrap_servers
    prefix = _name("many") + "-"
    groups = [*await _groups(bootstrap, prefix + "a"), *await _groups(bootstrap, prefix + "b")]
    a = await instances("a", prefix)
    placed = dict(zip((1, 2, 5, 6), groups, strict=True))  # shards 0, 3, 4 and 7 stay empty
    for _ in range(3):
        await a.scan()
        await a.shard_state.publish_scan(
            "it", {shard: [group] for shard, group in placed.items()}, a.coordinator, a.notifier
        )
        await _paced(SCAN_S)

    b = await instances("b", prefix)
    together = await b.shard_state.load_many(range(8))
    c = await instances("c", prefix)
    one_by_one = [await c.shard_state.load(shard) for shard in range(8)]
    for reports, instance in ((together, b), (one_by_one, c)):
        assert [r.shard for r in reports] == list(range(8))
        assert [r.groups for r in reports] == [1 if s in placed else 0 for s in range(8)]
        assert all(r.records == 0 for r in reports if r.shard not in placed)
        assert all(r.skipped == [] for r in reports)
        for shard in range(8):
            expected = {("it", placed[shard])} if shard in placed else set()
            assert instance.shard_state.groups(shard) == expected
        for group in groups:
            _same_windows(a, instance, group)
        assert instance.cluster.tracker.statuses == a.cluster.tracker.statuses


async def test_a_snapshot_from_an_instance_without_newer_evidence_is_installed(
    kafka_broker, instances
):
    # A rolling upgrade: the old instance keeps no e_churn_settled (a column added since); the
    # new one installs its snapshot with that evidence at its initial value, not skipped.
    prefix = _name("older") + "-"
    groups = list(await _groups(kafka_broker.bootstrap_servers, prefix))
    a = await instances("a", prefix)
    store = a.cluster.store
    store.portable_row_columns = tuple(
        n for n in store.portable_row_columns if n != "e_churn_settled"
    )
    await a.scan()
    await a.publish(groups)
    b = await instances("b", prefix)
    report = await b.shard_state.load(SHARD)
    assert (report.groups, report.skipped) == (2, [])
