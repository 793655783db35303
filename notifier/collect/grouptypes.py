"""Group types (KIP-848): ListGroups with each group's type, ConsumerGroupDescribe, and what a
consumer-protocol group's state means to the rules.

Since Kafka 4.0 a consumer may join with ``group.protocol=consumer``; its group is not
"classic", and DescribeGroups cannot describe it (``GROUP_ID_NOT_FOUND``, "not a classic
group", or ``Dead`` with no members on brokers before 4.0). ListGroups v5 names each group's
type, and ConsumerGroupDescribe (API key 69) describes consumer-protocol groups: members, their
current and target assignments, the group epoch and the target assignment epoch.

The message layouts follow Kafka's schemas (``ListGroupsRequest.json``,
``ListGroupsResponse.json``, ``ConsumerGroupDescribeRequest.json``,
``ConsumerGroupDescribeResponse.json``): flexible versions with compact strings and arrays and
a tagged-field section at the end of every structure. aiokafka 0.14 has neither (its ListGroups
stops at v1), so they are defined here on its ``Schema`` types. Which version goes out is
negotiated per connection from ApiVersions, like every other request: a broker without
ListGroups v5 gets v1 (no types: every group is described as classic), and one without
ConsumerGroupDescribe makes ``ConsumerGroupDescribe.prepare`` raise
``IncompatibleBrokerVersion`` before anything is sent.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence
from io import BytesIO
from typing import Any

from aiokafka.protocol.abstract import AbstractType
from aiokafka.protocol.admin import (
    ListGroupsRequest_v0,
    ListGroupsRequest_v1,
)
from aiokafka.protocol.api import Request, RequestStruct, Response
from aiokafka.protocol.types import (
    Boolean,
    CompactArray,
    CompactString,
    Int8,
    Int16,
    Int32,
    Schema,
    TaggedFields,
)

from notifier.collect.protocol import DescribedMember, Group, group_member, group_of_members
from notifier.collect.results import TopicPartition

CLASSIC = "classic"
CONSUMER = "consumer"
SHARE = "share"
STREAMS = "streams"
EVALUATED_TYPES = frozenset({CLASSIC, CONSUMER})
"""Group types the rules judge; other types are listed as what they are and not evaluated."""

UNEVALUATED_REASONS: Mapping[str, str] = {
    SHARE: "share group (KIP-932): listed, not evaluated as a consumer group",
    STREAMS: "streams group (KIP-1071): listed, not evaluated as a consumer group",
}

CONSUMER_PROTOCOL_STATES: Mapping[str, str] = {
    "Empty": "Empty",
    "Assigning": "PreparingRebalance",
    "Reconciling": "CompletingRebalance",
    "Stable": "Stable",
    "Dead": "Dead",
}
"""A consumer-protocol group's state as the rules read it (classic names).

``Assigning``: the group epoch moved (a member joined or left, a subscription changed) and the
coordinator has not computed the target assignment for it yet. ``Reconciling``: the target
assignment exists and members are still revoking and taking partitions to reach it. Both are
the new protocol's "rebalancing"; a group stuck in them for ``samples`` scans is a stuck
rebalance."""


def unevaluated_reason(group_type: str) -> str:
    """Why a group of ``group_type`` (not classic, not consumer) is left out of the rules."""
    return UNEVALUATED_REASONS.get(
        group_type, f"{group_type} group: listed, not evaluated as a consumer group"
    )


class Uuid(AbstractType[uuid.UUID]):
    """Kafka's ``uuid``: 16 bytes, most significant first."""

    @classmethod
    def encode(cls, value: uuid.UUID) -> bytes:
        return value.bytes

    @classmethod
    def decode(cls, data: BytesIO) -> uuid.UUID:
        raw = data.read(16)
        if len(raw) != 16:
            raise ValueError("Buffer underrun decoding uuid")
        return uuid.UUID(bytes=raw)


# --------------------------------------------------------------------------------------------
# ListGroups v5: every group with its state and type


class ListGroupsResponse_v5(Response):
    API_KEY = 16
    API_VERSION = 5
    SCHEMA = Schema(
        ("throttle_time_ms", Int32),
        ("error_code", Int16),
        (
            "groups",
            CompactArray(
                ("group_id", CompactString("utf-8")),
                ("protocol_type", CompactString("utf-8")),
                ("group_state", CompactString("utf-8")),
                ("group_type", CompactString("utf-8")),
                ("tags", TaggedFields),
            ),
        ),
        ("tags", TaggedFields),
    )


class ListGroupsRequest_v5(RequestStruct):
    API_KEY = 16
    API_VERSION = 5
    FLEXIBLE_VERSION = True
    RESPONSE_TYPE = ListGroupsResponse_v5
    SCHEMA = Schema(
        ("states_filter", CompactArray(CompactString("utf-8"))),
        ("types_filter", CompactArray(CompactString("utf-8"))),
        ("tags", TaggedFields),
    )


class ListGroups(Request[ListGroupsRequest_v0 | ListGroupsRequest_v1 | ListGroupsRequest_v5]):
    """ListGroups, v5 where the broker has it: no state or type filter (every group, each with
    its type); otherwise v1 or v0, whose answers carry no type."""

    API_KEY = 16

    def build(self, request_struct_class: type[Any]) -> Any:
        if request_struct_class.API_VERSION >= 5:
            return request_struct_class([], [], {})
        return request_struct_class()


def parse_list_groups(response: Any) -> list[tuple[str, str | None]]:
    """``(group id, group type)`` per listed group; the type is ``None`` before v5."""
    if response.API_VERSION >= 5:
        return [(entry[0], (entry[3] or CLASSIC).lower()) for entry in response.groups]
    return [(entry[0], None) for entry in response.groups]


