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

import ast
import functools
import hashlib
import io
import json
import logging
import math
import sqlite3
import time
import zlib
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import numpy as np

from notifier.damaged import last_written, move_aside
from notifier.diskfaults import DataDirError, error_text, is_disk_error
from notifier.rules import ROW_COLUMN_NAMES, Evaluator, TransitionTracker, WindowStore
from notifier.types import GroupStatus

log = logging.getLogger(__name__)

FORMAT_VERSION = 1
_ROW_ARRAYS = ROW_COLUMN_NAMES
_TABLE_ARRAYS = ("t_leo", "t_time", "t_count")


class CheckpointError(Exception):
    """The checkpoint could not be read; it has been moved aside and the error logged. What
    :func:`load` had filled in by then must be thrown away."""


def _blob(array: np.ndarray) -> bytes:
    buffer = io.BytesIO()
    np.save(buffer, array, allow_pickle=False)
    return buffer.getvalue()


_NPY_MAGIC = b"\x93NUMPY"


@functools.lru_cache(maxsize=4096)
def _npy_header(text: bytes) -> tuple[np.dtype, tuple[int, ...], bool]:
    fields = ast.literal_eval(text.decode("latin1"))
    dtype = np.dtype(fields["descr"])
    if dtype.hasobject:
        raise ValueError("the array holds Python objects")
    return dtype, tuple(int(n) for n in fields["shape"]), bool(fields["fortran_order"])


def _array(blob: bytes) -> np.ndarray:
    """What :func:`_blob` wrote (numpy's .npy format). The header of each distinct dtype and
    shape is parsed once: a shard's state holds tens of thousands of small arrays, and
    ``np.load`` spends most of its time parsing their headers."""
    if blob[:6] != _NPY_MAGIC:
        raise ValueError("an array is not in .npy format")
    width = 2 if blob[6] == 1 else 4
    start = 8 + width
    end = start + int.from_bytes(blob[8:start], "little")
    dtype, shape, fortran = _npy_header(bytes(blob[start:end]))
    count = math.prod(shape)
    if len(blob) - end != count * dtype.itemsize:
        raise ValueError(f"an array of shape {shape} is cut short or too long")
    data = np.frombuffer(blob, dtype=dtype, count=count, offset=end)
    return data.reshape(shape, order="F" if fortran else "C").copy()


def _digest(blobs: list[tuple[str, bytes]]) -> str:
    """A checksum of the arrays: SQLite notices a damaged page only where its own structure
    is hit, not in the middle of a blob."""
    digest = hashlib.blake2b(digest_size=16)
    for name, data in sorted(blobs):
        digest.update(name.encode() + b"\0" + len(data).to_bytes(8, "little") + data)
    return digest.hexdigest()


_RECORD_MAGIC = b"NFA1"
_DEFLATED_MAGIC = b"NFZ1"


def pack_arrays(
    meta: dict[str, Any], arrays: Mapping[str, np.ndarray], *, compress: bool = False
) -> bytes:
    """``meta`` (JSON-able) and named arrays as one self-checking record, in the checkpoint's
    array format: what the fleet's state topic carries (:mod:`notifier.fleet.state`).
    ``compress``: deflated at zlib's fastest level (offsets and times close to each other
    shrink about tenfold for a quarter millisecond per 100 kB)."""
    blobs = [(name, _blob(np.ascontiguousarray(a))) for name, a in arrays.items()]
    header = json.dumps(
        {"meta": meta, "arrays": [[n, len(b)] for n, b in blobs], "digest": _digest(blobs)},
        separators=(",", ":"),
    ).encode()
    body = b"".join([len(header).to_bytes(4, "big"), header, *(b for _, b in blobs)])
    if compress:
        return _DEFLATED_MAGIC + zlib.compress(body, 1)
    return _RECORD_MAGIC + body


class PackedArrays(Mapping[str, np.ndarray]):
    """The arrays of a record, each decoded when first read (a reader often needs few)."""

    def __init__(self, blobs: list[tuple[str, bytes]]) -> None:
        self._blobs = dict(blobs)
        self._decoded: dict[str, np.ndarray] = {}

    def __getitem__(self, name: str) -> np.ndarray:
        found = self._decoded.get(name)
        if found is None:
            found = self._decoded[name] = _array(self._blobs[name])
        return found

    def __iter__(self) -> Iterator[str]:
        return iter(self._blobs)

    def __len__(self) -> int:
        return len(self._blobs)


