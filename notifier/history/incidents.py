"""Labelled incidents (``incidents.csv`` or Parquet: ``cluster, group, start, end`` and
``kind``), the truth a backtest scores its alerts against."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa

from notifier.history.errors import HistoryNotFoundError, IncidentsError

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
