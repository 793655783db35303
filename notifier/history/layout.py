"""The history's layout on disk (see :mod:`notifier.history`): partition and file names, the
atomic write every file goes through, which files belong to the dataset, and the check that a
table holds the sample schema (:func:`conform`)."""

from __future__ import annotations

import os
import re
import uuid
from collections.abc import Callable
from datetime import date, timedelta
from pathlib import Path
from typing import Any, cast

import pyarrow as pa
import pyarrow.compute as pc

from notifier.history.errors import HistorySchemaError
from notifier.types import (
    OPTIONAL_SAMPLE_COLUMNS,
    REQUIRED_WHERE_AVAILABLE,
    SAMPLE_SCHEMA,
    with_optional_columns,
)

DAY_MS = 86_400_000
PARTITION_KEY = "date"
PARTITION_RE = re.compile(r"^date=(\d{4}-\d{2}-\d{2})$")
PARQUET_COMPRESSION = "zstd"
"""Faster to write than snappy here and half the size on sample data."""


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
    partitions = sorted(p for p in root.iterdir() if p.is_dir() and PARTITION_RE.match(p.name))
    folders = partitions or [root]
    return [
        f
        for folder in folders
        for f in sorted(folder.iterdir())
        if f.is_file() and f.suffix == ".parquet" and not f.name.startswith((".", "_"))
    ]


# --------------------------------------------------------------------------------------------
# Schema checks (pyarrow is untyped: its pa.types predicates return bool)


def _is_string(t: pa.DataType) -> bool:
    if pa.types.is_dictionary(t):
        return _is_string(t.value_type)
    is_string = pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_string_view(t)
    return cast(bool, is_string)


def _compatible(expected: pa.Field, found: pa.DataType) -> bool:
    """Whether ``found`` converts to the expected type without changing a meaningful value."""
    want = expected.type
    if found.equals(want):
        return True
    if pa.types.is_timestamp(want):
        # Any unit, any zone: Arrow keeps timestamps as UTC instants, so a cast is exact up to
        # sub-millisecond truncation, and naive timestamps are taken as UTC.
        return cast(bool, pa.types.is_timestamp(found))
    if pa.types.is_string(want):
        return _is_string(found)
    if pa.types.is_boolean(want):
        return cast(bool, pa.types.is_boolean(found))
    if pa.types.is_integer(want):
        # int64 partition/members or int32 offsets are harmless; the cast checks the range.
        return cast(
            bool, pa.types.is_integer(found) or (expected.nullable and pa.types.is_null(found))
        )
    return False


def validate_schema(schema: pa.Schema, path: str | os.PathLike[str]) -> None:
    """Raise :class:`HistorySchemaError` unless ``schema`` holds every sample column.

    The message names ``path`` and lists every missing column and every mistyped column with
    the expected and the found type, so one run shows everything that needs fixing. Extra
    columns (such as the ``date`` partition key) are ignored, and so is the lack of a column
    older histories were written without (:data:`~notifier.types.OPTIONAL_SAMPLE_COLUMNS`).
    """
    missing: list[str] = []
    mistyped: list[str] = []
    for expected in SAMPLE_SCHEMA:
        index = schema.get_field_index(expected.name)
        if index < 0:
            if expected.name not in OPTIONAL_SAMPLE_COLUMNS:
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
    not fit (an int64 partition beyond int32) or nulls in a non-nullable column (or, for
    ``log_end_offset``, in a row of an available partition) raise :class:`HistorySchemaError`
    naming the column and ``path``. A column older histories lack is added at its old value.
    """
    if not table.schema.equals(SAMPLE_SCHEMA):
        validate_schema(table.schema, path)
        table = _conformed(with_optional_columns(table), path)
    available = table.column("available")
    for name in REQUIRED_WHERE_AVAILABLE:
        column = table.column(name)
        if column.null_count:
            nulls = pc.sum(pc.and_(pc.is_null(column), available)).as_py() or 0
            if nulls:
                raise HistorySchemaError(
                    f"{path}: column {name} has {nulls} null values but may not be null"
                    " (only a partition marked unavailable has none)"
                )
    return table


def _conformed(table: pa.Table, path: str | os.PathLike[str]) -> pa.Table:
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
