"""The sample history: a Hive-partitioned Parquet dataset in :data:`SAMPLE_SCHEMA`.

Layout (a public contract, shared by the live writer, the synthetic generator and the backtest)::

    <root>/date=YYYY-MM-DD/part-<start-ms>-<id>.parquet

``date`` is the UTC date of ``ts``; the files hold exactly the sample columns (the date lives only
in the directory name). There is one row per group-partition per successful scan; a failed scan
writes nothing, so a gap in the history is the absence of rows. Files are written under a hidden
temporary name and renamed into place, so a reader never sees half a file, and names starting
with ``.`` or ``_`` are never part of the dataset.

Crash safety: the rows of the roll under way are also appended, scan by scan, to a hidden journal
(``<root>/.journal-<start-ms>-<id>.arrows``, an Arrow IPC stream, fsynced after every scan). A
roll written in full removes its journal; a journal still there when a writer starts was left by
a crash, and its rows are written out as the Parquet files the roll would have written (same
names, so a crash after some of them were renamed writes no row twice). A ``kill -9`` loses at
most the scan being journaled at that moment, not the ``roll_interval`` behind it.
"""

from __future__ import annotations

import functools
import logging
import os
import re
import shutil
import threading
import time
import uuid
from collections.abc import Callable
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds
import pyarrow.parquet as pq

from notifier.types import SAMPLE_COLUMNS, SAMPLE_SCHEMA

log = logging.getLogger(__name__)

DAY_MS = 86_400_000
PARTITION_KEY = "date"
_PARTITION_RE = re.compile(r"^date=(\d{4}-\d{2}-\d{2})$")
_JOURNAL_RE = re.compile(r"^\.journal-(\d{13})-([0-9a-f]{32})\.arrows$")
_JOURNAL_OPTIONS = pa.ipc.IpcWriteOptions(compression="zstd")
PARQUET_COMPRESSION = "zstd"
"""Faster to write than snappy here and half the size on sample data."""

TimeLike = datetime | date | pd.Timestamp | str | int | float
"""What the time-range arguments accept: an aware or naive (taken as UTC) datetime, an ISO 8601
string, or epoch milliseconds."""


# --------------------------------------------------------------------------------------------
# Errors


class HistoryError(Exception):
    """Any problem reading or writing the history; the message is meant for the user."""


class HistoryNotFoundError(HistoryError):
    """The history (or incidents) path does not exist."""


class HistoryEmptyError(HistoryError):
    """The history holds no rows at all, or none in the requested range."""


class HistorySchemaError(HistoryError):
    """A file's columns do not match :data:`SAMPLE_SCHEMA` (missing or mistyped columns)."""


class HistoryWriteError(HistoryError):
    """Queued rows could not be written (they stay queued; the writer retries)."""


class IncidentsError(HistoryError):
    """A labelled incidents file is missing a column or holds a value that cannot be parsed."""


# --------------------------------------------------------------------------------------------
# Layout helpers


def partition_name(day: date) -> str:
    """The directory name of a date partition (``date=YYYY-MM-DD``)."""
    return f"{PARTITION_KEY}={day.isoformat()}"


