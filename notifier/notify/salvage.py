"""What can still be read from a damaged notification store (:mod:`notifier.notify.outbox`).

A database SQLite cannot read (truncated, garbled pages, a disk error) never keeps the service
from starting: :func:`start_over` moves it aside as ``NAME.corrupt-<time>``, opens a new one,
and copies into it every row it can still read from a copy of the damaged file: a header that
is gone is rebuilt from the pages behind it, a truncated file is zero-filled to the size its
header gives, and each table is read row by row, stepping over damaged pages. What was kept and
what is lost from when is said in one line (:class:`Salvage`).
"""

from __future__ import annotations

import os
import shutil
import sqlite3
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from notifier.damaged import last_written, move_aside

_MAX_SKIP = 1 << 40
"""How far past a damaged page the salvage looks for readable rows (in rowids)."""


@dataclass(slots=True)
class Salvage:
    """What was kept from a damaged notification store
    (:attr:`~notifier.notify.outbox.NotifyStore.salvage`)."""

    moved_to: Path
    error: str
    last_written: str
    kept: dict[str, int] = field(default_factory=dict)
    """Rows copied into the new store, per table."""
    unreadable: dict[str, str] = field(default_factory=dict)
    """Tables where reading stopped at damage (first error), per table."""
    pending: int = 0
    outbox_ids: tuple[int, int] | None = None
    header_rebuilt: bool = False
    """The file's header was damaged and was rebuilt from its pages to read them."""

    def message(self, path: Path) -> str:
        kept = ", ".join(f"{n} {table}" for table, n in self.kept.items() if table != "meta")
        ids = (
            f", outbox ids {self.outbox_ids[0]}-{self.outbox_ids[1]}, {self.pending} pending"
            if self.outbox_ids
            else ""
        )
        damaged = ", ".join(sorted(self.unreadable)) or "none"
        rebuilt = "; its header was rebuilt from its pages" if self.header_rebuilt else ""
        return (
            f"notification store {path} is damaged ({self.error}{rebuilt}); moved it to "
            f"{self.moved_to.name} and started a new one with the rows that could be read "
            f"({kept or 'nothing'}{ids}). Tables with unreadable pages: {damaged}; their rows "
            f"there are lost, as the file was last written at {self.last_written}: pending "
            "notifications lost are not sent, and open incidents lost are opened anew if their "
            "group is still failing"
        )


def _readable_rows(
    source: sqlite3.Connection, table: str, columns: list[str]
) -> tuple[list[tuple[Any, ...]], str | None]:
    """Every row of ``table`` that can be read, in rowid order: after a damaged page, seek
    further and further ahead until rows can be read again (the first error is returned)."""
    rows: list[tuple[Any, ...]] = []
    first_error: str | None = None
    after, skip = 0, 1  # the tables' rowids start at 1
    select = f"SELECT rowid, {', '.join(columns)} FROM {table} WHERE rowid > ? ORDER BY rowid"
    while skip <= _MAX_SKIP:
        try:
            for row in source.execute(select, (after,)):
                rows.append(row[1:])
                after, skip = row[0], 1
            return rows, first_error
        except sqlite3.DatabaseError as exc:
            first_error = first_error or str(exc)
            after, skip = after + skip, skip * 2
    return rows, first_error


def _pad_to_header_size(path: Path) -> None:
    """Zero-fill a truncated database file up to the size its header gives: SQLite refuses a
    file shorter than that outright, while a missing page read as zeros is only an unreadable
    page, which the salvage steps over."""
    with path.open("r+b") as handle:
        header = handle.read(100)
        if len(header) < 100 or not header.startswith(b"SQLite format 3\0"):
            return
        page_size = int.from_bytes(header[16:18], "big")
        page_size = 65536 if page_size == 1 else page_size
        pages = int.from_bytes(header[28:32], "big")
        size = handle.seek(0, os.SEEK_END)
        if pages * page_size > size:
            handle.truncate(pages * page_size)


_HEADER_MAGIC = b"SQLite format 3\0"
_BTREE_PAGE_TYPES = frozenset({2, 5, 10, 13})


def _page_size_of(data: bytes) -> int | None:
    """The page size a database file's pages fit best (the header that says it is gone):
    the size at which most pages after the first begin like a b-tree page."""
    best, best_share = None, 0.0
    for size in (4096, 1024, 2048, 8192, 16384, 32768, 65536, 512):
        pages = len(data) // size
        if pages < 2 or len(data) % size:
            continue
        typed = sum(1 for page in range(1, pages) if data[page * size] in _BTREE_PAGE_TYPES)
        share = typed / (pages - 1)
        if share > best_share:
            best, best_share = size, share
    return best


