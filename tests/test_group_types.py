"""Kafka 4 consumer-protocol groups (KIP-848), share and streams groups, through the collector.

Apache Kafka's own answers (a classic group typed ``classic``, consumer-protocol groups of the
Java consumer, a share group) are in tests/test_apache_kafka.py. These tests run against
:class:`~tests.kafka_script.ScriptedKafka`, a scripted broker on a socket whose ListGroups v5
and ConsumerGroupDescribe answers are encoded byte by byte from Kafka's message schemas, for
what a real broker does not do on request: states mid-reconciliation, errors, old versions. The
rule tests at the end scan it with the real collector and replay what it saw through
``notifier test-rules``.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml
from click.testing import CliRunner

from notifier import resources
from notifier.api import create_app
from notifier.cli import main
from notifier.collect import ClusterCollector, ScanError, ScanResult, member_hash
from notifier.config import parse_service_config
from notifier.rules import load_rules
from notifier.service import Coordinator, make_collector
from notifier.types import Sample, table_to_samples
from tests.kafka_script import Member, ScriptedKafka
from tests.scripted import RecordingSink

GROUP_AUTHORIZATION_FAILED, INVALID_GROUP_ID = 30, 24


@pytest.fixture
async def kafka4() -> AsyncIterator[ScriptedKafka]:
    async with ScriptedKafka("4.0") as kafka:
        yield kafka


@pytest.fixture
async def kafka36() -> AsyncIterator[ScriptedKafka]:
    async with ScriptedKafka("3.6") as kafka:
        yield kafka


async def scan(kafka: ScriptedKafka, **kwargs: Any) -> ScanResult:
    async with ClusterCollector(kafka.bootstrap_servers, cluster="k", **kwargs) as collector:
        return await collector.scan()


def rows(result: ScanResult, group: str) -> dict[tuple[str, int], Sample]:
    return {(s.topic, s.partition): s for s in table_to_samples(result.samples) if s.group == group}


def two_members(epoch: int = 4, state: str = "Stable") -> dict[str, Any]:
    return {
        "state": state,
        "epoch": epoch,
        "members": [Member("m-a", {"orders": [0]}), Member("m-b", {"orders": [1]})],
        "commits": {("orders", 0): 90, ("orders", 1): 45},
    }


# --------------------------------------------------------------------------------------------
# Committed offsets


async def test_a_broker_without_offset_fetch_v8_is_asked_one_group_per_request(kafka36):
    # The scripted broker advertises OffsetFetch v1-v3 only: many groups in one request
    # (KIP-709) need v8, so nothing multi-group is sent, and every group is still read.
    kafka36.topic("orders", [100, 50])
    for i in range(5):
        kafka36.group(f"g{i}", group_type="classic", commits={("orders", 1): 10 * i})

    result = await scan(kafka36, offset_fetch_batch_size=100)

    assert {g: rows(result, g)[("orders", 1)].committed_offset for g in result.group_states} == {
        f"g{i}": 10 * i for i in range(5)
    }
    assert result.requests["OffsetFetch"] == 5
    assert sum(n for (api, v), n in kafka36.received.items() if api == "OffsetFetch") == 5
    assert {v for api, v in kafka36.received if api == "OffsetFetch"} == {3}


# --------------------------------------------------------------------------------------------
# Describing each type of group


async def test_a_consumer_protocol_group_is_described_with_consumer_group_describe(kafka4):
    kafka4.topic("orders", [100, 50])
    kafka4.group("billing", **two_members())
    kafka4.group("legacy", group_type="classic", members=[Member("c-1", {"orders": [0, 1]})],
                 commits={("orders", 0): 80})  # fmt: skip
    kafka4.group("tasks", group_type="share")
    kafka4.group("wordcount", group_type="streams")

    result = await scan(kafka4)

    assert result.group_types == {
        "billing": "consumer",
        "legacy": "classic",
        "tasks": "share",
        "wordcount": "streams",
    }
    assert result.group_states == {"billing": "Stable", "legacy": "Stable"}
    assert result.skipped_groups == {
        "tasks": "share group (KIP-932): listed, not evaluated as a consumer group",
        "wordcount": "streams group (KIP-1071): listed, not evaluated as a consumer group",
    }
    billing = rows(result, "billing")
    assert {tp: (r.committed_offset, r.log_end_offset, r.lag) for tp, r in billing.items()} == {
        ("orders", 0): (90, 100, 10),
        ("orders", 1): (45, 50, 5),
    }
    assert {(r.group_state, r.members) for r in billing.values()} == {("Stable", 2)}
    assert billing[("orders", 0)].member_hash == member_hash(["m-a", "m-b"], epoch=4) != 0
    # Who owns each partition, as Burrow's `owner` and `client_id` and notifications show it.
    assert {tp: (m.member_id, m.client_id, m.client_host)
            for tp, m in result.owners["billing"].items()} == {
        ("orders", 0): ("m-a", "consumer-1", "10.0.0.7"),
        ("orders", 1): ("m-b", "consumer-1", "10.0.0.7"),
    }  # fmt: skip
    # Each group went to the API that knows it, in one request per API.
    assert kafka4.described == {"DescribeGroups": ["legacy"], "ConsumerGroupDescribe": ["billing"]}
    assert result.requests["ListGroups"] == 1
    assert result.requests["DescribeGroups"] == 1
    assert result.requests["ConsumerGroupDescribe"] == 1
    # The newest versions both sides know, and no filter: every group with its type.
    assert kafka4.received[("ListGroups", 5)] == 1
    assert kafka4.received[("ConsumerGroupDescribe", 1)] == 1
    assert kafka4.list_groups_filters == [([], [])]


@pytest.mark.parametrize(
    ("state", "rules_see"),
    [
        ("Stable", "Stable"),
        ("Assigning", "PreparingRebalance"),
        ("Reconciling", "CompletingRebalance"),
        ("Empty", "Empty"),
        ("Dead", "Dead"),
        ("NotReady", "Unknown"),
    ],
)
async def test_consumer_protocol_states_are_mapped_onto_the_rules_states(kafka4, state, rules_see):
    kafka4.topic("orders", [100, 50])
    group = kafka4.group("billing", **two_members(state=state))
    if state in ("Empty", "Dead"):
        group.members = []

    result = await scan(kafka4)

    assert result.group_states == {"billing": rules_see}
    assert {r.group_state for r in rows(result, "billing").values()} == {rules_see}


async def test_an_epoch_bump_is_a_member_change_even_when_the_ids_stay(kafka4):
    """A member fenced for a slow poll loop rejoins with the same id: only the epoch moves."""
    kafka4.topic("orders", [100, 50])
    group = kafka4.group("billing", **two_members(epoch=4))
    async with ClusterCollector(kafka4.bootstrap_servers) as collector:
        first = rows(await collector.scan(), "billing")[("orders", 0)].member_hash
        again = rows(await collector.scan(), "billing")[("orders", 0)].member_hash
        group.epoch = 6
        bumped = rows(await collector.scan(), "billing")[("orders", 0)].member_hash
    assert first == again
    assert bumped != first
    assert 0 not in (first, bumped)


async def test_partitions_on_their_way_to_a_member_belong_to_the_group(kafka4):
    kafka4.topic("orders", [100, 50, 70])
    kafka4.group(
        "billing",
        state="Reconciling",
        epoch=5,
        assignment_epoch=5,
        members=[
            Member("m-a", {"orders": [0, 2]}, target={"orders": [0]}),
            Member("m-b", {"orders": [1]}, target={"orders": [1, 2]}),
            Member("m-c", {}, target={"orders": []}),
        ],
        commits={("orders", 0): 90},
    )

    result = await scan(kafka4)

    billing = rows(result, "billing")
    assert sorted(billing) == [("orders", 0), ("orders", 1), ("orders", 2)]
    assert billing[("orders", 1)].committed_offset is None  # assigned, never committed
    assert billing[("orders", 0)].members == 3
    assert result.group_states == {"billing": "CompletingRebalance"}


async def test_many_consumer_protocol_groups_go_in_batches(kafka4):
    kafka4.topic("orders", [100, 50])
    for n in range(5):
        kafka4.group(f"billing-{n}", **two_members())

    result = await scan(kafka4, describe_batch_size=2)

    assert set(result.group_states) == {f"billing-{n}" for n in range(5)}
    assert result.requests["ConsumerGroupDescribe"] == 3
    assert "DescribeGroups" not in result.requests


# --------------------------------------------------------------------------------------------
# Negotiation and fallbacks


async def test_a_broker_before_kip_848_gets_the_classic_path(kafka36):
    kafka36.topic("orders", [100, 50])
    kafka36.group("legacy", group_type="classic", members=[Member("c-1", {"orders": [0, 1]})],
                  commits={("orders", 0): 80})  # fmt: skip

    result = await scan(kafka36)

    assert result.group_states == {"legacy": "Stable"}
    assert result.group_types == {"legacy": "classic"}
    assert rows(result, "legacy")[("orders", 0)].lag == 20
    # ListGroups v1 (what the collector sent before; this broker has no v5), and nothing it
    # does not advertise: the scripted broker drops the connection on anything else.
    assert kafka36.received[("ListGroups", 1)] == 1
    assert not [api for api, _version in kafka36.received if api == "ConsumerGroupDescribe"]
    assert result.requests == {
        "Metadata": 1,
        "ListGroups": 1,
        "DescribeGroups": 1,
        "OffsetFetch": 1,
        "ListOffsets": 2,
    }


async def test_a_coordinator_without_consumer_group_describe_gets_describe_groups(caplog):
    """A cluster half way through an upgrade: the group is listed as consumer-protocol, its
    coordinator cannot describe it that way. Nothing unsupported is sent; it is what
    DescribeGroups makes of it, as before, and the log says why once."""
    async with ScriptedKafka("4.0", consumer_group_describe=False) as kafka:
        kafka.topic("orders", [100, 50])
        kafka.group("billing", **two_members())
        with caplog.at_level(logging.INFO, logger="notifier.collect"):
            async with ClusterCollector(kafka.bootstrap_servers, cluster="k") as collector:
                result = await collector.scan()
                await collector.scan()

    assert result.group_states == {"billing": "Dead"}
    assert result.group_types == {"billing": "consumer"}
    assert "ConsumerGroupDescribe" not in result.requests
    assert kafka.described["DescribeGroups"] == ["billing", "billing"]
    said = [
        r.getMessage() for r in caplog.records if "has no ConsumerGroupDescribe" in r.getMessage()
    ]
    assert said == [
        "cluster k: broker 0 has no ConsumerGroupDescribe; its groups are described with "
        "DescribeGroups"
    ]


async def test_a_group_converted_after_it_was_listed_is_asked_for_with_the_other_api(kafka4):
    """Kafka converts a classic group when a consumer-protocol member joins it, and back when
    the last one leaves: ListGroups may name the type it had a moment before."""
    kafka4.topic("orders", [100, 50])
    kafka4.group("upgraded", **two_members(), listed_as="classic")
    kafka4.group(
        "downgraded",
        group_type="classic",
        listed_as="consumer",
        members=[Member("c-1", {"orders": [0, 1]})],
        commits={("orders", 0): 80},
    )

    result = await scan(kafka4)

    assert result.group_types == {"downgraded": "classic", "upgraded": "consumer"}
    assert result.group_states == {"downgraded": "Stable", "upgraded": "Stable"}
    assert rows(result, "upgraded")[("orders", 0)].members == 2
    assert rows(result, "downgraded")[("orders", 0)].members == 1
    assert kafka4.described == {
        "DescribeGroups": ["upgraded", "downgraded"],
        "ConsumerGroupDescribe": ["downgraded", "upgraded"],
    }


async def test_describe_errors_of_consumer_protocol_groups(kafka4):
    kafka4.topic("orders", [100, 50])
    kafka4.group("private", **two_members(), describe_error=GROUP_AUTHORIZATION_FAILED)
    kafka4.group("billing", **two_members())

    result = await scan(kafka4)

    assert result.skipped_groups == {"private": "GROUP_AUTHORIZATION_FAILED"}
    assert set(result.group_states) == {"billing"}

    kafka4.group("bad name", **two_members(), describe_error=INVALID_GROUP_ID,
                 describe_error_message="The group id is not valid.")  # fmt: skip
    with pytest.raises(ScanError, match=r"ConsumerGroupDescribe\('bad name'\) failed with error "
                       r"code 24: The group id is not valid\."):  # fmt: skip
        await scan(kafka4)


async def test_a_moved_coordinator_is_found_again(kafka4):
    kafka4.topic("orders", [100, 50])
    kafka4.group("billing", **two_members(), not_coordinator_times=1)

    result = await scan(kafka4)

    assert result.group_states == {"billing": "Stable"}
    assert result.requests["FindCoordinator"] == 1
    assert result.requests["ConsumerGroupDescribe"] == 2


# --------------------------------------------------------------------------------------------
# What the rules make of it: the collector's samples replayed through `notifier test-rules`

RULES = {
    "burrow": {"enabled": True, "minimum_complete": 1.0},
    "rules": [
        {"name": "consumers-gone", "kind": "consumers_gone"},
        {"name": "stalled-or-stopped", "kind": "progress"},
        {"name": "stuck-rebalance", "kind": "stuck_rebalance", "samples": 6},
        {"name": "rebalance-storm", "kind": "rebalance_storm", "max_changes": 3},
    ],
}


async def scanned_series(
    kafka: ScriptedKafka, scans: int, before_scan: Callable[[int], None]
) -> dict[str, dict[str, list[Any]]]:
    """Scan ``scans`` times (``before_scan(i)`` moves the scripted broker on) and return each
    group's partition-0 columns, scan by scan, as the collector produced them."""
    series: dict[str, dict[str, list[Any]]] = {}
    async with ClusterCollector(kafka.bootstrap_servers, cluster="local") as collector:
        for i in range(scans):
            before_scan(i)
            result = await collector.scan()
            for sample in table_to_samples(result.samples):
                if sample.partition != 0:
                    continue
                columns = series.setdefault(sample.group, {})
                for name in ("committed_offset", "log_end_offset", "group_state", "members",
                             "member_hash"):  # fmt: skip
                    columns.setdefault(name, []).append(getattr(sample, name))
    return series


