"""Which instance of a fleet owns which shard: the leader balances the shards' work and moves as
few shards as it can (notifier.fleet.balance, notifier.fleet.assignor)."""

from __future__ import annotations

import asyncio
import json
import logging
import uuid

from aiokafka.coordinator.protocol import ConsumerProtocol, ConsumerProtocolMemberMetadata
from hypothesis import given, settings
from hypothesis import strategies as st

from notifier.config import parse_service_config
from notifier.fleet.assignor import ShardAssignor, merge_work
from notifier.fleet.balance import (
    TOLERANCE,
    ShardWork,
    balance,
    imbalance,
    loads,
    shard_work,
    weigh,
)
from notifier.fleet.membership import Membership
from notifier.fleet.shards import shard_of
from notifier.fleet.statetopic import ensure_topic
from tests.waiting import until_true

TOPIC = "notifier-fleet.eu.state"


class Cluster:
    """What the assignor asks of aiokafka's cluster metadata."""

    def __init__(self, partitions: int) -> None:
        self.count = partitions

    def partitions_for_topic(self, topic: str) -> set[int] | None:
        return set(range(self.count)) if topic == TOPIC else None


def owners(assignment: dict[str, list[int]]) -> dict[int, list[str]]:
    found: dict[int, list[str]] = {}
    for member, shards in assignment.items():
        for shard in shards:
            found.setdefault(shard, []).append(member)
    return found


@st.composite
def fleets(draw):
    """Shards with weights (some unknown), and members each claiming some of them (a shard
    may be claimed twice, as after an outage)."""
    shards = draw(st.integers(1, 40))
    weights = draw(st.dictionaries(st.integers(0, shards - 1), st.floats(0, 500, allow_nan=False)))
    names = draw(st.lists(st.text("abcdefgh", min_size=1, max_size=3), min_size=1,
                          max_size=6, unique=True))  # fmt: skip
    claims = {name: draw(st.lists(st.integers(0, shards + 3), max_size=shards)) for name in names}
    return list(range(shards)), claims, weights


@given(fleets())
@settings(max_examples=300, deadline=None)
def test_every_shard_has_exactly_one_owner_and_the_busiest_is_within_one_shard(fleet):
    shards, claims, weights = fleet
    assignment = balance(shards, claims, weights)
    assert sorted(assignment) == sorted(claims)
    assert sorted(owners(assignment)) == shards
    assert all(len(found) == 1 for found in owners(assignment).values())
    # Either even within the tolerance, or no single shard of the busiest would help.
    known = [weights[s] for s in shards if s in weights]
    default = sum(known) / len(known) if known else 1.0
    weight = {s: round(1000 * weights.get(s, default)) for s in shards}  # as balance weighs
    per_member = loads(assignment, weight)
    busiest = max(per_member, key=lambda m: per_member[m])
    if imbalance(assignment, weight) > TOLERANCE and assignment[busiest]:
        lightest = min(per_member.values())
        assert per_member[busiest] - lightest <= max(weight[s] for s in assignment[busiest])
    # The same input, the same answer (every instance could be the leader).
    assert balance(shards, dict(reversed(claims.items())), weights) == assignment


@given(fleets())
@settings(max_examples=200, deadline=None)
def test_a_balanced_assignment_is_kept_as_it_is(fleet):
    shards, claims, weights = fleet
    assignment = balance(shards, claims, weights)
    assert balance(shards, assignment, weights) == assignment


def test_new_shards_go_to_the_least_loaded_and_claims_are_kept():
    weights = {0: 10, 1: 10, 2: 10, 3: 10, 4: 30, 5: 5}
    assignment = balance(range(6), {"a": [0, 1, 2], "b": [3]}, weights)
    # a holds 30, b 10: the heaviest orphan (4) goes to b, then 5 to a (30 vs 40).
    assert assignment == {"a": [0, 1, 2, 5], "b": [3, 4]}


def test_a_joining_member_takes_only_what_evens_the_work():
    weights = {s: 10.0 for s in range(12)}
    before = balance(range(12), {"a": [], "b": [], "c": []}, weights)
    after = balance(range(12), {**before, "d": []}, weights)
    assert [len(after[m]) for m in "abcd"] == [3, 3, 3, 3]
    for member in "abc":
        assert set(after[member]) <= set(before[member])  # nothing moves between a, b and c


