"""The sample table a scan produces, and the conversions its rows go through.

One row per group-partition with a commit or an assignment, in
:data:`~notifier.types.SAMPLE_SCHEMA`; a member set becomes its fingerprint and a broker's
group state one of :data:`~notifier.types.GROUP_STATES`. A consumer-protocol group's states
are mapped onto the classic ones (:data:`~notifier.collect.grouptypes.CONSUMER_PROTOCOL_STATES`)
and its group epoch is part of its fingerprint: every bump of it is a change of the member set.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping
from typing import Any

import numpy as np
import pyarrow as pa

from notifier.collect.grouptypes import CLASSIC, rules_state
from notifier.collect.protocol import NO_COMMITS, CommittedOffsets, Group
from notifier.collect.results import TopicPartition
from notifier.types import GROUP_STATES, SAMPLE_SCHEMA


def build_samples(
    *,
    ts: int,
    cluster: str,
    groups: Mapping[str, Group],
    commits: Mapping[str, CommittedOffsets | Mapping[TopicPartition, int]],
    log_end: Mapping[TopicPartition, int],
    log_start: Mapping[TopicPartition, int | None],
) -> pa.Table:
    """One row per group-partition with a commit or an assignment and a known log-end offset,
    by group, then topic and partition.

    Built from arrays, a group and topic at a time (a group's commits come as arrays,
    :class:`~notifier.collect.protocol.CommittedOffsets`): no Python object per row, so a
    scan of a million group-partitions holds tens of MB here, not hundreds."""
    names = sorted(groups)
    ends = _LogOffsetIndex(log_end, log_start)
    topic_code: dict[str, int] = {}
    chunk_group: list[int] = []
    chunk_topic: list[int] = []
    partitions: list[np.ndarray] = []
    offsets: list[np.ndarray] = []
    has_commit: list[np.ndarray] = []
    for index, name in enumerate(names):
        group = groups[name]
        found = CommittedOffsets.of(commits.get(name, NO_COMMITS)).by_topic
        assigned = _by_topic(group.assigned)
        for topic in sorted(found.keys() | assigned.keys()) if assigned else sorted(found):
            parts, values = found.get(topic, _NONE_COMMITTED)
            committed = np.ones(parts.size, dtype=np.bool_)
            if topic in assigned:
                parts, values, committed = _with_assigned(parts, values, assigned[topic])
            chunk_group.append(index)
            chunk_topic.append(topic_code.setdefault(topic, len(topic_code)))
            partitions.append(parts)
            offsets.append(values)
            has_commit.append(committed)
    sizes = np.fromiter(map(len, partitions), np.int64, len(partitions))
    group_index: np.ndarray = np.repeat(np.asarray(chunk_group, dtype=np.int32), sizes)
    topic_index: np.ndarray = np.repeat(np.asarray(chunk_topic, dtype=np.int32), sizes)
    partition = _joined(partitions, np.int32)
    committed_offset = _joined(offsets, np.int64)
    committed = _joined(has_commit, np.bool_)
    slot = ends.slots(list(topic_code), topic_index, partition)
    known = slot >= 0
    if not known.all():
        kept = (group_index, topic_index, partition, committed_offset, committed, slot)
        group_index, topic_index, partition, committed_offset, committed, slot = (
            column[known] for column in kept
        )
    rows = int(partition.size)

    def per_group(values: list[Any], field: str) -> pa.Array:
        kind = SAMPLE_SCHEMA.field(field).type
        if kind == pa.string():  # repeated through a dictionary: no Python string per row
            return _strings(group_index, values)
        return pa.array(np.asarray(values, dtype=np.int64)[group_index], type=kind)

    described = [groups[name] for name in names]
    columns = {
        "ts": pa.array(np.full(rows, ts, dtype=np.int64), type=SAMPLE_SCHEMA.field("ts").type),
        "cluster": pa.repeat(pa.scalar(cluster, pa.string()), rows),
        "group": per_group(names, "group"),
        "topic": _strings(topic_index, list(topic_code)),
        "partition": pa.array(partition, type=pa.int32()),
        "committed_offset": _nullable(committed_offset, committed),
        "log_end_offset": pa.array(ends.end[slot], type=pa.int64()),
        "log_start_offset": _nullable(ends.start[slot], ends.has_start[slot]),
        "group_state": per_group(
            [normalize_group_state(g.state, g.group_type) for g in described], "group_state"
        ),
        "members": per_group([len(g.member_ids) for g in described], "members"),
        "member_hash": per_group(
            [member_hash(g.member_ids, epoch=g.group_epoch) for g in described], "member_hash"
        ),
        "available": pa.array(np.ones(rows, dtype=np.bool_), type=pa.bool_()),
    }
    return pa.Table.from_arrays(
        [columns[name] for name in SAMPLE_SCHEMA.names], schema=SAMPLE_SCHEMA
    )


_NONE_COMMITTED = (np.zeros(0, dtype=np.int32), np.zeros(0, dtype=np.int64))


def _by_topic(assigned: Iterable[TopicPartition]) -> dict[str, list[int]]:
    by_topic: dict[str, list[int]] = {}
    for topic, partition in assigned:
        by_topic.setdefault(topic, []).append(partition)
    return by_topic


def _with_assigned(
    parts: np.ndarray, values: np.ndarray, assigned: list[int]
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """A topic's committed partitions and the assigned ones without a commit, in order of
    partition; the third array says which have a commit."""
    extra = np.setdiff1d(np.asarray(assigned, dtype=np.int32), parts)
    order = np.argsort(np.concatenate([parts, extra]), kind="stable")
    committed = np.concatenate([np.ones(parts.size, np.bool_), np.zeros(extra.size, np.bool_)])
    return (
        np.concatenate([parts, extra])[order],
        np.concatenate([values, np.zeros(extra.size, np.int64)])[order],
        committed[order],
    )


def _joined(chunks: list[np.ndarray], dtype: type) -> np.ndarray:
    """The chunks end to end (none: an empty array of ``dtype``)."""
    return np.concatenate(chunks).astype(dtype, copy=False) if chunks else np.zeros(0, dtype)


def _nullable(values: np.ndarray, present: np.ndarray) -> pa.Array:
    if present.all():
        return pa.array(values, type=pa.int64())
    return pa.array(values, type=pa.int64(), mask=~present)


class _LogOffsetIndex:
    """The log-end and log-start offsets of a scan as arrays, each topic's partitions a run
    of slots: looked up for a million rows at once, not a dict look-up per row."""

    def __init__(
        self, log_end: Mapping[TopicPartition, int], log_start: Mapping[TopicPartition, int | None]
    ) -> None:
        extent: dict[str, int] = {}
        for topic, partition in log_end:
            extent[topic] = max(extent.get(topic, 0), partition + 1)
        self.base: dict[str, int] = {}
        size = 0
        for topic, count in extent.items():
            self.base[topic] = size
            size += count
        self.extent = extent
        self.known = np.zeros(size, dtype=np.bool_)
        self.end = np.zeros(size, dtype=np.int64)
        self.start = np.zeros(size, dtype=np.int64)
        self.has_start = np.zeros(size, dtype=np.bool_)
        for (topic, partition), end in log_end.items():
            at = self.base[topic] + partition
            self.known[at] = True
            self.end[at] = end
            start = log_start.get((topic, partition))
            if start is not None:
                self.start[at] = start
                self.has_start[at] = True

    def slots(
        self, topics: list[str], topic_index: np.ndarray, partition: np.ndarray
    ) -> np.ndarray:
        """Each row's slot, -1 where its log-end offset is not known."""
        if not self.known.size:
            return np.full(partition.size, -1, dtype=np.int64)
        base = np.asarray([self.base.get(t, -1) for t in topics], dtype=np.int64)
        extent = np.asarray([self.extent.get(t, 0) for t in topics], dtype=np.int64)
        row_base, row_extent = base[topic_index], extent[topic_index]
        part = partition.astype(np.int64)
        inside = (row_base >= 0) & (part >= 0) & (part < row_extent)
        slot = np.where(inside, row_base + part, 0)
        return np.where(inside & self.known[slot], slot, -1)


