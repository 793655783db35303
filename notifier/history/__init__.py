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

Modules: ``layout`` (names, the atomic write, the dataset's files, the schema check),
``reader`` (:func:`read_history`), ``incidents`` (:func:`load_incidents`, labelled incidents),
``writer`` (:class:`HistoryWriter` and the journals' recovery), ``errors``.

Imports :mod:`notifier.types` only.
"""

from notifier.history.errors import (
    HistoryEmptyError,
    HistoryError,
    HistoryNotFoundError,
    HistorySchemaError,
    HistoryWriteError,
    IncidentsError,
)
from notifier.history.incidents import INCIDENT_COLUMNS, load_incidents
from notifier.history.layout import (
    DAY_MS,
    PARQUET_COMPRESSION,
    PARTITION_KEY,
    conform,
    day_of_ms,
    history_files,
    part_file_name,
    partition_name,
    validate_schema,
    write_parquet_atomic,
)
from notifier.history.reader import TimeLike, read_history, to_ms
from notifier.history.writer import HistoryWriter, recover_journals

__all__ = [
    "DAY_MS",
    "INCIDENT_COLUMNS",
    "PARQUET_COMPRESSION",
    "PARTITION_KEY",
    "HistoryEmptyError",
    "HistoryError",
    "HistoryNotFoundError",
    "HistorySchemaError",
    "HistoryWriteError",
    "HistoryWriter",
    "IncidentsError",
    "TimeLike",
    "conform",
    "day_of_ms",
    "history_files",
    "load_incidents",
    "part_file_name",
    "partition_name",
    "read_history",
    "recover_journals",
    "to_ms",
    "validate_schema",
    "write_parquet_atomic",
]