# --------------------------------------------------------------------------------------------
# ConsumerGroupDescribe (API key 69)


def assignment_schema() -> Schema:
    """A member's assignment in a describe answer (ConsumerGroupDescribe, ShareGroupDescribe):
    topics by id and name, each with its partitions."""
    return Schema(
        (
            "topic_partitions",
            CompactArray(
                ("topic_id", Uuid),
                ("topic_name", CompactString("utf-8")),
                ("partitions", CompactArray(Int32)),
                ("tags", TaggedFields),
            ),
        ),
        ("tags", TaggedFields),
    )


def describe_response_schema(member_fields: Sequence[tuple[str, Any]]) -> Schema:
    """The answer of a KIP-848-style describe (ConsumerGroupDescribe, ShareGroupDescribe):
    each group with its error, state, epochs and members of ``member_fields``."""
    return Schema(
        ("throttle_time_ms", Int32),
        (
            "groups",
            CompactArray(
                ("error_code", Int16),
                ("error_message", CompactString("utf-8")),
                ("group_id", CompactString("utf-8")),
                ("group_state", CompactString("utf-8")),
                ("group_epoch", Int32),
                ("assignment_epoch", Int32),
                ("assignor_name", CompactString("utf-8")),
                ("members", CompactArray(*member_fields)),
                ("authorized_operations", Int32),
                ("tags", TaggedFields),
            ),
        ),
        ("tags", TaggedFields),
    )


def _consumer_member_fields(with_member_type: bool) -> list[tuple[str, Any]]:
    member_fields: list[tuple[str, Any]] = [
        ("member_id", CompactString("utf-8")),
        ("instance_id", CompactString("utf-8")),
        ("rack_id", CompactString("utf-8")),
        ("member_epoch", Int32),
        ("client_id", CompactString("utf-8")),
        ("client_host", CompactString("utf-8")),
        ("subscribed_topic_names", CompactArray(CompactString("utf-8"))),
        ("subscribed_topic_regex", CompactString("utf-8")),
        ("assignment", assignment_schema()),
        ("target_assignment", assignment_schema()),
    ]
    if with_member_type:
        member_fields.append(("member_type", Int8))
    member_fields.append(("tags", TaggedFields))
    return member_fields


DESCRIBE_REQUEST_SCHEMA = Schema(
    ("group_ids", CompactArray(CompactString("utf-8"))),
    ("include_authorized_operations", Boolean),
    ("tags", TaggedFields),
)
"""The request of a KIP-848-style describe: the group ids, no authorized operations."""


class ConsumerGroupDescribeResponse_v0(Response):
    API_KEY = 69
    API_VERSION = 0
    SCHEMA = describe_response_schema(_consumer_member_fields(with_member_type=False))


class ConsumerGroupDescribeResponse_v1(Response):
    """v1 adds each member's type (KIP-1099): -1 unknown, 0 classic, 1 consumer."""

    API_KEY = 69
    API_VERSION = 1
    SCHEMA = describe_response_schema(_consumer_member_fields(with_member_type=True))


class ConsumerGroupDescribeRequest_v0(RequestStruct):
    API_KEY = 69
    API_VERSION = 0
    FLEXIBLE_VERSION = True
    RESPONSE_TYPE = ConsumerGroupDescribeResponse_v0
    SCHEMA = DESCRIBE_REQUEST_SCHEMA


class ConsumerGroupDescribeRequest_v1(RequestStruct):
    API_KEY = 69
    API_VERSION = 1
    FLEXIBLE_VERSION = True
    RESPONSE_TYPE = ConsumerGroupDescribeResponse_v1
    SCHEMA = DESCRIBE_REQUEST_SCHEMA


class ConsumerGroupDescribe(
    Request[ConsumerGroupDescribeRequest_v0 | ConsumerGroupDescribeRequest_v1]
):
    API_KEY = 69

    def __init__(self, groups: Sequence[str]) -> None:
        self._groups = list(groups)

    def build(self, request_struct_class: type[Any]) -> Any:
        return request_struct_class(self._groups, False, {})


def assigned_partitions(assignment: Sequence[Any]) -> set[TopicPartition]:
    """The partitions of an assignment decoded with :func:`assignment_schema`."""
    topic_partitions = assignment[0] or []
    return {
        (topic_name, int(partition))
        for _topic_id, topic_name, partitions, _tags in topic_partitions
        for partition in partitions or []
    }


def parse_consumer_group(entry: Sequence[Any]) -> Group:
    """A ConsumerGroupDescribe answer's group (without error) as a :class:`Group`.

    Its partitions are those members own now and those the target assignment gives them (a
    partition on its way from one member to another belongs to the group either way, and is
    still owned by the member that has it now); its state stays the broker's name, which
    :func:`rules_state` maps.
    """
    _error, _message, group_id, state, group_epoch, assignment_epoch = entry[:6]
    members = [
        DescribedMember(
            group_member(member[0], member[4], member[5]),
            member[6] or [],
            owned=assigned_partitions(member[8]),
            target=assigned_partitions(member[9]),
        )
        for member in entry[7] or []
    ]
    return group_of_members(
        group_id,
        state or "Unknown",
        CONSUMER,
        members,
        group_type=CONSUMER,
        group_epoch=int(group_epoch),
        assignment_epoch=int(assignment_epoch),
    )


def rules_state(state: str | None, group_type: str = CLASSIC) -> str | None:
    """The state name the rules know for a group of ``group_type`` (classic names pass as is)."""
    if group_type == CONSUMER and state is not None:
        return CONSUMER_PROTOCOL_STATES.get(state, state)
    return state
