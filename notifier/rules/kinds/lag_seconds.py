"""``lag_seconds``: how far behind in time (notifier.rules.lagtime) above a threshold, or above
the group's own rhythm when that is longer (a batch job between runs: its confirmed pause from
:mod:`notifier.rules.habits`); the log end when the committed offset last moved is this kind's
own evidence (``e_leo_at_move``)."""

from __future__ import annotations

from dataclasses import replace
from typing import Annotated, Any, ClassVar, Literal

import numpy as np
from pydantic import Field

from notifier.config.base import Duration
from notifier.config.rules import Hysteresis, KindRule, RuleBase
from notifier.rules.habits import NULL, UNSET_TS, ScanTimes, ScanView
from notifier.rules.kernels import SEVERITY_NONE
from notifier.rules.kinds.base import (
    ChartLine,
    Description,
    KindEvidence,
    PartitionView,
    Rows,
    RuleKind,
    RuleRun,
    Verdict,
    human_seconds,
    threshold_line,
    with_hysteresis,
)
from notifier.rules.kinds.progress import judged_memberless_ms, seen_in_part
from notifier.types import Severity


class LagSecondsRule(Hysteresis, KindRule):
    kind: Literal["lag_seconds"]
    name: str
    severity: Severity = Severity.WARN
    threshold: Duration
    clear_below: Duration | None = None
    catching_up_within: Duration = 0.0
    """Do not open while the consumer, at the pace it closed the gap over the window, will be
    caught up within this long (0: off): a new group reading weeks of history from the
    earliest offset, or one draining what a pause left, needs nobody. A consumer that reads
    slower than records arrive never closes the gap."""
    rhythm_tolerance: Annotated[float, Field(ge=0.0)] = 0.0
    """A group whose confirmed rhythm is to leave its records waiting longer than
    ``threshold`` (a batch job that runs every hour: its usual pause between runs plus its
    usual wait before a commit, and what its last run left unread, up to
    ``catching_up_within``) is judged by that rhythm instead: it opens only once its
    records have waited this many times as long (0: off). A job that misses a run is behind
    by more than that soon after; a pause the group has not shown twice is not its rhythm."""
    TUNABLE: ClassVar[tuple[str, ...]] = (
        *RuleBase.TUNABLE, "threshold", "clear_below", "catching_up_within", "rhythm_tolerance"
    )  # fmt: skip


MARKER_OFFSETS = 1
"""Offsets a ``read_committed`` consumer that has read everything may sit below a log end: the
transaction's commit marker (a consumer committing the last record's offset + 1 stays on it)."""


def follow_commits(
    columns: dict[str, np.ndarray], index: slice | np.ndarray, scan: ScanView, times: ScanTimes
) -> None:
    """The log end seen when the committed offset last moved (or was first seen); and for a
    new group, where and when it first committed, until it has read what was there then."""
    known = (scan.committed != NULL) & (scan.log_end != NULL)
    moved = known & (~scan.had_sample | (scan.previous_committed != scan.committed))
    columns["e_leo_at_move"][index] = np.where(moved, scan.log_end, columns["e_leo_at_move"][index])
    # A row seen without a committed offset that now has one: a group that began under the
    # service's eyes (a new group reading from the earliest offset).
    first = known & scan.had_sample & (scan.previous_committed == NULL)
    since = np.where(first, scan.ts, columns["e_new_since"][index])
    start_committed = np.where(first, scan.committed, columns["e_new_committed"][index])
    start_log_end = np.where(first, scan.log_end, columns["e_new_log_end"][index])
    # Done once it has read what was there at its first commit (or its offset went back: a
    # log that started over, a reset, is no bootstrap).
    done = (since != UNSET_TS) & (
        ~known | (scan.committed >= start_log_end) | (scan.committed < start_committed)
    )
    columns["e_new_since"][index] = np.where(done, UNSET_TS, since)
    columns["e_new_committed"][index] = np.where(done, NULL, start_committed)
    columns["e_new_log_end"][index] = np.where(done, NULL, start_log_end)


def on_the_marker(lag: np.ndarray, latest_leo: np.ndarray, leo_at_move: np.ndarray) -> np.ndarray:
    """Rows at most :data:`MARKER_OFFSETS` below a log end that has not moved since the
    committed offset last did: nothing has arrived since it committed, what is left is the
    commit marker, and its lag in seconds (the age of the last record) waits for nothing."""
    resting: np.ndarray = (lag > 0) & (lag <= MARKER_OFFSETS) & (latest_leo == leo_at_move)
    return resting


