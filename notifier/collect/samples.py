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
from notifier.collect.protocol import Group
from notifier.collect.results import TopicPartition
from notifier.types import GROUP_STATES, SAMPLE_SCHEMA


def build_samples(
    *,
    ts: int,
    cluster: str,
    groups: Mapping[str, Group],
    commits: Mapping[str, Mapping[TopicPartition, int]],
    log_end: Mapping[TopicPartition, int],
    log_start: Mapping[TopicPartition, int | None],
) -> pa.Table:
    """One row per group-partition with a commit or an assignment and a known log-end offset,
    by group, then topic and partition.

    Built a column at a time (what is the same for a whole group is repeated, not appended
    row by row): a scan of a million group-partitions spends well under a second here."""
    names: list[str] = []
    rows_per_group: list[int] = []
    states: list[str] = []
    members: list[int] = []
    hashes: list[int] = []
    topic_ids: dict[str, int] = {}
    topic_index: list[int] = []
    partition_ids: list[int] = []
    kept: list[TopicPartition] = []
    committed: list[int | None] = []
    for name in sorted(groups):
        group = groups[name]
        group_commits = commits.get(name, {})
        wanted = group_commits.keys() | group.assigned if group.assigned else group_commits
        partitions = sorted(tp for tp in wanted if tp in log_end)
        if not partitions:
            continue
        names.append(name)
        rows_per_group.append(len(partitions))
        states.append(normalize_group_state(group.state, group.group_type))
        members.append(len(group.member_ids))
        hashes.append(member_hash(group.member_ids, epoch=group.group_epoch))
        topic_index += [topic_ids.setdefault(topic, len(topic_ids)) for topic, _ in partitions]
        partition_ids += [partition for _, partition in partitions]
        kept += partitions
        committed += map(group_commits.get, partitions)
    counts = np.asarray(rows_per_group, dtype=np.int64)
    rows = int(counts.sum())
    group_index = np.repeat(np.arange(len(names), dtype=np.int32), counts)

    def per_group(values: list[Any], field: str) -> pa.Array:
        kind = SAMPLE_SCHEMA.field(field).type
        if kind == pa.string():  # repeated through a dictionary: no Python string per row
            return _strings(group_index, values)
        return pa.array(np.repeat(np.asarray(values, dtype=np.int64), counts), type=kind)

    columns = {
        "ts": pa.array(np.full(rows, ts, dtype=np.int64), type=SAMPLE_SCHEMA.field("ts").type),
        "cluster": pa.repeat(pa.scalar(cluster, pa.string()), rows),
        "group": per_group(names, "group"),
        "topic": _strings(np.asarray(topic_index, dtype=np.int32), list(topic_ids)),
        "partition": pa.array(partition_ids, type=pa.int32()),
        "committed_offset": pa.array(committed, type=pa.int64()),
        "log_end_offset": pa.array(list(map(log_end.__getitem__, kept)), type=pa.int64()),
        "log_start_offset": pa.array(list(map(log_start.get, kept)), type=pa.int64()),
        "group_state": per_group(states, "group_state"),
        "members": per_group(members, "members"),
        "member_hash": per_group(hashes, "member_hash"),
        "available": pa.array(np.ones(rows, dtype=np.bool_), type=pa.bool_()),
    }
    return pa.Table.from_arrays(
        [columns[name] for name in SAMPLE_SCHEMA.names], schema=SAMPLE_SCHEMA
    )


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
