"""``consumers_gone``: no members through the window while the lag grows."""

from __future__ import annotations

from typing import ClassVar, Literal

import numpy as np

from notifier.config.rules import KindRule, RuleBase
from notifier.rules.habits import memberless
from notifier.rules.kernels import current_lag, pick, valid_mask
from notifier.rules.kinds.base import (
    Description,
    GroupView,
    Rows,
    RuleKind,
    RuleRun,
    Verdict,
    every_group,
)
from notifier.types import Severity


class ConsumersGoneRule(KindRule):
    """The group has no members through the window while its lag grows."""

    kind: Literal["consumers_gone"]
    name: str
    severity: Severity = Severity.ERR
    TUNABLE: ClassVar[tuple[str, ...]] = RuleBase.TUNABLE


def consumers_gone(
    committed: np.ndarray,
    log_end: np.ndarray,
    members: np.ndarray,
    state: np.ndarray,
    count: np.ndarray,
    severity: np.ndarray | int,
) -> np.ndarray:
    """No members through the whole window while the lag grew from its first to its last
    sample."""
    out = np.zeros(committed.shape[0], dtype=np.int8)
    hit = np.nonzero(memberless(state[:, -1], members[:, -1]))[0]
    if hit.size == 0:
        return out
    width = committed.shape[1]
    n = count[hit]
    valid = valid_mask(n, width)
    gone = memberless(state[hit], members[hit])
    always_gone = np.all(~valid | gone, axis=1) & (n >= 2)
    first = np.clip(width - n.astype(np.int64), 0, width - 1)
    first_lag = current_lag(committed[hit, first], log_end[hit, first])
    last_lag = current_lag(committed[hit, -1], log_end[hit, -1])
    growing = (first_lag >= 0) & (last_lag > first_lag)
    out[hit] = np.where(always_gone & growing, pick(severity, hit), 0)
    return out


def evaluate(rows: Rows, run: RuleRun) -> Verdict:
    return Verdict(
        consumers_gone(
            rows.committed, rows.log_end, rows.members, rows.group_state, rows.count, run.severity
        )
    )


def describe_group(view: GroupView) -> Description:
    evidence = view.group_evidence()
    evidence.update(
        members=[s["members"] for s in view.window], lag=[s["lag"] for s in view.window]
    )
    return Description(view.status, "no members while lag grows", evidence)


KIND = RuleKind(
    name="consumers_gone",
    model=ConsumersGoneRule,
    params=(),
    evaluate=evaluate,
    describe_group=describe_group,
    group_level=every_group,
)
