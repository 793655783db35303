"""Damaged state files: moved aside (never deleted) so the service can start without them.

A checkpoint or notification store that SQLite cannot read must not keep the service from
starting (a supervisor restarting it would loop forever), and must not be deleted either: it is
the evidence, and sometimes more can be recovered from it by hand than the service did.
:func:`move_aside` renames it, with its WAL and shared-memory companions, to
``NAME.corrupt-<UTC time>``; :func:`last_written` says when it was last written, which is where
what was lost begins.
"""

from __future__ import annotations

import os
import time
from datetime import UTC, datetime
from pathlib import Path

SQLITE_COMPANIONS = ("-wal", "-shm", "-journal")


def move_aside(path: Path) -> Path:
    """Rename ``path`` (and its SQLite companions) to ``path.corrupt-<UTC time>``; returns the
    new name of ``path``."""
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    aside = path.with_name(f"{path.name}.corrupt-{stamp}")
    n = 1
    while aside.exists():
        n += 1
        aside = path.with_name(f"{path.name}.corrupt-{stamp}-{n}")
    os.replace(path, aside)
    for suffix in SQLITE_COMPANIONS:
        companion = path.with_name(path.name + suffix)
        if companion.exists():
            os.replace(companion, aside.with_name(aside.name + suffix))
    return aside


def last_written(path: Path) -> str:
    """When ``path`` (or its WAL, if later) was last written, as ISO 8601 UTC."""
    times = [p.stat().st_mtime for p in (path, path.with_name(path.name + "-wal")) if p.exists()]
    if not times:
        return "unknown"
    return datetime.fromtimestamp(max(times), tz=UTC).isoformat(timespec="seconds")
