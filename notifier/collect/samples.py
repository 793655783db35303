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
    """One row per group-partition with a commit or an assignment and a known log-end offset."""
    columns: dict[str, list[Any]] = {name: [] for name in SAMPLE_SCHEMA.names}
    for name in sorted(groups):
        group = groups[name]
        group_commits = commits.get(name, {})
        state = normalize_group_state(group.state, group.group_type)
        members = len(group.member_ids)
        fingerprint = member_hash(group.member_ids, epoch=group.group_epoch)
        for tp in sorted(set(group_commits) | group.assigned):
            leo = log_end.get(tp)
            if leo is None:
                continue
            columns["ts"].append(ts)
            columns["cluster"].append(cluster)
            columns["group"].append(name)
            columns["topic"].append(tp[0])
            columns["partition"].append(tp[1])
            columns["committed_offset"].append(group_commits.get(tp))
            columns["log_end_offset"].append(leo)
            columns["log_start_offset"].append(log_start.get(tp))
            columns["group_state"].append(state)
            columns["members"].append(members)
            columns["member_hash"].append(fingerprint)
            columns["available"].append(True)
    return pa.Table.from_pydict(columns, schema=SAMPLE_SCHEMA)


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
