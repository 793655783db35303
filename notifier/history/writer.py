"""Writing the history from the scan loop: :class:`HistoryWriter` queues each scan, journals it
at once (crash safety, see :mod:`notifier.history`) and writes a roll of Parquet files every
``roll_interval_s``; :func:`recover_journals` writes out what a crash left."""

from __future__ import annotations

import functools
import logging
import os
import re
import shutil
import threading
import time
import uuid
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from notifier.history.errors import HistoryError, HistoryWriteError
from notifier.history.layout import (
    DAY_MS,
    PARQUET_COMPRESSION,
    PARTITION_RE,
    conform,
    day_of_ms,
    part_file_name,
    partition_name,
    write_parquet_atomic,
)
from notifier.types import SAMPLE_SCHEMA

log = logging.getLogger(__name__)

_JOURNAL_RE = re.compile(r"^\.journal-(\d{13})-([0-9a-f]{32})\.arrows$")
_JOURNAL_OPTIONS = pa.ipc.IpcWriteOptions(compression="zstd")


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


ROLL_ROWS = 1_000_000
"""Queued rows that make a roll due before its interval is up. Rows wait for their roll in
memory (about 100 B each as a scan table), so at a million group-partitions a scan is written
as it comes rather than 30 of them held for a 5-minute roll (about 0.1 GB each); a file of a
million rows is also as large as readers want one."""


class HistoryWriter:
    """Appends scan tables to the history from the scan loop without ever blocking it.

    :meth:`append` only queues the table; the background thread journals it at once (see the
    module docstring: a crash loses at most the scan being journaled). Every
    ``roll_interval_s`` (or sooner, once ``roll_rows`` are queued) the thread
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
        roll_rows: int = ROLL_ROWS,
    ) -> None:
        if roll_interval_s <= 0:
            raise ValueError("roll_interval_s must be positive")
        if roll_rows < 1:
            raise ValueError("roll_rows must be at least 1")
        self.root = Path(root)
        self.roll_interval_s = float(roll_interval_s)
        self.retention_days = int(retention_days)
        self.retry_s = float(retry_s)
        self.max_queued_rows = int(max_queued_rows)
        self.roll_rows = int(roll_rows)
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
            match = PARTITION_RE.match(folder.name)
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
            # Rows that are a roll of their own, due at once (a scan of roll_rows or more), go
            # straight to their files: a journal of them would be deleted as soon as written
            # (at 10^6 rows, a zstd stream of the whole scan) and hold their table longer. Only
            # if the roll fails are they journaled, to wait for the retry.
            unjournaled = (
                bool(incoming)
                and self._journal is None
                and len(self._pending) == len(incoming)
                and self._retry_at is None
                and self._queued_rows >= self.roll_rows
            )
            if incoming and not unjournaled:
                self._journal_rows(incoming)
            flushing = ticket > self._flush_served
            error: HistoryWriteError | None = None
            try:
                now = time.monotonic()
                failing = self._retry_at is not None
                queued = self._queued_rows
                due = (self._roll_deadline is not None and now >= self._roll_deadline) or (
                    not failing and (queued > self.max_queued_rows or queued >= self.roll_rows)
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
            if unjournaled and self._pending:
                self._journal_rows(self._pending)
            # What is still queued is in _pending: the scan's tables are not held here while
            # the thread waits for the next scan (at 10^6 rows ~90 MiB, alive through the next
            # scan's collect and evaluation otherwise).
            del incoming
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
