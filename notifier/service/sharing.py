"""The one seam between the coordinator and a fleet of instances sharing its clusters.

The coordinator knows a fleet only as a :class:`Share` (:mod:`notifier.fleet` implements it):
which groups are this instance's, a lock held while groups change hands, and where each scan's
results go. The fleet knows the coordinator only as a :class:`ShareHost`: a hand-over arrived
(groups to take in, to give away, scans to bring forward) and the state a group's next owner
needs. This module is all :mod:`notifier.fleet` may import of :mod:`notifier.service`, and
:mod:`notifier.service` imports nothing of the fleet (``tests/test_imports.py``).
"""

from __future__ import annotations

import asyncio
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

from notifier.collect import ScanResult
from notifier.rules import GroupRows, ScanColumns, WindowStore
from notifier.types import GroupStatus

STALE_AFTER_INTERVALS = 3
"""A cluster's data is stale (and the service not ready) when no scan succeeded within this
many scan intervals; a group another instance owns is judged by the same measure."""


@dataclass(frozen=True)
class GroupHandover:
    """One group's coordinator state as it moves between instances."""

    rows: GroupRows
    rule_state: Mapping[str, Sequence[int]]
    status: GroupStatus


class Share(Protocol):
    """This instance's share of the watched groups, as the coordinator sees it."""

    @property
    def handover(self) -> asyncio.Lock:
        """Held around each scan, and by each hand-over of groups: a scan never sees a group
        half taken in or half given away."""

    def owns(self, cluster: str, group: str) -> bool:
        """Whether this instance watches ``group`` of ``cluster`` (the others are listed by a
        scan, never described or fetched)."""

    async def publish(self, cluster: str, result: ScanResult) -> None:
        """Make what a successful scan of ``cluster`` changed (already processed here) known
        to the fleet: the next owner of a group resumes from it. May raise or be cut short
        by the coordinator's timeout; the watching goes on either way."""


class ShareHost(Protocol):
    """What the fleet may ask of the coordinator (:class:`notifier.service.Coordinator`)."""

    def join_fleet(self, share: Share) -> None:
        """From now on, watch only what ``share`` owns and give it each scan (before the
        coordinator starts)."""

    def cluster_names(self) -> Collection[str]:
        """The clusters watched now (a reload adds and removes them)."""

    def store(self, cluster: str) -> WindowStore | None:
        """The cluster's windows (None: not watched here), to read a group's rows from."""

    def group_verdict(self, cluster: str, group: str) -> tuple[dict[str, list[int]], GroupStatus]:
        """The group's rules' state and its tracked status after the latest scan."""

    def export_group(self, cluster: str, group: str) -> GroupHandover | None:
        """What the next owner of a group needs (None: nothing kept of it)."""

    def import_group(self, handover: GroupHandover) -> None:
        """Take over a group another instance exported, in place of what was kept of it."""

    def replay_group_scan(
        self,
        scan: ScanColumns,
        rule_state: Mapping[str, Mapping[str, Sequence[int]]],
        statuses: Mapping[str, GroupStatus],
    ) -> None:
        """Ingest a scan another instance made of groups taken over (their rules' state and
        status after it are given, by group)."""

    def drop_groups(self, cluster: str, groups: Collection[str]) -> None:
        """Forget groups handed to another instance, without a transition."""

    def shards_taken_over(self, shards: frozenset[int]) -> None:
        """A hand-over arrived: ``shards`` were taken over and their state loaded; each
        cluster's next scan is brought forward."""
