"""``retention``: records lost to retention, or about to be."""

from __future__ import annotations

from typing import ClassVar, Literal

import numpy as np

from notifier.config.base import Duration, Fraction
from notifier.config.rules import KindRule, RuleBase
from notifier.rules.habits import NULL, UNSET_TS, ScanTimes, ScanView
from notifier.rules.kernels import SEVERITY_NONE, SEVERITY_WARN
from notifier.rules.kinds.base import (
    Description,
    KindEvidence,
    PartitionView,
    Rows,
    RuleKind,
    RuleRun,
    Verdict,
    human_seconds,
)
from notifier.types import Severity


class RetentionRule(KindRule):
    """ERR when records were already lost (committed < log-start); WARN when the committed
    offset is within ``warn_fraction`` of the retained range from log-start, or when, at the
    pace it reads now, retention will overtake it within ``warn_within``."""

    kind: Literal["retention"]
    name: str
    severity: Severity = Severity.ERR
    warn_fraction: Fraction = 0.1
    warn_within: Duration = 0.0
    """WARN when the log start, moving at the partition's normal production rate, will pass
    the committed offset within this long at the pace the consumer reads now (0: off)."""
    TUNABLE: ClassVar[tuple[str, ...]] = (*RuleBase.TUNABLE, "warn_fraction", "warn_within")


def follow_log_start(
    columns: dict[str, np.ndarray], index: slice | np.ndarray, scan: ScanView, times: ScanTimes
) -> None:
    """When the log start last moved forward: retention is deleting records now (a topic
    younger than its retention, or one whose segments roll weekly, deletes nothing for a
    long while, and its log start says nothing about a pace)."""
    if scan.log_start is None:
        return
    seen = columns["e_log_start_seen"][index]
    known = scan.log_start != NULL
    moved = known & (seen != NULL) & (scan.log_start > seen)
    columns["e_log_start_moved_ts"][index] = np.where(
        moved, scan.ts, columns["e_log_start_moved_ts"][index]
    )
    columns["e_log_start_seen"][index] = np.where(known, scan.log_start, seen)


KEEPING_UP = 0.9
"""A consumer reading at least this share of the normal production rate is not losing ground
for the time-to-loss warning (its measured speed wobbles by that much)."""


def time_to_loss_s(
    committed: np.ndarray,
    log_start: np.ndarray,
    consume_rate: np.ndarray,
    normal_rate: np.ndarray,
) -> np.ndarray:
    """Seconds until the log start passes the committed offset at the present pace: the log
    start moves at the partition's normal production rate (time retention deletes what was
    written that long ago), the consumer at the speed measured over its last commits. Infinite
    when it keeps up (reads at least :data:`KEEPING_UP` of the normal rate) or is not
    measured."""
    with np.errstate(invalid="ignore", divide="ignore"):
        closing = normal_rate - consume_rate
        losing = (consume_rate < KEEPING_UP * normal_rate) & (closing > 0)
        left = np.maximum(committed - log_start, 0).astype(np.float64)
        seconds = np.where(losing, left / closing, np.inf)
    return np.where(np.isnan(seconds), np.inf, seconds)


def retention_risk(
    committed: np.ndarray,
    log_end: np.ndarray,
    log_start: np.ndarray,
    warn_fraction: np.ndarray | float,
    severity: np.ndarray | int,
    seconds_to_loss: np.ndarray | None = None,
    warn_within_s: np.ndarray | float = 0.0,
    deleting: np.ndarray | None = None,
) -> np.ndarray:
    """ERR-level (``severity``) when committed < log-start: records the group still had to read
    were deleted. WARN when the committed offset is within ``warn_fraction`` of the retained
    range from log-start (the next retention pass may delete them), or when
    ``seconds_to_loss`` (:func:`time_to_loss_s`) is under ``warn_within``: retention will
    overtake it if it goes on at this pace (only where retention is ``deleting``: its log
    start moved forward within ``warn_within``).

    The near-the-edge WARN needs a log that retention has deleted from (its start is past
    offset 0): a re-created topic, a freshly added partition or a topic younger than its
    retention holds a few records from offset 0, and a lag of one record would be "within 10%"
    of such a range although nothing is being deleted. Records of a log that has never been
    trimmed are reported when they are lost (ERR), since nothing here says when retention will
    first reach them."""
    known = (committed >= 0) & (log_start >= 0) & (log_end > committed)
    lost = known & (committed < log_start)
    retained = np.maximum(log_end - log_start, 0)
    trimmed = log_start > 0
    near = known & ~lost & trimmed & ((committed - log_start) < warn_fraction * retained)
    if seconds_to_loss is not None:
        at_pace = seconds_to_loss < warn_within_s
        if deleting is not None:
            at_pace &= deleting
        near |= known & ~lost & at_pace
    out = np.where(lost, severity, SEVERITY_NONE)
    return np.where(near, SEVERITY_WARN, out).astype(np.int8)


