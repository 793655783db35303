"""An evaluation's arrays and the group results built from them, on demand.

:class:`Evaluation` covers every window evaluated at one moment and each group's roll-up; a
:class:`~notifier.types.GroupResult` (partitions, findings, evidence) is built only for the
groups someone asks about (the API, a transition, a test). Each finding's status, sentence and
evidence come from its rule's kind (``describe`` / ``describe_group`` in
:mod:`notifier.rules.kinds`); what is the same for every kind (a rule held by
``keep_firing_for``, one finding per partition or per group) is here.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

from notifier.rules import kernels as kernels
from notifier.rules.kernels import SEVERITY_ERR, SEVERITY_WARN
from notifier.rules.kinds.base import SEVERITY_NAME, GroupView, PartitionView
from notifier.rules.settings import RuleBinding
from notifier.rules.store import NULL, WindowStore
from notifier.types import (
    GROUP_STATES,
    PARTITION_STATUS_CODES,
    Finding,
    GroupResult,
    GroupStatus,
    PartitionResult,
    Severity,
)

if TYPE_CHECKING:
    from notifier.rules.evaluate import Evaluator


@dataclass
class Evaluation:
    """Every window's outcome at one moment, and each group's roll-up."""

    evaluator: Evaluator
    now: int
    rows: np.ndarray
    gids: np.ndarray
    status: np.ndarray
    complete: np.ndarray
    burrow_complete: np.ndarray
    current_lag: np.ndarray
    lag_seconds: np.ndarray
    burrow: kernels.BurrowOutcome
    row_severity: dict[str, np.ndarray]
    group_ids: np.ndarray
    group_status: np.ndarray
    group_partial: np.ndarray
    group_ungated_status: np.ndarray
    """Per group: its status from the rules whose kind pages from partial windows alone (a
    rewind): what the complete-flag gate lets a partial group's status rise to."""
    group_complete: np.ndarray
    group_burrow_complete: np.ndarray
    group_total_lag: np.ndarray
    group_max_lag_seconds: np.ndarray
    group_fired: dict[str, np.ndarray]
    detail: dict[str, np.ndarray] = field(default_factory=dict)
    """Per rule whose kind gives one (``Verdict.detail``) and row: a code its finding text
    reads (``progress``: kernels.STALL, kernels.STOP or 0)."""
    usual_wait_ms: np.ndarray = field(default_factory=lambda: np.zeros(0))
    """Per row: its group's usual wait before the offset moves (``WindowStore.usual_wait_ms``)."""
    waits_learned: np.ndarray = field(default_factory=lambda: np.zeros(0))
    """Per row: how many waits of its group that was learned from."""
    _order: np.ndarray | None = field(default=None, repr=False)
    _starts: np.ndarray | None = field(default=None, repr=False)

    def __len__(self) -> int:
        return int(self.group_ids.size)

    def keys(self) -> list[tuple[str, str]]:
        store = self.evaluator.store
        return [store.group_key[g] for g in self.group_ids.tolist()]

    def status_of(self, gid: int) -> GroupStatus:
        return GroupStatus.from_rank(int(self.group_status[gid]))

    def ungated_status_of(self, gid: int) -> GroupStatus:
        """What the complete-flag gate lets a partial group's status rise to."""
        return GroupStatus.from_rank(int(self.group_ungated_status[gid]))

    def results(self) -> Iterator[GroupResult]:
        for gid in self.group_ids.tolist():
            yield self.result_for_gid(gid)

    def result(self, cluster: str, group: str) -> GroupResult:
        gid = self.evaluator.store.group_id(cluster, group)
        if gid is None or not np.any(self.group_ids == gid):
            return not_found(cluster, group, self.now)
        return self.result_for_gid(gid)

    def _rows_of(self, gid: int) -> np.ndarray:
        if self._order is None:
            self._order = np.argsort(self.gids, kind="stable")
            self._sorted = self.gids[self._order]
        lo = np.searchsorted(self._sorted, gid, side="left")
        hi = np.searchsorted(self._sorted, gid, side="right")
        return self._order[lo:hi]

    def result_for_gid(self, gid: int, ungated: bool = False) -> GroupResult:
        """Build the full result (partitions, findings, evidence) of one group; ``ungated``:
        only what passes the complete-flag gate of a partial group (``group_ungated_status``
        and its rules' findings)."""
        ev = self.evaluator
        store = ev.store
        cluster, group = store.group_key_of(gid)
        local = self._rows_of(gid)
        local = local[
            np.lexsort((store.row_partition[self.rows[local]], _topics(store, self.rows[local])))
        ]
        partitions = [self._partition(i) for i in local.tolist()]
        findings: list[Finding] = []
        for binding in ev.bindings:
            fired = int(self.group_fired[binding.name][gid])
            if ungated and not binding.kind.pages_from_partial_windows:
                continue
            if fired:
                findings.extend(self._findings(binding, gid, local, fired))
        known = [p for p in partitions if p.current_lag is not None]
        max_lag = max(known, key=lambda p: p.current_lag or 0) if known else None
        newest = int(self.rows[local[-1]]) if local.size else None
        max_seconds = float(self.group_max_lag_seconds[gid])
        return GroupResult(
            cluster=cluster,
            group=group,
            status=self.ungated_status_of(gid) if ungated else self.status_of(gid),
            complete=float(self.group_complete[gid]),
            burrow_complete=float(self.group_burrow_complete[gid]),
            partial=bool(self.group_partial[gid]),
            evaluated_at=self.now,
            partitions=partitions,
            findings=findings,
            total_lag=int(self.group_total_lag[gid]),
            max_lag=max_lag,
            max_lag_seconds=None if math.isnan(max_seconds) else max_seconds,
            group_state=GROUP_STATES[int(store.s_state[newest, -1])]
            if newest is not None
            else "Unknown",
            members=int(store.s_members[newest, -1]) if newest is not None else 0,
        )

    def _partition(self, i: int) -> PartitionResult:
        store = self.evaluator.store
        row = int(self.rows[i])
        _, _, topic, partition = store.row_key_of(row)
        ring = store.ring(row)
        committed = int(store.s_committed[row, -1])
        log_start = int(store.s_log_start[row, -1])
        lag = int(self.current_lag[i])
        seconds = float(self.lag_seconds[i])
        return PartitionResult(
            topic=topic,
            partition=partition,
            status=PARTITION_STATUS_CODES[int(self.status[i])],
            complete=float(self.complete[i]),
            burrow_complete=float(self.burrow_complete[i]),
            committed_offset=None if committed == NULL else committed,
            log_end_offset=int(store.s_leo[row, -1]),
            log_start_offset=None if log_start == NULL else log_start,
            current_lag=None if lag < 0 else lag,
            lag_seconds=None if math.isnan(seconds) else seconds,
            start=ring[0] if ring else None,
            end=ring[-1] if ring else None,
        )

    def _findings(
        self, binding: RuleBinding, gid: int, local: np.ndarray, fired: int
    ) -> list[Finding]:
        severity = Severity.WARN if fired == SEVERITY_WARN else Severity.ERR
        row_sev = self.row_severity[binding.name][local]
        state = self.evaluator.state[binding.name]
        since = int(state.pending_since[gid])
        if not row_sev.any():
            cleared = int(state.last_true[gid])
            return [
                Finding(
                    rule=binding.name,
                    kind=binding.kind.name,
                    severity=severity,
                    status=SEVERITY_NAME[fired],
                    message=(
                        f"condition cleared; keeps firing for "
                        f"{'up to ' if binding.rule.keep_firing_capped else ''}"
                        f"{binding.rule.keep_firing_for:g}s after it last held (keep_firing_for"
                        f"{', no longer than it fired' if binding.rule.keep_firing_capped else ''})"
                    ),
                    evidence={"last_true": cleared},
                    since=None,
                )
            ]
        hits = local[row_sev > 0]
        if binding.kind.group_level(binding.rule):
            return [self._group_finding(binding, gid, hits, severity, since)]
        return [self._partition_finding(binding, int(i), severity, since) for i in hits.tolist()]

    def _partition_finding(
        self, binding: RuleBinding, i: int, severity: Severity, since: int
    ) -> Finding:
        store = self.evaluator.store
        row = int(self.rows[i])
        _, _, topic, partition = store.row_key_of(row)
        code = int(self.row_severity[binding.name][i])
        view = PartitionView(
            evaluation=self,
            rule_name=binding.name,
            rule=binding.rule,
            i=i,
            row=row,
            status=SEVERITY_NAME.get(code, "OK"),
            window=store.samples(row),
        )
        status, message, evidence = binding.kind.describe(view)
        return Finding(
            rule=binding.name,
            kind=binding.kind.name,
            severity=Severity.ERR if code == SEVERITY_ERR else Severity.WARN,
            status=status,
            topic=topic,
            partition=partition,
            message=message,
            evidence=evidence,
            since=since if since >= 0 else None,
        )

    def _group_finding(
        self, binding: RuleBinding, gid: int, hits: np.ndarray, severity: Severity, since: int
    ) -> Finding:
        store = self.evaluator.store
        row = int(self.rows[hits[0]])
        view = GroupView(
            evaluation=self,
            rule_name=binding.name,
            rule=binding.rule,
            gid=gid,
            row=row,
            status=SEVERITY_NAME[int(self.group_fired[binding.name][gid])],
            window=store.samples(row),
            partitions=[
                "{}/{}".format(*store.row_key_of(int(self.rows[i]))[2:]) for i in hits.tolist()
            ],
        )
        status, message, evidence = binding.kind.describe_group(view)
        return Finding(
            rule=binding.name,
            kind=binding.kind.name,
            severity=severity,
            status=status,
            message=message,
            evidence=evidence,
            since=since if since >= 0 else None,
        )


def _topics(store: WindowStore, rows: np.ndarray) -> list[str]:
    return [store.row_key_of(int(r))[2] for r in rows]


def kept_firing(finding: Finding) -> bool:
    """Whether ``finding`` is a rule whose condition has cleared but that keeps firing for its
    ``keep_firing_for`` (:class:`Evaluation` gives it as evidence when the condition last held)."""
    return finding.since is None and set(finding.evidence) == {"last_true"}


def not_found(cluster: str, group: str, now: int) -> GroupResult:
    """Burrow's answer for an unknown group: NOTFOUND, complete 1.0, no partitions."""
    return GroupResult(
        cluster=cluster,
        group=group,
        status=GroupStatus.NOTFOUND,
        complete=1.0,
        burrow_complete=1.0,
        partial=False,
        evaluated_at=now,
    )


def group_without_partitions(cluster: str, group: str, now: int) -> GroupResult:
    """A group the cluster lists with no partitions (its topics were deleted): Burrow answers
    OK with complete 0."""
    return GroupResult(
        cluster=cluster,
        group=group,
        status=GroupStatus.OK,
        complete=0.0,
        burrow_complete=0.0,
        partial=False,
        evaluated_at=now,
    )