def _rebuild_header(path: Path, wal: bool) -> bool:
    """Write a plausible 100-byte header over a database file whose header is damaged (what
    SQLite's ``.recover`` would need too): the pages behind it are intact, and only the header
    says how to read them. True when one was written."""
    data = path.read_bytes()
    if data.startswith(_HEADER_MAGIC):
        return False
    size = _page_size_of(data)
    if size is None or data[100] not in _BTREE_PAGE_TYPES:
        return False  # page 1's own b-tree header is gone too: nothing to rebuild on
    version = 2 if wal else 1
    header = bytearray(100)
    header[0:16] = _HEADER_MAGIC
    header[16:18] = (1 if size == 65536 else size).to_bytes(2, "big")
    header[18], header[19], header[20] = version, version, 0
    header[21], header[22], header[23] = 64, 32, 32
    header[24:28] = (1).to_bytes(4, "big")  # change counter
    header[28:32] = (len(data) // size).to_bytes(4, "big")
    header[40:44] = (1).to_bytes(4, "big")  # schema cookie
    header[44:48] = (4).to_bytes(4, "big")  # schema format
    header[56:60] = (1).to_bytes(4, "big")  # UTF-8
    header[92:96] = (1).to_bytes(4, "big")  # valid for this change counter
    major, minor, patch = sqlite3.sqlite_version_info
    header[96:100] = (major * 1_000_000 + minor * 1000 + patch).to_bytes(4, "big")
    with path.open("r+b") as handle:
        handle.write(bytes(header))
    return True


def start_over(
    path: Path,
    error: sqlite3.DatabaseError,
    *,
    open_store: Callable[[Path], sqlite3.Connection],
    tables: Sequence[str],
    usable: Callable[[str, list[str], tuple[Any, ...]], bool],
) -> tuple[sqlite3.Connection, Salvage]:
    """Move the damaged file at ``path`` aside, open a new one (``open_store``) and copy into
    it every readable row of ``tables`` that is ``usable`` (decodes into what the store reads)."""
    written = last_written(path)
    aside = move_aside(path)
    db = open_store(path)
    salvage = Salvage(moved_to=aside, error=str(error), last_written=written)
    with tempfile.TemporaryDirectory(dir=path.parent, prefix=".salvage-") as work:
        copy = Path(work) / path.name
        for suffix in ("", "-wal"):
            if aside.with_name(aside.name + suffix).exists():
                shutil.copyfile(aside.with_name(aside.name + suffix), str(copy) + suffix)
        if _rebuild_header(copy, wal=Path(str(copy) + "-wal").exists()):
            salvage.header_rebuilt = True
        _pad_to_header_size(copy)
        try:
            source = sqlite3.connect(f"file:{copy}?mode=ro", uri=True)
        except sqlite3.DatabaseError as exc:
            salvage.unreadable = dict.fromkeys(tables, str(exc))
            return db, salvage
        try:
            _copy_readable(source, db, salvage, tables, usable)
        finally:
            source.close()
    return db, salvage


def _copy_readable(
    source: sqlite3.Connection,
    db: sqlite3.Connection,
    salvage: Salvage,
    tables: Sequence[str],
    decodes: Callable[[str, list[str], tuple[Any, ...]], bool],
) -> None:
    """Every readable, decodable row of each table from ``source`` into ``db``."""
    for table in tables:
        columns = [row[1] for row in db.execute(f"PRAGMA table_info({table})")]
        rows, problem = _readable_rows(source, table, columns)
        if problem is not None:
            salvage.unreadable[table] = problem
        usable = [row for row in rows if decodes(table, columns, row)]
        db.execute("BEGIN")
        db.executemany(
            f"INSERT OR IGNORE INTO {table} ({', '.join(columns)})"
            f" VALUES ({', '.join('?' * len(columns))})",
            usable,
        )
        db.execute("COMMIT")
        salvage.kept[table] = len(usable)
        if table == "outbox" and usable:
            ids = [row[columns.index("id")] for row in usable]
            salvage.outbox_ids = (min(ids), max(ids))
            state = columns.index("state")
            salvage.pending = sum(1 for row in usable if row[state] == "pending")
