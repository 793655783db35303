"""The Kafka protocol as the collector speaks it: API names, error codes, requests, and the
records its answers are decoded into.

aiokafka 0.14 decodes a DescribeGroups v3 answer with the v2 layout (it ignores the trailing
``authorized_operations`` of each group), which garbles any answer with more than one group;
:class:`DescribeGroups` is a request of our own whose v3 answer is decoded with the v3 layout.
Its OffsetFetch stops at v3 (one group per request); :class:`OffsetFetch` adds v8 (KIP-709,
``OffsetFetchRequest.json``/``OffsetFetchResponse.json``: many groups in one request, a flexible
version with compact strings and arrays and tagged fields).
"""

from __future__ import annotations

import struct
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from io import BytesIO
from typing import Any

import numpy as np
from aiokafka.coordinator.protocol import (
    ConsumerProtocolMemberAssignment,
    ConsumerProtocolMemberMetadata,
)
from aiokafka.errors import IncompatibleBrokerVersion
from aiokafka.protocol.admin import (
    DescribeGroupsRequest_v0,
    DescribeGroupsRequest_v1,
    DescribeGroupsRequest_v2,
    DescribeGroupsRequest_v3,
    DescribeGroupsResponse_v3,
)
from aiokafka.protocol.api import Request, RequestStruct, Response
from aiokafka.protocol.commit import (
    OffsetFetchRequest_v1,
    OffsetFetchRequest_v2,
    OffsetFetchRequest_v3,
)
from aiokafka.protocol.types import (
    Boolean,
    CompactArray,
    CompactString,
    Int16,
    Int32,
    Int64,
    Schema,
    TaggedFields,
)

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


@dataclass(slots=True)
class TopicOffsets:
    """One topic of a group in a v8 OffsetFetch answer, as arrays: each partition asked for
    (or committed to), its committed offset (-1: none) and its error code."""

    name: str
    partition: np.ndarray
    offset: np.ndarray
    error: np.ndarray


@dataclass(frozen=True, slots=True)
class CommittedOffsets:
    """One group's committed offsets as arrays: for each topic, its partitions in ascending
    order (int32, each once) and their offsets (int64).

    What a scan keeps of a group's commits until its sample table is built: no Python object
    per partition (a dict of ``(topic, partition)`` tuples cost about 100 B per
    group-partition, 100 MB at a million)."""

    by_topic: Mapping[str, tuple[np.ndarray, np.ndarray]]

    @classmethod
    def from_topics(cls, topics: Iterable[tuple[str, np.ndarray, np.ndarray]]) -> CommittedOffsets:
        """From ``(topic, partitions, offsets)`` in any order; a partition given twice keeps
        its last offset, as a dict would."""
        chunks: dict[str, list[tuple[np.ndarray, np.ndarray]]] = {}
        for topic, partitions, offsets in topics:
            chunks.setdefault(topic, []).append((partitions, offsets))
        by_topic = {}
        for topic, parts in chunks.items():
            partitions = np.concatenate([p for p, _ in parts]).astype(np.int32, copy=False)
            offsets = np.concatenate([o for _, o in parts]).astype(np.int64, copy=False)
            if partitions.size > 1 and not bool(np.all(partitions[1:] > partitions[:-1])):
                order = np.argsort(partitions, kind="stable")
                partitions, offsets = partitions[order], offsets[order]
                last = np.append(partitions[1:] != partitions[:-1], True)
                partitions, offsets = partitions[last], offsets[last]
            by_topic[topic] = (partitions, offsets)
        return cls(by_topic)

    @classmethod
    def from_mapping(cls, offsets: Mapping[TopicPartition, int]) -> CommittedOffsets:
        topics: dict[str, tuple[list[int], list[int]]] = {}
        for (topic, partition), offset in offsets.items():
            partitions, values = topics.setdefault(topic, ([], []))
            partitions.append(partition)
            values.append(offset)
        return cls.from_topics(
            (topic, np.asarray(parts, dtype=np.int32), np.asarray(values, dtype=np.int64))
            for topic, (parts, values) in topics.items()
        )

    @classmethod
    def of(cls, offsets: CommittedOffsets | Mapping[TopicPartition, int]) -> CommittedOffsets:
        return offsets if isinstance(offsets, CommittedOffsets) else cls.from_mapping(offsets)

    def __len__(self) -> int:
        return sum(partitions.size for partitions, _ in self.by_topic.values())

    def as_dict(self) -> dict[TopicPartition, int]:
        return {
            (topic, partition): offset
            for topic, (partitions, offsets) in self.by_topic.items()
            for partition, offset in zip(partitions.tolist(), offsets.tolist(), strict=True)
        }


