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
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

import numpy as np
from fastapi import HTTPException

from notifier.api.burrow import burrow_point
from notifier.api.sources import ClusterView, CoordinatorView, NotifierView, SilenceView
from notifier.rules import Evaluation, group_without_partitions, not_found
from notifier.rules.results import kept_firing
from notifier.types import Finding, GroupResult, GroupStatus, Incident, Severity


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
    """The group's last result, each partition naming the member that owns it; Burrow's
    OK/complete 0 for a listed group with no partitions; NOTFOUND for a group the cluster
    does not list."""
    evaluation: Evaluation | None = state.evaluation
    now = evaluation.now if evaluation is not None else 0
    if evaluation is not None:
        gid = state.store.group_id(cluster, group)
        if gid is not None and np.any(evaluation.group_ids == gid):
            return evaluation.result_for_gid(gid).attach_owners(state.owners.get(group, {}))
    if group in state.groups:
        return group_without_partitions(cluster, group, now)
    return not_found(cluster, group, now)


def groups_overview(
    state: ClusterView, cluster: str, notifier: NotifierView | None, now_ms: int
) -> list[dict[str, Any]]:
    """Every group of a cluster from the evaluation arrays (per-group results are built only
    for groups a rule fires for, to name their leading finding), with a lag sparkline (the
    group's total lag at each sample of the window), its open incident, whether a silence
    holds its alerts back, and the data's age. The API serves the same rows from its cache
    (:func:`overview_rows`, then :func:`overview_clock_members` per request)."""
    fresh = freshness(state, now_ms)
    incidents = open_incidents(notifier)
    rows = overview_rows(state, cluster, incidents, ActiveSilences(notifier), fresh.stale)
    return [{**row, **overview_clock_members(incident, fresh, now_ms)} for row, incident in rows]


def overview_rows(
    state: ClusterView,
    cluster: str,
    incidents: Mapping[tuple[str, str], Incident],
    silences: ActiveSilences,
    stale: bool,
) -> list[tuple[dict[str, Any], Incident | None]]:
    """:func:`groups_overview`'s rows without what changes with the clock (the open
    incident's summary and the data's age, :func:`overview_clock_members`), each with the
    incident that summary is of: a function of the cluster's last scan, whether its data is
    stale, the open incidents by (cluster, group) and the silences active now
    (:attr:`ActiveSilences.key`)."""
    return joined_rows(cluster, list(scan_rows(state, cluster, stale)), incidents, silences)


ScanRow = tuple[dict[str, Any], list[Finding], bool]
"""What an /api/groups row takes from a scan: its members, the group's findings (to match
silences against), and whether the row shows the group's open incident (a group listed
without partitions does not)."""


def scan_rows(
    state: ClusterView,
    cluster: str,
    stale: bool,
    result_of: Callable[[int, str], GroupResult] | None = None,
) -> Iterator[ScanRow]:
    """:func:`overview_rows` before the open incidents and silences are joined in
    (:func:`joined_rows`), one group at a time; ``result_of(gid, group)`` gives the result of
    a group a rule fires for (to name its leading finding). The scan must stay the cluster's
    last while the rows are read."""
    evaluation: Evaluation | None = state.evaluation
    seen: set[str] = set()
    if evaluation is not None and evaluation.rows.size:
        if result_of is None:
            result_of = lambda gid, _group: evaluation.result_for_gid(gid)  # noqa: E731
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
            fired = sorted(name for name, fired in firing.items() if fired[gid])
            findings = result_of(gid, group).findings if fired else []
            yield (
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
                    "rules": fired,
                    "finding": leading_finding(findings),
                    "lag_history": [int(v) for v in spark[gid]],
                    "group_state": state.groups.get(group, "Unknown"),
                },
                findings,
                True,
            )
    for group in sorted(set(state.groups) - seen):
        yield (
            {
                "cluster": cluster, "group": group, "status": "OK", "complete": 0.0,
                "partial": False, "total_lag": 0, "max_lag_seconds": None, "partitions": 0,
                "rules": [], "finding": None, "lag_history": [],
                "group_state": state.groups[group],
            },
            [],
            False,
        )  # fmt: skip


