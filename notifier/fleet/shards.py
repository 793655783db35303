"""Which shard each watched (cluster, consumer group) belongs to.

The hash is stable across processes, Python versions and machines (unlike ``hash()``), so every
instance of a fleet agrees on it without talking; the state topic's partition ``p`` is shard
``p``.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from functools import lru_cache
from hashlib import blake2b


# Every scan asks again for every listed group (the collector's ownership filter, the shards'
# work, the state's publishing): remembered, a group costs one hash while it exists.
@lru_cache(maxsize=1 << 16)
def shard_of(cluster: str, group: str, partitions: int) -> int:
    """The shard of ``group`` of ``cluster`` among ``partitions`` shards."""
    digest = blake2b(f"{cluster}\0{group}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big") % partitions


def by_shard(cluster: str, groups: Iterable[str], partitions: int) -> dict[int, list[str]]:
    """``groups`` of ``cluster`` by their shard, each list sorted."""
    out: defaultdict[int, list[str]] = defaultdict(list)
    for group in groups:
        out[shard_of(cluster, group, partitions)].append(group)
    return {shard: sorted(names) for shard, names in sorted(out.items())}