def _strings(index: np.ndarray, values: list[str]) -> pa.Array:
    """``values[index[i]]`` for each i, as a plain string column."""
    dictionary = pa.array(values, type=pa.string())
    return pa.DictionaryArray.from_arrays(pa.array(index, type=pa.int32()), dictionary).cast(
        pa.string()
    )


def member_hash(member_ids: Iterable[str], *, epoch: int | None = None) -> int:
    """A stable signed 64-bit fingerprint of a member set; 0 for no members.

    Equal for the same set in any order and across processes (unlike ``hash()``), so the
    evaluator can tell "the members changed" from one sample to the next without storing ids.
    ``epoch`` is a consumer-protocol group's group epoch: the coordinator bumps it whenever a
    member joins, leaves or is fenced and rejoins with the same id, so with it in the
    fingerprint such a change shows even when the ids come out the same.
    """
    ids = sorted(member_ids)
    if not ids:
        return 0
    text = "\x00".join(ids)
    if epoch is not None:
        text += f"\x01{epoch}"
    digest = hashlib.blake2b(text.encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big", signed=True)


def normalize_group_state(state: str | None, group_type: str = CLASSIC) -> str:
    """The state as one of :data:`GROUP_STATES`: a classic group's name as the broker says it,
    a consumer-protocol group's mapped (``Assigning`` and ``Reconciling`` are rebalancing);
    anything else is ``"Unknown"``."""
    mapped = rules_state(state, group_type)
    return mapped if mapped in GROUP_STATES else "Unknown"