NO_COMMITS = CommittedOffsets({})


# A partition of a v8 answer when its metadata is null or empty and it has no tagged fields,
# as brokers send it for offsets committed by consumers: 20 bytes, always the same layout.
_PARTITION = np.dtype(
    [
        ("partition", ">i4"),
        ("offset", ">i8"),
        ("leader_epoch", ">i4"),
        ("metadata", "u1"),
        ("error", ">i2"),
        ("tags", "u1"),
    ]
)
assert _PARTITION.itemsize == 20


class _Reader:
    """The flexible encoding's primitives over a buffer (Kafka's ``ByteBufferAccessor``)."""

    __slots__ = ("at", "buf")

    def __init__(self, buf: memoryview) -> None:
        self.buf = buf
        self.at = 0

    def fixed(self, layout: struct.Struct) -> tuple[Any, ...]:
        values = layout.unpack_from(self.buf, self.at)
        self.at += layout.size
        return values

    def uvarint(self) -> int:
        value = shift = 0
        while True:
            byte = self.buf[self.at]
            self.at += 1
            value |= (byte & 0x7F) << shift
            if not byte & 0x80:
                return value
            shift += 7

    def string(self) -> str | None:
        length = self.uvarint() - 1
        if length < 0:
            return None
        end = self.at + length
        if end > len(self.buf):
            raise ValueError("Buffer underrun decoding string")
        text = bytes(self.buf[self.at : end]).decode("utf-8")
        self.at = end
        return text

    def skip_tags(self) -> None:
        for _ in range(self.uvarint()):
            self.uvarint()  # the tag
            size = self.uvarint()
            self.at += size


_I32, _I16 = struct.Struct(">i"), struct.Struct(">h")
_PARTITION_HEAD = struct.Struct(">iqi")


def _topic_offsets(reader: _Reader, name: str, count: int) -> TopicOffsets:
    if count <= 0:
        empty = np.zeros(0, dtype=np.int64)
        return TopicOffsets(name, empty.astype(np.int32), empty, empty.astype(np.int16))
    size = count * _PARTITION.itemsize
    if reader.at + size <= len(reader.buf):
        entries = np.frombuffer(reader.buf, dtype=_PARTITION, count=count, offset=reader.at)
        # The first partition that is not 20 bytes long (metadata longer than empty, tagged
        # fields) sits where the view expects it, and shows: then it is read field by field.
        if bool(np.all((entries["metadata"] <= 1) & (entries["tags"] == 0))):
            reader.at += size
            return TopicOffsets(
                name,
                entries["partition"].astype(np.int32),
                entries["offset"].astype(np.int64),
                entries["error"].astype(np.int16),
            )
    partitions, offsets, errors = [], [], []
    for _ in range(count):
        partition, offset, _leader_epoch = reader.fixed(_PARTITION_HEAD)
        reader.string()  # metadata
        (error,) = reader.fixed(_I16)
        reader.skip_tags()
        partitions.append(partition)
        offsets.append(offset)
        errors.append(error)
    return TopicOffsets(
        name,
        np.asarray(partitions, dtype=np.int32),
        np.asarray(offsets, dtype=np.int64),
        np.asarray(errors, dtype=np.int16),
    )


class OffsetFetchResponse_v8(Response):
    """A v8 answer. Decoded here rather than by aiokafka's generic schema walk, which builds a
    tuple per partition: a scan of a million group-partitions spent seconds in it. Each
    topic's partitions become arrays (:class:`TopicOffsets`); ``groups`` holds
    ``(group_id, [TopicOffsets, ...], error_code)``. :attr:`SCHEMA` is the message's layout,
    which encodes it (the tests compare the two decodings)."""

    API_KEY = 9
    API_VERSION = 8

    @classmethod
    def decode(cls, data: BytesIO | bytes) -> OffsetFetchResponse_v8:
        if isinstance(data, bytes):
            data = BytesIO(data)
        start = data.tell()
        reader = _Reader(memoryview(data.read()))
        (throttle_time_ms,) = reader.fixed(_I32)
        groups: list[tuple[str | None, list[TopicOffsets], int]] = []
        for _ in range(reader.uvarint() - 1):
            group_id = reader.string()
            topics = []
            for _ in range(reader.uvarint() - 1):
                name = reader.string() or ""
                topics.append(_topic_offsets(reader, name, reader.uvarint() - 1))
                reader.skip_tags()
            (error_code,) = reader.fixed(_I16)
            reader.skip_tags()
            groups.append((group_id, topics, error_code))
        reader.skip_tags()
        end = start + reader.at
        data.seek(end)
        return cls(throttle_time_ms=throttle_time_ms, groups=groups)

    SCHEMA = Schema(
        ("throttle_time_ms", Int32),
        (
            "groups",
            CompactArray(
                ("group_id", CompactString("utf-8")),
                (
                    "topics",
                    CompactArray(
                        ("name", CompactString("utf-8")),
                        (
                            "partitions",
                            CompactArray(
                                ("partition_index", Int32),
                                ("committed_offset", Int64),
                                ("committed_leader_epoch", Int32),
                                ("metadata", CompactString("utf-8")),
                                ("error_code", Int16),
                                ("tags", TaggedFields),
                            ),
                        ),
                        ("tags", TaggedFields),
                    ),
                ),
                ("error_code", Int16),
                ("tags", TaggedFields),
            ),
        ),
        ("tags", TaggedFields),
    )


