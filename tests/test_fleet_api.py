"""The fleet's API end to end (issue 10): three real ``notifier run`` processes with a
``coordination:`` section share one cluster of the embedded broker, and any instance's API
answers for every group of the cluster as a user would ask it: the group lists, a group's
status, lag and offsets on an instance that does not own it, ``/api/fleet`` with disjoint shards
covering all, each ``/metrics`` with its own ``instance`` label and only its own groups, a
silence made on one instance muting a group another owns, an incident of another instance's
group, and ``/readyz`` naming the shards each owns.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AsyncExitStack
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, TypeVar

import httpx
import pytest
from aiokafka import AIOKafkaProducer
from prometheus_client.parser import text_string_to_metric_families

from notifier.api import ApiServer, create_app
from notifier.demo import HttpReceiver
from notifier.fleet.view import FleetView, view_topic
from notifier.notify.config import parse_notify
from notifier.rules import load_rules
from tests.scripted import drive, scan_result, service
from tests.service_process import ServiceProcess
from tests.test_collect import _commit, _produce
from tests.test_fleet_coordination import Outage, populate
from tests.test_fleet_view import ROOT, T0, FixedOwnership, commits
from tests.waiting import until_value

pytestmark = pytest.mark.broker

SHARDS = 12
INSTANCES = ("i0", "i1", "i2")
GROUPS = 30
HOT_BACKLOG = 60
"""Records added to the hot topic once the silence is everywhere: lag far over the threshold."""
DEADLINE_S = 180.0
"""Generous: three processes, their scans and rebalances on two shared cores."""

RULES = """\
window: {intervals: 3}
burrow: {enabled: false}
rules:
  - name: lag-warn
    kind: lag
    threshold: 20
    severity: warn
