"""Reading a history (a dataset directory or one Parquet file) for a time range and a group
pattern: :func:`read_history`, and :func:`to_ms` for the time arguments."""

from __future__ import annotations

import os
import re
from datetime import UTC, date, datetime
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds
import pyarrow.parquet as pq

from notifier.history.errors import HistoryEmptyError, HistoryError, HistoryNotFoundError
from notifier.history.layout import (
    PARTITION_RE,
    conform,
    day_of_ms,
    history_files,
    validate_schema,
)
from notifier.types import SAMPLE_COLUMNS

TimeLike = datetime | date | pd.Timestamp | str | int | float
"""What the time-range arguments accept: an aware or naive (taken as UTC) datetime, an ISO 8601
string, or epoch milliseconds."""


# --------------------------------------------------------------------------------------------
# Time arguments


def to_ms(value: TimeLike) -> int:
    """Epoch milliseconds (UTC) from a datetime, date, ISO string or number of milliseconds."""
    if isinstance(value, bool):
        raise TypeError("a time cannot be a bool")
    if isinstance(value, int | float | np.integer | np.floating):
        return int(value)
    if isinstance(value, date) and not isinstance(value, datetime):
        value = datetime(value.year, value.month, value.day, tzinfo=UTC)
    stamp = pd.Timestamp(value)
    stamp = stamp.tz_localize("UTC") if stamp.tzinfo is None else stamp.tz_convert("UTC")
    return int(stamp.value // 1_000_000)


def _fmt_ms(ms: int | None) -> str:
    if ms is None:
        return "…"
    return datetime.fromtimestamp(ms / 1000, tz=UTC).isoformat(timespec="milliseconds")


# --------------------------------------------------------------------------------------------
# Reading


def read_history(
    path: str | os.PathLike[str],
    start: TimeLike | None = None,
    end: TimeLike | None = None,
    groups: str | None = None,
) -> pa.Table:
    """Read a history (a dataset directory or one Parquet file) into one table.

    Rows have ``start <= ts < end`` (either bound may be left out) and, when ``groups`` is
    given, a group name in which the regular expression matches somewhere (RE2 syntax as
    pyarrow evaluates it; anchor with ``^…$`` for whole names). Date partitions outside the
    range are not opened. The result is in :data:`SAMPLE_SCHEMA`, ordered by ``ts``.

    Raises :class:`HistoryNotFoundError` for a missing path, :class:`HistorySchemaError` for a
    file whose columns do not fit, :class:`HistoryEmptyError` when no row matches.
    This is the single-process reader; it holds the whole selection in memory.
    """
    root = Path(path)
    if not root.exists():
        raise HistoryNotFoundError(f"history path {root} does not exist")
    start_ms = None if start is None else to_ms(start)
    end_ms = None if end is None else to_ms(end)
    if start_ms is not None and end_ms is not None and end_ms <= start_ms:
        raise HistoryError(f"empty time range: end {_fmt_ms(end_ms)} <= start {_fmt_ms(start_ms)}")
    if groups is not None:
        try:
            re.compile(groups)
        except re.error as exc:
            raise HistoryError(f"invalid group regex {groups!r}: {exc}") from exc

    files = _files_in_range(history_files(root), start_ms, end_ms)
    if not files:
        # Either nothing at all, or no partition overlaps the range: the same answer for the user.
        raise HistoryEmptyError(_empty_message(root, start_ms, end_ms, groups))

    # Files written by different versions may differ in compatible types; read each schema
    # once (footers only, cheap) and scan each family of identical schemas on its own.
    families: dict[pa.Schema, list[Path]] = {}
    for file in files:
        schema = pq.read_schema(file)
        validate_schema(schema, file)
        families.setdefault(schema, []).append(file)

    tables = []
    for schema, members in families.items():
        dataset = ds.dataset([str(f) for f in members], schema=schema, format="parquet")
        expression = _filter(schema, start_ms, end_ms, groups)
        try:
            # A file written before a column existed lacks it: conform adds it.
            present = [name for name in SAMPLE_COLUMNS if name in schema.names]
            table = dataset.to_table(columns=present, filter=expression)
        except pa.ArrowInvalid as exc:
            hint = f" (the group regex {groups!r} is evaluated as RE2)" if groups else ""
            raise HistoryError(f"cannot read history at {root}: {exc}{hint}") from exc
        tables.append(conform(table, members[0] if len(members) == 1 else root))
    table = pa.concat_tables(tables) if len(tables) > 1 else tables[0]
    if table.num_rows == 0:
        raise HistoryEmptyError(_empty_message(root, start_ms, end_ms, groups))
    return _sorted_by_ts(table)


def _files_in_range(files: list[Path], start_ms: int | None, end_ms: int | None) -> list[Path]:
    """Skip date partitions that cannot hold rows of the range (files outside ``date=`` stay)."""
    first = None if start_ms is None else day_of_ms(start_ms)
    last = None if end_ms is None else day_of_ms(end_ms - 1)
    kept = []
    for file in files:
        match = PARTITION_RE.match(file.parent.name)
        if match:
            day = date.fromisoformat(match.group(1))
            if (first is not None and day < first) or (last is not None and day > last):
                continue
        kept.append(file)
    return kept


def _filter(
    schema: pa.Schema, start_ms: int | None, end_ms: int | None, groups: str | None
) -> ds.Expression | None:
    ts_type = schema.field("ts").type

    def bound(ms: int) -> pa.Scalar:
        # In the file's own timestamp type, so the filter is pushed down without casts. For
        # second timestamps, round up: ts >= 1.5 s means ts >= 2 s, ts < 1.5 s means ts < 2 s.
        if ts_type.unit == "s":
            return pa.scalar(-(-ms // 1000), type=ts_type)
        return pa.scalar(ms * {"ms": 1, "us": 1_000, "ns": 1_000_000}[ts_type.unit], type=ts_type)

    terms = []
    if start_ms is not None:
        terms.append(ds.field("ts") >= bound(start_ms))
    if end_ms is not None:
        terms.append(ds.field("ts") < bound(end_ms))
    if groups is not None:
        terms.append(pc.match_substring_regex(ds.field("group"), pattern=groups))
    if not terms:
        return None
    expression = terms[0]
    for term in terms[1:]:
        expression = expression & term
    return expression


def _sorted_by_ts(table: pa.Table) -> pa.Table:
    ts = table.column("ts").cast(pa.int64()).to_numpy()
    if ts.size > 1 and bool(np.any(ts[1:] < ts[:-1])):
        return table.take(np.argsort(ts, kind="stable"))
    return table


def _empty_message(root: Path, start_ms: int | None, end_ms: int | None, groups: str | None) -> str:
    if start_ms is None and end_ms is None:
        where = "at all"
    else:
        where = f"in the range [{_fmt_ms(start_ms)}, {_fmt_ms(end_ms)})"
    which = f" for groups matching {groups!r}" if groups is not None else ""
    return f"history at {root} has no rows {where}{which}"