def joined_rows(
    cluster: str,
    rows: Iterable[ScanRow],
    incidents: Mapping[tuple[str, str], Incident],
    silences: ActiveSilences,
) -> list[tuple[dict[str, Any], Incident | None]]:
    """:func:`scan_rows` with each group's open incident and the silences holding its alerts
    back, each row with the incident it shows. A row's ``status`` is its open incident's (what
    the pager said), the scan's own beside it (:func:`status_members`)."""
    out: list[tuple[dict[str, Any], Incident | None]] = []
    for row, findings, shows_incident in rows:
        group = row["group"]
        incident = incidents.get((cluster, group)) if shows_incident else None
        members = {
            **status_members(row["status"], row["partial"], row["complete"], findings, incident),
            "incident_id": incident.id if incident else None,
            **silences.of(cluster, group, incident, findings),
        }
        out.append(({**row, **members}, incident))
    return out


def status_members(
    evaluated: str,
    partial: bool,
    complete: float,
    findings: list[Finding],
    incident: Incident | None,
) -> dict[str, Any]:
    """The status a person reads first, and why it is not what the evaluation says.

    ``status``: the open incident's, which is what was notified (the last status the gate let
    through), else the evaluation's; ``evaluated_status``: the evaluation's (the last scan whose
    rows are worked out); ``status_reason`` (None when there is nothing to explain):
    ``{"kind", "message"}``, where ``kind`` is

    - ``recovering``: the evaluation is better than the incident, on a partial window (a
      window still filling, or stale data): the gate keeps the incident's status until a
      complete window agrees;
    - ``hold``: the same, the evaluation worse than the incident;
    - ``keep_firing_for``: every rule behind the status has seen its condition clear and keeps
      firing for its ``keep_firing_for``;
    - ``earlier_scan``: the evaluation shown is from an earlier scan than the one that moved
      the incident (the rows of the latest scan are being worked out; ``data_age_seconds``).
    """
    if incident is None:
        return {"status": evaluated, "evaluated_status": evaluated, "status_reason": None}
    status = incident.status.value
    reason: dict[str, str] | None = None
    if evaluated != status:
        if partial:
            recovering = GroupStatus(evaluated).rank < incident.status.rank
            kind = "recovering" if recovering else "hold"
            reason = {"kind": kind, "message": (
                f"evaluated {evaluated} on a partial window ({round(100 * complete)}% complete): "
                f"the incident stays {status} until a complete window agrees"
            )}  # fmt: skip
        else:
            reason = {"kind": "earlier_scan", "message": (
                f"evaluated {evaluated} at an earlier scan than the one that made the incident "
                f"{status}; the next rows agree"
            )}  # fmt: skip
    elif findings and all(kept_firing(f) for f in findings):
        by_rule = {f.rule: f.message for f in findings}
        reason = {
            "kind": "keep_firing_for",
            "message": "; ".join(f"{rule}: {by_rule[rule]}" for rule in sorted(by_rule)),
        }
    return {"status": status, "evaluated_status": evaluated, "status_reason": reason}


_STATUS_WORD_RANK = {"STOP": 3, "STALL": 3, "REWIND": 3, "ERR": 2, "WARN": 1}


def leading_finding(findings: list[Finding]) -> dict[str, Any] | None:
    """The finding a person should read first: the most severe, a named fault (STOP, STALL,
    REWIND) before a plain ERR, then the one firing longest. Its ``status`` is the word the
    table shows, its ``message`` the sentence."""
    if not findings:
        return None
    first = max(
        findings,
        key=lambda f: (
            f.severity is Severity.ERR,
            _STATUS_WORD_RANK.get(f.status, 0),
            -(f.since if f.since is not None else 2**62),
        ),
    )
    return {
        "rule": first.rule, "status": first.status, "severity": first.severity.value,
        "message": first.message, "topic": first.topic, "partition": first.partition,
        "since": first.since, "others": len(findings) - 1,
    }  # fmt: skip


