"""Results, incidents and notifications as plain JSON-able dicts, and back.

This is the format of the outbox's bodies and of the incidents table's JSON columns, so what
was written before a restart reads back as the same objects (each ``*_from_dict`` is the
inverse of its ``*_to_dict``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from notifier.types import (
    Alert,
    CommitPoint,
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


def finding_from_dict(d: Mapping[str, Any]) -> Finding:
    return Finding(
        rule=d["rule"],
        kind=d["kind"],
        severity=Severity(d["severity"]),
        status=d["status"],
        topic=d.get("topic"),
        partition=d.get("partition"),
        message=d.get("message", ""),
        evidence=dict(d.get("evidence") or {}),
        since=d.get("since"),
        labels=dict(d.get("labels") or {}),
        annotations=dict(d.get("annotations") or {}),
    )


def _point_to_dict(p: CommitPoint | None) -> dict[str, Any] | None:
    return None if p is None else {"offset": p.offset, "timestamp": p.timestamp, "lag": p.lag}


def _point_from_dict(d: Mapping[str, Any] | None) -> CommitPoint | None:
    return None if d is None else CommitPoint(d["offset"], d["timestamp"], d.get("lag"))


def _partition_to_dict(p: PartitionResult) -> dict[str, Any]:
    # Statuses stay StrEnum members (they are str, and serialize as their value): reading
    # ``.value`` goes through the enum's descriptor, which a storm pays for 100,000 times.
    return {
        "topic": p.topic,
        "partition": p.partition,
        "status": p.status,
        "complete": p.complete,
        "burrow_complete": p.burrow_complete,
        "committed_offset": p.committed_offset,
        "log_end_offset": p.log_end_offset,
        "log_start_offset": p.log_start_offset,
        "current_lag": p.current_lag,
        "lag_seconds": p.lag_seconds,
        "start": _point_to_dict(p.start),
        "end": _point_to_dict(p.end),
        "owner": p.owner,
        "client_id": p.client_id,
    }


def _partition_from_dict(d: Mapping[str, Any]) -> PartitionResult:
    return PartitionResult(
        topic=d["topic"],
        partition=d["partition"],
        status=PartitionStatus(d["status"]),
        complete=d["complete"],
        burrow_complete=d["burrow_complete"],
        committed_offset=d.get("committed_offset"),
        log_end_offset=d["log_end_offset"],
        log_start_offset=d.get("log_start_offset"),
        current_lag=d.get("current_lag"),
        lag_seconds=d.get("lag_seconds"),
        start=_point_from_dict(d.get("start")),
        end=_point_from_dict(d.get("end")),
        owner=d.get("owner", ""),
        client_id=d.get("client_id", ""),
    )


def result_to_dict(r: GroupResult) -> dict[str, Any]:
    """A :class:`GroupResult` as plain data; ``max_lag`` is kept as an index into partitions
    when it is one of them (it normally is), so large groups are not stored twice."""
    max_lag: Any = None
    if r.max_lag is not None:
        index = next((i for i, p in enumerate(r.partitions) if p is r.max_lag), None)
        max_lag = {"index": index} if index is not None else _partition_to_dict(r.max_lag)
    return {
        "cluster": r.cluster,
        "group": r.group,
        "status": r.status,
        "complete": r.complete,
        "burrow_complete": r.burrow_complete,
        "partial": r.partial,
        "evaluated_at": r.evaluated_at,
        "partitions": [_partition_to_dict(p) for p in r.partitions],
        "findings": [f.to_dict() for f in r.findings],
        "total_lag": r.total_lag,
        "max_lag": max_lag,
        "max_lag_seconds": r.max_lag_seconds,
        "group_state": r.group_state,
        "members": r.members,
    }


def result_from_dict(d: Mapping[str, Any]) -> GroupResult:
    partitions = [_partition_from_dict(p) for p in d.get("partitions", [])]
    raw = d.get("max_lag")
    max_lag: PartitionResult | None = None
    if isinstance(raw, Mapping):
        index = raw.get("index")
        max_lag = partitions[index] if index is not None else _partition_from_dict(raw)
    return GroupResult(
        cluster=d["cluster"],
        group=d["group"],
        status=GroupStatus(d["status"]),
        complete=d["complete"],
        burrow_complete=d["burrow_complete"],
        partial=d["partial"],
        evaluated_at=d["evaluated_at"],
        partitions=partitions,
        findings=[finding_from_dict(f) for f in d.get("findings", [])],
        total_lag=d.get("total_lag", 0),
        max_lag=max_lag,
        max_lag_seconds=d.get("max_lag_seconds"),
        group_state=d.get("group_state", "Unknown"),
        members=d.get("members", 0),
    )


def incident_to_dict(i: Incident) -> dict[str, Any]:
    return {
        "id": i.id,
        "cluster": i.cluster,
        "group": i.group,
        "opened_at": i.opened_at,
        "status": i.status.value,
        "peak_status": i.peak_status.value,
        "closed_at": i.closed_at,
        "close_reason": i.close_reason,
        "findings": [f.to_dict() for f in i.findings],
        "silenced": i.silenced,
    }


def incident_from_dict(d: Mapping[str, Any]) -> Incident:
    return Incident(
        id=d["id"],
        cluster=d["cluster"],
        group=d["group"],
        opened_at=d["opened_at"],
        status=GroupStatus(d["status"]),
        peak_status=GroupStatus(d["peak_status"]),
        closed_at=d.get("closed_at"),
        close_reason=d.get("close_reason"),
        findings=[finding_from_dict(f) for f in d.get("findings", [])],
        silenced=bool(d.get("silenced", False)),
    )


def notification_to_dict(n: Notification) -> dict[str, Any]:
    """A :class:`Notification` as plain data (what the outbox stores, as JSON)."""
    return {
        "id": n.id,
        "receiver": n.receiver,
        "group_key": n.group_key,
        "created_at": n.created_at,
        "status_page_url": n.status_page_url,
        "extras": n.extras,
        "alerts": [
            {
                "event": a.event.value,
                "incident": incident_to_dict(a.incident),
                "result": None if a.result is None else result_to_dict(a.result),
                "muted": [f.to_dict() for f in a.muted],
                "news": list(a.news),
            }
            for a in n.alerts
        ],
    }


def notification_from_dict(d: Mapping[str, Any]) -> Notification:
    """The inverse of :func:`notification_to_dict`."""
    return Notification(
        id=d["id"],
        receiver=d["receiver"],
        group_key=d["group_key"],
        created_at=d["created_at"],
        status_page_url=d.get("status_page_url"),
        extras=dict(d.get("extras") or {}),
        alerts=[
            Alert(
                event=Event(a["event"]),
                incident=incident_from_dict(a["incident"]),
                result=None if a.get("result") is None else result_from_dict(a["result"]),
                muted=[finding_from_dict(f) for f in a.get("muted") or []],
                news=[str(rule) for rule in a.get("news") or []],
            )
            for a in d["alerts"]
        ],
    )
