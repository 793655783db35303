"""A data dir that cannot be written: told apart from damage, said once, and checked at start.

While the service runs, a full, read-only or vanished ``data_dir`` must not lose what was
already decided: each writer of state (the notification store, the checkpoints, the history)
keeps what it could not write in memory and tries again; :class:`WriteHealth` is how each one
says so — one ERROR line when writes start failing (naming the path and the error), one INFO
line when they succeed again, and what ``/readyz`` and ``/metrics`` show meanwhile.

At start, :func:`data_dir_problem` says in one line why a ``data_dir`` cannot be used (a regular
file in its path, a read-only or full file system, a parent that cannot be created): ``notifier
run`` exits 2 with it and ``notifier check`` reports the same line. SQLite's "unable to open
database file" is such a problem, not damage (:func:`is_disk_error`): the file is not moved
aside for it.
"""

from __future__ import annotations

import errno
import logging
import os
import sqlite3
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

log = logging.getLogger("notifier.diskfaults")

_DISK_ERROR_CODES = frozenset(
    code
    for code in (
        getattr(sqlite3, "SQLITE_FULL", 13),
        getattr(sqlite3, "SQLITE_READONLY", 8),
        getattr(sqlite3, "SQLITE_IOERR", 10),
        getattr(sqlite3, "SQLITE_CANTOPEN", 14),
    )
)
_DISK_ERRNOS = frozenset({errno.ENOSPC, errno.EROFS, errno.EDQUOT, errno.EIO, errno.ENOENT,
                          errno.ENOTDIR, errno.EACCES, errno.EPERM})  # fmt: skip

PROBE_BYTES = 64 * 1024
"""What a start writes (and removes) to see that the data dir takes writes; ``check`` asks the
file system for at least as much free space."""


class DataDirError(Exception):
    """The data dir (or a state file in it) cannot be opened or written; one line naming the
    path and why."""

    def __init__(self, path: Path, reason: str) -> None:
        super().__init__(f"data_dir {path}: {reason}")
        self.path = path
        self.reason = reason


def is_disk_error(exc: BaseException) -> bool:
    """Whether ``exc`` says the disk refused a write (full, read-only, gone, I/O error) rather
    than that a file is damaged or a statement is wrong."""
    if isinstance(exc, sqlite3.Error):
        code = getattr(exc, "sqlite_errorcode", None)
        if code is not None:
            return (code & 0xFF) in _DISK_ERROR_CODES
        text = str(exc)
        return any(
            words in text
            for words in ("disk is full", "readonly database", "disk I/O error", "unable to open")
        )
    return isinstance(exc, OSError) and exc.errno in _DISK_ERRNOS


def error_text(exc: BaseException) -> str:
    if isinstance(exc, OSError) and exc.strerror:
        where = f": {exc.filename}" if exc.filename else ""
        return f"[Errno {exc.errno}] {exc.strerror}{where}"
    return str(exc) or type(exc).__name__


@dataclass
class WriteHealth:
    """Whether one writer of state gets its writes to disk: what ``/readyz`` and ``/metrics``
    show for it, and the two log lines (failing, recovered)."""

    what: str
    """In words, e.g. "notification store"."""
    path: Path
    failing_since_ms: int | None = None
    error: str | None = None
    errors: int = 0
    """Failed attempts since the start (every retry counts)."""
    unwritten: int = 0
    """Changes kept in memory until the disk takes them."""
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def failing(self) -> bool:
        return self.failing_since_ms is not None

    def failed(self, exc: BaseException, unwritten: int) -> None:
        self.errors += 1
        self.unwritten = unwritten
        self.error = error_text(exc)
        if self.failing_since_ms is not None:
            return
        self.failing_since_ms = int(time.time() * 1000)
        log.error(
            "%s %s cannot be written (%s): %d change(s) are kept in memory and written as soon "
            "as the disk takes them; a restart meanwhile would lose them",
            self.what, self.path, self.error, unwritten,
            extra={"event": "state_write_failed", "what": self.what, "path": str(self.path),
                   "error": self.error, "unwritten": unwritten, **self.extra},
        )  # fmt: skip

    def succeeded(self, written: int = 0) -> None:
        self.unwritten = 0
        if self.failing_since_ms is None:
            return
        failed_for = (time.time() * 1000 - self.failing_since_ms) / 1000
        log.info(
            "%s %s is written again after %.1f s; %d change(s) kept in memory were written",
            self.what, self.path, failed_for, written,
            extra={"event": "state_write_recovered", "what": self.what, "path": str(self.path),
                   "failed_for_s": round(failed_for, 1), "written": written, **self.extra},
        )  # fmt: skip
        self.failing_since_ms = None
        self.error = None

    def summary(self) -> dict[str, Any]:
        """``/readyz``'s entry for this writer."""
        return {
            "what": self.what,
            "path": str(self.path),
            "writing": not self.failing,
            "failing_since": self.failing_since_ms,
            "error": self.error,
            "errors": self.errors,
            "unwritten": self.unwritten,
        }


def _existing_ancestor(path: Path) -> Path:
    current = path
    while not current.exists() and current != current.parent:
        current = current.parent
    return current


def _not_a_directory(path: Path) -> str | None:
    """The first component of ``path`` that exists and is not a directory, as a reason."""
    for part in [*reversed(path.parents), path]:
        if part.exists() and not part.is_dir():
            what = "a regular file" if part.is_file() else "not a directory"
            if part == path:
                return f"it is {what}, not a directory"
            return f"{part} is {what}, so nothing can be created under it"
    return None


def data_dir_problem(path: Path, *, create: bool) -> str | None:
    """Why ``path`` cannot be the data dir, in one line naming it (None: it can). ``create``
    (``notifier run``): make it if missing and write a probe file; without (``notifier
    check``): change nothing and ask the file system the same questions, so both say the
    same thing."""
    problem = _not_a_directory(path)
    if problem is not None:
        return f"data_dir {path}: {problem}"
    ancestor = _existing_ancestor(path)
    if create:
        try:
            path.mkdir(parents=True, exist_ok=True)
            probe = path / f".write-probe-{os.getpid()}"
            try:
                with probe.open("wb") as handle:
                    handle.write(b"\0" * PROBE_BYTES)
                    handle.flush()
                    os.fsync(handle.fileno())
            finally:
                probe.unlink(missing_ok=True)
        except OSError as exc:
            where = path if path.is_dir() else ancestor
            return f"data_dir {path}: {_reason(path, where, exc.errno)}"
        return None
    try:
        stats = os.statvfs(ancestor)
    except OSError as exc:
        return f"data_dir {path}: {_reason(path, ancestor, exc.errno)}"
    if stats.f_flag & os.ST_RDONLY:
        return f"data_dir {path}: {_reason(path, ancestor, errno.EROFS)}"
    if stats.f_bavail * stats.f_frsize < PROBE_BYTES:
        return f"data_dir {path}: {_reason(path, ancestor, errno.ENOSPC)}"
    return None


def _reason(path: Path, ancestor: Path, code: int | None) -> str:
    text = os.strerror(code) if code is not None else "unknown error"
    if ancestor != path:
        return f"cannot be created under {ancestor} ({text})"
    return f"cannot be written ({text})"