def seconds_to_catch_up(rows: Rows, at: np.ndarray) -> np.ndarray:
    """For the rows at positions ``at``: seconds until the lag is gone at the pace the
    committed offset gained on the log end over the window (first to last sample); infinite
    when it did not gain or is unknown."""
    start = rows.window_start(at)
    lag = rows.lag[at]
    known = (start.committed != NULL) & (start.log_end != NULL) & (lag >= 0) & (start.span_s > 0)
    gained = (rows.latest_committed[at] - start.committed) - (rows.latest_leo[at] - start.log_end)
    with np.errstate(invalid="ignore", divide="ignore"):
        seconds = np.where(known & (gained > 0), lag * start.span_s / gained, np.inf)
    return np.where(np.isnan(seconds), np.inf, seconds)


def bootstrap_catching_up(rows: Rows, at: np.ndarray, within_s: np.ndarray | float) -> np.ndarray:
    """For the rows at positions ``at``: a new group bootstrapping (first committed while the
    service watched, not yet past the log end of then) that will be caught up within
    ``within_s`` at the pace it gained on the log end since its first commit, or has not
    committed a second time yet and first did less than ``within_s`` ago (its pace is not
    measurable before: a group that commits every few minutes shows none in a window)."""
    evidence, index = rows.store.evidence, rows.index
    since = evidence["e_new_since"][index][at]
    start_committed = evidence["e_new_committed"][index][at]
    start_log_end = evidence["e_new_log_end"][index][at]
    new = since != UNSET_TS
    committed, log_end, lag = rows.latest_committed[at], rows.latest_leo[at], rows.lag[at]
    elapsed_s = (rows.now - since) / 1000.0
    gained = (committed - start_committed) - (log_end - start_log_end)
    with np.errstate(invalid="ignore", divide="ignore"):
        seconds = np.where(new & (gained > 0) & (lag >= 0), lag * elapsed_s / gained, np.inf)
    unmeasured = new & (committed == start_committed) & (elapsed_s < within_s)
    result: np.ndarray = new & ((seconds < within_s) | unmeasured)
    return result


def usual_wait_between_reads_s(evidence: Any, index: slice | np.ndarray | int) -> np.ndarray:
    """How long each row's records usually wait before they are read, as its group's confirmed
    habits have shown, in seconds: its usual spell without members (a batch job's pause
    between runs, a restart) and its usual wait before the offset moves once members are
    there. 0 while nothing is learned. A pause learned from one the service saw only in part
    (a batch job found between runs) is, like the ``progress`` kind's, taken as the part seen
    scaled by the backlog it found (at least twice the part: the service starts anywhere in a
    pause, on the median half way through it) until a whole one has ended."""
    spell = judged_memberless_ms(
        np.asarray(evidence["e_memberless_how"][index]),
        np.asarray(evidence["e_usual_memberless_ms"][index]),
        np.asarray(evidence["e_cut_spell_scale"][index]),
    )
    wait = evidence["e_usual_wait_ms"][index]
    rhythm: np.ndarray = (spell + wait) / 1000.0
    return rhythm


def left_unread_s(
    lag_seconds: np.ndarray, now_ms: int, move_ts: np.ndarray, at_most_s: np.ndarray | float
) -> np.ndarray:
    """How far behind, in seconds, each row was when its offset last moved (the age of its
    oldest unread record then; 0 when it was caught up or has not moved), up to
    ``at_most_s``: what a batch job's last run left for the next one, which its records wait
    for on top of the pause."""
    with np.errstate(invalid="ignore"):
        behind = np.where(
            move_ts != UNSET_TS, np.nan_to_num(lag_seconds) - (now_ms - move_ts) / 1000.0, 0.0
        )
    left: np.ndarray = np.clip(behind, 0.0, at_most_s)
    return left


def rhythm_threshold(
    threshold_s: np.ndarray | float,
    rhythm_s: np.ndarray,
    tolerance: np.ndarray | float,
    left_unread: np.ndarray | float = 0.0,
) -> np.ndarray:
    """The lag in seconds each row is judged against: ``threshold``, or ``tolerance`` × the
    row's rhythm and what its last run ``left_unread`` when that is longer (``tolerance`` 0:
    the threshold alone)."""
    judged: np.ndarray = np.maximum(threshold_s, tolerance * (rhythm_s + left_unread))
    return judged


