"""Share groups (KIP-932): what they consume, read with ShareGroupDescribe (API key 77) and
DescribeShareGroupOffsets (API key 90), so their backlog is judged like a consumer group's.

A share group has no committed offset per partition: its members acquire records, acknowledge
them one by one, and the broker keeps a share-partition start offset (SPSO), below which every
record is acknowledged (or archived), and the acknowledged ranges beyond it. The records the
group has not finished with are its lag; Kafka 4.4 (DescribeShareGroupOffsets v1, KIP-1226)
counts it. The offset the rules see for a partition is the log-end offset minus that lag (at
least the SPSO): it moves as the group finishes records, stands still while nobody does, like a
consumer group's commit. The SPSO alone understates progress (a broker may keep it at 0 while
the records after it are acknowledged), so it is used alone only where the broker has v0 (no
lag). A partition the group has no state for yet (SPSO -1) has no offset, as a consumer group
without a commit. The lag is read before the log-end offsets, so records that arrive during
the scan itself (milliseconds) may be missing from it.

ShareGroupDescribe gives the group's state (``Empty``, ``Stable``, ``Dead``: the classic names),
members and assignments, as ConsumerGroupDescribe does for a consumer-protocol group. The
layouts follow Kafka 4.4's schemas (``ShareGroupDescribeResponse.json`` v1,
``DescribeShareGroupOffsetsResponse.json`` v0 and v1, whose v1 adds each partition's lag); a
broker without both APIs (before Kafka 4.2, or share groups switched off) leaves its share
groups listed and not evaluated, as before.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from aiokafka.protocol.api import Request, RequestStruct, Response
from aiokafka.protocol.types import (
    CompactArray,
    CompactString,
    Int16,
    Int32,
    Int64,
    Schema,
    TaggedFields,
)

from notifier.collect.grouptypes import (
    DESCRIBE_REQUEST_SCHEMA,
    SHARE,
    Uuid,
    assigned_partitions,
    assignment_schema,
    describe_response_schema,
)
from notifier.collect.protocol import (
    DescribedMember,
    Group,
    group_member,
    group_of_members,
    groups_topics_partitions,
)
from notifier.collect.results import TopicPartition

SHARE_STATES = ("Empty", "Stable", "Dead")
"""A share group's states (``ShareGroup.ShareGroupState``), which are classic names."""

# --------------------------------------------------------------------------------------------
# ShareGroupDescribe (API key 77), v1


_SHARE_MEMBER_FIELDS: list[tuple[str, Any]] = [
    ("member_id", CompactString("utf-8")),
    ("rack_id", CompactString("utf-8")),
    ("member_epoch", Int32),
    ("client_id", CompactString("utf-8")),
    ("client_host", CompactString("utf-8")),
    ("subscribed_topic_names", CompactArray(CompactString("utf-8"))),
    ("assignment", assignment_schema()),
    ("tags", TaggedFields),
]
"""A share group's member: a consumer-protocol member without instance id, regex and target
assignment."""


class ShareGroupDescribeResponse_v1(Response):
    API_KEY = 77
    API_VERSION = 1
    SCHEMA = describe_response_schema(_SHARE_MEMBER_FIELDS)


class ShareGroupDescribeRequest_v1(RequestStruct):
    API_KEY = 77
    API_VERSION = 1
    FLEXIBLE_VERSION = True
    RESPONSE_TYPE = ShareGroupDescribeResponse_v1
    SCHEMA = DESCRIBE_REQUEST_SCHEMA


class ShareGroupDescribe(Request[ShareGroupDescribeRequest_v1]):
    API_KEY = 77

    def __init__(self, groups: Sequence[str]) -> None:
        self._groups = list(groups)

    def build(self, request_struct_class: type[Any]) -> Any:
        return request_struct_class(self._groups, False, {})


def parse_share_group(entry: Sequence[Any]) -> Group:
    """A ShareGroupDescribe answer's group (without error) as a :class:`Group`: its members,
    the partitions assigned to them and who has each (share groups hand one partition to
    several members: the first one named keeps it)."""
    group_id, state, group_epoch, assignment_epoch = entry[2], entry[3], entry[4], entry[5]
    members = [
        DescribedMember(
            group_member(member[0], member[3], member[4]),
            member[5] or [],
            owned=assigned_partitions(member[6]),
        )
        for member in entry[7] or []
    ]
    return group_of_members(
        group_id,
        state if state in SHARE_STATES else "Unknown",
        SHARE,
        members,
        group_type=SHARE,
        group_epoch=int(group_epoch),
        assignment_epoch=int(assignment_epoch),
        shared_partitions=True,
    )