def test_shards_of_uneven_work_are_balanced_by_work_not_by_count():
    # A fleet of a thousand groups of equal size over 32 shards: equal numbers of shards leave
    # the busiest instance about 7% above its share; by work it is within the tolerance.
    groups = [f"orders-consumer-{i:04d}" for i in range(1000)]
    weights = weigh(shard_work("prod", groups, {}, 32))
    by_count = balance(range(32), {"a": [], "b": [], "c": []}, {})
    by_work = balance(range(32), {"a": [], "b": [], "c": []}, weights)
    assert imbalance(by_count, weights) > 0.05
    assert imbalance(by_work, weights) <= TOLERANCE


def test_a_shards_weight_counts_its_groups_and_their_partitions():
    groups = ["billing", "search", "audit"]
    work = shard_work("prod", groups, {"billing": 9, "search": 1}, 4)
    assert sum(work.values(), ShardWork()) == ShardWork(groups=3, scanned=2, partitions=10)
    expected: dict[int, float] = {}
    # audit was not scanned here: it counts as the mean of the others (5 partitions).
    for group, partitions in (("billing", 9), ("search", 1), ("audit", 5)):
        shard = shard_of("prod", group, 4)
        expected[shard] = expected.get(shard, 0) + 1 + partitions
    assert weigh(work) == expected


def test_what_one_member_scanned_sizes_the_groups_nobody_scanned():
    # The leader has scanned shard 0 (groups of 20 partitions); a member that has scanned
    # nothing yet owns shard 1. Both shards hold ten groups: they weigh the same.
    claims = {"leader": [0], "new": [1]}
    reports = {
        "leader": {0: ShardWork(10, 10, 200), 1: ShardWork(10, 0, 0)},
        "new": {0: ShardWork(10, 0, 0), 1: ShardWork(10, 0, 0)},
    }
    merged = merge_work(claims, reports)
    assert merged == {0: ShardWork(10, 10, 200), 1: ShardWork(10, 0, 0)}
    assert weigh(merged) == {0: 210.0, 1: 210.0}


# ------------------------------------------------------------------ the group protocol


def joining(assignor: ShardAssignor) -> ConsumerProtocolMemberMetadata:
    """A member's JoinGroup metadata as the leader decodes it."""
    encoded = assignor.metadata([TOPIC]).encode()
    return ConsumerProtocol.METADATA.decode(encoded)


def test_the_leader_balances_by_the_weights_the_members_send():
    work = {s: ShardWork(1, 1, 10 * (s % 4)) for s in range(12)}  # 1, 11, 21, 31, 1, ...
    weights = weigh(work)
    a = ShardAssignor(TOPIC, 12, owned=lambda: [], work=lambda: work)
    b = ShardAssignor(TOPIC, 12, owned=lambda: [], work=lambda: None)  # before its scan
    members = {"member-a": joining(a), "member-b": joining(b)}
    result = a.assign(Cluster(12), members)
    assignment = {m: [p for _, parts in r.assignment for p in parts] for m, r in result.items()}
    assert sorted(s for shards in assignment.values() for s in shards) == list(range(12))
    assert imbalance(assignment, weights) <= TOLERANCE
    # Decodable by every member, as aiokafka does.
    for member, encoded in result.items():
        decoded = ConsumerProtocol.ASSIGNMENT.decode(encoded.encode())
        assert [tp.partition for tp in decoded.partitions()] == assignment[member]


def test_a_member_whose_data_cannot_be_read_claims_nothing_but_gets_shards():
    a = ShardAssignor(TOPIC, 4, owned=lambda: [0, 1, 2, 3])
    odd = ConsumerProtocolMemberMetadata(0, [TOPIC], b"\x00not json")
    result = a.assign(Cluster(4), {"a": joining(a), "old": odd})
    assert [len(r.assignment[0][1]) for r in result.values()] == [2, 2]


def test_a_shards_work_is_its_owners_word_else_the_best_informed():
    claims = {"a": [0], "b": [1]}
    reports = {
        "a": {0: ShardWork(5, 5, 50), 1: ShardWork(4, 0, 0)},
        "b": {0: ShardWork(5, 1, 10), 1: ShardWork(4, 4, 8), 2: ShardWork(3, 0, 0)},
        "c": {2: ShardWork(3, 2, 7)},
    }
    assert merge_work(claims, reports) == {
        0: ShardWork(5, 5, 50),
        1: ShardWork(4, 4, 8),
        2: ShardWork(3, 2, 7),
    }


