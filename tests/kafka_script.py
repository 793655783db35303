"""A scripted Kafka-protocol broker on a loopback socket, for what the embedded broker cannot do.

Tansu 0.6 has no ConsumerGroupHeartbeat, so no consumer can join a consumer-protocol group
(KIP-848) on it, and the collector's ConsumerGroupDescribe path needs a broker that has such
groups. :class:`ScriptedKafka` answers the requests a scan sends — ApiVersions, Metadata,
ListGroups, DescribeGroups, ConsumerGroupDescribe, FindCoordinator, OffsetFetch, ListOffsets —
from groups and topics a test sets up, as one broker (node 0) that coordinates every group.

ListGroups v5 and ConsumerGroupDescribe v0/v1 answers are encoded here byte by byte from
Kafka's message schemas (``ListGroupsResponse.json``, ``ConsumerGroupDescribeResponse.json``):
flexible versions, compact strings and arrays (length + 1 as an unsigned varint), uuids, and a
tagged-field section closing every structure — with a tagged field the client does not know in
each group and member, as a newer broker may send. They share no code with the collector's
decoders, so a field out of place on either side fails the tests. The classic answers use
aiokafka's structures, which the collector already relies on against the embedded broker.

``kafka="4.0"`` advertises ListGroups v0–v5 and ConsumerGroupDescribe v0–v1, and DescribeGroups
answers a consumer-protocol group with ``GROUP_ID_NOT_FOUND``; ``kafka="3.6"`` advertises
neither (ListGroups up to v4), as brokers before KIP-848 do.
"""

from __future__ import annotations

import asyncio
import struct
import uuid
from collections import Counter
from dataclasses import dataclass, field
from io import BytesIO

from aiokafka.coordinator.protocol import (
    ConsumerProtocolMemberAssignment,
    ConsumerProtocolMemberMetadata,
)
from aiokafka.protocol.admin import (
    ApiVersionResponse_v0,
    DescribeGroupsRequest_v3,
    DescribeGroupsResponse_v3,
    ListGroupsResponse_v1,
)
from aiokafka.protocol.commit import OffsetFetchRequest_v3, OffsetFetchResponse_v3
from aiokafka.protocol.coordination import FindCoordinatorRequest_v0, FindCoordinatorResponse_v0
from aiokafka.protocol.metadata import MetadataRequest_v1, MetadataResponse_v1
from aiokafka.protocol.offset import OffsetRequest_v1, OffsetResponse_v1

API_VERSIONS, METADATA, LIST_OFFSETS, OFFSET_FETCH = 18, 3, 2, 9
FIND_COORDINATOR, DESCRIBE_GROUPS, LIST_GROUPS, CONSUMER_GROUP_DESCRIBE = 10, 15, 16, 69
NOT_COORDINATOR, GROUP_ID_NOT_FOUND = 16, 69
NO_AUTHORIZED_OPERATIONS = -(2**31)

# Kafka's "flexibleVersions" of the requests this broker answers: from these versions on, the
# request header carries tagged fields, and so does the response header (ApiVersions excepted).
_FLEXIBLE_FROM = {
    API_VERSIONS: 3,
    METADATA: 9,
    LIST_OFFSETS: 6,
    OFFSET_FETCH: 6,
    FIND_COORDINATOR: 3,
    DESCRIBE_GROUPS: 5,
    LIST_GROUPS: 3,
    CONSUMER_GROUP_DESCRIBE: 0,
}
# An unknown tag: a reader that does not skip tagged fields it does not know misreads the rest.
_UNKNOWN_TAGS = {7: b"\x2a\x2a\x2a"}


# --------------------------------------------------------------------------------------------
# Kafka's flexible encoding, by hand


def uvarint(value: int) -> bytes:
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def int8(value: int) -> bytes:
    return struct.pack(">b", value)


def int16(value: int) -> bytes:
    return struct.pack(">h", value)


def int32(value: int) -> bytes:
    return struct.pack(">i", value)


def compact_string(value: str | None) -> bytes:
    if value is None:
        return uvarint(0)
    raw = value.encode()
    return uvarint(len(raw) + 1) + raw


def compact_array(items: list[bytes]) -> bytes:
    return uvarint(len(items) + 1) + b"".join(items)


def tagged_fields(tags: dict[int, bytes]) -> bytes:
    return uvarint(len(tags)) + b"".join(
        uvarint(tag) + uvarint(len(value)) + value for tag, value in sorted(tags.items())
    )


