"""A group's lag over the last hours, read from the Parquet history the service writes, for the
status page's charts: total lag, the largest partition's lag and the furthest-behind
partition's lag in seconds at each scan, downsampled to a few hundred points, and the
thresholds of the rules that apply to the group.

The reads are bounded: at most :data:`MAX_HOURS` back, one group's rows, and the result at most
:data:`MAX_POINTS` points. They are blocking (Parquet and Arrow files), so the API runs them in
a worker thread. Besides the Parquet files, the rows of the roll under way are read from the
writer's journal (``.journal-*.arrows``, see :mod:`notifier.history`), so the chart reaches the
last scan instead of stopping at the last roll; a row found in both is counted once.

Lag in seconds is computed per partition from the history's own log-end offsets, as
``docs/architecture.md#lag-in-seconds`` describes (the time the log-end offset reached the
committed offset, interpolated between the scans around it), with every earlier scan of the
range as the table instead of the live service's last ``lag_time_points``. A log-end offset that
goes backwards starts the partition's table over, as it does live.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from notifier.history import HistoryEmptyError, HistoryNotFoundError, conform, read_history
from notifier.rules import RulesConfig
from notifier.rules.kinds import ChartLine, kind_of
from notifier.types import SAMPLE_SCHEMA, available_rows

MAX_HOURS = 48
"""The furthest back a chart reaches: a read is bounded whatever the request asks."""
DEFAULT_HOURS = 6
MAX_POINTS = 360
"""Points per series at most: about one per two pixels of a wide chart."""
JOURNAL_GLOB = ".journal-*.arrows"


def exact_group_pattern(group: str) -> str:
    """An anchored pattern matching exactly ``group``, read the same by Python's ``re`` (which
    :func:`read_history` checks it with) and RE2 (which pyarrow matches with): every ASCII
    character but letters, digits and ``_`` written as ``\\xHH``, so no group name can be read
    as regex syntax; other characters are never syntax in either."""
    escaped = "".join(
        f"\\x{ord(ch):02x}" if ch.isascii() and not (ch.isalnum() or ch == "_") else ch
        for ch in group
    )
    return f"^{escaped}$"


def read_group_rows(root: Path, cluster: str, group: str, start_ms: int, end_ms: int) -> pa.Table:
    """The history's rows of one group with ``start_ms <= ts < end_ms`` (Parquet files and the
    journal of the roll under way), in :data:`SAMPLE_SCHEMA`; empty when there are none."""
    tables = []
    with contextlib.suppress(HistoryEmptyError, HistoryNotFoundError):
        tables.append(read_history(root, start_ms, end_ms, groups=exact_group_pattern(group)))
    tables += [_journal_rows(path, group, start_ms, end_ms) for path in _journals(root)]
    tables = [t for t in tables if t.num_rows]
    if not tables:
        return SAMPLE_SCHEMA.empty_table()
    table = pa.concat_tables(tables)
    return table.filter(pc.equal(table.column("cluster"), cluster))


def _journals(root: Path) -> list[Path]:
    try:
        return sorted(root.glob(JOURNAL_GLOB))
    except OSError:
        return []


def _journal_rows(path: Path, group: str, start_ms: int, end_ms: int) -> pa.Table:
    """A journal's complete batches (the writer may be appending the next one, or may have
    just written the roll out and removed the file: both are fine)."""
    batches = []
    try:
        with pa.memory_map(str(path)) as source, pa.ipc.open_stream(source) as reader:
            while True:
                try:
                    batches.append(reader.read_next_batch())
                except StopIteration:
                    break
    except (OSError, pa.ArrowInvalid):
        pass  # gone, or cut mid-batch: the batches before the cut are kept
    if not batches:
        return SAMPLE_SCHEMA.empty_table()
    table = conform(pa.Table.from_batches(batches), path)
    ts = table.column("ts").cast(pa.int64())
    keep = pc.and_(
        pc.equal(table.column("group"), group),
        pc.and_(pc.greater_equal(ts, start_ms), pc.less(ts, end_ms)),
    )
    return table.filter(keep)


@dataclass(frozen=True, slots=True)
class LagSeries:
    """One group's lag at each scan (or each bucket of scans, keeping each bucket's worst)."""

    ts: np.ndarray
    """Epoch ms of each point (the last scan of its bucket)."""
    total_lag: np.ndarray
    max_partition_lag: np.ndarray
    max_lag_seconds: np.ndarray
    """NaN where no partition's lag in seconds is known."""
    scans: int
    """Scans the history holds in the range (before downsampling)."""
    bucket_ms: int
    """The width of a bucket; 0 when every scan is a point of its own."""

    def points(self) -> list[dict[str, Any]]:
        return [
            {
                "ts": int(t),
                "total_lag": int(total),
                "max_partition_lag": int(largest),
                "max_lag_seconds": None if math.isnan(seconds) else round(float(seconds), 1),
            }
            for t, total, largest, seconds in zip(
                self.ts.tolist(),
                self.total_lag.tolist(),
                self.max_partition_lag.tolist(),
                self.max_lag_seconds.tolist(),
                strict=True,
            )
        ]


