"""A plain, one-partition-at-a-time reference implementation of every rule.

Written for clarity, straight from docs/architecture.md ("Burrow's rules", "Lag in seconds")
and the rules' docs, with no numpy. The vectorized kernels in ``notifier.rules.kernels`` must
agree with it on every window (see ``test_rules_property.py``).
"""

from __future__ import annotations

from dataclasses import dataclass
from itertools import pairwise

REBALANCING = {"PreparingRebalance", "CompletingRebalance", "Unknown"}
MEMBERLESS = {"Empty", "Dead"}


@dataclass
class Commit:
    offset: int
    timestamp: int
    lag: int | None


def burrow(
    ring: list[Commit],
    broker_offsets: list[int],
    current_lag: int | None,
    now_ms: int,
    allowed_lag: int,
    complete: float,
    minimum_complete: float,
) -> tuple[str, dict]:
    """Burrow's per-partition status and its intermediate rule results."""
    rules: dict = {}
    if ring:
        first, last = ring[0], ring[-1]
        rules["stopped"] = (now_ms - last.timestamp) > (last.timestamp - first.timestamp)
        rules["recent_lag_zero"] = any(b <= last.offset for b in broker_offsets)
    else:
        rules["stopped"] = False
        rules["recent_lag_zero"] = any(b <= -1 for b in broker_offsets)
    rewind_index = -1
    unrecovered = False
    for i in range(1, len(ring)):
        if ring[i].offset < ring[i - 1].offset:
            rewind_index = i
            if all(later.offset < ring[i - 1].offset for later in ring[i:]):
                unrecovered = True
    rules["rewind_index"] = rewind_index
    lags = [c.lag for c in ring if c.lag is not None]
    rules["lag_always_not_zero"] = not any(lag <= allowed_lag for lag in lags)
    rules["stalled"] = bool(ring) and all(c.offset == ring[0].offset for c in ring)
    rules["lag_not_decreasing"] = all(b >= a for a, b in pairwise(lags))

    if not ring or complete < minimum_complete:
        return "OK", rules
    if current_lag is None or current_lag <= allowed_lag:
        return "OK", rules
    if rules["stopped"] and not rules["recent_lag_zero"]:
        return "STOP", rules
    if unrecovered:
        return "REWIND", rules
    if not rules["lag_always_not_zero"]:
        return "OK", rules
    if rules["stalled"]:
        return "STALL", rules
    if rules["lag_not_decreasing"]:
        return "WARN", rules
    return "OK", rules


def split_stop_stall(status: str, state: str, members: int) -> str:
    if status in ("STOP", "STALL"):
        return "STALL" if members > 0 and state not in MEMBERLESS else "STOP"
    return status


@dataclass
class Point:
    ts: int
    committed: int | None
    log_end: int
    log_start: int | None
    state: str
    members: int
    member_changed: bool


def window_complete(window: list[Point], width: int, now_ms: int, max_gap_ms: int) -> float:
    if not window or now_ms - window[-1].ts > max_gap_ms:
        return 0.0
    run = 1
    for newer, older in zip(reversed(window), list(reversed(window))[1:]):
        if newer.ts - older.ts > max_gap_ms:
            break
        run += 1
    return min(run, width) / width


def lag_of(point: Point) -> int | None:
    if point.committed is None:
        return None
    return max(0, point.log_end - point.committed)


def stuck_rebalance(window: list[Point], samples: int) -> bool:
    run = 0
    for point in reversed(window):
        if point.state not in REBALANCING:
            break
        run += 1
    return run >= samples


def rebalance_storm(window: list[Point], max_changes: int) -> bool:
    return sum(p.member_changed for p in window) > max_changes


def retention(point: Point, warn_fraction: float) -> str | None:
    """ "lost", "near" or None."""
    if point.committed is None or point.log_start is None or point.log_end <= point.committed:
        return None
    if point.committed < point.log_start:
        return "lost"
    retained = max(point.log_end - point.log_start, 0)
    trimmed = point.log_start > 0
    if trimmed and point.committed - point.log_start < warn_fraction * retained:
        return "near"
    return None


def consumers_gone(window: list[Point]) -> bool:
    if len(window) < 2:
        return False
    if not all(p.members == 0 or p.state in MEMBERLESS for p in window):
        return False
    first, last = lag_of(window[0]), lag_of(window[-1])
    return first is not None and last is not None and last > first


def lag_seconds(table: list[tuple[int, int]], committed: int | None, now_ms: int) -> float | None:
    """Kafka Lag Exporter's estimate from (LEO, time ms) points, oldest first."""
    if committed is None or not table:
        return None
    if committed >= table[-1][0]:
        return 0.0
    if len(table) < 2:
        return None
    below = [i for i, (leo, _) in enumerate(table) if leo <= committed]
    if below:
        i = below[-1]
        (l0, t0), (l1, t1) = table[i], table[i + 1]
    else:
        (l0, t0), (l1, t1) = table[0], table[-1]
    at = table[0][1] if l1 == l0 else t0 + (committed - l0) * (t1 - t0) / (l1 - l0)
    return max(0.0, (now_ms - at) / 1000)


def add_leo_point(table: list[tuple[int, int]], leo: int, ts: int, size: int) -> None:
    if table and (ts <= table[-1][1] or leo < table[-1][0]):
        return
    if len(table) >= 2 and table[-1][0] == leo and table[-2][0] == leo:
        table[-1] = (leo, ts)
        return
    table.append((leo, ts))
    if len(table) > size:
        table.pop(0)
