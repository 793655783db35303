"""Warm restarts: the window store, the rules' ``for`` state and the open statuses, in SQLite.

A restart that loads a checkpoint resumes with full windows (the downtime shows as a gap only
if it was longer than the gap tolerance) and does not re-fire what was open: the transition
tracker remembers every non-OK group. A checkpoint written with other window settings (the
rules file changed ``intervals`` or ``lag_time_points``) is not loaded; the service starts cold
and says so.

A checkpoint SQLite cannot read (a truncated or garbled file, a disk error) is moved aside as
``NAME.corrupt-<time>`` and the cluster starts cold, saying in one line what was lost and from
when (:class:`CheckpointError`): a damaged file never keeps the service from starting.
"""

from __future__ import annotations

import json
import logging
import sqlite3
import time
from pathlib import Path

import numpy as np

from notifier.damaged import last_written, move_aside
from notifier.diskfaults import DataDirError, error_text, is_disk_error
from notifier.packed import array_blob, blob_array, digest
from notifier.rules import Evaluator, TransitionTracker, WindowStore, evidence
from notifier.rules.store import TABLE_COLUMN_NAMES
from notifier.types import GroupStatus

log = logging.getLogger(__name__)

FORMAT_VERSION = 1
_TABLE_ARRAYS = TABLE_COLUMN_NAMES


class CheckpointError(Exception):
    """The checkpoint could not be read; it has been moved aside and the error logged. What
    :func:`load` had filled in by then must be thrown away."""


def _connect(path: Path) -> sqlite3.Connection:
    path.parent.mkdir(parents=True, exist_ok=True)
    conn = sqlite3.connect(path)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)")
    conn.execute("CREATE TABLE IF NOT EXISTS arrays (name TEXT PRIMARY KEY, data BLOB NOT NULL)")
    return conn


def save(path: Path, store: WindowStore, evaluator: Evaluator, tracker: TransitionTracker) -> float:
    """Write a checkpoint atomically (one transaction); returns the seconds it took."""
    started = time.perf_counter()
    rows = store.rows_in_use
    table_keys = store.table_keys()
    tables = len(table_keys)
    meta = {
        "version": FORMAT_VERSION,
        "width": store.width,
        "points": store.points,
        "rows": rows,
        "tables": tables,
        "group_key": store.group_key,
        "table_keys": [[*k, i] for i, k in enumerate(table_keys)],
        "free_rows": store._free_rows,
        "free_groups": store._free_groups,
        "epoch": store._epoch,
        "groups": len(store.group_key),
        "last_scan_ts": store.last_scan_ts,
        "statuses": [[c, g, s.value] for (c, g), s in tracker.statuses.items()],
        "rule_state": sorted(evaluator.state),
        "saved_at": int(time.time() * 1000),
    }
    arrays = {name: store.column(name)[:rows] for name in store.row_column_names}
    arrays |= {name: getattr(store, name)[:tables] for name in _TABLE_ARRAYS}
    arrays["group_epoch"] = store.group_epoch[: len(store.group_key)]
    groups = len(store.group_key)
    for rule, state in evaluator.state.items():
        for field in ("pending_since", "last_true", "firing", "fired_severity"):
            arrays[f"rule:{rule}:{field}"] = getattr(state, field)[:groups]
    blobs = [(name, array_blob(np.ascontiguousarray(a))) for name, a in arrays.items()]
    meta["digest"] = digest(blobs)
    conn = _connect(path)
    try:
        with conn:
            conn.execute("DELETE FROM arrays")
            conn.executemany("INSERT INTO arrays (name, data) VALUES (?, ?)", blobs)
            conn.execute(
                "INSERT OR REPLACE INTO meta (key, value) VALUES ('checkpoint', ?)",
                (json.dumps(meta),),
            )
    finally:
        conn.close()
    return time.perf_counter() - started