def series_input(group: str, columns: dict[str, list[Any]], **shape: str) -> dict[str, Any]:
    """A test-rules input of the scanned columns; ``shape`` overrides some (the shape a group
    had before ConsumerGroupDescribe: Dead, no members)."""
    text = {name: " ".join(str(v) for v in values) for name, values in columns.items()}
    return {
        "group": group,
        "topic": "orders",
        "committed": text["committed_offset"],
        "log_end": text["log_end_offset"],
        "group_state": shape.get("group_state", text["group_state"]),
        "members": shape.get("members", text["members"]),
        "member_hash": shape.get("member_hash", text["member_hash"]),
    }


def as_before(scans: int) -> dict[str, str]:
    return {"group_state": f"Deadx{scans - 1}", "members": f"0x{scans - 1}",
            "member_hash": f"0x{scans - 1}"}  # fmt: skip


def run_test_rules(tmp_path: Path, name: str, interval: str, inputs: list, expect: list) -> str:
    path = tmp_path / "kip848.test.yaml"
    path.write_text(
        yaml.safe_dump(
            {
                "rules": RULES,
                "tests": [{"name": name, "interval": interval, "input": inputs, "expect": expect}],
            },
            sort_keys=False,
        )
    )
    result = CliRunner().invoke(main, ["test-rules", str(path)])
    assert result.exit_code == 0, result.output
    return result.output


