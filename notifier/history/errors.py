"""The history's errors: each message is meant for the user (it names the file and what was
expected)."""

from __future__ import annotations


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