"""

T = TypeVar("T")


def config_yaml(bootstrap: str, prefix: str, hook: str, instance: str) -> str:
    return (
        "clusters:\n"
        f"  - {{name: prod, bootstrap_servers: '{bootstrap}', scan_interval: 2s,"
        f" request_timeout: 10s, scan_timeout: 20s, group_allow: ['^{prefix}-']}}\n"
        f"rules: rules.yaml\ndata_dir: data-{instance}\nhistory: {{enabled: false}}\n"
        "api: {host: 127.0.0.1, port: 0}\n"
        "notify:\n"
        "  receivers:\n"
        "    ops:\n"
        f"      - webhook: {{url: '{hook}'}}\n"
        "  route: {receiver: ops, group_wait: 0s, group_interval: 1s, group_by: ['...']}\n"
        "  delivery: {retry_initial: 0.2s, retry_max: 1s}\n"
        "coordination:\n"
        f"  name: {prefix}\n"
        "  cluster: prod\n"
        f"  partitions: {SHARDS}\n"
        "  session_timeout: 6s\n"
        "  heartbeat_interval: 1s\n"
        f"  instance: {instance}\n"
    )


async def until(what: str, check: Callable[[], Awaitable[T | None]], logs: list[Path]) -> T:
    """Poll ``check`` until it returns something; fail naming ``what`` after DEADLINE_S."""
    deadline = time.monotonic() + DEADLINE_S
    while True:
        found = await check()
        if found:
            return found
        if time.monotonic() > deadline:
            tails = "\n".join(f"--- {p.name}\n{p.read_text()[-3000:]}" for p in logs)
            raise AssertionError(f"not within {DEADLINE_S:g}s: {what}\n{tails}")
        await asyncio.sleep(0.5)


async def get(client: httpx.AsyncClient, url: str) -> Any:
    answer = await client.get(url)
    assert answer.status_code == 200, f"{url}: {answer.status_code} {answer.text}"
    return answer.json()


def rows_of(body: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {row["group"]: row for row in body["groups"]}


def opens(rx: HttpReceiver, group: str) -> list[dict[str, Any]]:
    return [
        alert
        for request in rx.requests
        for alert in request.json["alerts"]
        if alert["incident"]["group"] == group and alert["event"] == "open"
    ]


def metric_groups(text: str) -> tuple[set[str | None], set[str]]:
    """The ``instance`` labels and the groups of every series of a /metrics text."""
    instances: set[str | None] = set()
    groups: set[str] = set()
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            instances.add(sample.labels.get("instance"))
            for label in ("consumergroup", "group"):
                if label in sample.labels:
                    groups.add(sample.labels[label])
    return instances, groups


async def test_every_instance_answers_for_the_whole_fleet(kafka_broker, tmp_path):
    bootstrap = kafka_broker.bootstrap_servers
    prefix = f"fapi-{uuid.uuid4().hex[:8]}"
    cold = await populate(bootstrap, prefix, GROUPS)
    hot_topic = f"{prefix}-hot"
    await _produce(bootstrap, hot_topic, [10])
    hot = [f"{prefix}-hot-a", f"{prefix}-hot-b"]
    for group in hot:
        await _commit(bootstrap, group, {(hot_topic, 0): 8})  # lag 2: fine for now
    every = sorted(cold + hot)
    (tmp_path / "rules.yaml").write_text(RULES)
    logs = [tmp_path / f"{name}.log" for name in INSTANCES]

    async with AsyncExitStack() as stack:
        rx = await stack.enter_async_context(HttpReceiver())
        services: dict[str, ServiceProcess] = {}
        for name, log_path in zip(INSTANCES, logs, strict=True):
            config = tmp_path / f"{name}.yaml"
            config.write_text(config_yaml(bootstrap, prefix, rx.url_for("/hook"), name))
            services[name] = ServiceProcess(config, log_path)
        await asyncio.gather(*(stack.enter_async_context(s) for s in services.values()))
        client = await stack.enter_async_context(httpx.AsyncClient(timeout=30))
        url = {name: s.url.rstrip("/") for name, s in services.items()}

        # /api/fleet on every instance: all three, disjoint shards covering every shard; every
        # instance lists every group, fresh, each row naming the owner.
        async def settled() -> dict[str, dict[str, Any]] | None:
            seen = {}
            for name in INSTANCES:
                fleet = await client.get(f"{url[name]}/api/fleet")
                if fleet.status_code != 200:
                    return None
                shards = {m["instance"]: m["shards"] for m in fleet.json()["instances"]}
                owned = [s for n in INSTANCES for s in shards.get(n, [])]
                if sorted(shards) != list(INSTANCES) or sorted(owned) != list(range(SHARDS)):
                    return None
                rows = rows_of(await get(client, f"{url[name]}/api/groups"))
                if sorted(rows) != every or any(r["stale"] for r in rows.values()):
                    return None
                seen[name] = {"shards": shards, "rows": rows}
            if len({str(s["shards"]) for s in seen.values()}) != 1:
                return None  # a rebalance still under way somewhere
            return seen

        seen = await until("a settled fleet, every group on every instance", settled, logs)
        shards = seen["i0"]["shards"]
        owner = {g: r["instance"] for g, r in seen["i0"]["rows"].items()}
        for name in INSTANCES:
            assert {g: r["instance"] for g, r in seen[name]["rows"].items()} == owner
            assert all(shards[n] for n in INSTANCES), f"an instance owns no shard: {shards}"

            # Burrow's consumer list: every group of the cluster.
            listed = await get(client, f"{url[name]}/v3/kafka/prod/consumer")
            assert sorted(listed["consumers"]) == every

            # /readyz: the shards it owns.
            ready = await get(client, f"{url[name]}/readyz")
            assert ready["fleet"]["instance"] == name
            assert ready["fleet"]["shards"] == sorted(shards[name])

        # A group's status, lag and offsets answer on an instance that does not own it, as its
        # owner answers them.
        group = cold[0]
        mine, other = owner[group], next(n for n in INSTANCES if n != owner[group])
        base = f"/v3/kafka/prod/consumer/{group}"
        status = await get(client, f"{url[other]}{base}/status")
        assert status["status"]["group"] == group and status["status"]["instance"] == mine
        lag_there = await get(client, f"{url[other]}{base}/lag")
        lag_here = await get(client, f"{url[mine]}{base}/lag")
        assert lag_there["status"]["status"] == "OK"
        assert {(p["topic"], p["partition"]) for p in lag_there["status"]["partitions"]} == {
            (p["topic"], p["partition"]) for p in lag_here["status"]["partitions"]
        }
        offsets_there = await get(client, f"{url[other]}{base}")
        offsets_here = await get(client, f"{url[mine]}{base}")
        assert offsets_there["instance"] == mine and not offsets_there["error"]
        assert offsets_there["topics"].keys() == offsets_here["topics"].keys() != set()
        missing = await client.get(f"{url[other]}/v3/kafka/prod/consumer/{prefix}-nobody")
        assert missing.status_code == 404

        # /metrics: each its own instance label and only its own groups; summed over the
        # instances, every group once.
        async def metrics_split() -> dict[str, set[str]] | None:
            by_instance = {}
            for name in INSTANCES:
                answer = await client.get(f"{url[name]}/metrics")
                assert answer.status_code == 200
                instances, groups = metric_groups(answer.text)
                assert instances == {name}, f"{name}'s series carry instance={instances}"
                by_instance[name] = groups
            counted = [g for groups in by_instance.values() for g in groups]
            if sorted(counted) != every:
                return None
            return by_instance

        split = await until("each group in exactly one /metrics", metrics_split, logs)
        for name, groups in split.items():
            assert groups == {g for g, n in owner.items() if n == name}

        # A silence made on one instance shows on all and mutes a group another one owns.
        muted, loud = hot
        maker = next(n for n in INSTANCES if n != owner[muted])
        ends = (datetime.now(UTC) + timedelta(hours=1)).isoformat()
        made = await client.post(
            f"{url[maker]}/api/silences",
            json={"matchers": {"group": muted}, "ends_at": ends, "author": "ops",
                  "comment": "hot-a is being migrated"},
        )  # fmt: skip
        assert made.status_code == 201, made.text
        silence_id = made.json()["silence"]["id"]

        async def everywhere() -> bool:
            for name in INSTANCES:
                body = await get(client, f"{url[name]}/api/silences")
                if silence_id not in {s["id"] for s in body["silences"]}:
                    return False
            return True

        await until("the silence on every instance", everywhere, logs)
        producer = AIOKafkaProducer(bootstrap_servers=bootstrap)
        await producer.start()
        try:
            for i in range(HOT_BACKLOG):
                await producer.send_and_wait(hot_topic, b"late%d" % i, partition=0)
        finally:
            await producer.stop()

        [alert] = await until("the loud group's page", lambda: _ready(opens(rx, loud)), logs)

        async def muted_incident() -> dict[str, Any] | None:
            row = rows_of(await get(client, f"{url[maker]}/api/groups"))[muted]
            return row if row["incident"] and row["silenced"] else None

        row = await until("the muted group's incident, silenced", muted_incident, logs)
        assert row["instance"] == owner[muted] and row["silence_ids"] == [silence_id]
        assert opens(rx, muted) == [], "a silenced group was paged"

        # An incident of a group another instance owns: that instance's answer.
        incident_id = alert["incident"]["id"]
        asker = next(n for n in INSTANCES if n != owner[loud])
        detail = await get(client, f"{url[asker]}/api/incidents/{incident_id}")
        assert detail["instance"] == owner[loud]
        assert detail["incident"]["group"] == loud and detail["incident"]["id"] == incident_id
        nowhere = await client.get(f"{url[asker]}/api/incidents/{'0' * 32}")
        assert nowhere.status_code == 404, nowhere.text

        assert opens(rx, muted) == [], "a silenced group was paged"


async def _ready(value: T) -> T:
    return value


# ------------------------------------------------------------------------------------------
# In one process: the view joined late, and an owner that does not answer


@dataclass
class Member:
    """One instance's coordinator, notifier, fleet view and API (real HTTP)."""

    coord: Any
    view: FleetView
    server: ApiServer
    http: httpx.AsyncClient
    scans: list[int]
    """How many scans it made (its clock is the scans' time)."""

    async def scan(self, count: int) -> None:
        for _ in range(count):
            await drive(self.coord, 1)
            self.scans[0] += 1


