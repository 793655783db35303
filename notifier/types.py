"""The data types every stage shares.

Data flows one way: the collector produces :class:`Sample` rows (one per group-partition per
successful scan; the history adds one marked unavailable per window the step kept of a
partition the scan could not read), the window store keeps them, the evaluator turns windows
into :class:`GroupResult` objects, the transition tracker turns changes of group status into
:class:`Transition` objects, and the notifier turns those into :class:`Notification` objects.
History files and the backtest use the very same sample columns (:data:`SAMPLE_SCHEMA`).
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

import pyarrow as pa
import pyarrow.compute as pc

# --------------------------------------------------------------------------------------------
# Samples


GROUP_STATES = ("Stable", "PreparingRebalance", "CompletingRebalance", "Empty", "Dead", "Unknown")
"""Group states as DescribeGroups reports them; the index is the compact code the store keeps."""

GROUP_STATE_CODE = {name: code for code, name in enumerate(GROUP_STATES)}
REBALANCING_STATES = frozenset({"PreparingRebalance", "CompletingRebalance", "Unknown"})
MEMBERLESS_STATES = frozenset({"Empty", "Dead"})

SAMPLE_SCHEMA = pa.schema(
    [
        pa.field("ts", pa.timestamp("ms", tz="UTC"), nullable=False),
        pa.field("cluster", pa.string(), nullable=False),
        pa.field("group", pa.string(), nullable=False),
        pa.field("topic", pa.string(), nullable=False),
        pa.field("partition", pa.int32(), nullable=False),
        pa.field("committed_offset", pa.int64(), nullable=True),
        pa.field("log_end_offset", pa.int64(), nullable=True),
        pa.field("log_start_offset", pa.int64(), nullable=True),
        pa.field("group_state", pa.string(), nullable=False),
        pa.field("members", pa.int32(), nullable=False),
        pa.field("member_hash", pa.int64(), nullable=False),
        pa.field("available", pa.bool_(), nullable=False),
    ]
)
"""One schema for live samples, the Parquet history and the backtest input.

``available`` false: the scan could not read the partition's offsets (no leader known, or
none answered). The collector leaves such partitions out of its rows and names them beside
(``ScanResult.unavailable_partitions``); the live step keeps their windows, and the service
writes the history a row for each window kept, so that every replay keeps it too
(:func:`notifier.rules.step.unavailable_samples`): its ``log_end_offset`` and
``log_start_offset`` are null, its commit and group as last seen.
``log_end_offset`` is null in those rows only. Files written before the column existed are
read as available throughout (:data:`OPTIONAL_SAMPLE_COLUMNS`)."""

SAMPLE_COLUMNS = tuple(SAMPLE_SCHEMA.names)

OPTIONAL_SAMPLE_COLUMNS: Mapping[str, Any] = {"available": True}
"""Columns older histories lack, with the value their rows are read with."""

REQUIRED_WHERE_AVAILABLE = ("log_end_offset",)
"""Columns that may be null only in rows of unavailable partitions."""


def with_optional_columns(table: pa.Table) -> pa.Table:
    """``table`` with the :data:`OPTIONAL_SAMPLE_COLUMNS` it lacks, at their old value."""
    for name, value in OPTIONAL_SAMPLE_COLUMNS.items():
        if name not in table.column_names:
            field = SAMPLE_SCHEMA.field(name)
            table = table.append_column(
                field, pa.repeat(pa.scalar(value, field.type), table.num_rows)
            )
    return table


def unavailable_partitions(table: pa.Table) -> tuple[tuple[str, int], ...]:
    """The ``(topic, partition)`` pairs ``table`` marks unavailable, sorted, once each."""
    if "available" not in table.column_names or table.num_rows == 0:
        return ()
    lost = table.filter(pc.invert(table.column("available")))
    if lost.num_rows == 0:
        return ()
    pairs = zip(lost.column("topic").to_pylist(), lost.column("partition").to_pylist())
    return tuple(sorted(set(pairs)))


def available_rows(table: pa.Table) -> pa.Table:
    """``table`` without the rows of unavailable partitions (what a window store ingests)."""
    if "available" not in table.column_names or table.num_rows == 0:
        return table
    available = table.column("available")
    if available.null_count == 0 and pc.all(available).as_py():
        return table
    return table.filter(available)


@dataclass(slots=True, frozen=True)
class Sample:
    """One scan's view of one group-partition. ``ts`` is the scan's observation time (ms, UTC)."""

    ts: int
    cluster: str
    group: str
    topic: str
    partition: int
    committed_offset: int | None
    log_end_offset: int | None
    """None exactly when the partition was unavailable to the scan (``available`` false)."""
    log_start_offset: int | None = None
    group_state: str = "Stable"
    members: int = 1
    member_hash: int = 0
    available: bool = True

    @property
    def lag(self) -> int | None:
        """LEO minus committed, clamped at 0; ``None`` when the group has no commit or the
        partition was unavailable."""
        if self.committed_offset is None or self.log_end_offset is None:
            return None
        return max(0, self.log_end_offset - self.committed_offset)


@dataclass(slots=True, frozen=True)
class GroupMember:
    """A member of a consumer group as its coordinator describes it: the member id the broker
    gave it, the ``client.id`` the consumer set and the host it connects from (the broker's
    ``/10.2.0.14`` with the leading slash dropped). Empty strings where a broker reports none."""

    member_id: str
    client_id: str = ""
    client_host: str = ""

    def describe(self) -> str:
        """``billing-7f9c on 10.2.0.14``: who a person should look at; ``""`` when the broker
        named neither."""
        if self.client_id and self.client_host:
            return f"{self.client_id} on {self.client_host}"
        return self.client_id or self.client_host


def samples_to_table(samples: list[Sample]) -> pa.Table:
    """Build an Arrow table in :data:`SAMPLE_SCHEMA` from sample objects."""
    columns: dict[str, list[Any]] = {name: [] for name in SAMPLE_COLUMNS}
    for sample in samples:
        for name in SAMPLE_COLUMNS:
            columns[name].append(getattr(sample, name))
    return pa.Table.from_pydict(columns, schema=SAMPLE_SCHEMA)


def table_to_samples(table: pa.Table) -> list[Sample]:
    """The inverse of :func:`samples_to_table` (for tests and small tools, not hot paths)."""
    table = with_optional_columns(table).select(list(SAMPLE_COLUMNS))
    ts = table.column("ts").cast(pa.int64()).to_pylist()
    rows = table.drop_columns(["ts"]).to_pylist()
    return [Sample(ts=t, **row) for t, row in zip(ts, rows)]


# --------------------------------------------------------------------------------------------
# Statuses


class PartitionStatus(enum.StrEnum):
    """Burrow's per-partition statuses."""

    OK = "OK"
    WARN = "WARN"
    STOP = "STOP"
    STALL = "STALL"
    REWIND = "REWIND"

    @property
    def group_status(self) -> GroupStatus:
        if self is PartitionStatus.OK:
            return GroupStatus.OK
        if self is PartitionStatus.WARN:
            return GroupStatus.WARN
        return GroupStatus.ERR


