"""Log offsets: the log-end and log-start offset of every partition a scan needs, with
``ListOffsets`` twice per partition leader (latest and earliest: a partition may appear only
once per request), whatever the number of partitions.

A partition whose leader is unknown refreshes the metadata, at most every 5 s for that reason
(so a commit left on a deleted topic costs nothing); one a leader refuses as not its own
(``NOT_LEADER`` and friends) refreshes it at once and is asked again.
"""

from __future__ import annotations

import logging
import time
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass

from aiokafka.protocol.offset import OffsetRequest

from notifier.collect.protocol import (
    EARLIEST,
    LATEST,
    LEADER_ERRORS,
    NONE,
    READ_UNCOMMITTED,
    Metadata,
)
from notifier.collect.results import ScanError, TopicPartition, elapsed_clock
from notifier.collect.session import ClusterSession, run_all

log = logging.getLogger("notifier.collect")  # the name it logged under before the split

LEADER_REFRESH_MIN_S = 5.0
"""The least time between metadata refreshes for partitions without a known leader."""


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


@dataclass(frozen=True, slots=True)
class LogOffsets:
    """What ListOffsets said, and when it was asked."""

    ts: int
    """Wall-clock milliseconds, the scan's timestamp."""
    elapsed_at: float
    """The same moment on :func:`~notifier.collect.results.elapsed_clock`."""
    log_end: dict[TopicPartition, int]
    log_start: dict[TopicPartition, int | None]
    unavailable: set[TopicPartition]
    """Partitions asked for whose log-end offset no leader gave."""


class LogOffsetReader:
    """Reads the log-end and log-start offsets of partitions from their leaders."""

    def __init__(self, session: ClusterSession, *, cluster: str, metadata_max_age_s: float) -> None:
        self._session = session
        self._cluster = cluster
        self._leader_refresh_min_s = min(metadata_max_age_s, LEADER_REFRESH_MIN_S)

    async def read(self, wanted: set[TopicPartition]) -> LogOffsets:
        session = self._session
        md = session.metadata
        assert md is not None
        leaderless = any(md.leader(tp) not in md.brokers for tp in wanted)
        if leaderless and time.monotonic() - md.fetched_at >= self._leader_refresh_min_s:
            # New topics or moved leaders; rate-limited so that a commit left on a deleted
            # topic does not cost a metadata request every scan.
            md = await session.refresh_metadata()
        ts, elapsed_at = _now_ms(), elapsed_clock()
        log_end: dict[TopicPartition, int] = {}
        log_start: dict[TopicPartition, int | None] = {}
        failed = await self._round(md, wanted, log_end, log_start)
        if failed:
            # NOT_LEADER and friends: a leader moved since the metadata was read.
            md = await session.refresh_metadata()
            await self._round(md, failed, log_end, log_start)
        unavailable = {tp for tp in wanted if tp not in log_end}
        if unavailable:
            log.warning(
                "cluster %s: no log-end offset for %d partitions (e.g. %s)",
                self._cluster,
                len(unavailable),
                min(unavailable),
            )
        return LogOffsets(ts, elapsed_at, log_end, log_start, unavailable)

    async def _round(
        self,
        md: Metadata,
        wanted: Iterable[TopicPartition],
        log_end: dict[TopicPartition, int],
        log_start: dict[TopicPartition, int | None],
    ) -> set[TopicPartition]:
        """One ListOffsets per leader and timestamp for the partitions with a known leader.

        Returns the partitions a leader refused as not (or no longer) its own.
        """
        by_leader: defaultdict[int, list[TopicPartition]] = defaultdict(list)
        retry: set[TopicPartition] = set()
        for tp in wanted:
            leader = md.leader(tp)
            if leader in md.brokers:
                by_leader[leader].append(tp)

        async def one(leader: int, tps: list[TopicPartition], timestamp: int) -> None:
            by_topic: defaultdict[str, list[tuple[int, int]]] = defaultdict(list)
            for topic, partition in sorted(tps):
                by_topic[topic].append((partition, timestamp))
            request = OffsetRequest(-1, READ_UNCOMMITTED, sorted(by_topic.items()))
            response = await self._session.send_to_node(leader, request)
            target = log_end if timestamp == LATEST else log_start
            for topic, partitions in response.topics:
                for entry in partitions:
                    partition, error_code = entry[0], entry[1]
                    tp = (topic, partition)
                    if error_code == NONE:
                        offset = entry[2][0] if response.API_VERSION == 0 else entry[3]
                        target[tp] = int(offset)
                    elif error_code in LEADER_ERRORS:
                        retry.add(tp)
                    elif timestamp == LATEST:
                        raise ScanError(
                            f"ListOffsets({topic}/{partition}) failed with error code {error_code}"
                        )

        await run_all(
            one(leader, tps, timestamp)
            for leader, tps in by_leader.items()
            for timestamp in (LATEST, EARLIEST)
        )
        return retry