@pytest.fixture
async def members(tmp_path, notifiers) -> AsyncIterator[Callable[..., Awaitable[Member]]]:
    """Start members over cluster "c": ``await members(name, group, bootstrap, topic, ...)``;
    all stopped after."""
    started: list[Member] = []
    receivers = {"r": {"webhook": {"url": "http://127.0.0.1:9/"}}}  # never reached
    notify = parse_notify({"receivers": receivers, "route": {"receiver": "r"}})

    async def start(
        name: str, group: str, bootstrap: str, topic: str, *, background: bool = False,
        api_url: str | None = None,
    ) -> Member:  # fmt: skip
        directory = tmp_path / name
        directory.mkdir()
        scans = [0]

        def clock() -> int:
            return T0 + scans[0] * 10_000

        notifier = await notifiers(notify, directory / "notify.sqlite", clock=clock)
        script = [scan_result(commits(group, i), "c", T0 + i * 10_000) for i in range(40)]
        coord, _ = service(directory, script, load_rules(ROOT / "rules.yaml"), sink=notifier)
        view = FleetView(bootstrap, topic, FixedOwnership(name, frozenset({group})), coord,
                         notifier, clock=clock, poll_interval_s=0.05, member_interval_s=0.5,
                         background_start=background)  # fmt: skip
        server = ApiServer(create_app(coord, notifier, clock=clock, fleet=view), "127.0.0.1", 0)
        await server.start()
        view.api_url = api_url or server.url
        http = httpx.AsyncClient(base_url=server.url, timeout=30)
        member = Member(coord, view, server, http, scans)
        started.append(member)
        await asyncio.wait_for(view.start(), 60)
        return member

    try:
        yield start
    finally:
        for member in started:
            await member.http.aclose()
            await member.view.stop()
            await member.server.stop()


