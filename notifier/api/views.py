"""The /api JSON the status page reads: every group of a cluster at a glance, one group with
its evidence, incidents, and each cluster's scan health.

Built from the coordinator's last evaluation of each cluster (numpy arrays, read in bulk for
the overview) and, when notifications are configured, the notifier's open incidents. Every answer
says how old its data is (:class:`Freshness`): during an outage the last verdicts stay visible,
marked stale, with ``complete`` shrunk to the part of the window the scans still cover.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

import numpy as np
from fastapi import HTTPException

from notifier.api.burrow import burrow_point
from notifier.api.sources import ClusterView, CoordinatorView, NotifierView
from notifier.rules import Evaluation, group_without_partitions, not_found
from notifier.types import GroupResult, GroupStatus, Incident


@dataclass(frozen=True, slots=True)
class Freshness:
    """How old a cluster's data is when a request reads it."""

    last_scan: int | None
    """When the last successful scan observed the cluster (epoch ms); None: never."""
    age_seconds: float | None
    stale: bool
    """No successful scan within the last few intervals (the test readiness uses)."""
    coverage: float
    """The share of a window the data still covers as of now: 1.0 unless stale, then less
    by one interval for each scan interval since the last successful scan."""

    def fields(self) -> dict[str, Any]:
        """What every answer carries."""
        return {"last_scan": self.last_scan, "data_age_seconds": self.age_seconds,
                "stale": self.stale}  # fmt: skip


def freshness(state: ClusterView, now_ms: int) -> Freshness:
    """The age of a cluster's data at ``now_ms``."""
    last = state.metrics.last_success_ms
    stale = state.stale(now_ms)
    if last is None:
        return Freshness(None, None, stale, 0.0)
    age_ms = max(0, now_ms - last)
    coverage = 1.0
    if stale:
        missed = age_ms // max(1, round(state.config.scan_interval * 1000))
        coverage = max(0.0, 1.0 - missed / state.store.width)
    return Freshness(last, round(age_ms / 1000, 1), stale, coverage)


def as_of(result: GroupResult, fresh: Freshness) -> GroupResult:
    """``result`` as it stands when it is read. Stale data keeps its verdict, but its windows
    no longer reach the present: each partition's ``complete`` (ours and Burrow's) shrinks to
    the window's share the data covers, the group's follows (the share of partitions still
    complete), and the result is partial."""
    if not fresh.stale or not result.partitions:
        return result
    factor = fresh.coverage
    scaled = {
        id(p): dataclasses.replace(
            p, complete=p.complete * factor, burrow_complete=p.burrow_complete * factor
        )
        for p in result.partitions
    }
    partitions = list(scaled.values())
    count = len(partitions)
    return dataclasses.replace(
        result,
        partitions=partitions,
        complete=sum(p.complete >= 1.0 for p in partitions) / count,
        burrow_complete=sum(p.burrow_complete >= 1.0 for p in partitions) / count,
        partial=True,
        max_lag=None if result.max_lag is None else scaled[id(result.max_lag)],
    )


def group_result(state: ClusterView, cluster: str, group: str) -> GroupResult:
    """The group's last result; Burrow's OK/complete 0 for a listed group with no partitions;
    NOTFOUND for a group the cluster does not list."""
    evaluation: Evaluation | None = state.evaluation
    now = evaluation.now if evaluation is not None else 0
    if evaluation is not None:
        gid = state.store.group_id(cluster, group)
        if gid is not None and np.any(evaluation.group_ids == gid):
            return evaluation.result_for_gid(gid)
    if group in state.groups:
        return group_without_partitions(cluster, group, now)
    return not_found(cluster, group, now)


