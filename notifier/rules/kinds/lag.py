"""``lag``: lag in offsets above a threshold, per partition or summed over the group."""

from __future__ import annotations

from typing import Any, ClassVar, Literal

import numpy as np

from notifier.config.base import NonNegativeInt
from notifier.config.rules import Hysteresis, KindRule, RuleBase
from notifier.rules.kernels import SEVERITY_NONE
from notifier.rules.kinds.base import (
    ChartLine,
    Description,
    GroupView,
    PartitionView,
    Rows,
    RuleKind,
    RuleRun,
    Verdict,
    threshold_line,
    with_hysteresis,
)
from notifier.types import Severity


class LagRule(Hysteresis, KindRule):
    kind: Literal["lag"]
    name: str
    severity: Severity = Severity.WARN
    threshold: NonNegativeInt
    clear_below: NonNegativeInt | None = None
    scope: Literal["partition", "group"] = "partition"
    TUNABLE: ClassVar[tuple[str, ...]] = (*RuleBase.TUNABLE, "threshold", "clear_below")


def lag_above(
    lag: np.ndarray, threshold: np.ndarray | int, severity: np.ndarray | int
) -> np.ndarray:
    """Lag (offsets) above the threshold; unknown lag never fires."""
    return np.where((lag >= 0) & (lag > threshold), severity, SEVERITY_NONE).astype(np.int8)


def evaluate(rows: Rows, run: RuleRun) -> Verdict:
    gids = rows.gids
    if run.rule.scope == "group":
        known = np.bincount(gids, weights=rows.lag >= 0, minlength=rows.n_groups)[gids] > 0
        values = np.where(known, rows.total_lag[gids], -1)
    else:
        values = rows.lag
    return Verdict(with_hysteresis(lag_above, values, rows, run))


def describe(view: PartitionView) -> Description:
    threshold = view.rule.threshold
    evidence = view.lag_evidence()
    evidence["threshold"] = threshold
    return Description(view.status, f"lag {view.lag} > {threshold}", evidence)


def describe_group(view: GroupView) -> Description:
    total = view.total_lag
    threshold = view.rule.threshold
    evidence = view.group_evidence()
    evidence.update(total_lag=total, threshold=threshold)
    return Description(view.status, f"group lag {total} > {threshold}", evidence)


def _group_scope(rule: Any) -> bool:
    return bool(rule.scope == "group")


def chart_line(rule: Any) -> ChartLine:
    """On the lag chart, against a partition's lag or the group's total (its ``scope``)."""
    return threshold_line(rule, "lag", rule.scope)


KIND = RuleKind(
    name="lag",
    model=LagRule,
    params=("threshold", "clear_below"),
    evaluate=evaluate,
    describe=describe,
    describe_group=describe_group,
    group_level=_group_scope,
    chart_line=chart_line,
)