# --------------------------------------------------------------------------------------------
# DescribeShareGroupOffsets (API key 90), v0 and v1


def _offsets_response(with_lag: bool) -> Schema:
    partition: list[tuple[str, Any]] = [
        ("partition_index", Int32),
        ("start_offset", Int64),
        ("leader_epoch", Int32),
    ]
    if with_lag:
        partition.append(("lag", Int64))
    partition += [
        ("error_code", Int16),
        ("error_message", CompactString("utf-8")),
        ("tags", TaggedFields),
    ]
    return Schema(
        ("throttle_time_ms", Int32),
        (
            "groups",
            CompactArray(
                ("group_id", CompactString("utf-8")),
                (
                    "topics",
                    CompactArray(
                        ("topic_name", CompactString("utf-8")),
                        ("topic_id", Uuid),
                        ("partitions", CompactArray(*partition)),
                        ("tags", TaggedFields),
                    ),
                ),
                ("error_code", Int16),
                ("error_message", CompactString("utf-8")),
                ("tags", TaggedFields),
            ),
        ),
        ("tags", TaggedFields),
    )


_OFFSETS_REQUEST = Schema(
    groups_topics_partitions(topic="topic_name", partitions="partitions"),
    ("tags", TaggedFields),
)


class DescribeShareGroupOffsetsResponse_v0(Response):
    API_KEY = 90
    API_VERSION = 0
    SCHEMA = _offsets_response(with_lag=False)


class DescribeShareGroupOffsetsResponse_v1(Response):
    """v1 adds each partition's lag as the broker counts it."""

    API_KEY = 90
    API_VERSION = 1
    SCHEMA = _offsets_response(with_lag=True)


class DescribeShareGroupOffsetsRequest_v0(RequestStruct):
    API_KEY = 90
    API_VERSION = 0
    FLEXIBLE_VERSION = True
    RESPONSE_TYPE = DescribeShareGroupOffsetsResponse_v0
    SCHEMA = _OFFSETS_REQUEST


class DescribeShareGroupOffsetsRequest_v1(RequestStruct):
    API_KEY = 90
    API_VERSION = 1
    FLEXIBLE_VERSION = True
    RESPONSE_TYPE = DescribeShareGroupOffsetsResponse_v1
    SCHEMA = _OFFSETS_REQUEST


class DescribeShareGroupOffsets(
    Request[DescribeShareGroupOffsetsRequest_v0 | DescribeShareGroupOffsetsRequest_v1]
):
    """Every topic-partition the groups have state for (``topics`` null)."""

    API_KEY = 90

    def __init__(self, groups: Sequence[str]) -> None:
        self._groups = list(groups)

    def build(self, request_struct_class: type[Any]) -> Any:
        return request_struct_class([(group, None, {}) for group in self._groups], {})


@dataclass(frozen=True, slots=True)
class ShareOffsets:
    """What DescribeShareGroupOffsets said of one group: each partition's SPSO, and its lag
    where the broker counts it (v1)."""

    starts: dict[TopicPartition, int] = field(default_factory=dict)
    lags: dict[TopicPartition, int] = field(default_factory=dict)

    def offsets(self, log_end: Mapping[TopicPartition, int]) -> dict[TopicPartition, int]:
        """The offset up to which the group is done with each partition, as a consumer group's
        commit: the log-end offset minus the lag, never below the SPSO nor above the end."""
        out = dict(self.starts)
        for tp, lag in self.lags.items():
            end = log_end.get(tp)
            if end is not None and lag >= 0 and tp in out:
                out[tp] = min(end, max(out[tp], end - lag))
        return out


def parse_share_offsets(
    response: Any,
) -> tuple[dict[str, ShareOffsets], dict[str, tuple[int, str]]]:
    """Each group's share-partition start offsets and lags (partitions without a start
    offset, SPSO -1 or an error, are left out), and the groups the broker answered with an
    error (code, message)."""
    found: dict[str, ShareOffsets] = {}
    errors: dict[str, tuple[int, str]] = {}
    with_lag = response.API_VERSION >= 1
    error_at = 4 if with_lag else 3
    for group_id, topics, error_code, message, _tags in response.groups:
        if error_code:
            errors[group_id] = (int(error_code), message or "")
            continue
        group = found.setdefault(group_id, ShareOffsets())
        for topic, _topic_id, partitions, _ in topics or []:
            for partition in partitions or []:
                start, tp = int(partition[1]), (topic, int(partition[0]))
                if partition[error_at] != 0 or start < 0:
                    continue
                group.starts[tp] = start
                if with_lag:
                    group.lags[tp] = int(partition[3])
    return found, errors