def groups_overview(
    state: ClusterView, cluster: str, notifier: NotifierView | None, now_ms: int
) -> list[dict[str, Any]]:
    """Every group of a cluster from the evaluation arrays (no per-group objects built), with
    a lag sparkline (the group's total lag at each sample of the window) and the data's age."""
    fresh = freshness(state, now_ms)
    age = {"stale": fresh.stale, "data_age_seconds": fresh.age_seconds}
    rows = overview_rows(state, cluster, open_incidents(notifier), fresh.stale)
    return [{**row, **age} for row in rows]


def overview_rows(
    state: ClusterView,
    cluster: str,
    incidents: Mapping[tuple[str, str], Incident],
    stale: bool,
) -> list[dict[str, Any]]:
    """:func:`groups_overview` without the data's age (the members every row ends with), from
    the open incidents by (cluster, group) and whether the data is stale."""
    evaluation: Evaluation | None = state.evaluation
    out: list[dict[str, Any]] = []
    seen: set[str] = set()
    if evaluation is not None and evaluation.rows.size:
        store = state.store
        rows = evaluation.rows
        gids = evaluation.gids
        n_groups = len(store.group_key)
        committed = store.s_committed[rows]
        leo = store.s_leo[rows]
        lag2d = np.where(committed >= 0, np.maximum(leo - committed, 0), 0)
        spark = np.stack(
            [
                np.bincount(gids, weights=lag2d[:, j], minlength=n_groups)
                for j in range(store.width)
            ],
            axis=1,
        )
        counts = np.bincount(gids, minlength=n_groups)
        firing = {name: fired for name, fired in evaluation.group_fired.items() if fired.any()}
        for gid in evaluation.group_ids.tolist():
            _, group = store.group_key_of(gid)
            seen.add(group)
            seconds = float(evaluation.group_max_lag_seconds[gid])
            incident = incidents.get((cluster, group))
            out.append(
                {
                    "cluster": cluster,
                    "group": group,
                    "status": evaluation.status_of(gid).value,
                    # Stale: no window covers the present, so no group is complete.
                    "complete": 0.0 if stale else float(evaluation.group_complete[gid]),
                    "partial": stale or bool(evaluation.group_partial[gid]),
                    "total_lag": int(evaluation.group_total_lag[gid]),
                    "max_lag_seconds": None if math.isnan(seconds) else round(seconds, 1),
                    "partitions": int(counts[gid]),
                    "rules": sorted(name for name, fired in firing.items() if fired[gid]),
                    "lag_history": [int(v) for v in spark[gid]],
                    "incident_id": incident.id if incident else None,
                    "silenced": bool(incident.silenced) if incident else False,
                    "group_state": state.groups.get(group, "Unknown"),
                }
            )
    for group in sorted(set(state.groups) - seen):
        out.append(
            {
                "cluster": cluster, "group": group, "status": "OK", "complete": 0.0,
                "partial": False, "total_lag": 0, "max_lag_seconds": None, "partitions": 0,
                "rules": [], "lag_history": [], "incident_id": None, "silenced": False,
                "group_state": state.groups[group],
            }
        )  # fmt: skip
    return out


def open_incidents(notifier: NotifierView | None) -> Mapping[tuple[str, str], Incident]:
    """The notifier's open incidents by (cluster, group), ``silenced`` as of now (the same
    mapping object as long as they stay the same)."""
    if notifier is None:
        return _NO_INCIDENTS
    return notifier.open_incidents()


_NO_INCIDENTS: Mapping[tuple[str, str], Incident] = MappingProxyType({})


def group_detail(
    state: ClusterView, cluster: str, group: str, notifier: NotifierView | None, now_ms: int
) -> dict[str, Any]:
    """One group with its evidence: each partition's sample window, commit ring and LEO
    table (and when its log-end offset last went backwards), and the findings."""
    fresh = freshness(state, now_ms)
    incident = open_incidents(notifier).get((cluster, group))
    return {
        **group_evidence(state, cluster, group, fresh),
        "incident_id": incident.id if incident else None,
        "silenced": bool(incident.silenced) if incident else False,
        **fresh.fields(),
    }


