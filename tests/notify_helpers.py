"""Inputs for the notify tests: findings, results and transitions at simulated times, notify
configs and dispatchers built from them, and the service tests' configs and waiting helpers.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from notifier.config import NotifyConfig
from notifier.notify import Dispatcher
from notifier.notify.config import parse_notify
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
    Transition,
)
from tests.waiting import until_true

OK, WARN, ERR, GONE = GroupStatus.OK, GroupStatus.WARN, GroupStatus.ERR, GroupStatus.NOTFOUND
T0 = 1_714_560_000_000
S = 1000  # one second in ms
M = 60 * S
H = 60 * M


def finding(
    status: GroupStatus, *, rule: str = "burrow", topic: str | None = "orders", partition: int = 0
) -> Finding:
    return Finding(
        rule=rule,
        kind="stall" if status is ERR else "lag_growing",
        severity=Severity.ERR if status is ERR else Severity.WARN,
        status="STALL" if status is ERR else "WARN",
        topic=topic,
        partition=partition,
        message="committed offset stopped moving",
        evidence={"lag_end": 48_000},
    )


def result(
    cluster: str, group: str, status: GroupStatus, at: int, findings: list[Finding] | None = None
) -> GroupResult:
    if findings is None:
        findings = [finding(status)] if status.rank > 0 else []
    return GroupResult(
        cluster=cluster,
        group=group,
        status=status,
        complete=1.0,
        burrow_complete=1.0,
        partial=False,
        evaluated_at=at,
        findings=findings,
        total_lag=48_000 if status.rank > 0 else 0,
    )


def move(
    group: str,
    previous: GroupStatus,
    current: GroupStatus,
    at: int,
    *,
    cluster: str = "prod",
    findings: list[Finding] | None = None,
) -> Transition:
    """A gated transition of ``cluster/group``; NOTFOUND means the group is gone."""
    if current is GONE:
        return Transition(cluster, group, previous, current, at, None, gone=True)
    return Transition(
        cluster, group, previous, current, at, result(cluster, group, current, at, findings)
    )


def notify_config(route: dict[str, Any] | None = None, **top: Any) -> NotifyConfig:
    base_route = {"receiver": "oncall", "group_wait": 0, "group_interval": 0}
    data: dict[str, Any] = {
        "receivers": {
            "oncall": {"webhook": {"url": "http://127.0.0.1:9/oncall"}},
            "team": {"webhook": {"url": "http://127.0.0.1:9/team"}},
            "dba": {"webhook": {"url": "http://127.0.0.1:9/dba"}},
        },
        "route": {**base_route, **(route or {})},
        **top,
    }
    return parse_notify(data)


def dispatcher(route: dict[str, Any] | None = None, **top: Any) -> Dispatcher:
    return Dispatcher.from_config(notify_config(route, **top))


def events(notifications: list[Notification]) -> list[tuple[str, str, str]]:
    """``(receiver, event, group)`` per alert, in order."""
    return [(n.receiver, a.event.value, a.incident.group) for n in notifications for a in n.alerts]


FAST_DELIVERY = {"retry_initial": "10ms", "retry_max": "50ms", "stop_timeout": "2s"}


def now_ms() -> int:
    return int(time.time() * 1000)


def config(
    receivers: dict[str, Any], route: dict[str, Any] | None = None, **top: Any
) -> NotifyConfig:
    receiver = next(iter(receivers))
    data = {
        "receivers": receivers,
        "route": {"receiver": receiver, "group_wait": 0, "group_interval": 0, **(route or {})},
        "delivery": FAST_DELIVERY,
        **top,
    }
    return parse_notify(data, env={})


def webhook(url: str, **kwargs: Any) -> dict[str, Any]:
    return {"hook": {"webhook": {"url": url, **kwargs}}}


async def eventually(predicate: Callable[[], bool], timeout: float = 5.0) -> None:
    """The notify tests' wait: their steps are quick, so it polls often, 5 s at most."""
    await until_true(predicate, timeout, every=0.005)


def alerts_of(requests) -> list[tuple[str, str, str]]:
    """``(notification id, event, group)`` per alert of each webhook request."""
    return [
        (body["notification_id"], alert["event"], alert["incident"]["group"])
        for body in (r.json for r in requests)
        for alert in body["alerts"]
    ]


def full_notification() -> Notification:
    partitions = [
        PartitionResult(
            topic="orders",
            partition=p,
            status=PartitionStatus.STALL if p else PartitionStatus.OK,
            complete=1.0,
            burrow_complete=0.5,
            committed_offset=None if p == 2 else 100 * p,
            log_end_offset=1000,
            log_start_offset=0,
            current_lag=None if p == 2 else 1000 - 100 * p,
            lag_seconds=None if p == 2 else 12.5,
            start=CommitPoint(10, 1, None),
            end=CommitPoint(20, 2, 5),
            owner="host-1",
            client_id="c-1",
        )
        for p in range(3)
    ]
    res = result("prod", "orders", ERR, 1_000)
    res.partitions = partitions
    res.max_lag = partitions[1]
    res.max_lag_seconds = 12.5
    incident = Incident(
        id="abc",
        cluster="prod",
        group="orders",
        opened_at=1,
        status=ERR,
        peak_status=ERR,
        findings=[finding(ERR)],
        silenced=True,
    )
    gone = Incident("def", "prod", "gone", 1, GroupStatus.NOTFOUND, WARN, 5, "gone", [], False)
    return Notification(
        id="n1",
        receiver="oncall",
        group_key='{cluster="prod"}',
        alerts=[Alert(Event.ESCALATE, incident, res), Alert(Event.RESOLVE, gone, None)],
        created_at=2_000,
        status_page_url="https://status",
        extras={"team": "data"},
    )