async def test_a_consuming_group_falling_behind_is_warn_as_its_classic_twin(kafka4, tmp_path):
    """The issue's case: slowly growing lag. As Dead with no members (what DescribeGroups made
    of it) it was ERR, consumers-gone; described, it is Burrow's WARN, as the classic group."""
    kafka4.topic("orders", [1000, 1000])
    kip848 = kafka4.group("kip848", **two_members())
    classic = kafka4.group("classic", group_type="classic",
                           members=[Member("c-1", {"orders": [0, 1]})])  # fmt: skip

    def produce_and_consume(i: int) -> None:
        kafka4.topics["orders"] = [1000 + 12 * i, 1000]
        for group in (kip848, classic):
            group.commits = {("orders", 0): 995 + 10 * i}

    columns = await scanned_series(kafka4, 10, produce_and_consume)
    assert columns["kip848"]["members"] == [2] * 10

    output = run_test_rules(
        tmp_path,
        "slowly growing lag",
        "60s",
        [
            series_input("kip848", columns["kip848"]),
            series_input("classic", columns["classic"]),
            series_input("as-before", columns["kip848"], **as_before(10)),
        ],
        [
            {"at": "540s", "group": "kip848", "status": "WARN"},
            {"at": "540s", "group": "classic", "status": "WARN"},
            {
                "at": "540s",
                "group": "as-before",
                "status": "ERR",
                "findings": [{"rule": "consumers-gone"}],
            },
        ],
    )
    assert "1 passed, 0 failed" in output


