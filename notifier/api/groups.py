"""``/api/groups``: every group of every cluster at a glance, one group with its evidence, its
lag over the last hours (the status page's chart), and ``/api/fleet``: the instances of a
fleet. The bodies are built in :mod:`~notifier.api.views` (and
:mod:`~notifier.api.overview`, :mod:`~notifier.api.series`).

In a fleet, a group another instance owns is answered from the fleet's view, or asked of its
owner for what only the owner has (the windows, the Parquet history), each answer naming the
``instance`` that answered.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any
from urllib.parse import quote

import orjson
import pyarrow as pa
import pyarrow.compute as pc
from fastapi import APIRouter, HTTPException, Query, Request
from pydantic import BaseModel, ConfigDict, Field

from notifier.api.cache import JSONBytes, encode, with_members
from notifier.api.context import Api
from notifier.api.errors import NOT_FOUND, errors
from notifier.api.incidents import incident_spans
from notifier.api.models import GroupHistory
from notifier.api.owner import ask_owner, forwarded, not_in_view
from notifier.api.series import (
    DEFAULT_HOURS,
    MAX_HOURS,
    LagSeries,
    lag_series,
    read_group_rows,
    thresholds,
)
from notifier.api.sources import ClusterView
from notifier.api.views import (
    ActiveSilences,
    cluster_summaries,
    freshness,
    group_detail,
    group_evidence,
    group_live_members,
    group_result,
    open_incidents,
)
from notifier.types import SAMPLE_SCHEMA, GroupStatus

router = APIRouter(tags=["notifier"])


class NotEvaluated(BaseModel):
    group: str
    reason: str


class ClusterSummary(BaseModel):
    """A cluster's scan health and how old its data is."""

    cluster: str
    down: bool
    consecutive_failures: int
    last_error: str | None
    scan_interval_s: float
    not_evaluated: list[NotEvaluated] = Field(
        description="groups the cluster lists that no rule judges (share and streams groups)"
    )
    last_scan: int | None = Field(description="epoch ms of the last successful scan")
    data_age_seconds: float | None
    stale: bool


class GroupRow(BaseModel):
    """One group at a glance (the status page's table)."""

    model_config = ConfigDict(extra="allow")

    cluster: str
    group: str
    status: str
    complete: float
    partial: bool
    total_lag: int
    max_lag_seconds: float | None
    partitions: int
    rules: list[str] = Field(description="the rules firing for it")
    finding: dict[str, Any] | None = Field(description="the leading finding")
    lag_history: list[int] = Field(description="its lag over the window, oldest first")
    group_state: str


class GroupsOverview(BaseModel):
    groups: list[GroupRow]
    clusters: list[ClusterSummary]
    fleet_view: str | None = Field(
        default=None, description="in a fleet whose view is not read yet: why only ours are listed"
    )


class GroupDetail(BaseModel):
    """One group with its evidence: each partition's window, commit ring and LEO table, the
    findings, its open incident, the silences holding it back and how old its data is."""

    model_config = ConfigDict(extra="allow")

    cluster: str
    group: str
    status: str
    complete: float
    partial: bool
    total_lag: int
    findings: list[dict[str, Any]]
    partitions: list[dict[str, Any]]
    incident_id: str | None = None
    last_scan: int | None = None
    data_age_seconds: float | None = None
    stale: bool | None = None
    instance: str | None = Field(default=None, description="in a fleet: who answered")


class FleetInstance(BaseModel):
    instance: str
    shards: list[int]
    api: str | None = Field(description="the base URL of its API")
    last_seen: int = Field(description="epoch ms of its last member record")
    age_seconds: float
    stale: bool
    groups: int = Field(description="the groups it published bulletins for")


class Fleet(BaseModel):
    """The instances of the fleet, their shards and when each was last seen."""

    instance: str = Field(description="this instance")
    topic: str = Field(description="the fleet's state topic")
    instances: list[FleetInstance]


@router.get("/api/groups", response_model=GroupsOverview)
async def api_groups(api: Api) -> JSONBytes:
    coordinator, fleet = api.coordinator, api.fleet
    now = api.clock()
    incidents = open_incidents(api.notifier)
    silences = ActiveSilences(api.notifier)
    parts = [
        api.overviews.rows(name, s, incidents, silences, now, fleet)
        for name, s in coordinator.clusters.items()
    ]
    if fleet is not None:  # the other instances' groups, as the view has them
        parts.extend(
            b",".join(encode(remote.row()) for remote in fleet.remote_groups(name, now))
            for name in coordinator.clusters
        )
    groups = orjson.Fragment(b"[" + b",".join(p for p in parts if p) + b"]")
    body = {"groups": groups, "clusters": cluster_summaries(coordinator, now)}
    if fleet is not None and not fleet.available:  # only ours: say so
        body["fleet_view"] = (
            f"not available yet ({fleet.unavailable_reason}): only the groups of instance "
            f"{fleet.instance} are listed"
        )
    return JSONBytes(body)


