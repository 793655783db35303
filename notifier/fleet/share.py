"""The fleet as the coordinator sees it: :class:`FleetShare` implements the service's
:class:`~notifier.service.sharing.Share` over this instance's membership and shard state.

Which groups are this instance's is a question for the membership of the moment (one that
could not join at start-up is replaced when it tries again); each scan's results are weighed
(the fleet's leader balances shards by their work) and published to the state topic, shard by
shard.
"""

from __future__ import annotations

import asyncio
from collections.abc import Collection, Mapping
from typing import Any, Protocol

import pyarrow.compute as pc

from notifier.collect import ScanResult
from notifier.fleet.balance import ShardWork, shard_work
from notifier.fleet.shards import by_shard
from notifier.service.sharing import ShareHost


class Shards(Protocol):
    """This instance's shards (:class:`notifier.fleet.Membership`)."""

    instance: str
    partitions: int
    owned: frozenset[int]
    coordination_ok: bool

    def owns(self, cluster: str, group: str) -> bool: ...

    def readiness(self) -> dict[str, Any]: ...


class ScanPublisher(Protocol):
    """Where each scan's changes go, shard by shard (:class:`notifier.fleet.state.ShardState`)."""

    async def publish_scan(
        self,
        cluster: str,
        groups_by_shard: Mapping[int, Collection[str]],
        coordinator: ShareHost | None = None,
        notifier: Any = None,
    ) -> Any: ...


class FleetShare:
    """What the coordinator asks of the fleet (see the module's doc). ``shards`` and
    ``publisher`` may be replaced while it runs (a membership that joins late is made anew);
    ``notifier``'s incidents travel with the shards' state when notifications are configured."""

    def __init__(
        self,
        host: ShareHost,
        shards: Shards,
        publisher: ScanPublisher,
        notifier: Any = None,
        *,
        handover: asyncio.Lock | None = None,
    ) -> None:
        self.host = host
        self.shards = shards
        self.publisher = publisher
        self.notifier = notifier
        self._handover = handover or asyncio.Lock()
        self._work: dict[str, dict[int, ShardWork]] = {}
        """Each cluster's shards' work as this instance's last scan of it saw it."""

    @property
    def handover(self) -> asyncio.Lock:
        return self._handover

    # What the API says of this instance's share (``/readyz``, ``/metrics``), as the
    # membership of the moment has it.

    @property
    def instance(self) -> str:
        return self.shards.instance

    @property
    def owned(self) -> frozenset[int]:
        return self.shards.owned

    @property
    def coordination_ok(self) -> bool:
        return self.shards.coordination_ok

    def readiness(self) -> dict[str, Any]:
        return self.shards.readiness()

    def owns(self, cluster: str, group: str) -> bool:
        return self.shards.owns(cluster, group)

    async def publish(self, cluster: str, result: ScanResult) -> None:
        """Weigh the scan's shards, then publish its changes for every owned shard (so groups
        that vanished are said too) unless the coordination cluster is out of reach."""
        shards = self.shards
        self._weigh(cluster, result, shards.partitions)
        if not shards.coordination_ok:
            # Nobody can take these shards over meanwhile; the snapshot of the revoke that
            # follows the outage carries what these scans changed.
            return
        groups: dict[int, list[str]] = {shard: [] for shard in sorted(shards.owned)}
        for shard, names in by_shard(cluster, result.group_states, shards.partitions).items():
            groups.setdefault(shard, []).extend(names)
        await self.publisher.publish_scan(cluster, groups, self.host, self.notifier)

    def _weigh(self, cluster: str, result: ScanResult, partitions: int) -> None:
        """Each shard's work in ``cluster``: every listed group, with the partitions of those
        scanned here."""
        counted = pc.value_counts(result.samples.column("group"))
        per_group = dict(
            zip(counted.field("values").to_pylist(), counted.field("counts").to_pylist())
        )
        for group in result.group_states:
            per_group.setdefault(group, 0)
        self._work[cluster] = shard_work(cluster, result.listed_groups, per_group, partitions)

    def shard_work(self) -> dict[int, ShardWork] | None:
        """Each shard's work over every watched cluster, as this instance knows it (every
        shard, an empty one too: it weighs nothing); None until every cluster has been scanned
        once here."""
        names = set(self.host.cluster_names())
        for gone in set(self._work) - names:
            del self._work[gone]  # a reload removed the cluster
        if not names or names - set(self._work):
            return None
        total = dict.fromkeys(range(self.shards.partitions), ShardWork())
        for work in self._work.values():
            for shard, counts in work.items():
                total[shard] += counts
        return total
