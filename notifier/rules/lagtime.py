"""Lag in seconds from per-partition LEO tables (docs/architecture.md, "Lag in seconds", as Kafka
Lag Exporter does it).

Each (cluster, topic, partition) keeps up to ``P`` points ``(LEO, time)`` from successive scans,
oldest first and right-aligned in a row of a 2-D array (``count`` valid points at the end).

* A point whose time goes backwards is rejected.
* A point whose offset goes backwards means the log itself started over (the topic was
  recreated, the cluster rebuilt, a broker restarted empty): the old points describe a log that
  no longer exists, so the table starts again from the new point, and the reset is reported
  (:class:`LeoReset`) instead of turning into hours of false lag.
* A point with the same offset as the last two only moves the last point's time forward, so an
  idle partition keeps the moment its LEO last changed instead of filling the table.
* When full, the oldest point drops.

The lag of committed offset ``o`` at ``now`` is ``now - t(o)`` where ``t(o)`` is when the LEO was
``o``: linear interpolation between the last point with ``LEO <= o`` and the next one, or
extrapolation from the oldest and newest points when ``o`` is older than the table. Caught up
(``o >= newest LEO``) is 0. Fewer than two points is unknown (NaN), never 0. A flat table that is
not caught up has no slope: the lag is at least ``now - oldest time``, which is what we report.

Everything here is a pure function over numpy arrays; the store owns the arrays.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, cast

import numpy as np
from numpy.typing import NDArray

if TYPE_CHECKING:
    from notifier.rules.scancolumns import ScanColumns

NAN = float("nan")


@dataclass(frozen=True, slots=True)
class LeoReset:
    """A partition's log-end offset went backwards between two scans: its log started over."""

    cluster: str
    topic: str
    partition: int
    at: int
    """The scan that saw the lower offset (epoch ms)."""
    previous: int
    """The log-end offset the scan before saw."""
    current: int

    def to_dict(self) -> dict[str, Any]:
        return {
            "at": self.at,
            "previous_log_end_offset": self.previous,
            "log_end_offset": self.current,
        }


def append_points(
    leo: np.ndarray,
    times: np.ndarray,
    counts: np.ndarray,
    rows: np.ndarray,
    new_leo: np.ndarray,
    new_time: np.ndarray,
) -> NDArray[np.bool_]:
    """Add one point to each table in ``rows`` (unique), in place.

    Returns a mask over ``rows``: the tables that started over because the offset went
    backwards (they now hold the new point alone).
    """
    if rows.size == 0:
        return np.zeros(0, dtype=np.bool_)
    width = leo.shape[1]
    n = counts[rows]
    last_leo = leo[rows, -1]
    last_time = times[rows, -1]
    has_any = n > 0
    forward_in_time = ~has_any | (new_time > last_time)
    reset: NDArray[np.bool_] = has_any & forward_in_time & (new_leo < last_leo)
    if reset.any():
        target = rows[reset]
        leo[target] = 0
        times[target] = 0
        leo[target, -1] = new_leo[reset]
        times[target, -1] = new_time[reset]
        counts[target] = 1
    backwards = ~forward_in_time | reset
    flat = (n >= 2) & ~backwards & (new_leo == last_leo) & (leo[rows, -2] == last_leo)
    if flat.any():
        times[rows[flat], -1] = new_time[flat]
    grow = ~backwards & ~flat
    if grow.any():
        target = rows[grow]
        _push(leo, target, new_leo[grow])
        _push(times, target, new_time[grow])
        counts[target] = np.minimum(n[grow] + 1, width)
    return reset


def _push(points: Any, rows: np.ndarray, newest: np.ndarray) -> None:
    """Drop each row's oldest point and put ``newest`` last (a store's narrow column pushes
    its own codes)."""
    if isinstance(points, np.ndarray):
        points[rows, :-1] = points[rows, 1:]
        points[rows, -1] = newest
    else:
        points.push(rows, newest)


def _take(points: Any, rows: np.ndarray, slots: np.ndarray | int) -> np.ndarray:
    """The point at ``slots`` of each of ``rows``, as int64."""
    if isinstance(points, np.ndarray):
        # One gather from the flat array: cheaper than numpy's 2-D fancy indexing.
        taken: np.ndarray = points.reshape(-1)[rows * points.shape[1] + slots]
        return taken
    return np.asarray(points.take(rows, slots))


