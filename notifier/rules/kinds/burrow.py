"""Burrow's rules (the ``burrow:`` section): every partition's status, exactly as Burrow has it.

Not a kind of the ``rules:`` list: the rule set is always there (the /v3 API answers with its
statuses even when it does not notify), so the evaluator binds it first, by itself. Its kernel
is :func:`notifier.rules.kernels.burrow_status`, which the evaluator runs for every partition;
here are its settings, its severity and its finding text.
"""

from __future__ import annotations

from typing import ClassVar

import numpy as np

from notifier.config.base import Fraction, NonNegativeInt
from notifier.config.rules import RuleBase
from notifier.rules.kernels import OK, WARN
from notifier.rules.kinds.base import Description, PartitionView, Rows, RuleKind, RuleRun, Verdict
from notifier.types import CommitPoint


class BurrowRule(RuleBase):
    """Burrow's per-partition rules, exactly, with Burrow's ``allowed_lag`` and
    ``minimum_complete`` (which here is also the notification gate)."""

    allowed_lag: NonNegativeInt = 0
    minimum_complete: Fraction = 1.0
    TUNABLE: ClassVar[tuple[str, ...]] = (*RuleBase.TUNABLE, "allowed_lag", "minimum_complete")


def evaluate(rows: Rows, run: RuleRun) -> Verdict:
    """WARN on Burrow's WARN, ERR on STOP, STALL and REWIND."""
    status = rows.status
    return Verdict(np.where(status == OK, 0, np.where(status == WARN, 1, 2)))


def describe(view: PartitionView) -> Description:
    status = view.partition_status
    ring = view.store.ring(view.row)
    window = view.window
    lag = view.lag
    evidence = {
        "offsets": [c.offset for c in ring],
        "commit_timestamps": [c.timestamp for c in ring],
        "commit_lags": [c.lag for c in ring],
        "log_end_offsets": [s["log_end_offset"] for s in window],
        "current_lag": lag,
        "members": window[-1]["members"] if window else 0,
        "group_state": window[-1]["group_state"] if window else "Unknown",
    }
    return Description(status, burrow_message(status, ring, view.now, lag), evidence)


def burrow_message(status: str, ring: list[CommitPoint], now: int, lag: int) -> str:
    if not ring:
        return status
    quiet = (now - ring[-1].timestamp) / 1000
    span = (ring[-1].timestamp - ring[0].timestamp) / 1000
    if status == "STOP":
        return (
            f"no members and no progress: offset unchanged for {quiet:.0f}s "
            f"(> ring span {span:.0f}s), lag {lag}"
        )
    if status == "STALL":
        return (
            f"members present but offset {ring[-1].offset} not moving for {quiet:.0f}s "
            f"while lag is {lag}"
        )
    if status == "REWIND":
        return "committed offset went backwards and has not caught up"
    if status == "WARN":
        return f"lag never decreased across the window (now {lag})"
    return status


KIND = RuleKind(
    name="burrow",
    model=BurrowRule,
    params=("allowed_lag",),
    evaluate=evaluate,
    describe=describe,
)
