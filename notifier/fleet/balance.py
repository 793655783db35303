"""Which instance owns which shard: sticky, and balanced by the work each shard holds.

A shard is as much work as the groups hashed to it: each group costs its describe and commit
fetch, each of its partitions a log-end offset and a window. With a few dozen shards of a
thousand groups, shards differ by a quarter or more, so dealing out equal numbers of shards
leaves one instance with a tenth more work than its share. The fleet's leader balances the
shards' weights instead (:func:`weigh`), moving as few shards as it can (a shard that moves is a
hand-over: its state is flushed by one instance and loaded by another).

Pure functions: the group protocol's assignor (:mod:`notifier.fleet.assignor`) and the tests
call them alike.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from notifier.fleet.shards import shard_of

TOLERANCE = 0.02
"""The leader stops moving shards once the busiest instance is within this share above an even
split of the work."""

REBALANCE_ABOVE = 0.05
"""An assignment whose busiest instance holds more than this share above an even split is
worth a rebalance of its own (when the leader learns the weights after assigning)."""


@dataclass(frozen=True, slots=True)
class ShardWork:
    """What an instance knows of one shard's groups: how many there are, how many of them it
    scanned, and those groups' partitions (group-partitions with a commit or an assignment)."""

    groups: int = 0
    scanned: int = 0
    partitions: int = 0

    def __add__(self, other: ShardWork) -> ShardWork:
        return ShardWork(
            self.groups + other.groups,
            self.scanned + other.scanned,
            self.partitions + other.partitions,
        )


def shard_work(
    cluster: str, groups: Iterable[str], partitions: Mapping[str, int], shards: int
) -> dict[int, ShardWork]:
    """Each shard's :class:`ShardWork` among ``groups`` of ``cluster`` (those the allow/deny
    lists let through); ``partitions``: each group this instance scanned, with its partitions."""
    counts: defaultdict[int, list[int]] = defaultdict(lambda: [0, 0, 0])
    for group in groups:
        count = counts[shard_of(cluster, group, shards)]
        count[0] += 1
        if group in partitions:
            count[1] += 1
            count[2] += partitions[group]
    return {shard: ShardWork(*count) for shard, count in counts.items()}


def weigh(work: Mapping[int, ShardWork]) -> dict[int, float]:
    """Each shard's weight: one unit per group and one per partition, a group nobody scanned
    counting as many partitions as the scanned groups' mean (one when none was scanned)."""
    scanned = sum(w.scanned for w in work.values())
    partitions = sum(w.partitions for w in work.values())
    per_group = 1.0 + (partitions / scanned if scanned else 1.0)
    return {
        shard: w.scanned + w.partitions + (w.groups - w.scanned) * per_group
        for shard, w in work.items()
    }


def loads(
    assignment: Mapping[str, Iterable[int]], weights: Mapping[int, float]
) -> dict[str, float]:
    """Each member's work under ``assignment``."""
    return {m: sum(weights.get(s, 0.0) for s in shards) for m, shards in assignment.items()}


def imbalance(assignment: Mapping[str, Iterable[int]], weights: Mapping[int, float]) -> float:
    """How far the busiest member is above an even split of the work, as a share of it
    (0.0: perfectly even)."""
    per_member = loads(assignment, weights)
    total = sum(per_member.values())
    if not per_member or total <= 0:
        return 0.0
    return max(per_member.values()) / (total / len(per_member)) - 1.0


def balance(
    shards: Sequence[int],
    claims: Mapping[str, Iterable[int]],
    weights: Mapping[int, float],
    *,
    tolerance: float = TOLERANCE,
) -> dict[str, list[int]]:
    """Assign every one of ``shards`` to one of the members (the keys of ``claims``).

    Each member keeps the shards it claims (what it owned before; a shard claimed twice stays
    with the first member by id), the unclaimed ones go, heaviest first, to the least loaded
    member; then, while the busiest member is more than ``tolerance`` above an even split, one
    of its shards moves to another member, or two shards are swapped, whichever lowers the
    busier of the two the most. Each step lowers the sum of the squared loads, so it ends; it
    ends with no member busier than another by more than its lightest shard, or within the
    tolerance. A shard whose weight is unknown weighs the mean of the known ones.
    Deterministic: the same input gives the same assignment on every instance."""
    members = sorted(claims)
    if not members:
        return {}
    valid = sorted(set(shards))
    known = [weights[s] for s in valid if s in weights]
    default = sum(known) / len(known) if known else 1.0
    # In thousandths, as integers: sums are exact, so ties are ties on every instance.
    weight = {s: round(1000 * weights.get(s, default)) for s in valid}

    owner: dict[int, str] = {}
    for member in members:
        for shard in sorted(set(claims[member])):
            if shard in weight and shard not in owner:
                owner[shard] = member
    held: dict[str, set[int]] = {m: set() for m in members}
    for shard, member in owner.items():
        held[member].add(shard)
    load = {m: sum(weight[s] for s in held[m]) for m in members}

    def lightest(member: str) -> tuple[int, int, str]:
        return (load[member], len(held[member]), member)

    for shard in sorted((s for s in valid if s not in owner), key=lambda s: (-weight[s], s)):
        member = min(members, key=lightest)
        held[member].add(shard)
        load[member] += weight[shard]

    ideal = sum(weight.values()) / len(members)
    limit = ideal * (1.0 + tolerance)
    for _ in range(len(valid) * len(members) + 1):
        busiest = max(members, key=lambda m: (load[m], m))
        if load[busiest] <= limit:
            break
        step = _best_step(busiest, members, held, load, weight)
        if step is None:
            break
        other, give, take = step
        held[busiest].remove(give)
        held[other].add(give)
        load[busiest] -= weight[give]
        load[other] += weight[give]
        if take is not None:
            held[other].remove(take)
            held[busiest].add(take)
            load[other] -= weight[take]
            load[busiest] += weight[take]
    return {m: sorted(held[m]) for m in members}


def _best_step(
    busiest: str,
    members: list[str],
    held: Mapping[str, set[int]],
    load: Mapping[str, int],
    weight: Mapping[int, int],
) -> tuple[str, int, int | None] | None:
    """The move (``take`` None) or swap off ``busiest`` that leaves the busier of the two
    members lightest, if it is lighter than ``busiest`` is now; moves win ties (one hand-over
    instead of two)."""
    top = load[busiest]
    best: tuple[int, int, str, int, int] | None = None  # (peak, swap?, other, give, take)
    for other in members:
        if other == busiest:
            continue
        base = load[other]
        for give in sorted(held[busiest]):
            w = weight[give]
            candidates = [(w, -1)] + [(w - weight[t], t) for t in sorted(held[other])]
            for shift, take in candidates:
                if shift <= 0:
                    continue
                peak = max(top - shift, base + shift)
                if peak >= top:
                    continue
                key = (peak, int(take >= 0), other, give, take)
                if best is None or key < best:
                    best = key
    if best is None:
        return None
    _, _, other, give, take = best
    return other, give, (take if take >= 0 else None)
