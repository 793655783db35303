"""Incidents: one per (cluster, group), from its first transition above OK until it recovers.

:class:`IncidentBook` turns transitions into :class:`IncidentChange` values (opened, escalated,
updated, closed) and keeps cluster-down incidents (group :data:`CLUSTER_GROUP`) apart. Ids are
deterministic, so the backtest and a restart see the same ones.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Any, Literal

from notifier.types import Finding, GroupResult, GroupStatus, Incident, Severity, Transition

CLUSTER_GROUP = "*"
"""The ``group`` of a cluster-down incident (``prod/*``): one alert standing for every group."""
MAX_INCIDENT_FINDINGS = 200


def incident_id(cluster: str, group: str, opened_at: int) -> str:
    """Stable and deterministic (the backtest replays the same ids): a hash of the key and the
    opening time. Used as PagerDuty's dedup_key and the e-mail thread id."""
    return hashlib.blake2b(
        f"{cluster}\x00{group}\x00{opened_at}".encode(), digest_size=16
    ).hexdigest()


@dataclass(slots=True)
class IncidentChange:
    """What a transition did to an incident: ``opened``, ``escalated``, ``updated`` (same or
    lower status, new findings) or ``closed``."""

    kind: Literal["opened", "escalated", "updated", "closed"]
    incident: Incident
    result: GroupResult | None


def _finding_key(f: Finding) -> tuple[Any, ...]:
    return (f.rule, f.kind, f.topic, f.partition)


class IncidentBook:
    """One incident per (cluster, group): opens on the first transition above OK, escalates
    WARN→ERR (``peak_status`` keeps the worst), closes when the group is OK again or gone
    (``close_reason``: ``recovered``, ``gone``, or the transition's own reason: ``removed``
    for a group forgotten through the API).

    ``findings`` accumulate over the incident's life (the latest version of each
    rule/topic/partition, in order of first appearance). Cluster-down incidents
    (group :data:`CLUSTER_GROUP`) are kept apart so no real group can collide with them.
    """

    def __init__(self) -> None:
        self.open: dict[tuple[str, str], Incident] = {}
        self.clusters: dict[str, Incident] = {}
        self.results: dict[str, GroupResult | None] = {}

    def apply(self, transition: Transition) -> IncidentChange | None:
        key = transition.key
        incident = self.open.get(key)
        result = transition.result
        current = transition.current
        if transition.gone or current.rank <= GroupStatus.OK.rank:
            if incident is None:
                return None
            del self.open[key]
            incident.closed_at = transition.at
            incident.status = current
            gone = transition.gone or current is GroupStatus.NOTFOUND
            incident.close_reason = transition.reason or ("gone" if gone else "recovered")
            self.results[incident.id] = result
            return IncidentChange("closed", incident, result)
        findings = list(result.findings) if result is not None else []
        if incident is None:
            incident = Incident(
                id=incident_id(transition.cluster, transition.group, transition.at),
                cluster=transition.cluster,
                group=transition.group,
                opened_at=transition.at,
                status=current,
                peak_status=current,
                findings=findings[:MAX_INCIDENT_FINDINGS],
            )
            self.open[key] = incident
            self.results[incident.id] = result
            return IncidentChange("opened", incident, result)
        previous = incident.status
        incident.status = current
        if current.rank > incident.peak_status.rank:
            incident.peak_status = current
        self._merge(incident, findings)
        self.results[incident.id] = result
        kind: Literal["escalated", "updated"] = (
            "escalated" if current.rank > previous.rank else "updated"
        )
        return IncidentChange(kind, incident, result)

    @staticmethod
    def _merge(incident: Incident, findings: list[Finding]) -> None:
        if not findings:
            return
        index = {_finding_key(f): i for i, f in enumerate(incident.findings)}
        for finding in findings:
            at = index.get(_finding_key(finding))
            if at is not None:
                incident.findings[at] = finding
            elif len(incident.findings) < MAX_INCIDENT_FINDINGS:
                index[_finding_key(finding)] = len(incident.findings)
                incident.findings.append(finding)

    def cluster_down(self, cluster: str, now: int, reason: str = "") -> IncidentChange | None:
        """Open the cluster's incident (None if it is already down)."""
        if cluster in self.clusters:
            return None
        message = reason or "the cluster cannot be scanned"
        incident = Incident(
            id=incident_id(cluster, CLUSTER_GROUP, now),
            cluster=cluster,
            group=CLUSTER_GROUP,
            opened_at=now,
            status=GroupStatus.ERR,
            peak_status=GroupStatus.ERR,
            findings=[
                Finding(
                    rule="cluster_down",
                    kind="cluster_down",
                    severity=Severity.ERR,
                    status="ERR",
                    message=f"{message}; alerts for its groups are muted until it is back",
                    evidence={"reason": message},
                    since=now,
                )
            ],
        )
        self.clusters[cluster] = incident
        self.results[incident.id] = None
        return IncidentChange("opened", incident, None)

    def cluster_up(
        self, cluster: str, now: int, reason: str = "cluster reachable again"
    ) -> IncidentChange | None:
        incident = self.clusters.pop(cluster, None)
        if incident is None:
            return None
        incident.closed_at = now
        incident.status = GroupStatus.OK
        incident.close_reason = reason
        return IncidentChange("closed", incident, None)

    def restore(self, incident: Incident, result: GroupResult | None, kind: str) -> None:
        """Put back an incident loaded from the store (open ones become current again)."""
        self.results[incident.id] = result
        if incident.closed_at is not None:
            return
        if kind == "cluster":
            self.clusters[incident.cluster] = incident
        else:
            self.open[(incident.cluster, incident.group)] = incident