@router.get("/api/groups/{cluster}/{group}", response_model=GroupDetail, responses=NOT_FOUND)
async def api_group(cluster: str, group: str, request: Request, api: Api) -> JSONBytes:
    state = api.cluster(cluster)
    fleet, notifier = api.fleet, api.notifier
    now = api.clock()
    if fleet is not None and not fleet.owns(cluster, group):
        remote = fleet.remote_group(cluster, group, now)
        if remote is None:
            raise not_in_view(fleet, "cluster or consumer")
        if not remote.owner_gone and not forwarded(request):
            # The windows are the owner's alone: ask it; when it cannot answer, the
            # bulletin's detail (no windows) is better than none.
            path = f"/api/groups/{quote(cluster, safe='')}/{quote(group, safe='')}"
            try:
                return JSONBytes(await ask_owner(fleet, cluster, group, path, request))
            except HTTPException as exc:
                if exc.status_code == 404:
                    raise
        return JSONBytes(remote.detail())
    fresh = freshness(state, now)
    if fresh.stale:  # as of now: the windows shrink with every scan missed
        return JSONBytes({**group_detail(state, cluster, group, notifier, now), **api.mine})
    result = api.result_of(state, cluster, group)
    evidence = api.scans.get(
        cluster, state, ("detail", group),
        lambda: encode(group_evidence(state, cluster, group, fresh, result)),
    )  # fmt: skip
    live = group_live_members(
        cluster, group, result, open_incidents(notifier), ActiveSilences(notifier), fresh, now
    )
    return JSONBytes(with_members(evidence, {**live, **api.mine}))


@router.get(
    "/api/groups/{cluster}/{group}/history", response_model=GroupHistory, responses=NOT_FOUND
)
async def api_group_history(
    cluster: str,
    group: str,
    request: Request,
    api: Api,
    hours: float | None = Query(
        None,
        gt=0,
        le=MAX_HOURS,
        description=f"how far back; unset: the span the group's history covers, at most "
        f"the last {DEFAULT_HOURS} h",
    ),
) -> dict[str, Any]:
    """The group's lag, largest partition lag and lag in seconds per scan over the last
    ``hours`` (at most 48), downsampled to at most 360 points; the thresholds of the rules
    that apply to it; its incidents and its cluster's outages in that time. Without
    ``hours``, the span the group's history covers (at most the last 6 h): a group watched
    for minutes fills the chart rather than being a sliver at its right edge."""
    state = api.coordinator.clusters.get(cluster)
    if state is None:
        raise HTTPException(404, "cluster not found")
    fleet = api.fleet
    if fleet is not None and not fleet.owns(cluster, group):
        path = f"/api/groups/{quote(cluster, safe='')}/{quote(group, safe='')}/history"
        params = {} if hours is None else {"hours": hours}
        answer = await ask_owner(fleet, cluster, group, path, request, params)
        owner = fleet.owner_api(cluster, group)
        return {**answer, "instance": owner[0] if owner else answer.get("instance")}
    result = group_result(state, cluster, group)
    if result.status is GroupStatus.NOTFOUND:
        raise HTTPException(404, "cluster or consumer not found")
    end = api.clock() + 1
    start = end - round((hours or DEFAULT_HOURS) * 3_600_000)
    history = api.coordinator.history
    series, start = await api.in_thread(_read_series, history.root if history else None,
                                        cluster, group, start, end, hours is None)  # fmt: skip
    if hours is None:
        hours = round((end - start) / 3_600_000, 4)
    spans = await incident_spans(api, cluster, group, start, end)
    topics = sorted({p.topic for p in result.partitions})
    lines = _thresholds(state, cluster, group, topics)
    interval_ms = round(state.config.scan_interval * 1000)
    return {
        "cluster": cluster, "group": group, "hours": hours, "start": start, "end": end,
        "history_enabled": history is not None, "scans": series.scans,
        "bucket_seconds": series.bucket_ms / 1000,
        "gap_ms": round(2.5 * max(series.bucket_ms, interval_ms)),
        "points": series.points(), "thresholds": lines, "incidents": spans,
        "scan_interval_s": state.config.scan_interval,
        "instance": fleet.instance if fleet is not None else None,
    }  # fmt: skip


@router.get(
    "/api/fleet",
    response_model=Fleet,
    responses=errors(e404="not part of a fleet", e503="the fleet view is not read yet"),
)
async def api_fleet(api: Api) -> JSONBytes:
    fleet = api.fleet
    if fleet is None:
        raise HTTPException(404, "this instance runs alone (no coordination: in the config)")
    if not fleet.available:
        raise HTTPException(
            503, f"the fleet view is not available yet ({fleet.unavailable_reason})"
        )
    return JSONBytes(fleet.fleet(api.clock()))


def _read_series(
    root: Path | None, cluster: str, group: str, start: int, end: int, fit: bool
) -> tuple[LagSeries, int]:
    """The group's series from ``start`` to ``end``, and where it starts: with ``fit``, at
    the group's first scan in that range (less a thirtieth of the span, so the first point
    is not on the edge)."""
    if root is None:
        return lag_series(SAMPLE_SCHEMA.empty_table(), start, end), start
    rows = read_group_rows(root, cluster, group, start, end)
    if fit and rows.num_rows:
        first = int(pc.min(rows.column("ts").cast(pa.int64())).as_py())
        start = max(start, first - max(1000, (end - first) // 30))
    return lag_series(rows, start, end), start


def _thresholds(state: ClusterView, cluster: str, group: str, topics: list[str]) -> list[Any]:
    if state.evaluation is None:
        return []
    return thresholds(state.evaluation.evaluator.config, cluster, group, topics)