def day_of_ms(ts_ms: int) -> date:
    """The UTC date a millisecond timestamp falls on (which partition a row belongs to)."""
    return date(1970, 1, 1) + timedelta(days=ts_ms // DAY_MS)


def part_file_name(start_ms: int, token: str | None = None) -> str:
    """``part-<start-ms>-<token>.parquet``; the zero-padded start keeps names in time order."""
    return f"part-{start_ms:013d}-{token or uuid.uuid4().hex}.parquet"


def write_parquet_atomic(path: Path, write: Callable[[Any], None]) -> None:
    """Run ``write(file_object)`` against a hidden temporary file, then rename it to ``path``.

    The rename is atomic on one file system, so readers see either no file or the whole file;
    the data is fsynced first so a crash cannot leave a renamed but empty file behind.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{uuid.uuid4().hex[:8]}.tmp")
    try:
        with open(tmp, "wb") as handle:
            write(handle)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def history_files(root: Path) -> list[Path]:
    """The visible Parquet files of a history, oldest partition first.

    Only ``date=*`` directories are read when there are any, so files kept beside the dataset
    (``incidents.csv``, notes) never get mistaken for history.
    """
    if root.is_file():
        return [root]
    partitions = sorted(p for p in root.iterdir() if p.is_dir() and _PARTITION_RE.match(p.name))
    folders = partitions or [root]
    return [
        f
        for folder in folders
        for f in sorted(folder.iterdir())
        if f.is_file() and f.suffix == ".parquet" and not f.name.startswith((".", "_"))
    ]


# --------------------------------------------------------------------------------------------
# Schema checks


def _is_string(t: pa.DataType) -> bool:
    if pa.types.is_dictionary(t):
        return _is_string(t.value_type)
    return pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_string_view(t)


def _compatible(expected: pa.Field, found: pa.DataType) -> bool:
    """Whether ``found`` converts to the expected type without changing a meaningful value."""
    want = expected.type
    if found.equals(want):
        return True
    if pa.types.is_timestamp(want):
        # Any unit, any zone: Arrow keeps timestamps as UTC instants, so a cast is exact up to
        # sub-millisecond truncation, and naive timestamps are taken as UTC.
        return pa.types.is_timestamp(found)
    if pa.types.is_string(want):
        return _is_string(found)
    if pa.types.is_integer(want):
        # int64 partition/members or int32 offsets are harmless; the cast checks the range.
        return pa.types.is_integer(found) or (expected.nullable and pa.types.is_null(found))
    return False


def validate_schema(schema: pa.Schema, path: str | os.PathLike[str]) -> None:
    """Raise :class:`HistorySchemaError` unless ``schema`` holds every sample column.

    The message names ``path`` and lists every missing column and every mistyped column with
    the expected and the found type, so one run shows everything that needs fixing. Extra
    columns (such as the ``date`` partition key) are ignored.
    """
    missing: list[str] = []
    mistyped: list[str] = []
    for expected in SAMPLE_SCHEMA:
        index = schema.get_field_index(expected.name)
        if index < 0:
            missing.append(expected.name)
            continue
        found = schema.field(index).type
        if not _compatible(expected, found):
            mistyped.append(f"{expected.name} (expected {expected.type}, found {found})")
    if missing or mistyped:
        problems = []
        if missing:
            problems.append("missing columns: " + ", ".join(missing))
        if mistyped:
            problems.append("mistyped columns: " + "; ".join(mistyped))
        raise HistorySchemaError(f"{path} does not hold the sample schema: " + "; ".join(problems))


def conform(table: pa.Table, path: str | os.PathLike[str] = "<table>") -> pa.Table:
    """Return ``table`` as exactly :data:`SAMPLE_SCHEMA` (column order, types, no extras).

    Validates first (:func:`validate_schema`), then casts the compatible types; values that do
    not fit (an int64 partition beyond int32) or nulls in a non-nullable column raise
    :class:`HistorySchemaError` naming the column and ``path``.
    """
    if table.schema.equals(SAMPLE_SCHEMA):
        return table
    validate_schema(table.schema, path)
    columns = []
    for field in SAMPLE_SCHEMA:
        column = table.column(field.name)
        if not column.type.equals(field.type):
            try:
                # Timestamps may lose sub-millisecond digits (harmless); integers must fit.
                column = column.cast(field.type, safe=not pa.types.is_timestamp(field.type))
            except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as exc:
                raise HistorySchemaError(
                    f"{path}: column {field.name} cannot be read as {field.type}: {exc}"
                ) from exc
        if not field.nullable and column.null_count:
            raise HistorySchemaError(
                f"{path}: column {field.name} has {column.null_count} null values "
                "but may not be null"
            )
        columns.append(column)
    return pa.Table.from_arrays(columns, schema=SAMPLE_SCHEMA)


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
            table = dataset.to_table(columns=list(SAMPLE_COLUMNS), filter=expression)
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
        match = _PARTITION_RE.match(file.parent.name)
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


# --------------------------------------------------------------------------------------------
# Labelled incidents

INCIDENT_COLUMNS = ("cluster", "group", "start", "end")


def load_incidents(path: str | os.PathLike[str]) -> pd.DataFrame:
    """Read labelled incidents (CSV or Parquet): ``cluster, group, start, end`` and ``kind``.

    ``start``/``end`` become UTC timestamps (ISO strings, naive taken as UTC, or epoch
    milliseconds); ``kind`` is optional (empty when absent); extra columns are kept.
    Raises :class:`HistoryNotFoundError` or :class:`IncidentsError` naming the file and the
    missing column or the row and value that could not be parsed.
    """
    file = Path(path)
    if not file.exists():
        raise HistoryNotFoundError(f"incidents file {file} does not exist")
    try:
        if _is_parquet(file):
            frame = pd.read_parquet(file)
        else:
            frame = pd.read_csv(file, dtype={"cluster": str, "group": str, "kind": str})
    except pd.errors.EmptyDataError as exc:
        raise IncidentsError(f"incidents file {file} is empty (no header)") from exc
    except (OSError, ValueError, pa.ArrowException) as exc:
        raise IncidentsError(f"cannot read incidents file {file}: {exc}") from exc

    missing = [c for c in INCIDENT_COLUMNS if c not in frame.columns]
    if missing:
        raise IncidentsError(
            f"incidents file {file} lacks column(s) {', '.join(missing)} "
            f"(has: {', '.join(map(str, frame.columns))})"
        )
    for column in ("cluster", "group"):
        blank = frame[column].isna() | (frame[column].astype(str).str.strip() == "")
        if blank.any():
            row = int(np.flatnonzero(blank.to_numpy())[0])
            raise IncidentsError(f"incidents file {file}, row {row + 1}: {column} is empty")
        frame[column] = frame[column].astype(str)
    for column in ("start", "end"):
        frame[column] = _parse_times(frame[column], file, column)
    backwards = frame["end"] < frame["start"]
    if backwards.any():
        row = int(np.flatnonzero(backwards.to_numpy())[0])
        raise IncidentsError(
            f"incidents file {file}, row {row + 1}: end {frame['end'].iloc[row]} "
            f"is before start {frame['start'].iloc[row]}"
        )
    if "kind" not in frame.columns:
        frame["kind"] = ""
    frame["kind"] = frame["kind"].fillna("").astype(str)
    extras = [c for c in frame.columns if c not in (*INCIDENT_COLUMNS, "kind")]
    return frame[[*INCIDENT_COLUMNS, "kind", *extras]].reset_index(drop=True)


def _is_parquet(file: Path) -> bool:
    if file.is_dir() or file.suffix.lower() in (".parquet", ".pq"):
        return True
    with open(file, "rb") as handle:
        return handle.read(4) == b"PAR1"


def _parse_times(values: pd.Series, file: Path, column: str) -> pd.Series:
    if pd.api.types.is_datetime64_any_dtype(values.dtype):
        parsed = pd.to_datetime(values, utc=True)
    elif pd.api.types.is_numeric_dtype(values.dtype):
        parsed = pd.to_datetime(values, unit="ms", utc=True, errors="coerce")
    else:
        parsed = pd.to_datetime(values, utc=True, errors="coerce", format="ISO8601")
    bad = parsed.isna()
    if bad.any():
        row = int(np.flatnonzero(bad.to_numpy())[0])
        raise IncidentsError(
            f"incidents file {file}, row {row + 1}: {column} {values.iloc[row]!r} "
            "is not a timestamp (use ISO 8601, e.g. 2026-11-21T10:00:00Z, or epoch ms)"
        )
    return parsed.astype("datetime64[ms, UTC]")


# --------------------------------------------------------------------------------------------
# Writing


class _Journal:
    """The rows of one roll, appended to a hidden Arrow IPC stream and fsynced scan by scan,
    so that a crash before the roll is written loses nothing (see the module docstring)."""

    def __init__(self, root: Path, start_ms: int, token: str, tables: list[pa.Table]) -> None:
        self.start_ms = start_ms
        self.token = token
        self.path = root / f".journal-{start_ms:013d}-{token}.arrows"
        root.mkdir(parents=True, exist_ok=True)
        self._file = open(self.path, "wb")  # noqa: SIM115 - open for the roll's lifetime
        self._stream = pa.ipc.new_stream(self._file, SAMPLE_SCHEMA, options=_JOURNAL_OPTIONS)
        self.append(tables)

    def append(self, tables: list[pa.Table]) -> None:
        for table in tables:
            self._stream.write_table(table)
        self._file.flush()
        os.fsync(self._file.fileno())

    def discard(self) -> None:
        """The roll is written (or rewritten into a new journal): this one is not needed."""
        try:
            self._stream.close()
        finally:
            self._file.close()
            self.path.unlink(missing_ok=True)


def recover_journals(root: Path) -> int:
    """Write out the rows of journals a crashed writer left in ``root``, as the Parquet files
    their rolls would have written, and remove the journals; returns the rows recovered. A
    journal cut short mid-scan keeps every scan before the cut."""
    if not root.is_dir():
        return 0
    recovered = 0
    for journal in sorted(root.iterdir()):
        match = _JOURNAL_RE.match(journal.name)
        if not match:
            continue
        try:
            recovered += _recover_journal(root, journal, int(match.group(1)), match.group(2))
        except Exception as exc:  # an unwritable history must not stop the service starting
            log.error("history journal %s cannot be written out (%s); kept for the next start",
                      journal, exc, extra={"event": "history_recovery_failed"})  # fmt: skip
    if recovered:
        log.warning("recovered %d history rows that a crash left unwritten", recovered)
    return recovered


def _recover_journal(root: Path, journal: Path, start_ms: int, token: str) -> int:
    """Write out one journal's rows as its roll's files and remove it; returns the rows."""
    tables = []
    try:
        with pa.ipc.open_stream(pa.memory_map(str(journal))) as reader:
            while True:
                try:
                    tables.append(pa.Table.from_batches([reader.read_next_batch()]))
                except StopIteration:
                    break
    except (pa.ArrowInvalid, OSError) as exc:
        # A torn last batch (the crash came mid-write): everything before it counts.
        log.warning("history journal %s ends in a torn write (%s); keeping the rows before",
                    journal, exc)  # fmt: skip
    rows_written = 0
    if tables:
        table = conform(pa.concat_tables(tables), journal)
        for day, rows in _split_by_day(table).items():
            path = root / partition_name(day) / part_file_name(start_ms, token)
            write_parquet_atomic(path, functools.partial(_write_table, rows))
        rows_written = table.num_rows
    journal.unlink()
    return rows_written


class HistoryWriter:
    """Appends scan tables to the history from the scan loop without ever blocking it.

    :meth:`append` only queues the table; the background thread journals it at once (see the
    module docstring: a crash loses at most the scan being journaled). Every
    ``roll_interval_s`` (or sooner, once more than ``max_queued_rows`` are queued) the thread
    writes the queued rows as one file per date partition (atomically, see
    :func:`write_parquet_atomic`), then prunes partitions older than ``retention_days``
    (``<= 0`` keeps everything). A new writer first recovers the journals a crash left
    (:attr:`recovered_rows`).

    Rows are kept in memory until their file is in place rather than streamed into open
    files, so a failed write loses nothing: the error is logged, counted in :attr:`errors`,
    and the same rows are tried again after ``retry_s``. Only while writes keep failing and
    more than ``max_queued_rows`` pile up are the oldest dropped, logged and counted in
    :attr:`dropped_rows` (memory has to be bounded somewhere).
    """

    def __init__(
        self,
        root: Path,
        roll_interval_s: float = 300,
        retention_days: int = 14,
        *,
        retry_s: float = 5.0,
        max_queued_rows: int = 5_000_000,
    ) -> None:
        if roll_interval_s <= 0:
            raise ValueError("roll_interval_s must be positive")
        self.root = Path(root)
        self.roll_interval_s = float(roll_interval_s)
        self.retention_days = int(retention_days)
        self.retry_s = float(retry_s)
        self.max_queued_rows = int(max_queued_rows)
        self.errors = 0
        self.last_error: BaseException | None = None
        self.last_error_text: str | None = None
        self.failing_since_ms: int | None = None
        self._failing: set[str] = set()  # operations whose last attempt failed
        self._errors_before_failing = 0
        self.rows_written = 0
        self.files_written = 0
        self.dropped_rows = 0
        self.journaled_rows = 0
        self.recovered_rows = recover_journals(self.root)

        self._cond = threading.Condition()
        self._incoming: list[pa.Table] = []
        self._queued_rows = 0  # rows appended and not yet written (incoming + pending)
        self._flush_requested = 0  # sequence numbers: a flush waits for its own to be served
        self._flush_served = 0
        self._flush_error: HistoryWriteError | None = None
        self._closing = False
        self._closed = False
        # Owned by the writer thread only.
        self._pending: list[pa.Table] = []
        self._journal: _Journal | None = None
        self._roll_started_ms: int | None = None
        self._roll_deadline: float | None = None
        self._retry_at: float | None = None

        self._thread = threading.Thread(target=self._run, name="history-writer", daemon=True)
        self._thread.start()

    # -- scan-loop side ----------------------------------------------------------------------

    def append(self, table: pa.Table) -> None:
        """Queue one scan's rows (cheap: a schema check and a list append under a lock)."""
        if self._closing:
            raise HistoryError("history writer is closed")
        if table.num_rows == 0:
            return
        table = conform(table, "appended table")
        with self._cond:
            self._incoming.append(table)
            self._queued_rows += table.num_rows
            self._cond.notify()

    @property
    def queued_rows(self) -> int:
        """Rows appended but not yet in a renamed file."""
        return self._queued_rows

    def flush(self, timeout: float | None = None) -> None:
        """Write everything queued so far and close the current roll (blocks until done).

        Raises :class:`HistoryWriteError` when the write failed; the rows stay queued.
        """
        with self._cond:
            if self._closed:
                return
            self._flush_requested += 1
            ticket = self._flush_requested
            self._cond.notify()
            if not self._cond.wait_for(lambda: self._flush_served >= ticket, timeout=timeout):
                raise HistoryWriteError(f"history flush to {self.root} timed out")
            error = self._flush_error
        if error is not None:
            raise error

    def close(self, timeout: float | None = None) -> None:
        """Flush and stop the thread; raises :class:`HistoryWriteError` if rows stay unwritten."""
        if self._closed:
            return
        try:
            self.flush(timeout=timeout)
        finally:
            with self._cond:
                self._closing = True
                self._cond.notify()
            self._thread.join(timeout=timeout)
            self._closed = True
            if self._queued_rows:
                log.error("history writer closed with %d rows unwritten", self._queued_rows)

    def __enter__(self) -> HistoryWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- retention ---------------------------------------------------------------------------

    def prune(self, now: datetime | None = None) -> list[Path]:
        """Remove date partitions entirely older than ``retention_days`` before ``now``.

        A partition is renamed to a hidden name first, so readers listing the dataset stop
        seeing it at once, then deleted. Returns the partitions removed.
        """
        if self.retention_days <= 0 or not self.root.exists():
            return []
        now = now or datetime.now(UTC)
        if now.tzinfo is None:
            now = now.replace(tzinfo=UTC)
        cutoff = (now.astimezone(UTC) - timedelta(days=self.retention_days)).date()
        removed = []
        for folder in sorted(self.root.iterdir()):
            match = _PARTITION_RE.match(folder.name)
            if not match or not folder.is_dir() or date.fromisoformat(match.group(1)) >= cutoff:
                continue
            doomed = folder.with_name(f".pruning-{folder.name}-{uuid.uuid4().hex[:8]}")
            os.replace(folder, doomed)
            shutil.rmtree(doomed, ignore_errors=True)
            removed.append(folder)
        if removed:
            log.info("pruned %d history partitions older than %s", len(removed), cutoff)
        return removed

    # -- writer thread -----------------------------------------------------------------------

    def _run(self) -> None:
        while True:
            with self._cond:
                self._cond.wait_for(self._has_work, timeout=self._wait_timeout())
                incoming, self._incoming = self._incoming, []
                ticket = self._flush_requested
                closing = self._closing
            if incoming and self._roll_started_ms is None:
                self._roll_started_ms = int(time.time() * 1000)
                self._roll_deadline = time.monotonic() + self.roll_interval_s
            self._pending.extend(incoming)
            if incoming:
                self._journal_rows(incoming)
            flushing = ticket > self._flush_served
            error: HistoryWriteError | None = None
            try:
                now = time.monotonic()
                failing = self._retry_at is not None
                due = (self._roll_deadline is not None and now >= self._roll_deadline) or (
                    not failing and self._queued_rows > self.max_queued_rows
                )
                retry_due = self._retry_at is None or now >= self._retry_at
                if self._pending and (flushing or (due and retry_due)):
                    error = self._write_roll()
                if self._retry_at is not None:
                    self._bound_queue()
            except Exception as exc:  # a bug must not kill the thread: flushes would hang
                self._record_error(exc, "in the writer loop", "roll")
                self._retry_at = time.monotonic() + self.retry_s
                error = HistoryWriteError(f"history writer failed: {exc}")
            if flushing:
                with self._cond:
                    self._flush_error = error
                    self._flush_served = ticket
                    self._cond.notify_all()
            if closing:
                return

    def _journal_rows(self, incoming: list[pa.Table]) -> None:
        """Make ``incoming`` durable before it waits for the roll; a journal that cannot be
        written is logged and counted, and the rows stay in memory as before."""
        try:
            if self._journal is None:
                assert self._roll_started_ms is not None
                self._journal = _Journal(
                    self.root, self._roll_started_ms, uuid.uuid4().hex, self._pending
                )
            else:
                self._journal.append(incoming)
            self.journaled_rows += sum(t.num_rows for t in incoming)
            self._succeeded("journal")
        except Exception as exc:
            self._record_error(exc, "journaling rows", "journal")
            self._close_journal()

    def _close_journal(self, replacement: list[pa.Table] | None = None) -> None:
        """Drop the roll's journal; with ``replacement``, journal those rows anew first (the
        ones a partly failed roll still has to write)."""
        old, self._journal = self._journal, None
        if replacement and old is not None:
            try:
                self._journal = _Journal(self.root, old.start_ms, uuid.uuid4().hex, replacement)
            except Exception as exc:
                self._record_error(exc, "journaling rows", "journal")
                return  # keep the old journal: more than needed beats less
        if old is not None:
            try:
                old.discard()
            except Exception as exc:
                self._record_error(exc, f"removing {old.path}", "journal")

    def _has_work(self) -> bool:
        return bool(self._incoming or self._closing or self._flush_requested > self._flush_served)

    def _wait_timeout(self) -> float | None:
        # After a failure the roll deadline is already past: wait for the retry instead.
        wake = self._retry_at if self._retry_at is not None else self._roll_deadline
        return None if wake is None else max(0.0, wake - time.monotonic())

    def _bound_queue(self) -> None:
        """Drop the oldest queued rows beyond ``max_queued_rows`` (only while writes fail)."""
        excess = self._queued_rows - self.max_queued_rows
        if excess <= 0:
            return
        dropped = 0
        while excess > dropped and self._pending:
            oldest = self._pending[0]
            cut = min(oldest.num_rows, excess - dropped)
            if cut == oldest.num_rows:
                self._pending.pop(0)
            else:
                self._pending[0] = oldest.slice(cut)
            dropped += cut
        with self._cond:
            self._queued_rows -= dropped
        self.dropped_rows += dropped
        log.error(
            "history queue over %d rows while writes fail: dropped the oldest %d rows",
            self.max_queued_rows,
            dropped,
        )

    def _write_roll(self) -> HistoryWriteError | None:
        """Write one file per date partition of the queued rows; keep what failed for a retry."""
        assert self._roll_started_ms is not None
        failed: list[str] = []
        kept: list[pa.Table] = []
        try:
            by_day = _split_by_day(pa.concat_tables(self._pending))
        except Exception as exc:  # never let the thread die with the rows in hand
            self._record_error(exc, "preparing rows", "roll")
            by_day = {}
            kept = self._pending
            failed.append(str(exc))
        # The journal's id names the files, so recovering a journal after a crash rewrites the
        # same files rather than adding copies.
        token = self._journal.token if self._journal is not None else None
        for day, table in by_day.items():
            path = self.root / partition_name(day) / part_file_name(self._roll_started_ms, token)
            try:
                write_parquet_atomic(
                    path,
                    functools.partial(_write_table, table),
                )
            except Exception as exc:
                self._record_error(exc, f"writing {path}", "roll")
                failed.append(f"{partition_name(day)}: {exc}")
                kept.append(table)
                continue
            with self._cond:
                self._queued_rows -= table.num_rows
            self.rows_written += table.num_rows
            self.files_written += 1
        self._pending = kept
        if failed:
            if len(kept) < len(by_day):  # some days are written: journal only the rest
                self._close_journal(replacement=kept)
            self._retry_at = time.monotonic() + self.retry_s
            return HistoryWriteError(
                f"history writer could not write to {self.root} "
                f"({self._queued_rows} rows still queued): " + "; ".join(failed)
            )
        self._close_journal()
        self._retry_at = None
        self._roll_started_ms = None
        self._roll_deadline = None
        self._succeeded("roll")
        try:
            self.prune()
            self._succeeded("prune")
        except Exception as exc:
            self._record_error(exc, f"pruning {self.root}", "prune")
        return None

    @property
    def failing(self) -> bool:
        """Whether some history write failed and has not succeeded since."""
        return bool(self._failing)

    def _record_error(self, exc: BaseException, doing: str, operation: str) -> None:
        """Count a failed ``operation`` (journal, roll, prune); loud once when writing starts
        failing, not at every scan while it goes on."""
        self.errors += 1
        self.last_error = exc
        self.last_error_text = f"{doing}: {exc}"
        if self._failing:
            self._failing.add(operation)
            log.debug("history writer: error %s: %s", doing, exc)
            return
        self._failing.add(operation)
        self.failing_since_ms = int(time.time() * 1000)
        log.error(
            "history writing fails (%s: %s); the rows stay in memory and are retried every "
            "%g s (the oldest dropped past %d rows); scanning, evaluating and notifying go on",
            doing, exc, self.retry_s, self.max_queued_rows, exc_info=exc,
            extra={"event": "history_write_failed", "path": str(self.root), "error": str(exc)},
        )  # fmt: skip

    def _succeeded(self, operation: str) -> None:
        if operation not in self._failing:
            return
        self._failing.discard(operation)
        if not self._failing:
            log.warning(
                "history writing works again (%d errors since it started failing)",
                self.errors - self._errors_before_failing,
                extra={"event": "history_write_recovered", "path": str(self.root)},
            )
            self._errors_before_failing = self.errors
            self.failing_since_ms = None


def _split_by_day(table: pa.Table) -> dict[date, pa.Table]:
    """Rows grouped by the UTC date of ``ts`` (a scan usually falls on one day: no copy)."""
    days = table.column("ts").cast(pa.int64()).to_numpy() // DAY_MS
    first, last = int(days.min()), int(days.max())
    if first == last:
        return {day_of_ms(first * DAY_MS): table}
    return {
        day_of_ms(int(day) * DAY_MS): table.filter(pa.array(days == day)) for day in np.unique(days)
    }


def _write_table(table: pa.Table, handle: Any) -> None:
    pq.write_table(table, handle, compression=PARQUET_COMPRESSION)
