"""``falling_behind``: consuming slower than the partition normally gets records."""

from __future__ import annotations

from typing import Annotated, ClassVar, Literal

import numpy as np
from pydantic import Field

from notifier.config.base import Duration
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


class FallingBehindRule(KindRule):
    """Consuming slower than ``ratio`` × the partition's normal production rate while the lag
    grows and is more than ``min_lag_seconds`` behind."""

    kind: Literal["falling_behind"]
    name: str
    severity: Severity = Severity.WARN
    ratio: Annotated[float, Field(gt=0.0, le=1.0)] = 0.85
    min_lag_seconds: Duration = 30.0
    TUNABLE: ClassVar[tuple[str, ...]] = (*RuleBase.TUNABLE, "ratio", "min_lag_seconds")


MIN_RECORDS_TO_JUDGE_RATE = 20
"""``falling_behind`` needs this many records expected in its span to compare rates."""


def falling_behind(
    now_ms: int,
    committed: np.ndarray,
    lag_seconds: np.ndarray,
    usual_wait_ms: np.ndarray,
    move_ts: np.ndarray,
    move_log_end: np.ndarray,
    move_measured: np.ndarray,
    consume_rate: np.ndarray,
    produce_rate: np.ndarray,
    normal_rate: np.ndarray,
    ratio: np.ndarray | float,
    min_lag_seconds: np.ndarray | float,
    severity: np.ndarray | int,
) -> np.ndarray:
    """Reading slower than the partition normally gets records, while more arrive than it
    reads, and, when its offset last moved, more than ``min_lag_seconds`` (and as many
    records) behind.

    Speeds are measured between the offset's moves, and the lag as it was at the last move,
    so a consumer that commits every five minutes is judged at its commits, never half way
    between them; a move seen only after missed scans or a rebalance (``move_measured``
    false) says nothing about speed, and the rule waits for the next.

    Comparing with the *normal* production rate (not the current one) is what tells a slow
    consumer from a burst: through a burst a healthy consumer reads at its full speed, above
    the normal rate, while its lag still grows for a while.
    """
    since_move_s = (now_ms - move_ts) / 1000.0
    with np.errstate(invalid="ignore"):
        slow = (consume_rate < ratio * normal_rate) & (produce_rate > consume_rate)
        behind_s = (lag_seconds - since_move_s) > min_lag_seconds
        backlog = np.maximum(move_log_end - committed, 0)
        # Enough records in a commit interval to tell a rate from chance: a slow topic is
        # judged by lag in seconds alone.
        judged = normal_rate * (min_lag_seconds + usual_wait_ms / 1000.0)
        behind = (backlog > normal_rate * min_lag_seconds) & (judged >= MIN_RECORDS_TO_JUDGE_RATE)
    hit = slow & behind_s & behind & move_measured & (committed >= 0) & (move_log_end >= 0)
    return np.where(hit, severity, SEVERITY_NONE).astype(np.int8)


def evaluate(rows: Rows, run: RuleRun) -> Verdict:
    store, index = rows.store, rows.index
    return Verdict(
        falling_behind(
            rows.now,
            rows.latest_committed,
            rows.lag_seconds,
            rows.usual_wait_ms,
            store.e_move_ts[index],
            store.e_move_leo[index],
            store.e_move_measured[index],
            store.e_consume_rate[index],
            store.e_produce_rate[index],
            store.e_normal_rate[index],
            run.params["ratio"],
            run.params["min_lag_seconds"],
            run.severity,
        )
    )


def describe(view: PartitionView) -> Description:
    store, row, ratio = view.store, view.row, view.rule.ratio
    evidence, behind = position_evidence(view)
    consume = float(store.e_consume_rate[row])
    normal = float(store.e_normal_rate[row])
    evidence.update(
        consume_rate=consume,
        produce_rate=float(store.e_produce_rate[row]),
        normal_rate=normal,
        ratio=ratio,
    )
    message = (
        f"consuming {consume:.3g} records/s, below {ratio:.0%} of the "
        f"{normal:.3g}/s this partition normally gets; lag {view.lag}, {behind} behind"
    )
    return Description("WARN", message, evidence)


KIND = RuleKind(
    name="falling_behind",
    model=FallingBehindRule,
    params=("ratio", "min_lag_seconds"),
    evaluate=evaluate,
    describe=describe,
)
