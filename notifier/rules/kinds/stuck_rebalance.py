"""``stuck_rebalance``: the group has been rebalancing for the last N scans; how the current
rebalance began is this kind's own evidence, held once per group (``e_rebalance_since``,
``e_rebalance_joined``, ``e_settled_members``)."""

from __future__ import annotations

from typing import Annotated, ClassVar, Literal

import numpy as np
from pydantic import Field

from notifier.config.base import Duration
from notifier.config.rules import KindRule, RuleBase, WindowSettings
from notifier.rules.habits import UNSET_TS, ScanTimes, ScanView
from notifier.rules.kernels import SEVERITY_NONE, pick, valid_mask
from notifier.rules.kinds.base import (
    Description,
    GroupView,
    KindEvidence,
    Rows,
    RuleKind,
    RuleRun,
    Verdict,
    every_group,
)
from notifier.types import GROUP_STATE_CODE, Severity


class StuckRebalanceRule(KindRule):
    kind: Literal["stuck_rebalance"]
    name: str
    severity: Severity = Severity.ERR
    samples: Annotated[int, Field(ge=1)] = 6
    reading_nothing: bool = False
    """Only partitions whose committed offset stood still over those samples while records
    arrived: a rolling deploy rebalances often, but its consumers read and commit between."""
    join_wait: Duration = 0.0
    """A rebalance that began when a member joined a group that had members, with the member
    set unchanged since, fires only once it has lasted this long (0: no such grace). The
    classic protocol waits for every member it still lists: a crashed one until its session
    times out (a restarted pod joins beside it), a busy one until the rebalance timeout
    (``max.poll.interval.ms``, 5 min by default), after which the broker drops it. A member
    set that changes meanwhile, or a rebalance begun otherwise, fires after ``samples``."""
    TUNABLE: ClassVar[tuple[str, ...]] = (
        *RuleBase.TUNABLE, "samples", "reading_nothing", "join_wait"
    )  # fmt: skip

    def window_problem(self, window: WindowSettings) -> str | None:
        if self.samples > window.intervals:
            return (
                f"samples {self.samples} exceeds window.intervals {window.intervals}; "
                "it could never fire"
            )
        return None


REBALANCING_STATES = np.array(
    [GROUP_STATE_CODE[s] for s in ("PreparingRebalance", "CompletingRebalance", "Unknown")],
    dtype=np.int8,
)
"""The state codes of a group rebalancing (the embedded broker says ``Unknown`` meanwhile)."""


def follow_rebalance(
    columns: dict[str, np.ndarray], index: slice | np.ndarray, scan: ScanView, times: ScanTimes
) -> None:
    """When the current rebalance began, whether a member joining began it (more members
    listed than when the group last settled, the set unchanged since), and how many members
    the group had when it last settled."""
    rebalancing = np.isin(scan.state, REBALANCING_STATES)
    since = columns["e_rebalance_since"][index]
    settled = columns["e_settled_members"][index]
    begins = rebalancing & (since == UNSET_TS)
    grew = (settled > 0) & (scan.members > settled)
    joined = columns["e_rebalance_joined"][index]
    columns["e_rebalance_joined"][index] = np.where(
        begins, grew, rebalancing & joined & ~scan.member_changed
    )
    columns["e_rebalance_since"][index] = np.where(
        rebalancing, np.where(begins, scan.ts, since), UNSET_TS
    )
    columns["e_settled_members"][index] = np.where(rebalancing, settled, scan.members)


def waiting_for_listed_members(
    now_ms: int, since: np.ndarray, joined: np.ndarray, join_wait_ms: np.ndarray | float
) -> np.ndarray:
    """Rows in a rebalance a joining member began, with the member set unchanged since, for
    less than ``join_wait``: the group waits for a member it still lists (a dead one's session,
    a busy one's rebalance timeout)."""
    waiting: np.ndarray = joined & (since != UNSET_TS) & (now_ms - since < join_wait_ms)
    return waiting


def stuck_rebalance(
    state: np.ndarray,
    count: np.ndarray,
    samples: np.ndarray | int,
    severity: np.ndarray | int,
    reading_nothing: np.ndarray | float = 0.0,
    committed: np.ndarray | None = None,
    log_end: np.ndarray | None = None,
) -> np.ndarray:
    """The group has been rebalancing (or broker-reported Unknown) for the last N samples;
    with ``reading_nothing``, only rows whose committed offset stood still over those samples
    while records arrived."""
    out = _rebalancing_for(state, count, samples, severity)
    if committed is None or log_end is None or not np.any(np.asarray(reading_nothing) > 0):
        return out
    hit = np.nonzero(out)[0]
    if hit.size:
        width = state.shape[1]
        back = np.clip(width - np.asarray(pick(samples, hit), dtype=np.int64), 0, width - 1)
        still = (committed[hit, -1] == committed[hit, back]) & (
            log_end[hit, -1] > log_end[hit, back]
        )
        applies = np.asarray(pick(reading_nothing, hit)) > 0
        out[hit] = np.where(~applies | still, out[hit], 0)
    return out


def _rebalancing_for(
    state: np.ndarray, count: np.ndarray, samples: np.ndarray | int, severity: np.ndarray | int
) -> np.ndarray:
    out = np.zeros(state.shape[0], dtype=np.int8)
    hit = np.nonzero(np.isin(state[:, -1], REBALANCING_STATES))[0]  # only these can qualify
    if hit.size == 0:
        return out
    width = state.shape[1]
    rebalancing = np.isin(state[hit], REBALANCING_STATES) & valid_mask(count[hit], width)
    not_rebalancing = ~rebalancing
    trailing = np.where(
        not_rebalancing.any(axis=1), np.argmax(not_rebalancing[:, ::-1], axis=1), width
    )
    out[hit] = np.where(trailing >= pick(samples, hit), pick(severity, hit), 0)
    return out


def evaluate(rows: Rows, run: RuleRun) -> Verdict:
    out = stuck_rebalance(
        rows.group_state,
        rows.count,
        run.params["samples"],
        run.severity,
        run.params["reading_nothing"],
        rows.committed,
        rows.log_end,
    )
    join_wait_s = np.asarray(run.params["join_wait"])
    if np.any(out) and np.any(join_wait_s > 0):
        evidence = rows.store.evidence
        waiting = waiting_for_listed_members(
            rows.now,
            evidence["e_rebalance_since"][rows.index],
            evidence["e_rebalance_joined"][rows.index],
            join_wait_s * 1000.0,
        )
        out = np.where(waiting, SEVERITY_NONE, out).astype(np.int8)
    return Verdict(out)


def describe_group(view: GroupView) -> Description:
    samples = view.rule.samples
    evidence = view.group_evidence()
    evidence.update(group_states=[s["group_state"] for s in view.window], samples=samples)
    message = f"rebalancing for the last {samples} scans or more"
    return Description(view.status, message, evidence)


KIND = RuleKind(
    name="stuck_rebalance",
    model=StuckRebalanceRule,
    params=("samples", "reading_nothing", "join_wait"),
    evaluate=evaluate,
    describe_group=describe_group,
    group_level=every_group,
    evidence=KindEvidence(
        columns=(
            ("e_rebalance_since", np.int64, UNSET_TS),
            ("e_rebalance_joined", np.bool_, False),
            ("e_settled_members", np.int32, 0),
        ),
        update=follow_rebalance,
        per_group=True,
    ),
)