def incident_summary(incident: Incident | None, now_ms: int) -> dict[str, Any] | None:
    """What the table's incident chip shows (delivery state comes from /api/incidents)."""
    if incident is None:
        return None
    return {**incident_facts(incident), "duration_seconds": incident_duration(incident, now_ms)}


def incident_facts(incident: Incident) -> dict[str, Any]:
    """:func:`incident_summary` without what changes with the clock."""
    return {
        "id": incident.id, "opened_at": incident.opened_at, "status": incident.status.value,
        "peak_status": incident.peak_status.value, "silenced": incident.silenced,
    }  # fmt: skip


def incident_duration(incident: Incident, now_ms: int) -> float:
    """How long the incident has been open at ``now_ms``, in seconds (to a tenth)."""
    return round(max(0, now_ms - incident.opened_at) / 1000, 1)


class ActiveSilences:
    """The silences holding alerts back now, matched as the notifier matches them: a group is
    silenced when its open incident is, or when a silence would hold back an incident of the
    group with its current findings (so a silence made before a group fires shows at once)."""

    def __init__(self, notifier: NotifierView | None) -> None:
        self.silences: list[SilenceView] = []
        if notifier is not None:
            now = notifier.clock()
            self.silences = [s for s in notifier.list_silences() if s.active(now)]
        self.key = tuple(s.id for s in self.silences)
        """Which silences are active (a silence changes only by expiring, which takes it out
        of this set): what :meth:`of` answers from, besides its arguments."""

    def of(
        self, cluster: str, group: str, incident: Incident | None, findings: list[Finding]
    ) -> dict[str, Any]:
        """``silenced``, ``silenced_until`` (epoch ms) and ``silence_ids`` of one group."""
        matching: list[SilenceView] = []
        if self.silences:
            probe = incident or Incident(
                id="", cluster=cluster, group=group, opened_at=0, status=GroupStatus.OK,
                peak_status=GroupStatus.OK, findings=findings,
            )  # fmt: skip
            matching = [silence for silence in self.silences if silence.matches(probe)]
        silenced = bool(matching) or bool(incident is not None and incident.silenced)
        return {
            "silenced": silenced,
            "silenced_until": max((s.ends_at for s in matching), default=None),
            "silence_ids": [s.id for s in matching],
        }


def overview_clock_members(
    incident: Incident | None, fresh: Freshness, now_ms: int
) -> dict[str, Any]:
    """What an /api/groups row shows as of ``now_ms``: its open incident's summary (how long
    it has been open) and the data's age."""
    return {
        "incident": incident_summary(incident, now_ms),
        "stale": fresh.stale,
        "data_age_seconds": fresh.age_seconds,
    }


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
    result = group_result(state, cluster, group)
    return {
        **group_evidence(state, cluster, group, fresh, result),
        **group_live_members(
            cluster, group, result, open_incidents(notifier), ActiveSilences(notifier), fresh,
            now_ms,
        ),
    }  # fmt: skip


def group_live_members(
    cluster: str,
    group: str,
    result: GroupResult,
    incidents: Mapping[tuple[str, str], Incident],
    silences: ActiveSilences,
    fresh: Freshness,
    now_ms: int,
) -> dict[str, Any]:
    """What a group's detail shows besides its evidence, as of ``now_ms``: its open incident
    and why its status differs from the evaluation's (``status_reason``, as /api/groups says
    it: :func:`status_members`), the silences holding its alerts back and the data's age."""
    incident = incidents.get((cluster, group))
    seen = as_of(result, fresh)
    reading = status_members(
        seen.status.value, seen.partial, seen.complete, seen.findings, incident
    )
    return {
        "incident_id": incident.id if incident else None,
        "incident": incident_summary(incident, now_ms),
        "status_reason": reading["status_reason"],
        **silences.of(cluster, group, incident, result.findings),
        **fresh.fields(),
    }


