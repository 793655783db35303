"""The Kafka protocol as the collector speaks it: API names, error codes, requests, and the
records its answers are decoded into.

aiokafka 0.14 decodes a DescribeGroups v3 answer with the v2 layout (it ignores the trailing
``authorized_operations`` of each group), which garbles any answer with more than one group;
:class:`DescribeGroups` is a request of our own whose v3 answer is decoded with the v3 layout.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from aiokafka.coordinator.protocol import (
    ConsumerProtocolMemberAssignment,
    ConsumerProtocolMemberMetadata,
)
from aiokafka.protocol.admin import (
    DescribeGroupsRequest_v0,
    DescribeGroupsRequest_v1,
    DescribeGroupsRequest_v2,
    DescribeGroupsRequest_v3,
    DescribeGroupsResponse_v3,
)
from aiokafka.protocol.api import Request

from notifier.collect.results import ClusterLayout, PartitionLayout, ScanError, TopicPartition
from notifier.types import GroupMember

API_NAMES: Mapping[int, str] = {
    0: "Produce",
    1: "Fetch",
    2: "ListOffsets",
    3: "Metadata",
    8: "OffsetCommit",
    9: "OffsetFetch",
    10: "FindCoordinator",
    11: "JoinGroup",
    12: "Heartbeat",
    13: "LeaveGroup",
    14: "SyncGroup",
    15: "DescribeGroups",
    16: "ListGroups",
    17: "SaslHandshake",
    18: "ApiVersions",
    19: "CreateTopics",
    20: "DeleteTopics",
    21: "DeleteRecords",
    22: "InitProducerId",
    24: "AddPartitionsToTxn",
    25: "AddOffsetsToTxn",
    26: "EndTxn",
    28: "TxnOffsetCommit",
    29: "DescribeAcls",
    30: "CreateAcls",
    31: "DeleteAcls",
    32: "DescribeConfigs",
    33: "AlterConfigs",
    36: "SaslAuthenticate",
    37: "CreatePartitions",
    42: "DeleteGroups",
    69: "ConsumerGroupDescribe",
    77: "ShareGroupDescribe",
    90: "DescribeShareGroupOffsets",
}
"""Kafka API names by API key (those aiokafka and the collector send): the keys of
:attr:`ScanResult.requests` and the ``api`` label of ``notifier_kafka_requests_total``."""

LATEST = -1
EARLIEST = -2
READ_UNCOMMITTED = 0

# Kafka error codes the collector reacts to.
NONE = 0
UNKNOWN_TOPIC_OR_PARTITION = 3
LEADER_NOT_AVAILABLE = 5
NOT_LEADER = 6
COORDINATOR_LOAD_IN_PROGRESS = 14
COORDINATOR_NOT_AVAILABLE = 15
NOT_COORDINATOR = 16
INVALID_GROUP_ID = 24
GROUP_AUTHORIZATION_FAILED = 30
KAFKA_STORAGE_ERROR = 56
GROUP_ID_NOT_FOUND = 69
COORDINATOR_ERRORS = frozenset(
    {COORDINATOR_LOAD_IN_PROGRESS, COORDINATOR_NOT_AVAILABLE, NOT_COORDINATOR}
)
LEADER_ERRORS = frozenset(
    {UNKNOWN_TOPIC_OR_PARTITION, LEADER_NOT_AVAILABLE, NOT_LEADER, KAFKA_STORAGE_ERROR}
)


class _DescribeGroupsRequestV3(DescribeGroupsRequest_v3):
    """DescribeGroups v3 decoded with the v3 answer layout (aiokafka 0.14 maps it to v2)."""

    RESPONSE_TYPE = DescribeGroupsResponse_v3


class DescribeGroups(
    Request[
        DescribeGroupsRequest_v0
        | DescribeGroupsRequest_v1
        | DescribeGroupsRequest_v2
        | _DescribeGroupsRequestV3
    ]
):
    API_KEY = 15

    def __init__(self, groups: Sequence[str]) -> None:
        self._groups = list(groups)

    def build(self, request_struct_class: type[Any]) -> Any:
        if request_struct_class.API_VERSION >= 3:
            return request_struct_class(self._groups, False)
        return request_struct_class(self._groups)


class CoordinatorMoved(Exception):
    """The node asked is not (or not yet) the group's coordinator."""