class _Reader:
    def __init__(self, data: bytes) -> None:
        self.data = BytesIO(data)

    def int16(self) -> int:
        return int(struct.unpack(">h", self.data.read(2))[0])

    def int32(self) -> int:
        return int(struct.unpack(">i", self.data.read(4))[0])

    def uvarint(self) -> int:
        value = shift = 0
        while True:
            byte = self.data.read(1)[0]
            value |= (byte & 0x7F) << shift
            if byte < 0x80:
                return value
            shift += 7

    def string(self) -> str | None:
        length = self.int16()
        return None if length < 0 else self.data.read(length).decode()

    def compact_string(self) -> str | None:
        length = self.uvarint() - 1
        return None if length < 0 else self.data.read(length).decode()

    def compact_strings(self) -> list[str]:
        return [self.compact_string() or "" for _ in range(self.uvarint() - 1)]

    def skip_tags(self) -> None:
        for _ in range(self.uvarint()):
            self.uvarint()
            self.data.read(self.uvarint())

    def rest(self) -> bytes:
        return self.data.read()


# --------------------------------------------------------------------------------------------
# What the broker knows


@dataclass
class Member:
    member_id: str
    assignment: dict[str, list[int]] = field(default_factory=dict)
    target: dict[str, list[int]] | None = None
    """The target assignment (consumer-protocol groups); None: the current one."""
    client_id: str = "consumer-1"
    host: str = "/10.0.0.7"
    instance_id: str | None = None
    member_epoch: int = 1
    member_type: int = 1
    """ConsumerGroupDescribe v1's member type: 0 classic, 1 consumer."""


@dataclass
class ScriptedGroup:
    name: str
    group_type: str = "consumer"
    """classic, consumer, share or streams."""
    state: str = "Stable"
    members: list[Member] = field(default_factory=list)
    epoch: int = 1
    assignment_epoch: int | None = None
    """None: equal to the group epoch."""
    commits: dict[tuple[str, int], int] = field(default_factory=dict)
    describe_error: int = 0
    describe_error_message: str | None = None
    not_coordinator_times: int = 0
    """Answer this many describes of the group with NOT_COORDINATOR first."""
    listed_as: str | None = None
    """The type ListGroups names (None: ``group_type``): a group converted since."""


