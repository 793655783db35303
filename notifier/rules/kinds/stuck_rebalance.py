"""``stuck_rebalance``: the group has been rebalancing for the last N scans."""

from __future__ import annotations

from typing import Annotated, ClassVar, Literal

import numpy as np
from pydantic import Field

from notifier.config.rules import KindRule, RuleBase, WindowSettings
from notifier.rules.kernels import pick, valid_mask
from notifier.rules.kinds.base import (
    Description,
    GroupView,
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
    TUNABLE: ClassVar[tuple[str, ...]] = (*RuleBase.TUNABLE, "samples", "reading_nothing")

    def window_problem(self, window: WindowSettings) -> str | None:
        if self.samples > window.intervals:
            return (
                f"samples {self.samples} exceeds window.intervals {window.intervals}; "
                "it could never fire"
            )
        return None


_REBALANCING = np.array(
    [GROUP_STATE_CODE[s] for s in ("PreparingRebalance", "CompletingRebalance", "Unknown")],
    dtype=np.int8,
)


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
    hit = np.nonzero(np.isin(state[:, -1], _REBALANCING))[0]  # only these can qualify
    if hit.size == 0:
        return out
    width = state.shape[1]
    rebalancing = np.isin(state[hit], _REBALANCING) & valid_mask(count[hit], width)
    not_rebalancing = ~rebalancing
    trailing = np.where(
        not_rebalancing.any(axis=1), np.argmax(not_rebalancing[:, ::-1], axis=1), width
    )
    out[hit] = np.where(trailing >= pick(samples, hit), pick(severity, hit), 0)
    return out


def evaluate(rows: Rows, run: RuleRun) -> Verdict:
    return Verdict(
        stuck_rebalance(
            rows.group_state,
            rows.count,
            run.params["samples"],
            run.severity,
            run.params["reading_nothing"],
            rows.committed,
            rows.log_end,
        )
    )


def describe_group(view: GroupView) -> Description:
    samples = view.rule.samples
    evidence = view.group_evidence()
    evidence.update(group_states=[s["group_state"] for s in view.window], samples=samples)
    message = f"rebalancing for the last {samples} scans or more"
    return Description(view.status, message, evidence)


KIND = RuleKind(
    name="stuck_rebalance",
    model=StuckRebalanceRule,
    params=("samples", "reading_nothing"),
    evaluate=evaluate,
    describe_group=describe_group,
    group_level=every_group,
)