async def test_a_stalled_group_is_stall_not_stop(kafka4, tmp_path):
    kafka4.topic("orders", [15, 0])
    kip848 = kafka4.group("kip848", **two_members())

    def commit_then_stall(i: int) -> None:
        kafka4.topics["orders"] = [15 + 10 * i, 0]
        kip848.commits = {("orders", 0): 10 + 10 * min(i, 59)}

    columns = await scanned_series(kafka4, 63, commit_then_stall)

    run_test_rules(
        tmp_path,
        "stalled: members present, offset still",
        "10s",
        [
            series_input("kip848", columns["kip848"]),
            series_input("as-before", columns["kip848"], **as_before(63)),
        ],
        [
            {
                "at": "620s",
                "group": "kip848",
                "status": "ERR",
                "findings": [{"rule": "stalled-or-stopped", "status": "STALL"}],
            },
            {
                # Read as a memberless group (before KIP-848 was decoded) it is misjudged: an
                # assign()-style consumer whose members are never seen, now "consumers gone".
                "at": "620s",
                "group": "as-before",
                "status": "ERR",
                "findings": [{"rule": "consumers-gone"}],
            },
        ],
    )


async def test_reconciling_for_good_is_a_stuck_rebalance_and_epoch_churn_a_storm(kafka4, tmp_path):
    kafka4.topic("orders", [1000, 1000])
    stuck = kafka4.group("stuck", **two_members(epoch=3))
    churning = kafka4.group("churning", **two_members(epoch=3))

    def misbehave(i: int) -> None:
        kafka4.topics["orders"] = [1000 + 10 * i, 1000]
        churning.commits = {("orders", 0): 995 + 10 * i}
        churning.epoch = 3 + 2 * i  # fenced and back, with the same member ids, every scan
        if i < 4:
            stuck.commits = {("orders", 0): 995 + 10 * i}
        else:  # a member joined; the others never finish handing partitions over
            stuck.epoch, stuck.assignment_epoch, stuck.state = 4, 4, "Reconciling"

    columns = await scanned_series(kafka4, 12, misbehave)
    assert set(columns["churning"]["members"]) == {2}

    run_test_rules(
        tmp_path,
        "rebalancing the new way",
        "10s",
        [
            series_input("stuck", columns["stuck"]),
            series_input("churning", columns["churning"]),
        ],
        [
            {
                "at": "110s",
                "group": "stuck",
                "status": "ERR",
                "findings": [{"rule": "stuck-rebalance"}],
            },
            {
                "at": "110s",
                "group": "churning",
                "findings": [{"rule": "rebalance-storm"}],
            },
        ],
    )


