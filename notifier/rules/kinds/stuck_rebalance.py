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
    TUNABLE: ClassVar[tuple[str, ...]] = (*RuleBase.TUNABLE, "samples")

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
    state: np.ndarray, count: np.ndarray, samples: np.ndarray | int, severity: np.ndarray | int
) -> np.ndarray:
    """The group has been rebalancing (or broker-reported Unknown) for the last N samples."""
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
        stuck_rebalance(rows.group_state, rows.count, run.params["samples"], run.severity)
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
    params=("samples",),
    evaluate=evaluate,
    describe_group=describe_group,
    group_level=every_group,
)
