"""What the coordinator keeps for each cluster: its config, its pipeline (store, evaluator,
transition tracker), its collector, its scan counters and what the last scan saw, and the wall
clock the coordinator reads."""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from notifier.collect import ClusterCollector, ClusterLayout, collector_security
from notifier.config import ClusterConfig
from notifier.rules import (
    ClusterPipeline,
    Evaluation,
    Evaluator,
    LeoReset,
    TransitionTracker,
    WindowStore,
)
from notifier.service.scanclock import ScanClock
from notifier.service.sharing import STALE_AFTER_INTERVALS
from notifier.types import GroupMember


@dataclass
class ScanMetrics:
    scans: int = 0
    failures: int = 0
    consecutive_failures: int = 0
    last_success_ms: int | None = None
    """When the last scan succeeded, by the wall clock."""
    last_error: str | None = None
    last_duration_s: float = 0.0
    last_requests: dict[str, int] = field(default_factory=dict)
    last_evaluate_s: float = 0.0
    down: bool = False


@dataclass
class ClusterState:
    """Everything the coordinator keeps for one cluster."""

    config: ClusterConfig
    pipeline: ClusterPipeline
    collector: Any
    metrics: ScanMetrics = field(default_factory=ScanMetrics)
    evaluation: Evaluation | None = None
    groups: dict[str, str] = field(default_factory=dict)
    """Every group the last scan listed, with its state (groups without partitions too)."""
    not_evaluated: dict[str, str] = field(default_factory=dict)
    """Groups the last scan listed but left out, and why (not authorized to describe them; a
    share or streams group, which the rules do not know)."""
    leo_resets: dict[tuple[str, int], LeoReset] = field(default_factory=dict)
    """The latest log-end offset reset of each (topic, partition) since the service started."""
    group_members: Mapping[str, int] = field(default_factory=dict)
    """Each group's number of members in the last scan."""
    owners: Mapping[str, Mapping[tuple[str, int], GroupMember]] = field(default_factory=dict)
    """Per group, the member that owns each assigned partition as of the last scan."""
    layout: ClusterLayout | None = None
    """The brokers and topics of the last scan's metadata."""
    retry_at: float = 0.0
    clock: ScanClock = field(init=False)
    """Stamps each scan with its time on the cluster's one timeline (see scanclock)."""

    def __post_init__(self) -> None:
        self.clock = ScanClock(self.config.name, round(self.config.scan_interval * 1000))

    @property
    def store(self) -> WindowStore:
        return self.pipeline.store

    def stale(self, now_ms: int) -> bool:
        """No successful scan within the last :data:`STALE_AFTER_INTERVALS` intervals."""
        last = self.metrics.last_success_ms
        return (
            last is None or now_ms - last > STALE_AFTER_INTERVALS * self.config.scan_interval * 1000
        )

    @property
    def evaluator(self) -> Evaluator:
        return self.pipeline.evaluator

    @property
    def tracker(self) -> TransitionTracker:
        return self.pipeline.tracker


def make_collector(cluster: ClusterConfig) -> ClusterCollector:
    return ClusterCollector(
        cluster.bootstrap_servers,
        cluster=cluster.name,
        client_id=cluster.client_id,
        request_timeout_ms=int(cluster.request_timeout * 1000),
        scan_timeout_ms=int(cluster.scan_timeout * 1000),
        metadata_max_age_ms=int(cluster.metadata_max_age * 1000),
        group_allow=cluster.group_allow or None,
        group_deny=cluster.group_deny or None,
        describe_batch_size=cluster.describe_batch_size,
        offset_fetch_concurrency=cluster.offset_fetch_concurrency,
        offset_fetch_batch_size=cluster.offset_fetch_batch_size,
        **collector_security(cluster.security),
    )


def wall_clock_ms() -> int:
    """The wall clock, in epoch milliseconds."""
    return int(time.time() * 1000)


def utc_datetime(epoch_ms: float) -> datetime:
    """An epoch-milliseconds time as the aware datetime APScheduler takes."""
    return datetime.fromtimestamp(epoch_ms / 1000, UTC)
