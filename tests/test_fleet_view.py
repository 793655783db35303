"""The fleet-wide view (issue 10), as the people reading the API see it: two instances own
disjoint groups of one cluster; each instance's API (real HTTP, uvicorn in the test's loop)
answers for every group of the fleet, naming the instance that owns it; a silence made through
one instance mutes a group the other owns, and its deletion reaches it too; each /metrics
exports only its own groups, under its own ``instance`` label. The view topic lives on the
embedded broker (Tansu).

Ownership comes from a fixed set of groups here (the same attributes as the fleet's
membership), so the test is exact about which instance owns what."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest
from prometheus_client.parser import text_string_to_metric_families

from notifier.api import ApiServer, create_app
from notifier.fleet.view import FleetView, view_topic
from notifier.fleet.viewtable import Bulletin, MemberRecord, ViewTable
from notifier.notify.config import parse_notify
from notifier.notify.silences import Silence
from notifier.rules import load_rules
from notifier.types import Sample

from .scripted import drive, scan_result, service
from .test_metrics import BURROW_TOTAL, KAFKA_EXPORTER_SUMS, POLL_TIME_MS, _promtool
from .waiting import until_value

ROOT = Path(__file__).resolve().parents[1]
T0 = 1_714_560_000_000
STUCK_FROM = 6
"""The scan from which each instance's group stops committing: ERR from there, an incident
three scans later (rules.yaml's ``for``)."""

pytestmark = pytest.mark.broker


def commits(group: str, scan: int) -> list[Sample]:
    """``group`` reads topic ``t-<group>`` (two partitions) until STUCK_FROM, then stops."""
    moving = scan < STUCK_FROM
    return [
        Sample(ts=T0 + scan * 10_000, cluster="c", group=group, topic=f"t-{group}", partition=p,
               committed_offset=100 + 10 * scan if moving else 100,
               log_end_offset=110 + 10 * scan, group_state="Stable", members=1)
        for p in range(2)
    ]  # fmt: skip


@dataclass
class FixedOwnership:
    """Membership's attributes over a fixed set of groups."""

    instance: str
    groups: frozenset[str]
    owned: frozenset[int] = field(default_factory=lambda: frozenset({0}))
    partitions: int = 2
    coordination_ok: bool = True

    def owns(self, cluster: str, group: str) -> bool:
        return group in self.groups


@dataclass
class Instance:
    name: str
    group: str
    coord: Any
    notifier: Any
    view: FleetView
    server: ApiServer
    http: httpx.AsyncClient

    async def get(self, path: str) -> Any:
        response = await self.http.get(path)
        assert response.status_code == 200, (path, response.status_code, response.text)
        return response.json()


@pytest.fixture
async def fleet(request, kafka_broker, tmp_path, notifiers) -> AsyncIterator[dict[str, Instance]]:
    """Instances "a" (owns group "orders") and "b" (owns "billing") over cluster "c", sharing
    one view topic; time is the scans' time, shared by both. Parametrized (indirect) with
    ``{instance: (group, scans)}``, that instance also owns ``group``, listed in its first
    ``scans`` scans only."""
    extra: dict[str, tuple[str, int]] = getattr(request, "param", {})
    scans = {"a": 0, "b": 0}

    def clock() -> int:
        return T0 + max(scans.values()) * 10_000

    topic = view_topic(f"notifier-fleet.t{uuid.uuid4().hex[:8]}.state")
    receivers = {"r": {"webhook": {"url": "http://127.0.0.1:9/"}}}  # never reached
    notify = parse_notify({"receivers": receivers, "route": {"receiver": "r"}})
    instances: dict[str, Instance] = {}
    for name, group in (("a", "orders"), ("b", "billing")):
        directory = tmp_path / name
        directory.mkdir()
        notifier = await notifiers(notify, directory / "notify.sqlite", clock=clock)
        other, until_scan = extra.get(name, ("", 0))
        script = [
            scan_result(commits(group, i) + (commits(other, i) if i < until_scan else []), "c",
                        T0 + i * 10_000)
            for i in range(40)
        ]  # fmt: skip
        coord, _ = service(directory, script, load_rules(ROOT / "rules.yaml"), sink=notifier)
        ownership = FixedOwnership(name, frozenset({group, other} - {""}))
        view = FleetView(kafka_broker.bootstrap_servers, topic, ownership, coord, notifier,
                         clock=clock, poll_interval_s=0.05, member_interval_s=0.5)  # fmt: skip
        app = create_app(coord, notifier, clock=clock, fleet=view)
        server = ApiServer(app, "127.0.0.1", 0)
        await server.start()
        view.api_url = server.url
        await view.start()
        http = httpx.AsyncClient(base_url=server.url, timeout=30)
        instances[name] = Instance(name, group, coord, notifier, view, server, http)

    async def scan(name: str, count: int) -> None:
        for _ in range(count):
            await drive(instances[name].coord, 1)
            scans[name] += 1

    instances["scan"] = scan  # type: ignore[assignment]
    try:
        yield instances
    finally:
        for name in ("a", "b"):
            instance = instances[name]
            await instance.http.aclose()
            await instance.view.stop()
            await instance.server.stop()


def rows_by_group(body: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {row["group"]: row for row in body["groups"]}


async def test_each_instance_answers_for_every_group_of_the_fleet(fleet):
    a, b, scan = fleet["a"], fleet["b"], fleet["scan"]
    await scan("a", 12)
    await scan("b", 12)

    async def both_everywhere():
        bodies = [rows_by_group(await i.get("/api/groups")) for i in (a, b)]
        complete = all(set(body) == {"orders", "billing"} for body in bodies)
        # The scans' time jumps ahead of the member records here: wait for fresh ones.
        fresh = complete and not any(row["stale"] for body in bodies for row in body.values())
        return bodies if fresh else None

    on_a, on_b = await until_value(both_everywhere, 30, "both groups, fresh, on both instances")
    for rows in (on_a, on_b):
        assert rows["orders"]["instance"] == "a" and rows["billing"]["instance"] == "b"
        assert rows["orders"]["status"] == rows["billing"]["status"] == "ERR"
        assert rows["orders"]["rules"] and rows["billing"]["incident"]["status"] == "ERR"
    # The owner's row and the other instance's copy of it say the same.
    clock_members = {"data_age_seconds", "stale", "incident", "owner_gone"}
    for group, owner, other in (("orders", on_a, on_b), ("billing", on_b, on_a)):
        mine = {k: v for k, v in owner[group].items() if k not in clock_members}
        theirs = {k: v for k, v in other[group].items() if k not in clock_members}
        assert mine == theirs
        assert other[group]["stale"] is False
        assert other[group]["incident"]["id"] == owner[group]["incident"]["id"]

    # The group detail: the same evidence and members, wherever it is asked.
    local = await b.get("/api/groups/c/billing")
    remote = await a.get("/api/groups/c/billing")
    assert remote["instance"] == local["instance"] == "b"
    assert set(local) <= set(remote)
    assert remote["partitions"] == local["partitions"]  # asked of the owner: windows too
    assert all(p["window"] for p in remote["partitions"]), remote["partitions"]
    assert remote["findings"] == local["findings"] and remote["status"] == "ERR"
    assert (await a.http.get("/api/groups/c/nobody")).status_code == 404
    # The status page's chart of it: the owner's history, asked of the owner.
    history_there = await b.get("/api/groups/c/billing/history?hours=1")
    history_here = await a.get("/api/groups/c/billing/history?hours=1")
    assert history_here == history_there and history_here["instance"] == "b"
    assert (await a.http.get("/groups/c/billing")).status_code == 200

    # Burrow's v3: the consumer list, status and lag of the other's group.
    listed = await a.get("/v3/kafka/c/consumer")
    assert listed["consumers"] == ["billing", "orders"]
    lag_there = (await b.get("/v3/kafka/c/consumer/billing/lag"))["status"]
    lag_here = (await a.get("/v3/kafka/c/consumer/billing/lag"))["status"]
    assert lag_here["instance"] == lag_there["instance"] == "b"
    for member in ("status", "complete", "partitions", "partition_count", "maxlag", "totallag"):
        assert lag_here[member] == lag_there[member], member
    status_here = (await a.get("/v3/kafka/c/consumer/billing/status"))["status"]
    assert status_here["status"] == "ERR"
    assert all(p["status"] != "OK" for p in status_here["partitions"])
    missing = await a.http.get("/v3/kafka/c/consumer/nobody/status")
    assert missing.status_code == 404 and missing.json()["status"]["status"] == "NOTFOUND"

    # /api/fleet: both instances, their shards and their APIs.
    members = {m["instance"]: m for m in (await b.get("/api/fleet"))["instances"]}
    assert set(members) == {"a", "b"}
    assert members["a"]["api"] == a.server.url and members["a"]["shards"] == [0]
    assert not members["a"]["stale"] and members["a"]["groups"] == 1


async def test_a_silence_made_on_one_instance_mutes_the_other_instances_group(fleet):
    a, b, scan = fleet["a"], fleet["b"], fleet["scan"]
    await scan("b", 4)  # billing is still fine
    made = await a.http.post(
        "/api/silences",
        json={"matchers": {"group": "billing"}, "ends_at": T0 + 86_400_000,
              "author": "ops", "comment": "billing is being migrated"},
    )  # fmt: skip
    assert made.status_code == 201, made.text
    silence_id = made.json()["silence"]["id"]

    async def known_on_b():
        return silence_id in {s["id"] for s in (await b.get("/api/silences"))["silences"]}

    await until_value(known_on_b, 30, "the silence on b")
    await scan("b", 10)  # billing stops reading: ERR, then an incident, silenced from the start

    [incident] = b.notifier.incidents()
    assert incident.group == "billing" and incident.silenced

    async def silenced_on_a():
        row = rows_by_group(await a.get("/api/groups")).get("billing")
        return row if row and row["incident"] and row["silenced"] else None

    row = await until_value(silenced_on_a, 30, "billing silenced as a sees it")
    assert row["silence_ids"] == [silence_id] and row["instance"] == "b"

    expired = await b.http.delete(f"/api/silences/{silence_id}")  # made on a, expired on b
    assert expired.status_code == 200, expired.text

    async def expired_on_a():
        states = {s["id"]: s for s in (await a.get("/api/silences"))["silences"]}
        return states[silence_id] if states[silence_id]["state"] == "expired" else None

    expired_row = await until_value(expired_on_a, 30, "the expiry on a")
    assert not b.notifier.incidents()[0].silenced

    async def unsilenced_on_a():
        row = rows_by_group(await a.get("/api/groups")).get("billing")
        return row if row and not row["silenced"] else None

    assert (await until_value(unsilenced_on_a, 30, "billing no longer silenced on a"))[
        "silence_ids"
    ] == []
    # Applying what the view says again changes nothing (each instance reads its own records).
    assert not a.notifier.apply_silence(Silence.from_dict(expired_row))


async def test_each_instance_exports_its_own_groups_under_its_own_label(fleet):
    a, b, scan = fleet["a"], fleet["b"], fleet["scan"]
    await scan("a", 8)
    await scan("b", 8)
    texts = {}
    for instance in (a, b):
        response = await instance.http.get("/metrics")
        assert response.status_code == 200
        texts[instance.name] = response.text
    for name, group in (("a", "orders"), ("b", "billing")):
        text = texts[name]
        # Only the names the anchors themselves use (Burrow's, kafka_exporter's, Kafka Lag
        # Exporter's), as for a single instance.
        assert sorted(_promtool(text)) == sorted(BURROW_TOTAL + KAFKA_EXPORTER_SUMS + POLL_TIME_MS)
        instances = set()
        groups = set()
        for family in text_string_to_metric_families(text):
            for sample in family.samples:
                instances.add(sample.labels.get("instance"))
                for label in ("consumergroup", "group"):
                    if label in sample.labels:
                        groups.add(sample.labels[label])
        assert instances == {name}, f"every series of {name} carries instance={name}"
        assert groups == {group}


async def test_the_groups_of_an_instance_that_left_are_answered_as_stale(fleet):
    a, b, scan = fleet["a"], fleet["b"], fleet["scan"]
    await scan("b", 4)

    async def fresh_on_a():
        row = rows_by_group(await a.get("/api/groups")).get("billing")
        return row if row and not row["stale"] else None

    await until_value(fresh_on_a, 30, "billing on a")
    await b.view.stop()  # b leaves: its member record is withdrawn, its bulletins stay

    async def stale_on_a():
        row = rows_by_group(await a.get("/api/groups")).get("billing")
        return row if row and row["stale"] else None

    row = await until_value(stale_on_a, 30, "billing stale on a")
    assert row["owner_gone"] and row["complete"] == 0.0 and row["partial"]
    detail = await a.get("/api/groups/c/billing")
    assert detail["stale"] and detail["partial"] and detail["instance"] == "b"
    # Its owner's bulletin has the partitions' figures; their windows went with the owner.
    assert detail["partitions"] and all("window" not in p for p in detail["partitions"])
    lag = (await a.get("/v3/kafka/c/consumer/billing/lag"))["status"]
    assert lag["stale"] and lag["owner_gone"]
    assert [m["instance"] for m in (await a.get("/api/fleet"))["instances"]] == ["a"]


async def test_a_group_whose_verdict_holds_stays_fresh_between_the_refreshes_of_its_bulletin(
    fleet,
):
    """An unchanged group's bulletin is re-published only every few scans; its owner's member
    record says it keeps scanning, so the other instance never calls the group stale."""
    a, b, scan = fleet["a"], fleet["b"], fleet["scan"]
    for step in range(20):
        await scan("a", 1)
        await scan("b", 1)
        if step < 12:
            continue  # billing is in ERR with its incident open from here on
        last_scan = b.coord.clusters["c"].metrics.last_success_ms

        async def record_of_this_scan(last_scan=last_scan):
            record = a.view.table.members.get("b")
            return record is not None and record.scanned.get("c") == last_scan

        await until_value(record_of_this_scan, 30, f"b's member record after scan {step}")
        row = rows_by_group(await a.get("/api/groups"))["billing"]
        assert (row["status"], row["stale"]) == ("ERR", False), (step, row)
        assert row["data_age_seconds"] <= 6 * 10, row  # the figures are at most a refresh old


def test_the_table_keeps_the_latest_value_per_key_and_forgets_tombstones():
    table = ViewTable()
    member = MemberRecord("a", (0, 3), "http://127.0.0.1:1/", T0, {"c": T0 - 5_000})
    table.apply("m/a", member.encode())
    bulletin = Bulletin("c", "g/x", "a", T0, T0, 10.0, {"group": "g/x"}, None, {}, {})
    table.apply("g/c/g/x", bulletin.encode())  # a group name may hold a slash
    table.apply("s/1", orjson.dumps({"id": "1"}))
    assert table.members == {"a": member} and table.bulletin("c", "g/x") == bulletin
    assert table.bulletins() == [bulletin]
    table.apply("g/c/g/x", None)
    table.apply("s/1", None)
    table.apply("m/a", None)
    assert (table.bulletins(), table.silences, table.members) == ([], {}, {})
    with pytest.raises(ValueError, match="unknown key"):
        table.apply("x/1", b"{}")


def test_an_unreadable_bulletin_is_reported_once_and_answered_as_absent():
    reported: list[str] = []
    table = ViewTable(on_unreadable=lambda key, exc: reported.append(key))
    good = Bulletin("c", "ok", "a", T0, T0, 10.0, {"group": "ok"}, None, {}, {})
    table.apply("g/c/ok", good.encode())
    table.apply("g/c/bad", b'{"cluster": "c"}')  # read only when asked for, like every bulletin
    assert reported == []
    assert table.bulletins("c") == [good] and reported == ["g/c/bad"]
    assert table.bulletin("c", "bad") is None and reported == ["g/c/bad"]


@pytest.mark.parametrize("fleet", [{"b": ("retired", 3)}], indirect=True)
async def test_a_group_that_leaves_its_cluster_leaves_every_instances_answers(fleet):
    a, scan = fleet["a"], fleet["scan"]
    await scan("b", 2)

    async def listed_on_a():
        return "retired" in (await a.get("/v3/kafka/c/consumer"))["consumers"]

    await until_value(listed_on_a, 30, "retired listed on a")
    assert (await a.get("/api/groups/c/retired"))["instance"] == "b"
    await scan("b", 3)  # its owner's scans no longer list it

    async def gone_from_a():
        groups = rows_by_group(await a.get("/api/groups"))
        return "retired" not in groups and "billing" in groups

    await until_value(gone_from_a, 30, "retired gone from a")
    assert "retired" not in (await a.get("/v3/kafka/c/consumer"))["consumers"]
    assert (await a.http.get("/api/groups/c/retired")).status_code == 404
    assert (await a.http.get("/v3/kafka/c/consumer/retired/lag")).status_code == 404