def group_evidence(
    state: ClusterView,
    cluster: str,
    group: str,
    fresh: Freshness,
    result: GroupResult | None = None,
    *,
    windows: bool = True,
) -> dict[str, Any]:
    """:func:`group_detail` without what :func:`group_live_members` adds (its incident,
    silences and the data's age), from the group's last ``result`` (looked up when not
    given); raises a 404 for a group the cluster does not list. Without ``windows``, the
    partitions leave out their window, commit ring and LEO table (most of the detail's
    size: the fleet's bulletins leave them to the owner's API)."""
    if result is None:
        result = group_result(state, cluster, group)
    result = as_of(result, fresh)
    if result.status is GroupStatus.NOTFOUND:
        raise HTTPException(404, "cluster or consumer not found")
    store = state.store
    partitions = []
    for p in result.partitions:
        partition = {
            **jsonable(p.to_dict()),
            "owned_by": p.owned_by,
            "status": p.status.value,
            "leo_reset": _leo_reset(state, p.topic, p.partition),
        }
        if windows:
            row = store.row(cluster, group, p.topic, p.partition)
            partition["window"] = store.samples(row) if row is not None else []
            partition["commits"] = (
                [burrow_point(c) for c in store.ring(row)] if row is not None else []
            )
            partition["leo_table"] = (
                [{"log_end_offset": leo, "ts": ts} for leo, ts in store.leo_table(row)]
                if row is not None
                else []
            )
        partitions.append(partition)
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
        "findings": [_with_owner(jsonable(f.to_dict()), result, f) for f in result.findings],
        "partitions": partitions,
        "scan_interval_s": state.config.scan_interval,
        "intervals": store.width,
        "minimum_complete": _minimum_complete(state),
    }


def _with_owner(document: dict[str, Any], result: GroupResult, finding: Finding) -> dict[str, Any]:
    """A finding as the page shows it: where it names a partition, who owns that partition
    (``owned_by``: ``billing-7f9c on 10.2.0.14``, ``""`` when no member does)."""
    partition = result.partition(finding.topic, finding.partition)
    document["owned_by"] = partition.owned_by if partition is not None else ""
    return document


def _minimum_complete(state: ClusterView) -> float | None:
    """The notification gate (rules' ``burrow.minimum_complete``), to explain ``complete``."""
    return None if state.evaluation is None else state.evaluation.evaluator.config.minimum_complete


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


def state_summaries(
    coordinator: CoordinatorView, notifier: NotifierView | None
) -> list[dict[str, Any]]:
    """Each state file the disk refused lately (``/readyz``; the notification store always):
    its path, whether it is written, the error and how many changes wait in memory. A disk
    that refuses writes does not make the service unready — scanning and delivering go on,
    what was decided is kept in memory — but it says so here."""
    out = [health.summary() for health in coordinator.write_health()]
    if notifier is not None:
        store = notifier.metrics().get("store")
        if store is not None:
            out.insert(0, dict(store))
    return out


def cluster_summaries(coordinator: CoordinatorView, now_ms: int) -> list[dict[str, Any]]:
    """Each cluster's scan health and the age of its data (``/api/groups``, ``/readyz``)."""
    return [
        {
            "cluster": name, "down": s.metrics.down,
            "consecutive_failures": s.metrics.consecutive_failures,
            "last_error": s.metrics.last_error, "scan_interval_s": s.config.scan_interval,
            "not_evaluated": [
                {"group": g, "reason": why} for g, why in sorted(s.not_evaluated.items())
            ],
            **freshness(s, now_ms).fields(),
        }
        for name, s in coordinator.clusters.items()
    ]  # fmt: skip
