"""Notifications for the channel tests: alerts shaped like the rules produce them, at a fixed
time, so that what a receiver gets can be compared exactly.
"""

from __future__ import annotations

from notifier.types import (
    Alert,
    Event,
    Finding,
    GroupResult,
    GroupStatus,
    Incident,
    Notification,
    PartitionResult,
    PartitionStatus,
    Severity,
)

NOW = 1_714_560_000_000  # 2024-05-01 10:40 UTC, in ms
WEBHOOK_PATH = "/services/T000/B000/s3cr3tW3bh00kT0k3n"


def make_alert(
    event: Event = Event.OPEN,
    *,
    cluster: str = "prod",
    group: str = "orders",
    status: GroupStatus = GroupStatus.ERR,
    lag_seconds: float | None = 47 * 60,
    findings: list[Finding] | None = None,
    gone: bool = False,
) -> Alert:
    """One alert for ``cluster/group``; its incident id is ``cluster/group/opened_at``."""
    if findings is None:
        findings = [
            Finding(
                rule="burrow.stall",
                kind="stall",
                severity=Severity.ERR,
                status="STALL",
                topic="orders",
                partition=3,
                message="committed offset stopped moving while lag grew",
                evidence={"lag_start": 1200, "lag_end": 48_000},
            )
        ]
    if status is GroupStatus.OK:
        findings = []
    partition = PartitionResult(
        topic="orders",
        partition=3,
        status=PartitionStatus.STALL if findings else PartitionStatus.OK,
        complete=1.0,
        burrow_complete=1.0,
        committed_offset=1000,
        log_end_offset=49_000,
        log_start_offset=0,
        current_lag=48_000 if findings else 0,
        lag_seconds=lag_seconds,
        start=None,
        end=None,
    )
    result = GroupResult(
        cluster=cluster,
        group=group,
        status=status,
        complete=1.0,
        burrow_complete=1.0,
        partial=False,
        evaluated_at=NOW,
        partitions=[partition],
        findings=findings,
        total_lag=partition.current_lag or 0,
        max_lag=partition,
        max_lag_seconds=lag_seconds if findings else 0.0,
        group_state="Stable",
        members=2,
    )
    opened = NOW - 3_600_000
    incident = Incident(
        id=f"{cluster}/{group}/{opened}",
        cluster=cluster,
        group=group,
        opened_at=opened,
        status=status,
        peak_status=GroupStatus.ERR,
        closed_at=NOW if event is Event.RESOLVE else None,
        findings=findings,
    )
    return Alert(event=event, incident=incident, result=None if gone else result)


def make_notification(*alerts: Alert, extras: dict | None = None) -> Notification:
    alerts = alerts or (make_alert(),)
    return Notification(
        id=f"n-{alerts[0].event.value}-{len(alerts)}",
        receiver="oncall",
        group_key='{cluster="prod"}',
        alerts=list(alerts),
        created_at=NOW,
        status_page_url="https://notifier.example/status",
        extras=extras or {},
    )


def many_alerts(count: int, event: Event = Event.OPEN) -> list[Alert]:
    return [make_alert(event, group=f"group-{i:03d}") for i in range(count)]
