"""Pure rule functions, vectorized over many windows at once.

Every function takes numpy arrays (one row per group-partition window, oldest entry first,
right-aligned: ``count`` valid entries at the end of each row) and returns arrays. No I/O, no
state: the evaluator feeds them from the store, the backtest from history, the tests from
Burrow's own vectors.

Burrow's per-partition rules, in Burrow's order (docs/architecture.md, "Burrow's rules"):

1. no offsets → OK (complete 0);
2. ``complete < minimum_complete`` → OK, no rules run;
3. current lag ≤ ``allowed_lag`` → OK;
4. STOP when the consumer has been quiet for longer than the ring spans, unless some stored LEO
   is ≤ the last committed offset (it was caught up recently);
5. REWIND when an offset is lower than the one before it and no later offset got back to it;
6. OK when some lag in the ring is ≤ ``allowed_lag``;
7. STALL when every offset in the ring is the same;
8. WARN when the lag never decreases across the ring;
9. otherwise OK.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from notifier.rules.evidence import UNSET_TS, memberless
from notifier.types import GROUP_STATE_CODE

OK, WARN, STOP, STALL, REWIND = range(5)
"""Partition status codes (the index into :data:`notifier.types.PARTITION_STATUS_CODES`)."""

SEVERITY_NONE, SEVERITY_WARN, SEVERITY_ERR = 0, 1, 2
"""Per-row rule outcome codes: not firing, firing as WARN, firing as ERR."""

_I64_MIN = np.iinfo(np.int64).min
_I64_MAX = np.iinfo(np.int64).max
_REBALANCING = np.array(
    [GROUP_STATE_CODE[s] for s in ("PreparingRebalance", "CompletingRebalance", "Unknown")],
    dtype=np.int8,
)


def valid_mask(count: np.ndarray, width: int) -> np.ndarray:
    """Which slots of right-aligned rows hold an entry."""
    return np.arange(width, dtype=np.int16)[None, :] >= (width - count)[:, None]


@dataclass(slots=True)
class BurrowOutcome:
    """Each partition's status and every intermediate rule result (Burrow's names)."""

    status: np.ndarray
    stopped: np.ndarray
    recent_lag_zero: np.ndarray
    rewind_index: np.ndarray
    lag_always_not_zero: np.ndarray
    stalled: np.ndarray
    lag_not_decreasing: np.ndarray


def burrow_status(
    ring_offset: np.ndarray,
    ring_ts: np.ndarray,
    ring_lag: np.ndarray,
    ring_count: np.ndarray,
    broker_offsets: np.ndarray,
    broker_valid: np.ndarray,
    current_lag: np.ndarray,
    now_ms: int | np.ndarray,
    allowed_lag: int | np.ndarray,
    complete: np.ndarray | None = None,
    minimum_complete: float | np.ndarray = 0.0,
    valid: np.ndarray | None = None,
) -> BurrowOutcome:
    """Burrow's rules over rings of commits ``(offset, timestamp ms, lag or -1)``.

    ``broker_offsets`` are the stored LEOs (with ``broker_valid``), ``current_lag`` the latest
    LEO minus the last committed offset (``-1`` when unknown), ``complete`` the fraction used
    for ``minimum_complete`` (Burrow's ring fill when not given).
    """
    n, width = ring_offset.shape
    if valid is None:
        valid = valid_mask(ring_count, width)
    pairs = valid[:, :-1]  # right-aligned: slot j-1 valid implies slot j valid
    has_ring = ring_count > 0
    rows = np.arange(n)
    first = np.clip(width - ring_count.astype(np.int64), 0, width - 1)
    last_ts = ring_ts[:, -1]
    first_ts = ring_ts[rows, first]
    last_offset = ring_offset[:, -1]

    # Rule 4: quiet for longer than the ring spans ...
    stopped = has_ring & ((now_ms - last_ts) > (last_ts - first_ts))
    # ... unless the consumer was caught up with some stored LEO.
    recent_lag_zero = np.any(broker_valid & (broker_offsets <= last_offset[:, None]), axis=1)

    step = np.diff(ring_offset, axis=1)
    # Rule 5: an offset below its predecessor that no later offset got back to. Drops are
    # rare, so the suffix maximum is computed only for the rows that have one.
    drops = pairs & (step < 0)
    any_drop = drops.any(axis=1)
    rewind_index = np.full(n, -1, dtype=np.int64)
    unrecovered = np.zeros(n, dtype=np.bool_)
    if any_drop.any():
        hit = np.nonzero(any_drop)[0]
        d = drops[hit]
        rewind_index[hit] = width - 1 - np.argmax(d[:, ::-1], axis=1) - first[hit]
        offsets_or_min = np.where(valid[hit], ring_offset[hit], _I64_MIN)
        suffix_max = np.maximum.accumulate(offsets_or_min[:, ::-1], axis=1)[:, ::-1]
        unrecovered[hit] = np.any(suffix_max[:, 1:] < offsets_or_min[:, :-1], axis=1)

    # Rule 6: some lag in the ring within the allowance (no lag known: not within).
    lag_known = valid & (ring_lag >= 0)
    allowed = np.asarray(allowed_lag)
    allowed_2d = allowed[:, None] if allowed.ndim else allowed
    lag_always_not_zero = ~np.any(lag_known & (ring_lag <= allowed_2d), axis=1)

    # Rule 7: every offset the same.
    stalled = has_ring & ~np.any(pairs & (step != 0), axis=1)

    # Rule 8: lag never decreases. Entries with no lag (Burrow's inserted commits; scans
    # never make them) are skipped, which needs a forward fill only on rows that have one.
    lag_not_decreasing = ~np.any(pairs & (np.diff(ring_lag, axis=1) < 0), axis=1)
    gaps = np.any(valid & ~lag_known, axis=1)
    if gaps.any():
        hit = np.nonzero(gaps)[0]
        known = lag_known[hit]
        index = np.where(known, np.arange(width)[None, :], -1)
        prev_idx = np.maximum.accumulate(index, axis=1)[:, :-1]
        prev_lag = np.take_along_axis(ring_lag[hit], np.maximum(prev_idx, 0), axis=1)
        decreases = known[:, 1:] & (prev_idx >= 0) & (ring_lag[hit][:, 1:] < prev_lag)
        lag_not_decreasing[hit] = ~decreases.any(axis=1)

    if complete is None:
        complete = ring_count / width
    behind = (
        has_ring & (complete >= minimum_complete) & (current_lag >= 0) & (current_lag > allowed)
    )
    status = np.full(n, OK, dtype=np.int8)
    undecided = behind.copy()
    decisions: tuple[tuple[int, np.ndarray], ...] = (
        (STOP, stopped & ~recent_lag_zero),
        (REWIND, unrecovered),
        (OK, ~lag_always_not_zero),
        (STALL, stalled),
        (WARN, lag_not_decreasing),
    )
    for code, condition in decisions:
        hit = undecided & condition
        status[hit] = code
        undecided &= ~hit
    return BurrowOutcome(
        status=status,
        stopped=stopped,
        recent_lag_zero=recent_lag_zero,
        rewind_index=rewind_index,
        lag_always_not_zero=lag_always_not_zero,
        stalled=stalled,
        lag_not_decreasing=lag_not_decreasing,
    )


def split_stop_stall(status: np.ndarray, members_present: np.ndarray) -> np.ndarray:
    """Tell STALL from STOP with what a scan sees and Burrow's ring lacks.

    A ring of offset changes cannot tell "keeps committing the same offset" from "stopped
    committing": both are a consumer that has not moved. Members in the group mean a consumer
    is there and not progressing (STALL); no members means it is gone (STOP).
    """
    not_moving = (status == STOP) | (status == STALL)
    return np.where(not_moving, np.where(members_present, STALL, STOP), status).astype(np.int8)


def members_present(state: np.ndarray, members: np.ndarray) -> np.ndarray:
    """Whether the latest sample shows live members (not an Empty or Dead group)."""
    return ~memberless(state, members)


def window_complete(
    ts: np.ndarray,
    count: np.ndarray,
    now_ms: int | np.ndarray,
    max_gap_ms: int,
) -> np.ndarray:
    """How much of the window unbroken scans cover, up to ``now`` (1.0: watched long enough).

    The run of samples counted back from the newest, where neighbours are at most
    ``max_gap_ms`` apart, divided by the window size. A newest sample older than the gap
    (the partition was not in the latest scan) gives 0.
    """
    width = ts.shape[1]
    # Unset slots hold a time far in the past (evidence.UNSET_TS), so the step from the last
    # unset slot to the first sample is always a gap: no validity mask needed.
    broken = np.diff(ts, axis=1) > max_gap_ms
    trailing = np.where(broken.any(axis=1), np.argmax(broken[:, ::-1], axis=1), width - 1)
    fresh = (count > 0) & ((now_ms - ts[:, -1]) <= max_gap_ms)
    return np.where(fresh, (trailing + 1) / width, 0.0)


def current_lag(committed: np.ndarray, log_end: np.ndarray) -> np.ndarray:
    """LEO minus committed, clamped at 0; ``-1`` where there is no commit."""
    return np.where(committed >= 0, np.maximum(0, log_end - committed), -1)


# --------------------------------------------------------------------------------------------
# The other windowed rules. Each returns a severity code per row (0 none, 1 warn, 2 err).


def lag_above(
    lag: np.ndarray, threshold: np.ndarray | int, severity: np.ndarray | int
) -> np.ndarray:
    """Lag (offsets) above the threshold; unknown lag never fires."""
    return np.where((lag >= 0) & (lag > threshold), severity, SEVERITY_NONE).astype(np.int8)


def lag_seconds_above(
    lag_seconds: np.ndarray, threshold_s: np.ndarray | float, severity: np.ndarray | int
) -> np.ndarray:
    """Lag in seconds above the threshold; unknown (NaN) is not zero and never fires."""
    with np.errstate(invalid="ignore"):
        hit = lag_seconds > threshold_s
    return np.where(hit, severity, SEVERITY_NONE).astype(np.int8)


def stuck_rebalance(
    state: np.ndarray, count: np.ndarray, samples: np.ndarray | int, severity: np.ndarray | int
) -> np.ndarray:
    """The group has been rebalancing (or broker-reported Unknown) for the last N samples."""
    out = np.zeros(state.shape[0], dtype=np.int8)
    hit = np.nonzero(np.isin(state[:, -1], _REBALANCING))[0]  # only these can qualify
    if hit.size == 0:
        return out
    width = state.shape[1]
    rebalancing = np.isin(state[hit], _REBALANCING) & valid_mask(count[hit], width)
    not_rebalancing = ~rebalancing
    trailing = np.where(
        not_rebalancing.any(axis=1), np.argmax(not_rebalancing[:, ::-1], axis=1), width
    )
    out[hit] = np.where(trailing >= _pick(samples, hit), _pick(severity, hit), 0)
    return out


def _pick(value: np.ndarray | float, rows: np.ndarray) -> np.ndarray | float:
    return value[rows] if isinstance(value, np.ndarray) else value


def rebalance_storm(
    member_changed: np.ndarray,
    count: np.ndarray,
    max_changes: np.ndarray | int,
    severity: np.ndarray | int,
) -> np.ndarray:
    """The member set changed more than ``max_changes`` times within the window (slots
    before the first sample never hold a change)."""
    changes = np.count_nonzero(member_changed, axis=1)
    return np.where(changes > max_changes, severity, SEVERITY_NONE).astype(np.int8)


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


def consumers_gone(
    committed: np.ndarray,
    log_end: np.ndarray,
    members: np.ndarray,
    state: np.ndarray,
    count: np.ndarray,
    severity: np.ndarray | int,
) -> np.ndarray:
    """No members through the whole window while the lag grew from its first to its last
    sample."""
    out = np.zeros(committed.shape[0], dtype=np.int8)
    hit = np.nonzero(memberless(state[:, -1], members[:, -1]))[0]
    if hit.size == 0:
        return out
    width = committed.shape[1]
    n = count[hit]
    valid = valid_mask(n, width)
    gone = memberless(state[hit], members[hit])
    always_gone = np.all(~valid | gone, axis=1) & (n >= 2)
    first = np.clip(width - n.astype(np.int64), 0, width - 1)
    first_lag = current_lag(committed[hit, first], log_end[hit, first])
    last_lag = current_lag(committed[hit, -1], log_end[hit, -1])
    growing = (first_lag >= 0) & (last_lag > first_lag)
    out[hit] = np.where(always_gone & growing, _pick(severity, hit), 0)
    return out


# --------------------------------------------------------------------------------------------
# Rules on per-scan evidence (notifier.rules.evidence): they judge each group against its own
# habits instead of waiting for a ring of commits to fill.


@dataclass(slots=True)
class ProgressOutcome:
    """Per row: the severity code, and whether the row is stalled (members present) or
    stopped (no members) — the partition status a finding reports."""

    severity: np.ndarray
    stalled: np.ndarray
    stopped: np.ndarray


def no_progress(
    now_ms: int,
    wait_since: np.ndarray,
    wait_log_end: np.ndarray,
    usual_wait_ms: np.ndarray,
    memberless_since: np.ndarray,
    memberless_log_end: np.ndarray,
    usual_memberless_ms: np.ndarray,
    committed: np.ndarray,
    log_end: np.ndarray,
    present: np.ndarray,
    stall_after_ms: np.ndarray | float,
    stop_after_ms: np.ndarray | float,
    tolerance: np.ndarray | float,
    severity: np.ndarray | int,
) -> ProgressOutcome:
    """STALL: members present, the committed offset has not moved for longer than
    ``tolerance`` × the row's usual wait (at least ``stall_after``) while records arrived.
    STOP: no members for longer than ``tolerance`` × the group's usual restart (at least
    ``stop_after``) while records arrived that nobody reads."""
    stall_limit = np.maximum(stall_after_ms, tolerance * usual_wait_ms)
    stalled = (
        present
        & (wait_since != UNSET_TS)
        & (log_end > wait_log_end)
        & ((now_ms - wait_since) >= stall_limit)
    )
    stop_limit = np.maximum(stop_after_ms, tolerance * usual_memberless_ms)
    stopped = (
        ~present
        & (memberless_since != UNSET_TS)
        & (committed >= 0)
        & (log_end > committed)
        & (log_end > memberless_log_end)
        & ((now_ms - memberless_since) >= stop_limit)
    )
    out = np.where(stalled | stopped, severity, SEVERITY_NONE).astype(np.int8)
    return ProgressOutcome(severity=out, stalled=stalled, stopped=stopped)


def not_moved_since(
    firing: np.ndarray,
    firing_since: np.ndarray,
    moved_at: np.ndarray,
    log_end_at_move: np.ndarray,
    committed: np.ndarray,
    log_end: np.ndarray,
) -> np.ndarray:
    """Rows of a group already firing STOP or STALL whose offset has not moved since the
    episode began while records arrived that it has not read: members coming back (or a
    rebalance) do not end a STOP or STALL, the consumer reading again does. Without this a
    group that restarts but only commits minutes later would page "recovered", then page
    again for its lag."""
    return (
        firing
        & (firing_since >= 0)
        & (moved_at < firing_since)
        & (committed >= 0)
        & (log_end > committed)
        & (log_end > log_end_at_move)
    )


def rewound(rewind_from: np.ndarray, severity: np.ndarray | int) -> np.ndarray:
    """The committed offset went backwards and the consumer is not yet past where it was."""
    return np.where(rewind_from >= 0, severity, SEVERITY_NONE).astype(np.int8)


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


def churning(
    now_ms: int,
    churn_since: np.ndarray,
    churn_changes: np.ndarray,
    last_change: np.ndarray,
    churn_gap_ms: int,
    lasting_ms: np.ndarray | float,
    max_changes: np.ndarray | int,
    severity: np.ndarray | int,
) -> np.ndarray:
    """A run of member-set changes (each at most ``churn_gap`` after the previous) whose
    changes span ``lasting`` or more, with more than ``max_changes`` of them, and that is still
    going on (the last change at most ``churn_gap`` ago)."""
    hit = (
        (churn_since != UNSET_TS)
        & ((now_ms - last_change) <= churn_gap_ms)
        & ((last_change - churn_since) >= lasting_ms)
        & (churn_changes > max_changes)
    )
    return np.where(hit, severity, SEVERITY_NONE).astype(np.int8)