def groups_topics_partitions(
    topic: str = "name", partitions: str = "partition_indexes"
) -> tuple[str, CompactArray]:
    """The ``groups`` field of a flexible request that names partitions per topic per group
    (OffsetFetch v8, DescribeShareGroupOffsets): each group id with its topics, each topic's
    name (``topic``) and partition numbers (``partitions``): the names are the schema's."""
    return (
        "groups",
        CompactArray(
            ("group_id", CompactString("utf-8")),
            (
                "topics",
                CompactArray(
                    (topic, CompactString("utf-8")),
                    (partitions, CompactArray(Int32)),
                    ("tags", TaggedFields),
                ),
            ),
            ("tags", TaggedFields),
        ),
    )


class OffsetFetchRequest_v8(RequestStruct):
    API_KEY = 9
    API_VERSION = 8
    FLEXIBLE_VERSION = True
    RESPONSE_TYPE = OffsetFetchResponse_v8
    SCHEMA = Schema(
        groups_topics_partitions(),
        ("require_stable", Boolean),
        ("tags", TaggedFields),
    )


OffsetFetchWanted = list[tuple[str, list[int]]] | None
"""The partitions asked for, by topic; ``None``: every partition the group committed to."""


class OffsetFetch(
    Request[
        OffsetFetchRequest_v1
        | OffsetFetchRequest_v2
        | OffsetFetchRequest_v3
        | OffsetFetchRequest_v8
    ]
):
    """OffsetFetch for one group, or for many in one request where the broker has v8
    (KIP-709). Before v8 a request holds one group: asking a broker without v8 for several
    raises :class:`IncompatibleBrokerVersion` before anything is sent, as asking one before v2
    for every partition (``None``) does."""

    API_KEY = 9

    def __init__(self, groups: Sequence[tuple[str, OffsetFetchWanted]]) -> None:
        if not groups:
            raise ValueError("an OffsetFetch names at least one group")
        self.groups = list(groups)

    def build(self, request_struct_class: type[Any]) -> Any:
        version = request_struct_class.API_VERSION
        if version >= 8:
            return request_struct_class(
                [
                    (group, None if wanted is None else [(t, ps, {}) for t, ps in wanted], {})
                    for group, wanted in self.groups
                ],
                False,
                {},
            )
        if len(self.groups) > 1:
            raise IncompatibleBrokerVersion(
                f"OffsetFetch v{version} holds one group; {len(self.groups)} need v8 (KIP-709)"
            )
        group, wanted = self.groups[0]
        if wanted is None and version < 2:
            raise IncompatibleBrokerVersion("OffsetFetch for every partition needs v2")
        return request_struct_class(group, wanted)


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


@dataclass(frozen=True, slots=True)
class DescribedMember:
    """One member as a describe answer names it: who it is, the topics it subscribes to, the
    partitions it owns now and those it is on its way to (a consumer-protocol group's target
    assignment)."""

    member: GroupMember
    subscribed: Iterable[str]
    owned: set[TopicPartition]
    target: set[TopicPartition] = field(default_factory=set)