WAITS_OF_WOBBLE = 1.0
"""How many usual waits' worth of arriving records a consumer that keeps up may fall back over
its window: where its commits land between scans moves its lag by up to one. (Two cost the
fleet corpus's retention warnings 160 s at the median, one 55 s; the recorded corpus is quiet
with either.)"""


def losing_ground(rows: Rows, normal_rate: np.ndarray, candidates: np.ndarray) -> np.ndarray:
    """Of the ``candidates``, the rows whose lag grew over their window by more than
    :data:`WAITS_OF_WOBBLE` usual wait of arriving records. A pace measured over the last
    commits wobbles with where the commits fall between scans (recorded on Apache Kafka 4.4: a
    consumer committing every 10 s, scanned every 10 s, seen at lag 0 and then one commit
    behind, looked to read at half the rate), so the time-to-loss warning also wants the window
    to show the consumer falling back. Only the candidates' windows are read: few rows are."""
    out = np.zeros(candidates.shape, dtype=np.bool_)
    at = np.flatnonzero(candidates)
    if at.size:
        start = rows.window_start(at)
        lag = rows.lag[at]
        with np.errstate(invalid="ignore"):
            allowance = WAITS_OF_WOBBLE * normal_rate[at] * rows.usual_wait_ms[at] / 1000.0
            grew = (lag - (start.log_end - start.committed)) > np.nan_to_num(allowance)
        out[at] = (start.committed != NULL) & (start.log_end != NULL) & (lag >= 0) & grew
    return out


def evaluate(rows: Rows, run: RuleRun) -> Verdict:
    store, index = rows.store, rows.index
    log_start = store.latest_log_start[index]
    normal_rate = store.evidence["e_normal_rate"][index]
    warn_within_s = run.params["warn_within"]
    seconds_to_loss = time_to_loss_s(
        rows.latest_committed, log_start, store.evidence["e_consume_rate"][index], normal_rate
    )
    deleting = rows.now - store.evidence["e_log_start_moved_ts"][index] <= warn_within_s * 1000.0
    deleting &= losing_ground(rows, normal_rate, deleting & (seconds_to_loss < warn_within_s))
    return Verdict(
        retention_risk(
            rows.latest_committed,
            rows.latest_leo,
            log_start,
            run.params["warn_fraction"],
            run.severity,
            seconds_to_loss,
            warn_within_s,
            deleting,
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
        store, row = view.store, view.row
        consume_rate = store.evidence["e_consume_rate"][row : row + 1]
        normal_rate = store.evidence["e_normal_rate"][row : row + 1]
        left = time_to_loss_s(
            np.array([last["committed_offset"]]),
            np.array([last["log_start_offset"]]),
            consume_rate,
            normal_rate,
        )[0]
        if np.isfinite(left):
            evidence["seconds_to_loss"] = round(float(left))
            message = (
                f"at the pace it reads now ({float(consume_rate[0]):.3g} records/s "
                f"of the {float(normal_rate[0]):.3g}/s that arrive), retention "
                f"deletes records it has not read in about {human_seconds(float(left))}"
            )
        else:
            message = "committed offset close to the retention edge: records about to be lost"
    return Description(view.status, message, evidence)


KIND = RuleKind(
    name="retention",
    model=RetentionRule,
    params=("warn_fraction", "warn_within"),
    evaluate=evaluate,
    describe=describe,
    evidence=KindEvidence(
        columns=(
            ("e_log_start_seen", np.int64, NULL),
            ("e_log_start_moved_ts", np.int64, UNSET_TS),
        ),
        update=follow_log_start,
    ),
)