PARTITION_STATUS_CODES = tuple(PartitionStatus)
"""Index = the compact code the vectorized evaluator uses (0 = OK … 4 = REWIND)."""


class GroupStatus(enum.StrEnum):
    """Burrow's group statuses; ``rank`` orders them by how bad they are."""

    NOTFOUND = "NOTFOUND"
    OK = "OK"
    WARN = "WARN"
    ERR = "ERR"

    @property
    def rank(self) -> int:
        return _GROUP_RANK[self]

    @classmethod
    def from_rank(cls, rank: int) -> GroupStatus:
        return _GROUP_BY_RANK[rank]


_GROUP_RANK = {GroupStatus.NOTFOUND: -1, GroupStatus.OK: 0, GroupStatus.WARN: 1, GroupStatus.ERR: 2}
_GROUP_BY_RANK = {rank: status for status, rank in _GROUP_RANK.items()}


class Severity(enum.StrEnum):
    WARN = "warn"
    ERR = "err"

    @property
    def group_status(self) -> GroupStatus:
        return GroupStatus.WARN if self is Severity.WARN else GroupStatus.ERR


# --------------------------------------------------------------------------------------------
# Evaluation results


@dataclass(slots=True)
class CommitPoint:
    """An entry of Burrow's commit ring: an offset, when it was first seen, the lag then."""

    offset: int
    timestamp: int
    lag: int | None

    def to_dict(self) -> dict[str, Any]:
        return {"offset": self.offset, "timestamp": self.timestamp, "lag": self.lag}


@dataclass(slots=True)
class Finding:
    """Why a rule fired: enough for a notification to explain itself."""

    rule: str
    kind: str
    severity: Severity
    status: str
    topic: str | None = None
    partition: int | None = None
    message: str = ""
    evidence: dict[str, Any] = field(default_factory=dict)
    since: int | None = None
    labels: dict[str, str] = field(default_factory=dict)
    """The rule's labels (``team: data``): routes, silences and inhibit rules match them."""
    annotations: dict[str, str] = field(default_factory=dict)
    """The rule's annotations rendered over this finding (``summary``, ``description``,
    ``runbook_url``): what templates show beside the finding."""

    def to_dict(self) -> dict[str, Any]:
        # By hand rather than ``asdict``: this runs for every finding of every notification,
        # and ``asdict`` deep-copies the evidence; a shallow copy keeps callers' dicts apart.
        return {
            "rule": self.rule,
            "kind": self.kind,
            "severity": self.severity,
            "status": self.status,
            "topic": self.topic,
            "partition": self.partition,
            "message": self.message,
            "evidence": dict(self.evidence),
            "since": self.since,
            "labels": dict(self.labels),
            "annotations": dict(self.annotations),
        }


