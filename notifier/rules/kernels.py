"""Burrow's rules and what every rule kind shares, vectorized over many windows at once.

Every function takes numpy arrays (one row per group-partition window, oldest entry first,
right-aligned: ``count`` valid entries at the end of each row) and returns arrays. No I/O, no
state: the evaluator feeds them from the store, the backtest from history, the tests from
Burrow's own vectors. The other kinds' kernels are in their own modules
(:mod:`notifier.rules.kinds`).

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

from notifier.rules.habits import memberless
from notifier.rules.narrow import ColumnReader

OK, WARN, STOP, STALL, REWIND = range(5)
"""Partition status codes (the index into :data:`notifier.types.PARTITION_STATUS_CODES`)."""

SEVERITY_NONE, SEVERITY_WARN, SEVERITY_ERR = 0, 1, 2
"""Per-row rule outcome codes: not firing, firing as WARN, firing as ERR."""

_I64_MIN = np.iinfo(np.int64).min
_I64_MAX = np.iinfo(np.int64).max


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

    @classmethod
    def scatter(
        cls, whole: BurrowOutcome | None, n: int, part: slice | np.ndarray, chunk: BurrowOutcome
    ) -> BurrowOutcome:
        """``chunk``, the outcome of positions ``part`` of ``n`` rows, put in ``whole`` (None:
        the first chunk; a chunk of every row is the whole as it is)."""
        if whole is None:
            if isinstance(part, slice) and part.start in (0, None) and part.stop == n:
                return chunk
            whole = cls(*(np.empty(n, getattr(chunk, f).dtype) for f in _OUTCOME_FIELDS))
        for f in _OUTCOME_FIELDS:
            getattr(whole, f)[part] = getattr(chunk, f)
        return whole


def burrow_status(
    ring_offset: np.ndarray,
    ring_ts: np.ndarray | ColumnReader,
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

    ``ring_ts`` is read at each ring's first and last entry only. ``broker_offsets`` are the
    stored LEOs (with ``broker_valid``), ``current_lag`` the latest
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


_OUTCOME_FIELDS = tuple(BurrowOutcome.__dataclass_fields__)


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
    # Unset slots hold a time far in the past (habits.UNSET_TS), so the step from the last
    # unset slot to the first sample is always a gap: no validity mask needed.
    broken = np.diff(ts, axis=1) > max_gap_ms
    trailing = np.where(broken.any(axis=1), np.argmax(broken[:, ::-1], axis=1), width - 1)
    fresh = (count > 0) & ((now_ms - ts[:, -1]) <= max_gap_ms)
    return np.where(fresh, (trailing + 1) / width, 0.0)


def current_lag(committed: np.ndarray, log_end: np.ndarray) -> np.ndarray:
    """LEO minus committed, clamped at 0; ``-1`` where there is no commit."""
    return np.where(committed >= 0, np.maximum(0, log_end - committed), -1)


def pick(value: np.ndarray | float, rows: np.ndarray) -> np.ndarray | float:
    """A per-row parameter at ``rows`` (a scalar stays as it is)."""
    return value[rows] if isinstance(value, np.ndarray) else value
