"""``rewind``: the committed offset went backwards; the offset it left behind is this kind's own
evidence (``e_rewind_from``), kept until the consumer is past it again."""

from __future__ import annotations

from typing import ClassVar, Literal

import numpy as np

from notifier.config.rules import KindRule, RuleBase
from notifier.rules.habits import NULL, ScanTimes, ScanView, log_started_over, offset_moved
from notifier.rules.kernels import SEVERITY_NONE
from notifier.rules.kinds.base import (
    Description,
    KindEvidence,
    PartitionView,
    Rows,
    RuleKind,
    RuleRun,
    Verdict,
    position_evidence,
)
from notifier.types import Severity


class RewindRule(KindRule):
    """The committed offset went backwards; firing until the consumer is past where it was."""

    kind: Literal["rewind"]
    name: str
    severity: Severity = Severity.ERR
    TUNABLE: ClassVar[tuple[str, ...]] = RuleBase.TUNABLE


def remember_rewinds(
    columns: dict[str, np.ndarray], index: slice | np.ndarray, scan: ScanView, times: ScanTimes
) -> None:
    """A backwards jump of the committed offset, remembered until the consumer is past it."""
    c, prev_c = scan.committed, scan.previous_committed
    rewind_from = columns["e_rewind_from"][index]
    # A log that starts over (topic recreated, cluster rebuilt) takes the offset back with it:
    # that is not a rewind, and it ends one.
    log_reset = log_started_over(scan)
    went_back = offset_moved(scan) & (c < prev_c) & ~log_reset
    rewind_from = np.where(log_reset, NULL, rewind_from)
    rewind_from = np.where(went_back, np.maximum(prev_c, rewind_from), rewind_from)
    columns["e_rewind_from"][index] = np.where(
        (rewind_from != NULL) & (c != NULL) & (c >= rewind_from), NULL, rewind_from
    )


def rewound(rewind_from: np.ndarray, severity: np.ndarray | int) -> np.ndarray:
    """The committed offset went backwards and the consumer is not yet past where it was."""
    return np.where(rewind_from >= 0, severity, SEVERITY_NONE).astype(np.int8)


def evaluate(rows: Rows, run: RuleRun) -> Verdict:
    return Verdict(rewound(rows.store.evidence["e_rewind_from"][rows.index], run.severity))


def describe(view: PartitionView) -> Description:
    evidence, _ = position_evidence(view)
    committed = evidence["committed_offset"]
    was = int(view.store.evidence["e_rewind_from"][view.row])
    evidence.update(rewound_from=was, to_reread=max(0, was - committed))
    message = (
        f"committed offset went back from {was} to {committed}: "
        f"{was - committed} records to read again"
    )
    return Description("REWIND", message, evidence)


KIND = RuleKind(
    name="rewind",
    model=RewindRule,
    params=(),
    evaluate=evaluate,
    describe=describe,
    evidence=KindEvidence(
        columns=(("e_rewind_from", np.int64, NULL),),
        update=remember_rewinds,
    ),
    # A consumer re-reads a rewind's records quickly: one made during a broker restart can be
    # over before the window after the gap is whole again.
    pages_from_partial_windows=True,
)