@dataclass(slots=True)
class PartitionResult:
    topic: str
    partition: int
    status: PartitionStatus
    complete: float
    burrow_complete: float
    committed_offset: int | None
    log_end_offset: int
    log_start_offset: int | None
    current_lag: int | None
    lag_seconds: float | None
    start: CommitPoint | None
    end: CommitPoint | None
    owner: str = ""
    """The host of the member that owns the partition (Burrow's ``owner``); "" when none does."""
    client_id: str = ""
    """That member's ``client.id``; "" when no member owns the partition."""

    @property
    def owned_by(self) -> str:
        """``billing-7f9c on 10.2.0.14``, or ``""`` when no member owns the partition."""
        return GroupMember("", self.client_id, self.owner).describe()

    def to_dict(self) -> dict[str, Any]:
        # Written out rather than dataclasses.asdict: this runs for every partition of every
        # group detail and fleet bulletin, and asdict's recursive deep copy was most of it.
        return {
            "topic": self.topic,
            "partition": self.partition,
            "status": self.status,
            "complete": self.complete,
            "burrow_complete": self.burrow_complete,
            "committed_offset": self.committed_offset,
            "log_end_offset": self.log_end_offset,
            "log_start_offset": self.log_start_offset,
            "current_lag": self.current_lag,
            "lag_seconds": self.lag_seconds,
            "start": None if self.start is None else self.start.to_dict(),
            "end": None if self.end is None else self.end.to_dict(),
            "owner": self.owner,
            "client_id": self.client_id,
        }


@dataclass(slots=True)
class GroupResult:
    """The score of one group at one evaluation."""

    cluster: str
    group: str
    status: GroupStatus
    complete: float
    burrow_complete: float
    partial: bool
    evaluated_at: int
    partitions: list[PartitionResult] = field(default_factory=list)
    findings: list[Finding] = field(default_factory=list)
    total_lag: int = 0
    max_lag: PartitionResult | None = None
    max_lag_seconds: float | None = None
    group_state: str = "Unknown"
    members: int = 0

    @property
    def partition_count(self) -> int:
        return len(self.partitions)

    def partition(self, topic: str | None, partition: int | None) -> PartitionResult | None:
        """The result of one partition, or None (also for a finding about the whole group)."""
        if topic is None or partition is None:
            return None
        for p in self.partitions:
            if p.partition == partition and p.topic == topic:
                return p
        return None

    def attach_owners(self, owners: Mapping[tuple[str, int], GroupMember]) -> GroupResult:
        """Name on each partition the member that owns it (Burrow's ``owner`` and
        ``client_id``), from the scan's assignments; returns the result itself."""
        for p in self.partitions:
            member = owners.get((p.topic, p.partition))
            p.owner, p.client_id = (member.client_host, member.client_id) if member else ("", "")
        return self

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["partition_count"] = self.partition_count
        return data


@dataclass(slots=True)
class Transition:
    """A gated change of a group's status (``gone`` when the group or its topics vanished)."""

    cluster: str
    group: str
    previous: GroupStatus
    current: GroupStatus
    at: int
    result: GroupResult | None
    gone: bool = False
    reason: str | None = None
    """Why a gone group went: ``None`` when the cluster stopped listing it, ``"removed"`` when
    it was forgotten on request (Burrow's ``DELETE /v3/kafka/{cluster}/consumer/{group}``)."""
    news: tuple[str, ...] = ()
    """Rules that began firing at the group's status while it already stood there (offsets
    rewound while the group was stopped): the status is unchanged, the incident has news."""

    @property
    def key(self) -> tuple[str, str]:
        return (self.cluster, self.group)


# --------------------------------------------------------------------------------------------
# Incidents and notifications


class Event(enum.StrEnum):
    OPEN = "open"
    ESCALATE = "escalate"
    REPEAT = "repeat"
    RESOLVE = "resolve"


@dataclass(slots=True)
class Incident:
    """One episode of a group being unhealthy, from the first gated non-OK to OK or gone."""

    id: str
    cluster: str
    group: str
    opened_at: int
    status: GroupStatus
    peak_status: GroupStatus
    closed_at: int | None = None
    close_reason: str | None = None
    findings: list[Finding] = field(default_factory=list)
    silenced: bool = False

    @property
    def open(self) -> bool:
        return self.closed_at is None


@dataclass(slots=True)
class Alert:
    """One incident's part in a notification."""

    event: Event
    incident: Incident
    result: GroupResult | None
    muted: list[Finding] = field(default_factory=list)
    """Findings an inhibit rule holds back (a WARN beside the group's ERR): shown apart."""
    news: list[str] = field(default_factory=list)
    """For an ``escalate`` at the status already notified: the rules it tells of for the
    first time (a rewind while the group was stopped)."""


@dataclass(slots=True)
class Notification:
    """What one receiver is sent at once: one or more alerts grouped by the route's ``group_by``."""

    id: str
    receiver: str
    group_key: str
    alerts: list[Alert]
    created_at: int
    status_page_url: str | None = None
    extras: dict[str, Any] = field(default_factory=dict)


# --------------------------------------------------------------------------------------------
# Kafka clients

KafkaClientRole = Literal["scan", "fleet_membership", "fleet_state", "fleet_view"]
"""What a process's Kafka client is for, the ``client`` label of
``notifier_kafka_requests_total``: the scans; a fleet instance's group membership (joining,
heartbeats, the reachability probe, leaving); its shard state on the state topic (creating
it, snapshots and changes, loading shards); the fleet view (its topic, bulletins, members)."""
