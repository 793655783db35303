"""Response models of the endpoints the status page reads besides the overview and the group
detail: a group's history, incidents with their notifications and delivery state. They are
what ``/openapi.json`` documents; every time is epoch milliseconds (UTC)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, Field

DeliveryState = Literal["delivered", "pending", "failed", "not sent"]


class LagPoint(BaseModel):
    ts: int = Field(description="the scan (the last of its bucket when downsampled)")
    total_lag: int = Field(description="the group's lag in records, summed over its partitions")
    max_partition_lag: int = Field(description="the largest partition's lag in records")
    max_lag_seconds: float | None = Field(
        description="how far behind in time the furthest-behind partition is; null: unknown"
    )


class Threshold(BaseModel):
    rule: str
    metric: Literal["lag", "lag_seconds"]
    scope: Literal["partition", "group"] = Field(
        description="partition: compared with each partition's lag (the chart's largest "
        "partition); group: with the group's total"
    )
    value: float = Field(description="fires above this (records or seconds)")
    clear_below: float | None = Field(description="once firing, holds until at or below this")
    severity: Literal["warn", "err"]
    topics: list[str] = Field(description="the group's topics it applies to with this value")


class IncidentSpan(BaseModel):
    id: str
    cluster_down: bool = Field(description="the cluster's outage (group *), not the group's")
    opened_at: int
    closed_at: int | None
    status: str
    peak_status: str
    close_reason: str | None
    silenced: bool


class GroupHistory(BaseModel):
    """A group's lag over the last hours, from the service's Parquet history."""

    cluster: str
    group: str
    hours: float
    start: int
    end: int
    history_enabled: bool = Field(description="false: the service keeps no history")
    scans: int = Field(description="scans of the group in the range, before downsampling")
    bucket_seconds: float = Field(description="width of a downsampled point; 0: one per scan")
    gap_ms: int = Field(description="points further apart than this have missing scans between")
    points: list[LagPoint]
    thresholds: list[Threshold]
    incidents: list[IncidentSpan] = Field(
        description="the group's incidents and its cluster's outages overlapping the range"
    )
    scan_interval_s: float
    instance: str | None = Field(
        default=None, description="in a fleet, the instance that owns the group and answered"
    )


class ChannelDelivery(BaseModel):
    channel: str
    receiver: str
    state: Literal["delivered", "pending", "failed"] = Field(
        description="the state of the channel's latest notification for the incident"
    )
    last_event: str = Field(description="open, escalate, repeat or resolve")
    last_at: int
    last_error: str | None
    delivered: int
    pending: int
    failed: int


class IncidentOut(BaseModel):
    id: str
    cluster: str
    group: str = Field(description="* for a cluster-down incident")
    status: str
    peak_status: str
    opened_at: int
    closed_at: int | None
    close_reason: str | None
    silenced: bool
    findings: list[dict[str, Any]]
    duration_seconds: float = Field(description="open for this long (until closed or now)")
    delivery: DeliveryState = Field(description="the worst of the channels' latest states")
    channels: list[ChannelDelivery]


class IncidentList(BaseModel):
    incidents: list[IncidentOut]


class DeliveryOut(BaseModel):
    notification_id: str
    receiver: str
    channel: str
    event: str
    status: str = Field(description="the incident's status the notification carried")
    created_at: int
    state: Literal["delivered", "pending", "failed"]
    attempts: int
    next_attempt_at: int | None = Field(description="a pending notification's next try")
    done_at: int | None
    last_error: str | None


class WaitingOut(BaseModel):
    route: str
    receiver: str
    reason: Literal["group_wait", "cluster_down_wait", "group_interval", "silenced",
                    "inhibited", "below_threshold", "sent"]  # fmt: skip
    until: int | None = Field(description="epoch ms; null: until something changes")


class TimelineEntry(BaseModel):
    at: int
    event: Literal["opened", "open", "escalate", "repeat", "resolve", "closed"] = Field(
        description="opened/closed: the incident itself; the others: a notification planned"
    )
    status: str | None
    text: str
    waiting: list[WaitingOut] | None = Field(
        default=None,
        description="before any notification is sent: what each route that took the incident "
        "waits for, and until when",
    )


class IncidentDetail(BaseModel):
    incident: IncidentOut
    timeline: list[TimelineEntry]
    deliveries: list[DeliveryOut]
    instance: str | None = Field(
        default=None, description="in a fleet, the instance whose group it is and that answered"
    )