def load(path: Path, store: WindowStore, evaluator: Evaluator, tracker: TransitionTracker) -> bool:
    """Fill an empty store, evaluator and tracker from a checkpoint; False when there is none
    or it does not fit the current window settings.

    Raises :class:`CheckpointError` when the file cannot be read (after moving it aside and
    logging what is lost): the store, evaluator and tracker may then be half filled.
    """
    if not path.exists():
        return False
    written = last_written(path)
    try:
        return _load(path, store, evaluator, tracker)
    except Exception as exc:  # whatever a damaged file makes the reader raise
        if is_disk_error(exc):  # the disk refused (read-only, full, gone): not damage
            raise DataDirError(path, f"cannot be opened ({error_text(exc)})") from exc
        aside = move_aside(path)
        log.error(
            "checkpoint %s cannot be read (%s: %s); moved it to %s. Starting cold: the windows, "
            "rule state and open statuses it held, as last saved at %s, are lost; windows refill "
            "over the next %d scans and open incidents are kept by the notifier",
            path, type(exc).__name__, exc, aside.name, written, store.width,
            extra={"event": "checkpoint_unreadable", "path": str(path), "moved_to": str(aside),
                   "last_written": written, "error": str(exc)},
        )  # fmt: skip
        raise CheckpointError(f"{path}: {exc}") from exc


def _load(path: Path, store: WindowStore, evaluator: Evaluator, tracker: TransitionTracker) -> bool:
    conn = _connect(path)
    try:
        row = conn.execute("SELECT value FROM meta WHERE key = 'checkpoint'").fetchone()
        if row is None:  # save() always writes it: the file was emptied or cut short
            raise ValueError("the file holds no checkpoint (emptied or truncated?)")
        meta = json.loads(row[0])
        if meta.get("version") != FORMAT_VERSION:
            log.warning("checkpoint %s has format %s; starting cold", path, meta.get("version"))
            return False
        if meta["width"] != store.width or meta["points"] != store.points:
            log.warning(
                "checkpoint %s was written with intervals=%s lag_time_points=%s, the rules now say "
                "%s and %s; starting cold", path, meta["width"], meta["points"], store.width,
                store.points,
            )  # fmt: skip
            return False
        blobs = list(conn.execute("SELECT name, data FROM arrays"))
    finally:
        conn.close()
    if "digest" in meta and digest(blobs) != meta["digest"]:
        raise ValueError("its arrays do not match the digest saved with them (damaged pages)")
    arrays = {name: blob_array(data) for name, data in blobs}
    evidence.upgrade(arrays, store.evidence_kinds)

    rows, tables = meta["rows"], meta["tables"]
    while store.capacity < rows:
        store._alloc_rows(store.capacity * 2)
    while store.table_capacity < tables:
        store._alloc_tables(store.table_capacity * 2)
    for name in store.row_column_names:
        if name in arrays:  # a checkpoint from before a column existed keeps its initial value
            store.column(name)[:rows] = arrays[name]
    for name in _TABLE_ARRAYS:
        getattr(store, name)[:tables] = arrays[name]
    # Which row is which group-partition is in the columns restored above (row_group,
    # row_table, row_alive); checkpoints before 2026-11 also listed every row's key in the
    # meta, which is not needed.
    table_key: list[tuple[str, str, int]] = [("", "", 0)] * tables
    for c, t, p, i in meta["table_keys"]:
        table_key[i] = (c, t, p)
    store.restore_keys(
        rows_in_use=rows,
        group_key=[(k[0], k[1]) if k is not None else None for k in meta["group_key"]],
        table_key=table_key,
        free_rows=meta["free_rows"],
        free_groups=meta["free_groups"],
        epoch=meta["epoch"],
    )
    store.last_scan_ts = dict(meta["last_scan_ts"])

    groups = len(store.group_key)
    store.group_epoch = np.zeros(max(1024, 2 * groups), dtype=np.int64)
    store.group_epoch[:groups] = arrays["group_epoch"]
    for rule in meta["rule_state"]:
        state = evaluator.state.get(rule)
        if state is None:
            continue  # the rule was removed from the rules file
        state.grow(groups)
        for field in ("pending_since", "last_true", "firing", "fired_severity"):
            getattr(state, field)[:groups] = arrays[f"rule:{rule}:{field}"]
    evaluator.adopt_group_epochs()
    tracker.restore({(c, g): GroupStatus(s) for c, g, s in meta["statuses"]})
    log.info(
        "restored checkpoint %s: %d windows, %d groups, %d open statuses, saved %.0f s ago",
        path, store.alive_rows().size, len(store._group_of), len(tracker.statuses),
        (time.time() * 1000 - meta["saved_at"]) / 1000,
    )  # fmt: skip
    return True