class ScriptedKafka:
    """One scripted broker, node 0, on a loopback port; every group's coordinator."""

    def __init__(self, kafka: str = "4.0", *, consumer_group_describe: bool = True) -> None:
        if kafka not in ("4.0", "3.6"):
            raise ValueError(f"kafka must be '4.0' or '3.6', not {kafka!r}")
        self.kafka = kafka
        self.consumer_group_describe = consumer_group_describe and kafka == "4.0"
        """False on a 4.0 broker: one half way through an upgrade, without the API."""
        self.topics: dict[str, list[int]] = {}
        """Log-end offset per partition of each topic (log start is 0)."""
        self.topic_ids: dict[str, uuid.UUID] = {}
        self.groups: dict[str, ScriptedGroup] = {}
        self.received: Counter[tuple[str, int]] = Counter()
        """(API name, version) of every request answered."""
        self.described: dict[str, list[str]] = {"DescribeGroups": [], "ConsumerGroupDescribe": []}
        self.list_groups_filters: list[tuple[list[str], list[str]]] = []
        self.port = 0
        self._server: asyncio.Server | None = None
        self._writers: set[asyncio.StreamWriter] = set()

    @property
    def bootstrap_servers(self) -> str:
        return f"127.0.0.1:{self.port}"

    def topic(self, name: str, log_end: list[int]) -> None:
        self.topics[name] = list(log_end)
        self.topic_ids.setdefault(name, uuid.uuid5(uuid.NAMESPACE_DNS, name))

    def group(self, name: str, **kwargs: object) -> ScriptedGroup:
        group = ScriptedGroup(name, **kwargs)  # type: ignore[arg-type]
        self.groups[name] = group
        return group

    async def start(self) -> ScriptedKafka:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
            for writer in list(self._writers):
                writer.close()
            await self._server.wait_closed()

    async def __aenter__(self) -> ScriptedKafka:
        return await self.start()

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()

    # ----------------------------------------------------------------------------------------
    # The wire

    def _api_versions(self) -> list[tuple[int, int, int]]:
        versions = [
            (API_VERSIONS, 0, 3),
            (METADATA, 0, 1),
            (LIST_OFFSETS, 1, 1),
            (OFFSET_FETCH, 1, 3),
            (FIND_COORDINATOR, 0, 0),
            (DESCRIBE_GROUPS, 0, 3),
        ]
        if self.kafka == "3.6":
            return [*versions, (LIST_GROUPS, 0, 4)]
        if not self.consumer_group_describe:
            return [*versions, (LIST_GROUPS, 0, 5)]
        return [*versions, (LIST_GROUPS, 0, 5), (CONSUMER_GROUP_DESCRIBE, 0, 1)]

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._writers.add(writer)
        try:
            while True:
                size = struct.unpack(">i", await reader.readexactly(4))[0]
                request = _Reader(await reader.readexactly(size))
                api_key, version, correlation_id = (
                    request.int16(),
                    request.int16(),
                    request.int32(),
                )
                request.string()  # client id
                flexible = version >= _FLEXIBLE_FROM[api_key]
                if flexible:
                    request.skip_tags()
                body = self._answer(api_key, version, request)
                header = int32(correlation_id)
                if flexible and api_key != API_VERSIONS:
                    header += tagged_fields({})
                writer.write(int32(len(header) + len(body)) + header + body)
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            self._writers.discard(writer)
            writer.close()

    def _answer(self, api_key: int, version: int, request: _Reader) -> bytes:
        supported = {key: (low, high) for key, low, high in self._api_versions()}
        low, high = supported.get(api_key, (0, -1))
        if not low <= version <= high:
            raise ConnectionError(f"API {api_key} v{version} is not advertised")
        names = {
            API_VERSIONS: "ApiVersions",
            METADATA: "Metadata",
            LIST_OFFSETS: "ListOffsets",
            OFFSET_FETCH: "OffsetFetch",
            FIND_COORDINATOR: "FindCoordinator",
            DESCRIBE_GROUPS: "DescribeGroups",
            LIST_GROUPS: "ListGroups",
            CONSUMER_GROUP_DESCRIBE: "ConsumerGroupDescribe",
        }
        self.received[(names[api_key], version)] += 1
        if api_key == API_VERSIONS:
            return ApiVersionResponse_v0(0, self._api_versions()).encode()
        if api_key == METADATA:
            MetadataRequest_v1.decode(request.rest())
            return self._metadata()
        if api_key == FIND_COORDINATOR:
            FindCoordinatorRequest_v0.decode(request.rest())
            return FindCoordinatorResponse_v0(0, 0, "127.0.0.1", self.port).encode()
        if api_key == LIST_GROUPS:
            return self._list_groups(version, request)
        if api_key == DESCRIBE_GROUPS:
            return self._describe_groups(DescribeGroupsRequest_v3.decode(request.rest()).groups)
        if api_key == CONSUMER_GROUP_DESCRIBE:
            return self._consumer_group_describe(version, request)
        if api_key == OFFSET_FETCH:
            return self._offset_fetch(OffsetFetchRequest_v3.decode(request.rest()))
        return self._list_offsets(OffsetRequest_v1.decode(request.rest()))

    # ----------------------------------------------------------------------------------------
    # Answers

    def _metadata(self) -> bytes:
        topics = [
            (0, name, False, [(0, p, 0, [0], [0]) for p in range(len(log_end))])
            for name, log_end in sorted(self.topics.items())
        ]
        return MetadataResponse_v1([(0, "127.0.0.1", self.port, None)], 0, topics).encode()

    def _list_groups(self, version: int, request: _Reader) -> bytes:
        if version < 5:
            listed = [(g.name, _protocol_type(g)) for g in self.groups.values()]
            return ListGroupsResponse_v1(0, 0, listed).encode()
        states, types = request.compact_strings(), request.compact_strings()
        request.skip_tags()
        self.list_groups_filters.append((states, types))
        groups = [
            compact_string(g.name)
            + compact_string(_protocol_type(g))
            + compact_string(g.state)
            + compact_string(g.listed_as or g.group_type)
            + tagged_fields({})
            for g in self.groups.values()
        ]
        # ListGroupsResponse v5: ThrottleTimeMs, ErrorCode, Groups, then the tagged fields.
        return int32(0) + int16(0) + compact_array(groups) + tagged_fields({})

    def _describe_groups(self, names: list[str]) -> bytes:
        described = []
        for name in names:
            self.described["DescribeGroups"].append(name)
            group = self.groups.get(name)
            if group is None or group.group_type != "classic":
                if group is not None and self.kafka == "3.6":
                    # Before KIP-848 was GA: a group it cannot describe is Dead, no members.
                    described.append((0, name, "Dead", "", "", [], NO_AUTHORIZED_OPERATIONS))
                else:
                    described.append((GROUP_ID_NOT_FOUND, name, "Dead", "", "", [],
                                      NO_AUTHORIZED_OPERATIONS))  # fmt: skip
                continue
            members = [
                (
                    m.member_id,
                    m.client_id,
                    m.host,
                    ConsumerProtocolMemberMetadata(0, sorted(m.assignment), b"").encode(),
                    ConsumerProtocolMemberAssignment(
                        0, sorted((t, ps) for t, ps in m.assignment.items()), b""
                    ).encode(),
                )
                for m in group.members
            ]
            described.append((0, name, group.state, "consumer", "range", members,
                              NO_AUTHORIZED_OPERATIONS))  # fmt: skip
        return DescribeGroupsResponse_v3(0, described).encode()

    def _consumer_group_describe(self, version: int, request: _Reader) -> bytes:
        names = request.compact_strings()
        request.data.read(1)  # IncludeAuthorizedOperations
        request.skip_tags()
        groups = []
        for name in names:
            self.described["ConsumerGroupDescribe"].append(name)
            group = self.groups.get(name)
            if group is not None and group.not_coordinator_times:
                group.not_coordinator_times -= 1
                groups.append(_described_error(name, NOT_COORDINATOR, None))
            elif group is None:
                message = f"Group {name} not found."
                groups.append(_described_error(name, GROUP_ID_NOT_FOUND, message))
            elif group.group_type != "consumer":
                message = f"Group {name} is not a consumer group."
                groups.append(_described_error(name, GROUP_ID_NOT_FOUND, message))
            elif group.describe_error:
                groups.append(
                    _described_error(name, group.describe_error, group.describe_error_message)
                )
            else:
                groups.append(self._described_group(group, version))
        # ConsumerGroupDescribeResponse: ThrottleTimeMs, Groups, then the tagged fields.
        return int32(0) + compact_array(groups) + tagged_fields({})

    def _described_group(self, group: ScriptedGroup, version: int) -> bytes:
        members = []
        for m in group.members:
            member = (
                compact_string(m.member_id)
                + compact_string(m.instance_id)
                + compact_string(None)  # RackId
                + int32(m.member_epoch)
                + compact_string(m.client_id)
                + compact_string(m.host)
                + compact_array([compact_string(t) for t in sorted(m.assignment)])
                + compact_string(None)  # SubscribedTopicRegex
                + self._assignment(m.assignment)
                + self._assignment(m.assignment if m.target is None else m.target)
            )
            if version >= 1:
                member += int8(m.member_type)
            members.append(member + tagged_fields(_UNKNOWN_TAGS))
        assignment_epoch = group.epoch if group.assignment_epoch is None else group.assignment_epoch
        return (
            int16(0)  # ErrorCode
            + compact_string(None)  # ErrorMessage
            + compact_string(group.name)
            + compact_string(group.state)
            + int32(group.epoch)
            + int32(assignment_epoch)
            + compact_string("uniform")
            + compact_array(members)
            + int32(NO_AUTHORIZED_OPERATIONS)
            + tagged_fields(_UNKNOWN_TAGS)
        )

    def _assignment(self, partitions: dict[str, list[int]]) -> bytes:
        topics = [
            self.topic_ids[topic].bytes
            + compact_string(topic)
            + compact_array([int32(p) for p in parts])
            + tagged_fields({})
            for topic, parts in sorted(partitions.items())
        ]
        return compact_array(topics) + tagged_fields({})

    def _offset_fetch(self, request: OffsetFetchRequest_v3) -> bytes:
        group = self.groups.get(request.consumer_group)
        commits = group.commits if group is not None else {}
        wanted = (
            {(t, p) for t, parts in request.topics for p in parts}
            if request.topics is not None
            else set(commits)
        )
        by_topic: dict[str, list[tuple[int, int, str, int]]] = {}
        for topic, partition in sorted(wanted):
            offset = commits.get((topic, partition), -1)
            by_topic.setdefault(topic, []).append((partition, offset, "", 0))
        return OffsetFetchResponse_v3(0, sorted(by_topic.items()), 0).encode()

    def _list_offsets(self, request: OffsetRequest_v1) -> bytes:
        topics = []
        for topic, partitions in request.topics:
            answers = []
            for partition, timestamp in partitions:
                offset = self.topics[topic][partition] if timestamp == -1 else 0
                answers.append((partition, 0, -1, offset))
            topics.append((topic, answers))
        return OffsetResponse_v1(topics).encode()


def _protocol_type(group: ScriptedGroup) -> str:
    return {"share": "share", "streams": "streams"}.get(group.group_type, "consumer")


def _described_error(name: str, error_code: int, message: str | None) -> bytes:
    return (
        int16(error_code)
        + compact_string(message)
        + compact_string(name)
        + compact_string("Dead" if error_code == GROUP_ID_NOT_FOUND else "")
        + int32(-1)
        + int32(-1)
        + compact_string("")
        + compact_array([])
        + int32(NO_AUTHORIZED_OPERATIONS)
        + tagged_fields({})
    )
