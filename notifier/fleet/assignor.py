"""The fleet's assignor for Kafka's group protocol: shards balanced by their work, sticky.

Each member's JoinGroup carries, as the protocol's user data, the shards it owned and what it
knows of each shard's work (:class:`notifier.fleet.balance.ShardWork`: every member lists every
group, and knows the partitions of the groups it scanned). The leader takes each shard's work
from the member that owned it (it scanned the shard), else from the member that scanned most of
it, weighs them all alike (:func:`notifier.fleet.balance.weigh`: a group nobody scanned counts
as the fleet's mean) and assigns with :func:`notifier.fleet.balance.balance`.

A member only knows the weights after a scan, and a fleet that starts together joins before
any scan: that first assignment deals equal numbers of shards. So the leader remembers the
assignment it made, and :meth:`ShardAssignor.worth_rebalancing` tells its membership when the
weights it has learnt since show the busiest member more than
:data:`~notifier.fleet.balance.REBALANCE_ABOVE` above an even split, and a rebalance would
halve that (a probing rebalance, as Kafka Streams does for its warm-up tasks).

The user data is JSON (``{"owned": [...], "work": {"shard": [groups, scanned, partitions]}}``);
a member whose user data cannot be read (another version) claims nothing and knows no work.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from aiokafka.coordinator.protocol import (
    ConsumerProtocolMemberAssignment,
    ConsumerProtocolMemberMetadata,
)

from notifier.fleet.balance import REBALANCE_ABOVE, ShardWork, balance, imbalance, weigh

log = logging.getLogger(__name__)

PROTOCOL_NAME = "notifier-balanced"
VERSION = 0


class ShardAssignor:
    """One member's assignor (an instance, not a class: each member has its own state).

    ``owned()``: the shards this member holds (owned, or revoked for this rebalance and kept
    in memory); ``work()``: each shard's work as this member knows it, None before it knows
    every cluster's groups."""

    name = PROTOCOL_NAME
    version = VERSION

    def __init__(
        self,
        topic: str,
        partitions: int,
        owned: Callable[[], Iterable[int]],
        work: Callable[[], Mapping[int, ShardWork] | None] | None = None,
    ) -> None:
        self.topic = topic
        self.partitions = partitions
        self._owned = owned
        self._work = work or (lambda: None)
        self._assigned: dict[str, list[int]] | None = None
        self.led: dict[str, list[int]] | None = None
        """The assignment this member made as the leader of the current generation (None when
        another member leads it)."""

    # ------------------------------------------------------------ the group protocol

    def metadata(self, topics: Iterable[str]) -> ConsumerProtocolMemberMetadata:
        work = self._work() or {}
        data = {
            "owned": sorted(set(self._owned())),
            "work": {str(s): [w.groups, w.scanned, w.partitions] for s, w in sorted(work.items())},
        }
        return ConsumerProtocolMemberMetadata(
            self.version, sorted(topics), json.dumps(data, separators=(",", ":")).encode()
        )

    def assign(
        self, cluster: Any, members: Mapping[str, ConsumerProtocolMemberMetadata]
    ) -> dict[str, ConsumerProtocolMemberAssignment]:
        partitions = cluster.partitions_for_topic(self.topic)
        shards = sorted(partitions) if partitions else list(range(self.partitions))
        claims: dict[str, list[int]] = {}
        reports: dict[str, dict[int, ShardWork]] = {}
        for member_id, metadata in members.items():
            claims[member_id], reports[member_id] = _read(member_id, metadata.user_data)
        weights = weigh(merge_work(claims, reports))
        assignment = balance(shards, claims, weights)
        self._assigned = assignment
        log.info("fleet shards assigned by this instance (the leader)",
                 extra={"event": "fleet_assignment", "members": len(assignment),
                        "weights_known": len(weights), "shards": len(shards),
                        "imbalance": round(imbalance(assignment, weights), 3)})  # fmt: skip
        return {
            member_id: ConsumerProtocolMemberAssignment(
                self.version, [(self.topic, assigned)] if assigned else [], b""
            )
            for member_id, assigned in assignment.items()
        }

    def on_assignment(self, assignment: ConsumerProtocolMemberAssignment) -> None:
        # assign() runs on the leader only, just before: what it left is this generation's.
        self.led, self._assigned = self._assigned, None

    def on_generation_assignment(self, generation: int) -> None:
        pass

    # ------------------------------------------------------------ probing

    def worth_rebalancing(self) -> tuple[float, float] | None:
        """(imbalance now, imbalance after a rebalance) when this member leads the generation
        and the weights it knows now call for a rebalance; else None."""
        led = self.led
        if not led:
            return None
        work = self._work()
        if not work:
            return None
        weights = weigh(work)
        now = imbalance(led, weights)
        if now <= REBALANCE_ABOVE:
            return None
        shards = sorted(set(weights).union(*led.values()))
        after = imbalance(balance(shards, led, weights), weights)
        return (now, after) if after <= now / 2 else None


def merge_work(
    claims: Mapping[str, Iterable[int]], reports: Mapping[str, Mapping[int, ShardWork]]
) -> dict[int, ShardWork]:
    """Each shard's work: its owner's word (it scanned the shard), else the word of the member
    that scanned most of its groups (then the one that lists most); shards nobody reported are
    left out."""
    owner = {s: m for m, shards in sorted(claims.items(), reverse=True) for s in shards}
    merged: dict[int, tuple[tuple[bool, int, int], ShardWork]] = {}
    for member in sorted(reports):
        for shard, work in reports[member].items():
            rank = (owner.get(shard) == member, work.scanned, work.groups)
            if shard not in merged or rank > merged[shard][0]:
                merged[shard] = (rank, work)
    return {shard: work for shard, (_, work) in sorted(merged.items())}


def _read(member_id: str, user_data: bytes) -> tuple[list[int], dict[int, ShardWork]]:
    """A member's claims and work from its user data; nothing when unreadable."""
    try:
        data = json.loads(user_data or b"{}")
        owned = [int(s) for s in data.get("owned", [])]
        work = {
            int(s): ShardWork(*(max(0, int(n)) for n in counts))
            for s, counts in data.get("work", {}).items()
        }
    except (ValueError, TypeError, AttributeError):
        log.warning("a fleet member's join data cannot be read; it claims no shard",
                    extra={"event": "fleet_member_data_unreadable",
                           "member_id": member_id})  # fmt: skip
        return [], {}
    return owned, work