def test_the_leader_asks_for_a_rebalance_once_it_learns_the_work_is_uneven():
    known: dict[int, ShardWork] | None = None
    leader = ShardAssignor(TOPIC, 6, owned=lambda: [], work=lambda: known)
    follower = ShardAssignor(TOPIC, 6, owned=lambda: [], work=lambda: None)
    # The fleet starts together: nobody has scanned, the shards are dealt out by count.
    result = leader.assign(Cluster(6), {"l": joining(leader), "f": joining(follower)})
    leader.on_assignment(result["l"])
    follower.on_assignment(result["f"])
    assert follower.led is None  # only the leader knows what it assigned
    assert leader.worth_rebalancing() is None  # no weights yet
    dealt = {m: [p for _, parts in r.assignment for p in parts] for m, r in result.items()}
    heavy = dealt["l"]
    known = {s: ShardWork(1, 1, 99 if s in heavy else 9) for s in range(6)}
    verdict = leader.worth_rebalancing()
    assert verdict is not None
    now, after = verdict
    assert now > 0.5 and after <= now / 2
    # Even work: nothing to ask for.
    known = dict.fromkeys(range(6), ShardWork(1, 1, 9))
    assert leader.worth_rebalancing() is None


def test_the_join_data_names_the_owned_shards_and_their_work():
    work = {1: ShardWork(2, 1, 5), 3: ShardWork(7, 0, 0)}
    assignor = ShardAssignor(TOPIC, 4, owned=lambda: {3, 1}, work=lambda: work)
    data = json.loads(joining(assignor).user_data)
    assert data == {"owned": [1, 3], "work": {"1": [2, 1, 5], "3": [7, 0, 0]}}


# ------------------------------------------------------------------ on the broker


class NoState:
    """Shard state that holds nothing: this test is about who owns what, not what they hold."""

    async def load(self, shard: int) -> None:
        return None

    async def load_many(self, shards: list[int]) -> list[None]:
        return [None for _ in shards]

    async def snapshot(self, shard: int) -> None:
        return None

    def drop(self, shard: int) -> None:
        return None


async def test_a_fleet_that_joined_blind_rebalances_once_the_leader_knows_the_work(
    kafka_broker, caplog
):
    caplog.set_level(logging.INFO, logger="notifier.fleet")
    name = f"balance-{uuid.uuid4().hex[:6]}"
    service = parse_service_config(
        {
            "clusters": [{"name": "prod", "bootstrap_servers": kafka_broker.bootstrap_servers}],
            "coordination": {"name": name, "cluster": "prod", "partitions": 12,
                             "session_timeout": "6s", "heartbeat_interval": "1s"},
        },
        "fleet.yaml",
    )  # fmt: skip
    config, kafka = service.coordination, service.coordination_kafka()
    assert config is not None and kafka is not None
    known: dict[int, ShardWork] | None = None  # nobody has scanned yet
    members = [
        Membership(
            config, kafka, NoState(), handover=asyncio.Lock(), instance=f"i{n}",
            ensure_topic=lambda: ensure_topic(kafka.bootstrap_servers, config.topic, 12),
            work=lambda: known,
        )
        for n in range(3)
    ]  # fmt: skip
    try:
        for member in members:
            await member.start()
        await until_true(lambda: sum(len(m.owned) for m in members) == 12, 60, "assigned")
        (leader,) = [m for m in members if m.assignor.led is not None]
        dealt = {m.instance: sorted(m.owned) for m in members}
        # The scans find one instance's shards ten times the work of the others.
        heavy = set(dealt["i0"])
        known = {s: ShardWork(1, 1, 99 if s in heavy else 9) for s in range(12)}
        await until_true(
            lambda: (
                sum(len(m.owned) for m in members) == 12
                and {m.instance: sorted(m.owned) for m in members} != dealt
            ),
            60,
            "rebalanced",
        )
        now = {m.instance: sorted(m.owned) for m in members}
        # Four shards of 100 among three: one instance holds two of them, at best.
        weights = weigh(known)
        assert imbalance(dealt, weights) == 1.5
        assert imbalance(now, weights) == 0.25, now
        asked = [r for r in caplog.records
                 if getattr(r, "event", "") == "fleet_rebalance_requested"]  # fmt: skip
        assert [r.instance for r in asked] == [leader.instance]
    finally:
        for member in members:
            await member.stop()
