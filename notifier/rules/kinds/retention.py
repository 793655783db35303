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


COMMIT_WOBBLE_SCANS = 2.0
"""How many scan intervals' worth of arriving records a consumer's backlog at a commit may
exceed its backlog at the commit before without falling back: the backlog is read at the
scan after the commit, and what arrived between the two differs from one commit to the next
by up to a scan interval (a commit just after one scan, the next just before one)."""

FELL_BACK_AT_LEAST = 20
"""...and never by fewer records than this: on a topic of a record every few seconds, a
backlog of a few records more at one commit than at the one before is chance (which
commits the scans happened to see), not a consumer falling back."""


def follow_commit_backlog(
    columns: dict[str, np.ndarray], index: slice | np.ndarray, scan: ScanView, times: ScanTimes
) -> None:
    """Whether, at the consumer's latest measured move, its backlog had grown since its move
    before by more than :data:`COMMIT_WOBBLE_SCANS` scan intervals of records, and at least
    :data:`FELL_BACK_AT_LEAST` (``e_commit_fell_back``); and where the log ended at that move
    (``e_commit_reach``). A consumer that commits every five minutes shows it has fallen back
    at its first commit after it slowed down; its window (ten scans) only ever sees the
    backlog it builds between two commits, which a consumer that keeps up builds too."""
    moved_now = columns["e_move_ts"][index] == scan.ts
    measured = moved_now & columns["e_move_measured"][index]
    reach = columns["e_commit_reach"][index]
    known = (scan.committed != NULL) & (scan.log_end != NULL)
    before_known = scan.had_sample & (scan.previous_committed != NULL) & (reach != NULL)
    previous_backlog = np.where(before_known, reach - scan.previous_committed, 0)
    noise = np.maximum(
        np.nan_to_num(columns["e_normal_rate"][index])
        * COMMIT_WOBBLE_SCANS
        * times.scan_interval_ms
        / 1000.0,
        FELL_BACK_AT_LEAST,
    )
    fell_back = (
        measured
        & known
        & before_known
        & ((scan.log_end - scan.committed) - previous_backlog > noise)
    )
    columns["e_commit_fell_back"][index] = np.where(
        moved_now, fell_back, columns["e_commit_fell_back"][index]
    )
    columns["e_commit_reach"][index] = np.where(
        moved_now, np.where(known, scan.log_end, NULL), reach
    )


def follow_retention(
    columns: dict[str, np.ndarray], index: slice | np.ndarray, scan: ScanView, times: ScanTimes
) -> None:
    """This kind's evidence, one scan on: :func:`follow_log_start` and
    :func:`follow_commit_backlog`."""
    follow_log_start(columns, index, scan, times)
    follow_commit_backlog(columns, index, scan, times)


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


def losing_ground(
    rows: Rows, normal_rate: np.ndarray, candidates: np.ndarray, fell_back: np.ndarray
) -> np.ndarray:
    """Of the ``candidates``, the rows whose lag grew over their window by more than
    :data:`WAITS_OF_WOBBLE` usual wait of arriving records, or whose backlog at their latest
    commit had grown since the commit before (``fell_back``: :func:`follow_commit_backlog`).
    A pace measured over the last commits wobbles with where the commits fall between scans
    (recorded on Apache Kafka 4.4: a consumer committing every 10 s, scanned every 10 s, seen at
    lag 0 and then one commit behind, looked to read at half the rate), so the time-to-loss
    warning also wants the samples to show the consumer falling back. A window shows that for
    a consumer that commits often; one that commits every few minutes builds a backlog of a
    usual wait between any two commits, and only its commits tell. Only the candidates'
    windows are read: few rows are."""
    out: np.ndarray = candidates & fell_back
    at = np.flatnonzero(candidates & ~fell_back)
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
    deleting &= losing_ground(
        rows,
        normal_rate,
        deleting & (seconds_to_loss < warn_within_s),
        store.evidence["e_commit_fell_back"][index],
    )
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
            ("e_commit_reach", np.int64, NULL),
            ("e_commit_fell_back", np.bool_, False),
        ),
        update=follow_retention,
    ),
)
