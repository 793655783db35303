"""``lag_seconds``: how far behind in time (notifier.rules.lagtime) above a threshold."""

from __future__ import annotations

from typing import Any, ClassVar, Literal

import numpy as np

from notifier.config.base import Duration
from notifier.config.rules import Hysteresis, KindRule, RuleBase
from notifier.rules.kernels import SEVERITY_NONE
from notifier.rules.kinds.base import (
    ChartLine,
    Description,
    PartitionView,
    Rows,
    RuleKind,
    RuleRun,
    Verdict,
    human_seconds,
    threshold_line,
    with_hysteresis,
)
from notifier.types import Severity


class LagSecondsRule(Hysteresis, KindRule):
    kind: Literal["lag_seconds"]
    name: str
    severity: Severity = Severity.WARN
    threshold: Duration
    clear_below: Duration | None = None
    TUNABLE: ClassVar[tuple[str, ...]] = (*RuleBase.TUNABLE, "threshold", "clear_below")


def lag_seconds_above(
    lag_seconds: np.ndarray, threshold_s: np.ndarray | float, severity: np.ndarray | int
) -> np.ndarray:
    """Lag in seconds above the threshold; unknown (NaN) is not zero and never fires."""
    with np.errstate(invalid="ignore"):
        hit = lag_seconds > threshold_s
    return np.where(hit, severity, SEVERITY_NONE).astype(np.int8)


def evaluate(rows: Rows, run: RuleRun) -> Verdict:
    return Verdict(with_hysteresis(lag_seconds_above, rows.lag_seconds, rows, run))


def describe(view: PartitionView) -> Description:
    seconds = view.lag_seconds
    threshold = view.rule.threshold
    evidence = view.lag_evidence()
    evidence.update(lag_seconds=seconds, threshold_s=threshold)
    message = f"{human_seconds(seconds)} behind > {human_seconds(threshold)}"
    return Description(view.status, message, evidence)


def chart_line(rule: Any) -> ChartLine:
    """On the lag-in-seconds chart, against each partition's lag in seconds."""
    return threshold_line(rule, "lag_seconds")


KIND = RuleKind(
    name="lag_seconds",
    model=LagSecondsRule,
    params=("threshold", "clear_below"),
    evaluate=evaluate,
    describe=describe,
    chart_line=chart_line,
    sets_slo_wait=True,
)