async def test_the_api_lists_share_and_streams_groups_as_not_evaluated(kafka4, tmp_path):
    """A share or streams group is no consumer group the rules know: the service says so, per
    cluster in /api/groups (and /readyz), instead of silently leaving it out."""
    kafka4.topic("orders", [100, 50])
    kafka4.group("billing", **two_members())
    kafka4.group("tasks", group_type="share")
    kafka4.group("wordcount", group_type="streams")
    config = parse_service_config(
        {"clusters": [{"name": "k", "bootstrap_servers": kafka4.bootstrap_servers}],
         "history": {"enabled": False}},
        "test",
    )  # fmt: skip
    coord = Coordinator(config, load_rules(resources.default_rules()), tmp_path, RecordingSink())
    state = coord.clusters["k"]
    state.collector = make_collector(state.config)
    try:
        await coord.scan_once("k")
    finally:
        await state.collector.close()
    app = create_app(coord, clock=lambda: state.metrics.last_success_ms or 0)
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://notifier") as http:
        body = (await http.get("/api/groups")).json()
    assert [g["group"] for g in body["groups"]] == ["billing"]
    (cluster,) = body["clusters"]
    assert cluster["not_evaluated"] == [
        {"group": "tasks",
         "reason": "share group (KIP-932): listed, not evaluated as a consumer group"},
        {"group": "wordcount",
         "reason": "streams group (KIP-1071): listed, not evaluated as a consumer group"},
    ]  # fmt: skip