def unpack_arrays(record: bytes) -> tuple[dict[str, Any], PackedArrays]:
    """What :func:`pack_arrays` packed (the digest checked; each array decoded when read: a
    damaged array raises ValueError then); ValueError naming what is wrong with a damaged or
    foreign record."""
    if record[:4] == _DEFLATED_MAGIC:
        try:
            record = _RECORD_MAGIC + zlib.decompress(record[4:])
        except zlib.error as exc:
            raise ValueError(f"it cannot be inflated: {exc}") from None
    if record[:4] != _RECORD_MAGIC:
        raise ValueError(f"not an array record (starts with {record[:4]!r})")
    size = int.from_bytes(record[4:8], "big")
    try:
        header = json.loads(record[8 : 8 + size])
        layout = [(str(name), int(length)) for name, length in header["arrays"]]
    except (ValueError, KeyError, TypeError) as exc:
        raise ValueError(f"its header cannot be read: {exc}") from None
    blobs = []
    at = 8 + size
    for name, length in layout:
        blobs.append((name, record[at : at + length]))
        at += length
    if at != len(record) or _digest(blobs) != header.get("digest"):
        raise ValueError("its arrays do not match the digest packed with them")
    return header["meta"], PackedArrays(blobs)


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
    tables = len(store._table_of)
    meta = {
        "version": FORMAT_VERSION,
        "width": store.width,
        "points": store.points,
        "rows": rows,
        "tables": tables,
        "row_key": store.row_key,
        "group_key": store.group_key,
        "table_keys": [[*k, v] for k, v in store._table_of.items()],
        "free_rows": store._free_rows,
        "free_groups": store._free_groups,
        "epoch": store._epoch,
        "groups": len(store.group_key),
        "last_scan_ts": store.last_scan_ts,
        "statuses": [[c, g, s.value] for (c, g), s in tracker.statuses.items()],
        "rule_state": sorted(evaluator.state),
        "saved_at": int(time.time() * 1000),
    }
    arrays = {name: getattr(store, name)[:rows] for name in _ROW_ARRAYS}
    arrays |= {name: getattr(store, name)[:tables] for name in _TABLE_ARRAYS}
    arrays["group_epoch"] = store.group_epoch[: len(store.group_key)]
    groups = len(store.group_key)
    for rule, state in evaluator.state.items():
        for field in ("pending_since", "last_true", "firing", "fired_severity"):
            arrays[f"rule:{rule}:{field}"] = getattr(state, field)[:groups]
    blobs = [(name, _blob(np.ascontiguousarray(a))) for name, a in arrays.items()]
    meta["digest"] = _digest(blobs)
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
    if "digest" in meta and _digest(blobs) != meta["digest"]:
        raise ValueError("its arrays do not match the digest saved with them (damaged pages)")
    arrays = {name: _array(data) for name, data in blobs}

    rows, tables = meta["rows"], meta["tables"]
    while store.capacity < rows:
        store._alloc_rows(store.capacity * 2)
    while store.table_capacity < tables:
        store._alloc_tables(store.table_capacity * 2)
    for name in _ROW_ARRAYS:
        if name in arrays:  # a checkpoint from before a column existed keeps its initial value
            getattr(store, name)[:rows] = arrays[name]
    for name in _TABLE_ARRAYS:
        getattr(store, name)[:tables] = arrays[name]
    store.row_key = [tuple(k) if k is not None else None for k in meta["row_key"]]
    store._row_of = {k: i for i, k in enumerate(store.row_key) if k is not None}
    store.group_key = [tuple(k) if k is not None else None for k in meta["group_key"]]
    store._group_of = {k: i for i, k in enumerate(store.group_key) if k is not None}
    store._table_of = {(c, t, p): i for c, t, p, i in meta["table_keys"]}
    store._free_rows = list(meta["free_rows"])
    store._free_groups = list(meta["free_groups"])
    store._epoch = meta["epoch"]
    store.last_scan_ts = dict(meta["last_scan_ts"])
    store._last_scan.clear()

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
    tracker.statuses = {(c, g): GroupStatus(s) for c, g, s in meta["statuses"]}
    log.info(
        "restored checkpoint %s: %d windows, %d groups, %d open statuses, saved %.0f s ago",
        path, len(store._row_of), len(store._group_of), len(tracker.statuses),
        (time.time() * 1000 - meta["saved_at"]) / 1000,
    )  # fmt: skip
    return True