def lag_seconds_above(
    lag_seconds: np.ndarray, threshold_s: np.ndarray | float, severity: np.ndarray | int
) -> np.ndarray:
    """Lag in seconds above the threshold; unknown (NaN) is not zero and never fires."""
    with np.errstate(invalid="ignore"):
        hit = lag_seconds > threshold_s
    return np.where(hit, severity, SEVERITY_NONE).astype(np.int8)


def evaluate(rows: Rows, run: RuleRun) -> Verdict:
    leo_at_move = rows.store.evidence["e_leo_at_move"][rows.index]
    waiting = on_the_marker(rows.lag, rows.latest_leo, leo_at_move)
    seconds = np.where(waiting, 0.0, rows.lag_seconds)
    within_s = np.asarray(run.params["catching_up_within"])
    if np.any(np.asarray(run.params["rhythm_tolerance"]) > 0):
        rhythm = usual_wait_between_reads_s(rows.store.evidence, rows.index)
        # A batch job's run that ended before it had read everything leaves its oldest
        # records waiting the pause on top of how far behind it was: up to what a consumer
        # catching up is given, that is the job's rhythm, not a miss.
        left = left_unread_s(
            seconds, rows.now, rows.store.evidence["e_move_ts"][rows.index], within_s
        )
        threshold = rhythm_threshold(
            run.params["threshold"], rhythm, run.params["rhythm_tolerance"], left
        )
        run = replace(run, params={**run.params, "threshold": threshold})
    if np.any(within_s > 0):
        opening = ~run.state.firing[rows.gids] & (seconds > run.params["threshold"])
        at = np.flatnonzero(opening)
        if at.size:
            within = within_s[at] if within_s.ndim else within_s
            catching_up = (seconds_to_catch_up(rows, at) < within) | bootstrap_catching_up(
                rows, at, within
            )
            seconds[at[catching_up]] = 0.0
    return Verdict(with_hysteresis(lag_seconds_above, seconds, rows, run))


def describe(view: PartitionView) -> Description:
    seconds = view.lag_seconds
    rule = view.rule
    threshold = rule.threshold
    evidence = view.lag_evidence()
    rhythm = float(usual_wait_between_reads_s(view.store.evidence, view.row))
    move_ts = view.store.evidence["e_move_ts"][np.array([view.row])]
    left = float(left_unread_s(np.array([seconds]), view.now, move_ts, rule.catching_up_within)[0])
    judged = float(rhythm_threshold(threshold, np.asarray(rhythm), rule.rhythm_tolerance, left))
    evidence.update(lag_seconds=seconds, threshold_s=judged)
    message = f"{human_seconds(seconds)} behind > {human_seconds(threshold)}"
    if judged > threshold:
        evidence.update(usual_wait_between_reads_s=rhythm, left_unread_s=left)
        unread = f" and {human_seconds(left)} its last run left" if left >= 1 else ""
        part = seen_in_part(view.store.evidence, view.row)
        part = f", its pause {part}" if part is not None else ""
        message = (
            f"{human_seconds(seconds)} behind > {human_seconds(judged)} "
            f"({rule.rhythm_tolerance:g} x its records' usual wait of {human_seconds(rhythm)}"
            f"{part}{unread})"
        )
    return Description(view.status, message, evidence)


def chart_line(rule: Any) -> ChartLine:
    """On the lag-in-seconds chart, against each partition's lag in seconds."""
    return threshold_line(rule, "lag_seconds")


KIND = RuleKind(
    name="lag_seconds",
    model=LagSecondsRule,
    params=("threshold", "clear_below", "catching_up_within", "rhythm_tolerance"),
    evaluate=evaluate,
    describe=describe,
    chart_line=chart_line,
    sets_slo_wait=True,
    evidence=KindEvidence(
        columns=(
            ("e_leo_at_move", np.int64, NULL),
            ("e_new_since", np.int64, UNSET_TS),
            ("e_new_committed", np.int64, NULL),
            ("e_new_log_end", np.int64, NULL),
        ),
        update=follow_commits,
    ),
)