@dataclass(slots=True)
class Metadata:
    """The cluster metadata a scan works from: brokers, partition leaders, internal topics."""

    brokers: dict[int, tuple[str, int]]
    leaders: dict[str, dict[int, int]]
    internal: frozenset[str]
    fetched_at: float
    layout: ClusterLayout | None = None
    """Brokers, leaders, replicas and in-sync replicas, for the metrics of each."""

    def leader(self, tp: TopicPartition) -> int:
        return self.leaders.get(tp[0], {}).get(tp[1], -1)

    def partitions(self, topic: str) -> list[int]:
        return sorted(self.leaders.get(topic, {}))

    def user_topics(self) -> list[str]:
        return sorted(t for t in self.leaders if t not in self.internal)


@dataclass(slots=True)
class Group:
    """A consumer group as DescribeGroups (or, for a consumer-protocol group,
    ConsumerGroupDescribe) showed it, with its members' partitions decoded.

    ``state`` is the broker's name for it; ``group_type`` is ``"classic"`` or ``"consumer"``
    (KIP-848), whose group epoch and target assignment epoch are kept too.
    """

    name: str
    state: str
    protocol_type: str
    member_ids: list[str]
    assigned: set[TopicPartition]
    subscribed: set[str]
    group_type: str = "classic"
    group_epoch: int | None = None
    assignment_epoch: int | None = None
    owners: dict[TopicPartition, GroupMember] = field(default_factory=dict)
    """The member each assigned partition belongs to (its client id and host)."""

    @property
    def topics_of_interest(self) -> set[str]:
        return {topic for topic, _ in self.assigned} | self.subscribed


def decode_member(
    protocol_type: str, metadata: bytes, assignment: bytes
) -> tuple[set[TopicPartition], set[str]]:
    """Assigned partitions and subscribed topics of a consumer-protocol member.

    Only the version-0 prefix of the consumer protocol is read (later versions append fields),
    and anything undecodable counts as unknown: some brokers leave both empty.
    """
    assigned: set[TopicPartition] = set()
    subscribed: set[str] = set()
    if protocol_type != "consumer":
        return assigned, subscribed
    if assignment:
        try:
            decoded = ConsumerProtocolMemberAssignment.decode(assignment)
            assigned = {(t, p) for t, parts in decoded.assignment for p in parts}
        except Exception:  # foreign bytes: unknown is the honest answer
            assigned = set()
    if metadata:
        try:
            subscribed = set(ConsumerProtocolMemberMetadata.decode(metadata).subscription)
        except Exception:
            subscribed = set()
    return assigned, subscribed


def group_member(member_id: str, client_id: str | None, client_host: str | None) -> GroupMember:
    """A member as DescribeGroups names it. Kafka reports the host as Java prints an address
    (``/10.2.0.14``, or ``name/10.2.0.14`` when it resolved one): the leading slash says
    nothing and is dropped."""
    host = (client_host or "").removeprefix("/")
    return GroupMember(member_id, client_id or "", host)


def parse_metadata(response: Any) -> Metadata:
    data = response.to_object()
    brokers = {int(b["node_id"]): (str(b["host"]), int(b["port"])) for b in data["brokers"]}
    leaders: dict[str, dict[int, int]] = {}
    internal: set[str] = set()
    topics: dict[str, dict[int, PartitionLayout]] = {}
    for topic in data["topics"]:
        if not topic["partitions"]:
            continue
        name = topic["topic"]
        leaders[name] = {int(p["partition"]): int(p["leader"]) for p in topic["partitions"]}
        topics[name] = {
            int(p["partition"]): PartitionLayout(
                int(p["leader"]),
                tuple(map(int, p["replicas"] or ())),
                tuple(map(int, p["isr"] or ())),
            )
            for p in topic["partitions"]
        }
        if topic.get("is_internal") or name.startswith("__"):
            internal.add(name)
    layout = ClusterLayout({n: f"{host}:{port}" for n, (host, port) in brokers.items()}, topics)
    return Metadata(brokers, leaders, frozenset(internal), time.monotonic(), layout)


def parse_offset_fetch(group: str, response: Any) -> dict[TopicPartition, int]:
    top_error = getattr(response, "error_code", NONE)
    if top_error in COORDINATOR_ERRORS:
        raise CoordinatorMoved(f"error code {top_error}")
    if top_error != NONE:
        raise ScanError(f"OffsetFetch({group!r}) failed with error code {top_error}")
    commits: dict[TopicPartition, int] = {}
    for topic, partitions in response.topics:
        for partition, offset, _metadata, error_code in partitions:
            if error_code == NONE:
                if offset >= 0:
                    commits[(topic, partition)] = int(offset)
            elif error_code in COORDINATOR_ERRORS:
                raise CoordinatorMoved(f"error code {error_code}")
            elif error_code != UNKNOWN_TOPIC_OR_PARTITION:
                raise ScanError(
                    f"OffsetFetch({group!r}) for {topic}/{partition} failed with error code "
                    f"{error_code}"
                )
    return commits