def resets_in_scan(
    scan: ScanColumns, scan_rows: np.ndarray, previous: np.ndarray
) -> list[LeoReset]:
    """The resets :func:`append_points` found, one per partition: ``scan_rows`` index the
    scan's rows that reset a table, ``previous`` holds those tables' newest offsets before."""
    return [
        LeoReset(scan.cluster, scan.topic[i], int(scan.partition[i]), scan.ts, int(before),
                 int(scan.log_end[i]))
        for i, before in zip(scan_rows.tolist(), previous.tolist(), strict=True)
    ]  # fmt: skip


def lag_seconds(
    leo: np.ndarray,
    times: np.ndarray,
    counts: np.ndarray,
    table_rows: np.ndarray,
    committed: np.ndarray,
    now_ms: int | np.ndarray,
) -> np.ndarray:
    """Seconds behind for each committed offset (``-1`` = no commit) against its table row.

    NaN where unknown. Vectorized with a batched binary search: about log2(P) gathers of one
    element per partition instead of a pass over every point.
    """
    size = table_rows.size
    result = np.full(size, NAN)
    if size == 0:
        return result
    width = leo.shape[1]
    n = counts[table_rows].astype(np.int64)
    tables = table_rows.astype(np.int64)
    newest_leo = _take(leo, tables, width - 1)
    known = (committed >= 0) & (n > 0)
    caught_up = known & (committed >= newest_leo)
    result[caught_up] = 0.0
    todo = known & ~caught_up & (n >= 2)
    if not todo.any():
        return result
    idx = np.nonzero(todo)[0]
    o = committed[idx]
    b = tables[idx]
    now = np.asarray(now_ms, dtype=np.float64)
    if now.ndim:
        now = now[idx]
    # Most consumers are less than one scan behind: their offset sits in the newest segment,
    # whose ends we can read without a search.
    prev_leo = _take(leo, b, width - 2)
    newest = prev_leo <= o
    at = np.empty(idx.size)
    if newest.any():
        bn = b[newest]
        left_leo = prev_leo[newest].astype(np.float64)
        right_leo = newest_leo[idx][newest].astype(np.float64)
        left_time = _take(times, bn, width - 2).astype(np.float64)
        right_time = _take(times, bn, width - 1).astype(np.float64)
        at[newest] = left_time + (o[newest].astype(np.float64) - left_leo) * (
            right_time - left_time
        ) / (right_leo - left_leo)
    rest = np.nonzero(~newest)[0]
    if rest.size:
        at[rest] = _interpolate_older(leo, times, b[rest], o[rest], n[idx][rest], width)
    result[idx] = np.maximum(0.0, (now - at) / 1000.0)
    return result


def _interpolate_older(
    leo: Any,
    times: Any,
    tables: np.ndarray,
    offsets: np.ndarray,
    counts: np.ndarray,
    width: int,
) -> NDArray[np.float64]:
    """When the LEO was each offset, for offsets older than the newest segment: a batched
    binary search for the last point <= the offset, then interpolation (or extrapolation from
    the oldest and newest points when the offset is older than the table)."""
    oldest = width - counts
    lo = oldest.astype(np.int64)
    hi = np.full(tables.size, width - 2, dtype=np.int64)
    while True:
        active = lo < hi
        if not active.any():
            break
        mid = (lo + hi) // 2
        go_right = _take(leo, tables, np.minimum(mid, width - 1)) <= offsets
        lo = np.where(active & go_right, mid + 1, lo)
        hi = np.where(active & ~go_right, mid, hi)
    below = lo - 1
    older = below < oldest
    left = np.where(older, oldest, below)
    right = np.where(older, width - 1, below + 1)
    left_leo = _take(leo, tables, left).astype(np.float64)
    right_leo = _take(leo, tables, right).astype(np.float64)
    left_time = _take(times, tables, left).astype(np.float64)
    right_time = _take(times, tables, right).astype(np.float64)
    span = right_leo - left_leo
    with np.errstate(divide="ignore", invalid="ignore"):
        at = left_time + (offsets.astype(np.float64) - left_leo) * (right_time - left_time) / span
    # A flat table has no slope: the records were produced before its oldest point.
    # numpy types the comparison, hence the np.where, as Any.
    return cast(
        "NDArray[np.float64]",
        np.where(span > 0, at, _take(times, tables, oldest).astype(np.float64)),
    )
