"""``retention``: records lost to retention, or about to be."""

from __future__ import annotations

from typing import ClassVar, Literal

import numpy as np

from notifier.config.base import Fraction
from notifier.config.rules import KindRule, RuleBase
from notifier.rules.kernels import SEVERITY_NONE, SEVERITY_WARN
from notifier.rules.kinds.base import (
    Description,
    PartitionView,
    Rows,
    RuleKind,
    RuleRun,
    Verdict,
)
from notifier.types import Severity


class RetentionRule(KindRule):
    """ERR when records were already lost (committed < log-start); WARN when the committed
    offset is within ``warn_fraction`` of the retained range from log-start."""

    kind: Literal["retention"]
    name: str
    severity: Severity = Severity.ERR
    warn_fraction: Fraction = 0.1
    TUNABLE: ClassVar[tuple[str, ...]] = (*RuleBase.TUNABLE, "warn_fraction")


def retention_risk(
    committed: np.ndarray,
    log_end: np.ndarray,
    log_start: np.ndarray,
    warn_fraction: np.ndarray | float,
    severity: np.ndarray | int,
) -> np.ndarray:
    """ERR-level (``severity``) when committed < log-start: records the group still had to read
    were deleted. WARN when the committed offset is within ``warn_fraction`` of the retained
    range from log-start: the next retention pass may delete them."""
    known = (committed >= 0) & (log_start >= 0) & (log_end > committed)
    lost = known & (committed < log_start)
    retained = np.maximum(log_end - log_start, 0)
    near = known & ~lost & ((committed - log_start) < warn_fraction * retained)
    out = np.where(lost, severity, SEVERITY_NONE)
    return np.where(near, SEVERITY_WARN, out).astype(np.int8)


def evaluate(rows: Rows, run: RuleRun) -> Verdict:
    return Verdict(
        retention_risk(
            rows.latest_committed,
            rows.latest_leo,
            rows.store.latest_log_start[rows.index],
            run.params["warn_fraction"],
            run.severity,
        )
    )


def describe(view: PartitionView) -> Description:
    last = view.window[-1]
    evidence = {
        "committed_offset": last["committed_offset"],
        "log_start_offset": last["log_start_offset"],
        "log_end_offset": last["log_end_offset"],
        "warn_fraction": view.rule.warn_fraction,
    }
    if last["committed_offset"] < last["log_start_offset"]:
        lost = last["log_start_offset"] - last["committed_offset"]
        message = f"{lost} records deleted by retention before the group read them"
    else:
        message = "committed offset close to the retention edge: records about to be lost"
    return Description(view.status, message, evidence)


KIND = RuleKind(
    name="retention",
    model=RetentionRule,
    params=("warn_fraction",),
    evaluate=evaluate,
    describe=describe,
)
