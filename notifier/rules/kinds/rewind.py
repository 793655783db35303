"""``rewind``: the committed offset went backwards (per-scan evidence ``e_rewind_from``)."""

from __future__ import annotations

from typing import ClassVar, Literal

import numpy as np

from notifier.config.rules import KindRule, RuleBase
from notifier.rules.kernels import SEVERITY_NONE
from notifier.rules.kinds.base import (
    Description,
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


def rewound(rewind_from: np.ndarray, severity: np.ndarray | int) -> np.ndarray:
    """The committed offset went backwards and the consumer is not yet past where it was."""
    return np.where(rewind_from >= 0, severity, SEVERITY_NONE).astype(np.int8)


def evaluate(rows: Rows, run: RuleRun) -> Verdict:
    return Verdict(rewound(rows.store.e_rewind_from[rows.index], run.severity))


def describe(view: PartitionView) -> Description:
    evidence, _ = position_evidence(view)
    committed = evidence["committed_offset"]
    was = int(view.store.e_rewind_from[view.row])
    evidence.update(rewound_from=was, to_reread=max(0, was - committed))
    message = (
        f"committed offset went back from {was} to {committed}: "
        f"{was - committed} records to read again"
    )
    return Description("REWIND", message, evidence)


KIND = RuleKind(name="rewind", model=RewindRule, params=(), evaluate=evaluate, describe=describe)