def group_evidence(
    state: ClusterView,
    cluster: str,
    group: str,
    fresh: Freshness,
    result: GroupResult | None = None,
) -> dict[str, Any]:
    """:func:`group_detail` without its incident and the data's age (the members it ends
    with), from the group's last ``result`` (looked up when not given); raises a 404 for a
    group the cluster does not list."""
    if result is None:
        result = group_result(state, cluster, group)
    result = as_of(result, fresh)
    if result.status is GroupStatus.NOTFOUND:
        raise HTTPException(404, "cluster or consumer not found")
    store = state.store
    partitions = []
    for p in result.partitions:
        row = store.row(cluster, group, p.topic, p.partition)
        partitions.append(
            {
                **jsonable(p.to_dict()),
                "status": p.status.value,
                "window": store.samples(row) if row is not None else [],
                "commits": [burrow_point(c) for c in store.ring(row)] if row is not None else [],
                "leo_table": [{"log_end_offset": leo, "ts": ts} for leo, ts in store.leo_table(row)]
                if row is not None
                else [],
                "leo_reset": _leo_reset(state, p.topic, p.partition),
            }
        )
    return {
        "cluster": cluster,
        "group": group,
        "status": result.status.value,
        "complete": result.complete,
        "burrow_complete": result.burrow_complete,
        "partial": result.partial,
        "evaluated_at": result.evaluated_at,
        "total_lag": result.total_lag,
        "max_lag_seconds": result.max_lag_seconds,
        "group_state": result.group_state,
        "members": result.members,
        "findings": [jsonable(f.to_dict()) for f in result.findings],
        "partitions": partitions,
    }


def _leo_reset(state: ClusterView, topic: str, partition: int) -> dict[str, Any] | None:
    reset = state.leo_resets.get((topic, partition))
    return None if reset is None else reset.to_dict()


def jsonable(value: Any) -> Any:
    """``value`` with NaN and infinities as None, numpy scalars as Python's, enums as values."""
    if isinstance(value, dict):
        return {k: jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [jsonable(v) for v in value]
    if isinstance(value, float) and (math.isnan(value) or math.isinf(value)):
        return None
    if isinstance(value, np.generic):
        return value.item()
    if hasattr(value, "value") and isinstance(getattr(value, "value", None), str):
        return value.value
    return value


def incident_view(incident: Incident) -> dict[str, Any]:
    """An incident as ``/api/incidents`` lists it."""
    return {
        "id": incident.id, "cluster": incident.cluster, "group": incident.group,
        "status": incident.status, "peak_status": incident.peak_status,
        "opened_at": incident.opened_at, "closed_at": incident.closed_at,
        "close_reason": incident.close_reason, "silenced": incident.silenced,
        "findings": [f.to_dict() for f in incident.findings],
    }  # fmt: skip


def history_summary(coordinator: CoordinatorView) -> dict[str, Any] | None:
    """Whether the history is being written (``/readyz``): a failing history does not make
    the service unready (scanning and notifying go on), but it says so here."""
    history = coordinator.history
    if history is None:
        return None
    return {
        "writing": not history.failing,
        "failing_since": history.failing_since_ms,
        "error": history.last_error_text if history.failing else None,
        "errors": history.errors,
        "queued_rows": history.queued_rows,
        "dropped_rows": history.dropped_rows,
    }


def cluster_summaries(coordinator: CoordinatorView, now_ms: int) -> list[dict[str, Any]]:
    """Each cluster's scan health and the age of its data (``/api/groups``, ``/readyz``)."""
    return [
        {
            "cluster": name, "down": s.metrics.down,
            "consecutive_failures": s.metrics.consecutive_failures,
            "last_error": s.metrics.last_error, "scan_interval_s": s.config.scan_interval,
            **freshness(s, now_ms).fields(),
        }
        for name, s in coordinator.clusters.items()
    ]  # fmt: skip