async def test_a_view_unreachable_at_start_up_is_joined_in_the_background(kafka_broker, members):
    relay = Outage()  # the coordination cluster, unreachable when the instance starts
    host, port = kafka_broker.bootstrap_servers.rsplit(":", 1)
    relay.target = (host, int(port))
    relay_port = await relay.start()
    relay.cut()
    topic = view_topic(f"notifier-fleet.t{uuid.uuid4().hex[:8]}.state")
    try:
        a = await members("a", "orders", f"127.0.0.1:{relay_port}", topic, background=True)
        await a.scan(4)

        # Its own groups answer; what only the view knows says it is not available yet.
        groups = await a.http.get("/api/groups")
        assert groups.status_code == 200
        assert [r["group"] for r in groups.json()["groups"]] == ["orders"]
        assert "not available yet" in groups.json()["fleet_view"]
        assert (await a.http.get("/api/groups/c/orders")).status_code == 200
        for path in ("/api/fleet", "/api/groups/c/billing", "/v3/kafka/c/consumer/billing/lag"):
            answer = await a.http.get(path)
            assert answer.status_code == 503, (path, answer.text)
            assert "not available yet" in answer.json()["message"]
        assert not a.view.available

        relay.restore()

        async def joined() -> Any:
            answer = await a.http.get("/api/fleet")
            return answer.json() if answer.status_code == 200 else None

        fleet = await until_value(joined, 90, "the view joined once its cluster answers")
        assert [m["instance"] for m in fleet["instances"]] == ["a"]
        assert "fleet_view" not in (await a.http.get("/api/groups")).json()
    finally:
        await relay.close()


async def test_an_owner_that_does_not_answer_is_a_503_naming_it(kafka_broker, members):
    topic = view_topic(f"notifier-fleet.t{uuid.uuid4().hex[:8]}.state")
    bootstrap = kafka_broker.bootstrap_servers
    a = await members("a", "orders", bootstrap, topic)
    b = await members("b", "billing", bootstrap, topic, api_url="http://127.0.0.1:9/")
    await b.scan(4)
    await a.scan(4)

    async def billing_on_a() -> Any:
        answer = await a.http.get("/api/groups/c/billing")
        return answer.status_code == 200

    await until_value(billing_on_a, 60, "billing in a's view")
    for path in ("/v3/kafka/c/consumer/billing", "/api/groups/c/billing/history"):
        answer = await a.http.get(path)
        assert answer.status_code == 503, (path, answer.text)
        message = answer.json()["message"]
        assert "instance b" in message and "http://127.0.0.1:9/" in message, message
    # What the view has still answers.
    assert (await a.http.get("/v3/kafka/c/consumer/billing/lag")).status_code == 200
    # A request another instance forwarded is never forwarded on (no loop in a hand-over).
    forwarded = await a.http.get(
        "/v3/kafka/c/consumer/billing", headers={"x-notifier-forwarded-by": "b"}
    )
    assert forwarded.status_code == 503 and "ask again" in forwarded.json()["message"]