def lag_series(
    table: pa.Table, start_ms: int, end_ms: int, max_points: int = MAX_POINTS
) -> LagSeries:
    """Per scan of ``table`` (one group's history rows): total lag, the largest partition's
    lag and the largest lag in seconds; more than ``max_points`` scans are put in equal time
    buckets, each keeping its worst values so a spike stays visible. A partition a scan could
    not read (marked unavailable) has no lag in it."""
    table = available_rows(table)
    if table.num_rows == 0:
        empty = np.zeros(0, dtype=np.int64)
        return LagSeries(empty, empty, empty, np.zeros(0), 0, 0)
    ts = table.column("ts").cast(pa.int64()).to_numpy()
    topic_codes = pc.dictionary_encode(table.column("topic")).combine_chunks().indices
    partition = table.column("partition").to_numpy().astype(np.int64)
    key = np.asarray(topic_codes, dtype=np.int64) << 32 | partition
    committed = table.column("committed_offset").fill_null(-1).to_numpy().astype(np.int64)
    leo = table.column("log_end_offset").to_numpy().astype(np.int64)

    # One row per (scan, partition): a row read from both a roll and its journal counts once.
    order = np.lexsort((ts, key))
    ts, key, committed, leo = ts[order], key[order], committed[order], leo[order]
    unique = np.ones(ts.size, dtype=np.bool_)
    unique[1:] = (ts[1:] != ts[:-1]) | (key[1:] != key[:-1])
    ts, key, committed, leo = ts[unique], key[unique], committed[unique], leo[unique]

    lag = np.where(committed >= 0, np.maximum(leo - committed, 0), 0)
    seconds = _lag_seconds(ts, key, committed, leo)

    scan_ts, scan_of_row = np.unique(ts, return_inverse=True)
    total = np.bincount(scan_of_row, weights=lag, minlength=scan_ts.size).astype(np.int64)
    largest = np.zeros(scan_ts.size, dtype=np.int64)
    np.maximum.at(largest, scan_of_row, lag)
    behind = np.full(scan_ts.size, np.nan)
    np.fmax.at(behind, scan_of_row, seconds)
    scans = int(scan_ts.size)
    if scans <= max_points:
        return LagSeries(scan_ts, total, largest, behind, scans, 0)

    bucket_ms = max(1, math.ceil((end_ms - start_ms) / max_points))
    bucket = np.clip((scan_ts - start_ms) // bucket_ms, 0, max_points - 1)
    buckets, bucket_of_scan = np.unique(bucket, return_inverse=True)
    size = buckets.size
    b_ts = np.zeros(size, dtype=np.int64)
    np.maximum.at(b_ts, bucket_of_scan, scan_ts)
    b_total = np.zeros(size, dtype=np.int64)
    np.maximum.at(b_total, bucket_of_scan, total)
    b_largest = np.zeros(size, dtype=np.int64)
    np.maximum.at(b_largest, bucket_of_scan, largest)
    b_behind = np.full(size, np.nan)
    np.fmax.at(b_behind, bucket_of_scan, behind)
    return LagSeries(b_ts, b_total, b_largest, b_behind, scans, bucket_ms)


def _lag_seconds(
    ts: np.ndarray, key: np.ndarray, committed: np.ndarray, leo: np.ndarray
) -> np.ndarray:
    """Seconds behind of each row (sorted by partition, then time): the time the partition's
    log-end offset reached the committed offset, interpolated between the last scan whose
    log-end offset was at or below it and the next one. Caught up: 0; no commit: NaN; older
    than the partition's first scan in range: extrapolated at the rate seen since."""
    seconds = np.full(ts.size, np.nan)
    if ts.size == 0:
        return seconds
    start = np.ones(ts.size, dtype=np.bool_)
    start[1:] = (key[1:] != key[:-1]) | (leo[1:] < leo[:-1])
    bounds = np.append(np.flatnonzero(start), ts.size)
    for a, b in zip(bounds[:-1].tolist(), bounds[1:].tolist(), strict=True):
        t = ts[a:b].astype(np.float64)
        log_end = leo[a:b]
        offset = committed[a:b]
        out = seconds[a:b]
        out[(offset >= 0) & (offset >= log_end)] = 0.0
        behind = np.flatnonzero((offset >= 0) & (offset < log_end))
        if behind.size == 0:
            continue
        o = offset[behind]
        last_at_or_below = np.searchsorted(log_end, o, side="right") - 1
        inside = last_at_or_below >= 0
        at = np.full(behind.size, np.nan)
        j = last_at_or_below[inside]
        left_leo, right_leo = log_end[j].astype(np.float64), log_end[j + 1].astype(np.float64)
        at[inside] = t[j] + (o[inside] - left_leo) * (t[j + 1] - t[j]) / (right_leo - left_leo)
        # Older than the first scan in range: extrapolate from the first scan at the rate seen
        # up to this one (a first scan alone says nothing: unknown).
        older = np.flatnonzero(~inside)
        rows = behind[older]
        produced = (log_end[rows] - log_end[0]).astype(np.float64)
        elapsed = t[rows] - t[0]
        with np.errstate(divide="ignore", invalid="ignore"):
            rate = np.where(produced > 0, produced / elapsed, 0.0)
            at[older] = np.where(
                rate > 0, t[0] - (log_end[0] - o[~inside]) / rate, np.where(rows > 0, t[0], np.nan)
            )
        out[behind] = np.maximum(0.0, (t[behind] - at) / 1000.0)
    return seconds


def _burrow_line(burrow: Any) -> ChartLine | None:
    """Burrow's ``allowed_lag``, when it allows some lag (Burrow's section is no rule kind)."""
    if burrow.allowed_lag <= 0:
        return None
    return ChartLine("lag", "partition", float(burrow.allowed_lag), None, "err")


def thresholds(
    rules: RulesConfig, cluster: str, group: str, topics: list[str]
) -> list[dict[str, Any]]:
    """The lines to draw on a group's charts: every enabled rule whose kind draws one
    (:attr:`~notifier.rules.kinds.RuleKind.chart_line`) that applies to one of the group's
    topics (with its override for that topic), and Burrow's ``allowed_lag`` when Burrow's
    rules notify and allow some lag."""
    lines: dict[tuple[Any, ...], dict[str, Any]] = {}
    for topic in sorted(set(topics)) or [""]:
        candidates: list[Any] = [rules.burrow, *rules.rules]
        for rule in candidates:
            chart_line: Callable[[Any], ChartLine | None] | None
            if rule is rules.burrow:
                name, chart_line = "burrow", _burrow_line
            else:
                name, chart_line = rule.name, kind_of(rule.kind).chart_line
            if chart_line is None or not rule.applies_to(cluster, group, topic):
                continue
            resolved = rule.resolved_for(cluster, group, topic)
            if not resolved.enabled:
                continue
            drawn = chart_line(resolved)
            if drawn is None:
                continue
            line = {
                "rule": name,
                "metric": drawn.metric,
                "scope": drawn.scope,
                "value": drawn.value,
                "clear_below": drawn.clear_below,
                "severity": drawn.severity,
            }
            identity = tuple(line.values())
            entry = lines.setdefault(identity, {**line, "topics": []})
            if topic:
                entry["topics"].append(topic)
    return list(lines.values())