def group_of_members(
    name: str,
    state: str,
    protocol_type: str,
    members: Iterable[DescribedMember],
    *,
    group_type: str = "classic",
    group_epoch: int | None = None,
    assignment_epoch: int | None = None,
    shared_partitions: bool = False,
) -> Group:
    """A :class:`Group` from its described members, as every describe answer builds one
    (DescribeGroups, ConsumerGroupDescribe, ShareGroupDescribe).

    Its partitions are those members own now and those they are on their way to (a partition
    moving from one member to another belongs to the group either way); each owned partition's
    owner is the member that has it now: the last one named, or the first where
    ``shared_partitions`` (a share group hands one partition to several members).
    """
    member_ids: list[str] = []
    assigned: set[TopicPartition] = set()
    subscribed: set[str] = set()
    owners: dict[TopicPartition, GroupMember] = {}
    for described in members:
        member_ids.append(described.member.member_id)
        subscribed.update(described.subscribed)
        assigned |= described.owned | described.target
        if shared_partitions:
            for tp in described.owned:
                owners.setdefault(tp, described.member)
        else:
            owners.update(dict.fromkeys(described.owned, described.member))
    return Group(
        name,
        state,
        protocol_type,
        member_ids,
        assigned,
        subscribed,
        group_type=group_type,
        group_epoch=group_epoch,
        assignment_epoch=assignment_epoch,
        owners=owners,
    )


def parse_classic_group(entry: Sequence[Any]) -> Group:
    """A DescribeGroups answer's group (without error) as a :class:`Group`, its consumer
    members' subscriptions and assignments decoded (:func:`decode_member`)."""
    name, state, protocol_type, members = entry[1], entry[2], entry[3] or "", entry[5]

    def described(member: Sequence[Any]) -> DescribedMember:
        member_id, client_id, host, metadata, assignment = member[:5]
        parts, topics = decode_member(protocol_type, metadata, assignment)
        return DescribedMember(group_member(member_id, client_id, host), topics, parts)

    return group_of_members(name, state or "Unknown", protocol_type, map(described, members))


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
    """One group's committed offsets from an OffsetFetch answer of any version; raises
    :class:`CoordinatorMoved` when its coordinator is elsewhere now."""
    if response.API_VERSION >= 8:
        answers = offset_fetch_answers(response)
        if group not in answers:
            raise ScanError(f"OffsetFetch did not answer for {group!r}")
        answer = answers[group]
        if isinstance(answer, CoordinatorMoved):
            raise answer
        return answer.as_dict()
    top_error = getattr(response, "error_code", NONE)
    if top_error in COORDINATOR_ERRORS:
        raise CoordinatorMoved(f"error code {top_error}")
    if top_error != NONE:
        raise ScanError(f"OffsetFetch({group!r}) failed with error code {top_error}")
    return _commits(group, [(t, [p[:2] + p[3:] for p in ps]) for t, ps in response.topics])


def parse_offset_fetch_groups(
    response: Any,
) -> dict[str, dict[TopicPartition, int] | CoordinatorMoved]:
    """Each group's committed offsets from a v8+ OffsetFetch answer, or
    :class:`CoordinatorMoved` for a group whose coordinator is elsewhere now."""
    return {
        group: answer if isinstance(answer, CoordinatorMoved) else answer.as_dict()
        for group, answer in offset_fetch_answers(response).items()
    }


def offset_fetch_answers(response: Any) -> dict[str, CommittedOffsets | CoordinatorMoved]:
    """What :func:`parse_offset_fetch_groups` reads, each group's offsets kept as arrays."""
    out: dict[str, CommittedOffsets | CoordinatorMoved] = {}
    for group, topics, error_code in response.groups:
        if error_code in COORDINATOR_ERRORS:
            out[group] = CoordinatorMoved(f"error code {error_code}")
            continue
        if error_code != NONE:
            raise ScanError(f"OffsetFetch({group!r}) failed with error code {error_code}")
        found: list[tuple[str, np.ndarray, np.ndarray]] = []
        for topic in topics:
            if topic.error.any():
                bad = topic.error != NONE
                rows = zip(topic.partition[bad].tolist(), topic.offset[bad].tolist(),
                           topic.error[bad].tolist())  # fmt: skip
                try:
                    _commits(group, [(topic.name, list(rows))])
                except CoordinatorMoved as moved:
                    out[group] = moved
                    break
            good = (topic.error == NONE) & (topic.offset >= 0)
            if not good.any():
                continue  # a topic with no commit is not one the group committed to
            if good.all():
                found.append((topic.name, topic.partition, topic.offset))
            else:
                found.append((topic.name, topic.partition[good], topic.offset[good]))
        else:
            out[group] = CommittedOffsets.from_topics(found)
    return out


def _commits(
    group: str, topics: Sequence[tuple[str, Sequence[tuple[int, int, int]]]]
) -> dict[TopicPartition, int]:
    commits: dict[TopicPartition, int] = {}
    for topic, partitions in topics:
        for partition, offset, error_code in partitions:
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
