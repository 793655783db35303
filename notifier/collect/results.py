"""What a scan of a cluster hands the coordinator: a :class:`ScanResult` or a :class:`ScanError`."""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass, field

import pyarrow as pa

from notifier.types import GroupMember

TopicPartition = tuple[str, int]


_BOOTTIME: int | None = getattr(time, "CLOCK_BOOTTIME", None)


def elapsed_clock() -> float:
    """Seconds on a clock that nobody sets: it only runs forward, and counts time the machine
    spent suspended (Linux's ``CLOCK_BOOTTIME``; elsewhere ``time.monotonic``). What a step
    of the wall clock is told apart from elapsed time by."""
    return time.clock_gettime(_BOOTTIME) if _BOOTTIME is not None else time.monotonic()


@dataclass(frozen=True, slots=True)
class PartitionLayout:
    """Where a partition lives, as the cluster metadata says: its leader (-1: none), its
    replicas (the preferred leader first) and its in-sync replicas, by broker id."""

    leader: int
    replicas: tuple[int, ...]
    in_sync: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class ClusterLayout:
    """The brokers and every topic's partitions of the metadata a scan worked from (read only
    when the collector refreshes its metadata, not every scan)."""

    brokers: Mapping[int, str]
    """Each broker's ``host:port`` by id."""
    topics: Mapping[str, Mapping[int, PartitionLayout]]


class ScanError(RuntimeError):
    """A scan failed or timed out; it returned nothing (the coordinator records a gap)."""


class ClusterUnreachableError(ScanError):
    """A scan failed before any broker of the cluster answered: it got no further than trying
    to connect, so it cost the cluster what a probe would (the coordinator tries again at the
    next tick rather than backing off, and notices the cluster back within one interval)."""


@dataclass(frozen=True, slots=True)
class ScanResult:
    """One successful scan of one cluster.

    ``ts`` is the scan's observation time in ms since the epoch (UTC), the moment the log-end
    offsets were requested (commits are read before it, so lag is never understated); every
    row of ``samples`` carries it. ``samples`` is a table in :data:`SAMPLE_SCHEMA`, one row per
    group-partition that has a committed offset or is assigned to a member.
    """

    cluster: str
    ts: int
    samples: pa.Table
    requests: Mapping[str, int]
    """Kafka requests the scan sent, by API name (see
    :data:`~notifier.collect.protocol.API_NAMES`); the handshake of a new connection
    (ApiVersions, SASL) is not counted here but in ``connections_opened``."""
    group_states: Mapping[str, str] = field(default_factory=dict)
    """Every scanned group's state, including groups that produced no rows."""
    skipped_groups: Mapping[str, str] = field(default_factory=dict)
    """Groups left out and why (e.g. not authorized to describe them, or a share or streams
    group, listed but not evaluated)."""
    group_types: Mapping[str, str] = field(default_factory=dict)
    """Each selected group's type: ``classic``, ``consumer`` (KIP-848), ``share``, ``streams``
    as the broker names it (a broker without ListGroups v5 names none: its groups are
    ``classic`` unless ConsumerGroupDescribe found them)."""
    group_members: Mapping[str, int] = field(default_factory=dict)
    """Every described group's number of members."""
    unavailable_partitions: tuple[TopicPartition, ...] = ()
    """Partitions with a commit or assignment but no log-end offset (no leader known or none
    answered for them, even after a metadata refresh): left out of ``samples``."""
    connections_opened: int = 0
    duration_s: float = 0.0
    elapsed_at: float | None = None
    """:func:`elapsed_clock` read together with ``ts``, so the coordinator can tell a step of
    the wall clock between two scans from time that passed (None: not known)."""
    owners: Mapping[str, Mapping[TopicPartition, GroupMember]] = field(default_factory=dict)
    """Per group, the member each assigned partition belongs to (its client id and host, as
    the group's coordinator describes it); groups without assignments are left out."""
    layout: ClusterLayout | None = None
    """The brokers and topics of the metadata the scan worked from."""
    listed_groups: tuple[str, ...] = ()
    """Every listed group the allow/deny lists let through, scanned here or not: a fleet
    instance scans only its own shards' groups, and weighs every shard by these
    (:mod:`notifier.fleet.balance`)."""

    @property
    def total_requests(self) -> int:
        return sum(self.requests.values())
