"""The window store: per group-partition windows, Burrow's commit rings and LEO tables.

Everything is kept in columnar numpy arrays, one row per (cluster, group, topic, partition), so
that the evaluator runs its rules over a million windows at once and a million windows take a
few hundred bytes each: offsets are int32 codes against per-row bases, times uint16 codes into
one dictionary of the times the store's scans had (:mod:`notifier.rules.narrow`), read back as
the exact int64 values, and a LEO table holds only the points some table has filled.

Three structures per row, each oldest-first and right-aligned (the newest entry is the last
column, ``count`` valid entries at the end):

* the **sample window**: the last ``intervals`` scans that saw the partition (time, committed,
  LEO, log-start, group state, members, whether the member set changed). A scan that did not
  happen leaves no entry; the gap is visible as two neighbours further apart than the scan
  interval, and it is never filled with invented values.
* **Burrow's commit ring**: an entry only when the committed offset changes, stamped with the
  scan that first saw it, with Burrow's ``min-distance`` merging and insertion by commit order.
  A scan cannot tell a consumer that re-commits the same offset from one that stopped; a ring of
  changes is what keeps rare committers from looking stalled.
* per (cluster, topic, partition), a **LEO table** for lag in seconds
(:mod:`notifier.rules.lagtime`).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any, NamedTuple, overload

import numpy as np

from notifier.config import WindowSettings
from notifier.rules import evidence, lagtime
from notifier.rules.evidence import NULL, UNSET_TS
from notifier.rules.narrow import Bases, Dictionary, NarrowColumn, RowsOf, WholeFloat
from notifier.rules.scancolumns import GroupRows, ScanColumns
from notifier.types import (
    GROUP_STATES,
    CommitPoint,
)

_INITIAL_ROWS = 1024

_EVALUATE_CHUNK = 1 << 16
"""Rows whose LEO tables are read at a time: bounds the temporaries of lag in seconds."""

_SHAPES = ("row", "window", "ring", "table", "points")
_BASES = (None, "zero", "offsets", "times", "table_offsets")


@dataclass(frozen=True)
class Column:
    """One numpy column of :class:`WindowStore`, declared once as a class attribute there: the
    declaration is what allocates, grows, frees, exports and checkpoints it.

    ``shape``: ``row`` (one value per row), ``window`` (``intervals`` per row), ``ring``
    (``intervals`` per row), ``table`` (one per LEO table) or ``points`` (``lag_time_points``
    per LEO table). ``reset``: set back to ``fill`` when its row is freed. ``portable``: means
    the same in another process's store (not an id into this one). ``narrow``: held as ``code``
    against the named bases (:mod:`notifier.rules.narrow`: ``offsets`` of a row,
    ``table_offsets`` of a LEO table, ``zero``), or as a ``code`` into the store's dictionary of
    scan ``times``, exactly.
    """

    shape: str
    dtype: type
    fill: float
    reset: bool = True
    portable: bool = True
    narrow: str | None = None
    code: type = np.int32
    name: str = field(default="", compare=False)

    def __post_init__(self) -> None:
        if self.shape not in _SHAPES:
            raise ValueError(f"column shape must be one of {_SHAPES}, not {self.shape!r}")
        if self.narrow not in _BASES:
            raise ValueError(f"column bases must be one of {_BASES}, not {self.narrow!r}")

    def __set_name__(self, owner: type, name: str) -> None:
        object.__setattr__(self, "name", name)

    @property
    def per_row(self) -> bool:
        return self.shape in ("row", "window", "ring")

    # The allocated array lives in the instance's __dict__, which a non-data descriptor
    # yields to: reading a column costs a plain attribute lookup.
    @overload
    def __get__(self, obj: None, owner: type | None = None) -> Column: ...
    @overload
    def __get__(self, obj: object, owner: type | None = None) -> np.ndarray: ...
    def __get__(self, obj: object | None, owner: type | None = None) -> Column | np.ndarray:
        if obj is None:
            return self
        raise AttributeError(f"column {self.name!r} is not allocated")


class UsualWait(NamedTuple):
    """Per row, its group's usual wait before the offset moves (``WindowStore.usual_wait_ms``)."""

    ms: np.ndarray
    """The habit the rules judge by: at least ``assumed_commit_interval`` until it is trusted."""
    learned_ms: np.ndarray
    """What the waits seen so far showed, without that floor (equal to ``ms`` once trusted)."""
    waits: np.ndarray
    """How many waits it was learned from, over the group's partitions."""


class WindowStore:
    """Windows for many group-partitions of many clusters, updated one scan at a time.

    Rows are (cluster, group, topic, partition); every column below has one entry per row
    (``capacity`` rows allocated, ``rows_in_use`` handed out). Window and ring columns are
    ``(rows, intervals)``, oldest entry first, right-aligned: ``s_count`` / ``r_count`` valid
    entries at the end. LEO tables are per (cluster, topic, partition), ``(tables, points)``.
    """

    # The sample window: one entry per scan that saw the row. Offsets are held as int32
    # against the row's base, times as uint16 codes into the store's dictionary of the times
    # its scans had (notifier.rules.narrow), exactly.
    s_ts = Column("window", np.int64, UNSET_TS, narrow="times", code=np.uint16)
    s_committed = Column("window", np.int64, NULL, narrow="offsets")
    s_leo = Column("window", np.int64, NULL, narrow="offsets")
    s_log_start = Column("window", np.int64, NULL, narrow="offsets")
    s_state = Column("window", np.int8, NULL)
    # Members fit a byte's codes (up to 127) in all but the largest groups, whose rows spill.
    s_members = Column("window", np.int32, 0, narrow="zero", code=np.int8)
    s_member_changed = Column("window", np.bool_, False)
    s_count = Column("row", np.int16, 0)
    last_hash = Column("row", np.int64, 0)
    # Burrow's commit ring: one entry per change of the committed offset.
    r_offset = Column("ring", np.int64, NULL, narrow="offsets")
    r_ts = Column("ring", np.int64, 0, narrow="times", code=np.uint16)
    r_lag = Column("ring", np.int64, NULL, narrow="zero")
    r_order = Column("ring", np.int64, NULL, narrow="times", code=np.uint16)
    r_count = Column("row", np.int16, 0)
    # What a row is: its group id, LEO table, whether in use, and its epoch (its partition is
    # its LEO table's: `row_partition`).
    row_group = Column("row", np.int32, NULL, portable=False)
    row_table = Column("row", np.int32, NULL, reset=False, portable=False)
    row_alive = Column("row", np.bool_, False, portable=False)
    row_epoch = Column("row", np.int64, 0, reset=False, portable=False, narrow="zero")
    # Evidence that outlives the window is not declared here: each store allocates the columns
    # that notifier.rules.habits and the registered kinds declare (notifier.rules.evidence), in
    # `evidence`, by name.
    # LEO tables for lag in seconds, one per (cluster, topic, partition).
    t_leo = Column("points", np.int64, 0, narrow="table_offsets")
    t_time = Column("points", np.int64, 0, narrow="times", code=np.uint16)
    t_count = Column("table", np.int16, 0)

    def __init__(self, settings: WindowSettings | None = None, scan_interval_s: float = 10.0):
        self.settings = settings or WindowSettings()
        self.width = self.settings.intervals
        self.ring_size = self.settings.intervals
        self.points = self.settings.lag_time_points
        self.scan_interval_ms = round(scan_interval_s * 1000)
        self.max_gap_ms = int(self.settings.max_gap_factor * self.scan_interval_ms)
        self.min_distance_ms = round(self.settings.min_distance * 1000)
        self.churn_gap_ms = round(self.settings.churn_gap * 1000)

        # Which row holds a group-partition is in numpy, not in a dict of Python tuples (a
        # million windows took about 350 B each that way): a row's group id and LEO table are
        # columns, and (group id, table) pairs sorted are the index (rebuilt when rows come or
        # go). Names are held once per group and per LEO table.
        self._rows_used = 0
        self._free_rows: list[int] = []
        self._index_keys = np.zeros(0, dtype=np.int64)
        self._index_rows = np.zeros(0, dtype=np.int64)
        self._index_stale = False
        self.row_key = RowKeys(self)
        """``row_key[row]``: (cluster, group, topic, partition) of a row, None when free."""
        self._group_of: dict[tuple[str, str], int] = {}
        self.group_key: list[tuple[str, str] | None] = []
        self._free_groups: list[int] = []
        # LEO tables likewise: a table's topic id and partition are arrays, its topic's name
        # is held once per (cluster, topic), and (topic id, partition) pairs sorted are the index.
        self.topic_key: list[tuple[str, str]] = []
        self._topic_of: dict[tuple[str, str], int] = {}
        self._tables_used = 0
        self.table_topic = np.zeros(0, dtype=np.int32)
        self.table_partition = np.zeros(0, dtype=np.int32)
        self._table_index_keys = np.zeros(0, dtype=np.int64)
        self._table_index_ids = np.zeros(0, dtype=np.int64)
        self._table_index_stale = False
        self._last_scan: dict[str, tuple[list[str], list[str], np.ndarray, np.ndarray]] = {}
        self.last_scan_ts: dict[str, int] = {}
        self.leo_resets: list[lagtime.LeoReset] = []
        """The partitions whose log-end offset went backwards in the latest scan ingested."""
        self._epoch = 0
        self.group_epoch = np.zeros(1024, dtype=np.int64)

        self.evidence_kinds = evidence.keeping_kinds()
        """The kinds whose own evidence this store keeps: those registered when it was built."""
        self.evidence: dict[str, Any] = {}
        """The evidence columns by name (what kinds read, e.g. ``store.evidence["e_rewind_from"]``),
        one value per row."""
        evidence_columns = tuple(
            Column("row", dtype, fill, name=name, **_evidence_narrow(name, dtype, fill))
            for name, dtype, fill in evidence.columns(self.evidence_kinds)
        )
        self.row_columns: tuple[Column, ...] = DECLARED_ROW_COLUMNS + evidence_columns
        """Every per-row column of this store: the declared ones, then the evidence."""
        self.group_columns: dict[str, GroupColumn] = {
            name: GroupColumn(name, dtype, fill, self)
            for name, dtype, fill in evidence.group_columns(self.evidence_kinds)
        }
        """The evidence held once per group (``KindEvidence.per_group``), by name; it is in
        :attr:`evidence` too, where it reads and writes by row."""
        self.evidence.update(self.group_columns)
        group_names = tuple(self.group_columns)
        self.row_column_names = tuple(c.name for c in self.row_columns) + group_names
        """What a checkpoint saves of each row (a group's evidence as each of its rows reads
        it, so that a checkpoint's layout does not depend on where evidence is held)."""
        self.portable_row_columns = (
            tuple(c.name for c in self.row_columns if c.portable) + group_names
        )
        """The per-row columns that mean the same in another process's store."""

        self.bases = {name: Bases() for name in _BASES if name not in (None, "zero", "times")}
        """The int64 bases the narrow columns' codes are against, by name."""
        self.times = Dictionary(np.uint16)
        """The scan times the ``times`` columns' codes name (one per scan, not per row)."""
        self.capacity = 0
        self.table_capacity = 0
        self._alloc_rows(_INITIAL_ROWS)
        self._alloc_tables(_INITIAL_ROWS)
        self.group_rows = np.zeros(0, dtype=np.int32)

    # ---------------------------------------------------------------- allocation

    def _alloc_rows(self, capacity: int) -> None:
        self._alloc(self.row_columns, self.capacity, capacity)
        self.bases["offsets"].resize(capacity)
        self.capacity = capacity

    def _alloc_tables(self, capacity: int) -> None:
        self._alloc(TABLE_COLUMNS, self.table_capacity, capacity)
        self.bases["table_offsets"].resize(capacity)
        for name in ("table_topic", "table_partition"):
            grown = np.full(capacity, NULL, dtype=np.int32)
            kept = getattr(self, name)[: self.table_capacity]
            grown[: kept.size] = kept
            setattr(self, name, grown)
        self.table_capacity = capacity

    def _alloc(self, columns: tuple[Column, ...], kept: int, capacity: int) -> None:
        widths = {"window": self.width, "ring": self.ring_size, "points": self.points}
        for column in columns:
            width = widths.get(column.shape)
            if column.narrow is not None:
                held = self.__dict__ if _declared(column.name) else self.evidence
                narrow = held.get(column.name)
                if narrow is None:
                    bases = self.bases.get(column.narrow)
                    narrow = NarrowColumn(
                        column.name,
                        width,
                        int(column.fill),
                        column.dtype,
                        column.code,
                        bases,
                        grows=column.shape == "points",
                        dictionary=self.times if column.narrow == "times" else None,
                    )
                    if _declared(column.name):
                        setattr(self, column.name, narrow)
                    else:
                        self.evidence[column.name] = narrow
                narrow.resize(capacity)
                continue
            shape = (capacity,) if width is None else (capacity, width)
            new: np.ndarray = np.full(shape, column.fill, dtype=column.dtype)
            if kept:
                new[:kept] = self.column(column.name)[:kept]
            if _declared(column.name):
                setattr(self, column.name, new)
            else:
                self.evidence[column.name] = new

    def column(self, name: str) -> np.ndarray | NarrowColumn | GroupColumn:
        """A column by name, declared or evidence (checkpoints and hand-overs go by name)."""
        found: np.ndarray | NarrowColumn | GroupColumn | None = self.evidence.get(name)
        if found is not None:
            return found
        if not _declared(name):
            raise KeyError(f"the window store has no column {name!r}")
        array: np.ndarray = getattr(self, name)
        return array

    def _reserve_rows(self, wanted: int) -> None:
        """Room for ``wanted`` rows in use, grown by an eighth more than asked: a scan that
        brings many new rows grows the columns once, and a store is never twice its rows. The
        first scan's rows are what most stores keep for good: an empty store grows to exactly
        what it is asked for (a million windows would otherwise carry 125,000 spare rows)."""
        if wanted > self.capacity:
            self._alloc_rows(wanted if self._rows_used == 0 else wanted + wanted // 8)

    def _reserve_tables(self, wanted: int) -> None:
        """Room for ``wanted`` LEO tables, as :meth:`_reserve_rows` for rows."""
        if wanted > self.table_capacity:
            self._alloc_tables(wanted if not self._tables_used else wanted + wanted // 8)

    def _new_group(self, key: tuple[str, str]) -> int:
        if self._free_groups:
            gid = self._free_groups.pop()
            self.group_key[gid] = key
        else:
            gid = len(self.group_key)
            self.group_key.append(key)
            if gid >= self.group_epoch.size:
                grown = np.zeros(max(1024, 2 * self.group_epoch.size), dtype=np.int64)
                grown[: self.group_epoch.size] = self.group_epoch
                self.group_epoch = grown
        # A reused id gets a new epoch, so per-group state kept elsewhere (the evaluator's
        # `for` timers) is known to belong to the group that had the id before.
        self._epoch += 1
        self.group_epoch[gid] = self._epoch
        for column in self.group_columns.values():
            column.reset(gid)
        self._group_of[key] = gid
        return gid

    def _new_row(self, key: tuple[str, str, str, int]) -> int:
        cluster, group, topic, partition = key
        gid = self._group_of.get((cluster, group))
        if gid is None:
            gid = self._new_group((cluster, group))
        [table] = self._tables_for(cluster, [topic], np.zeros(1, np.int64), np.asarray([partition]))
        [row] = self._add_rows(np.asarray([gid]), np.asarray([table]))
        return int(row)

    def _topic_id(self, cluster: str, topic: str) -> int:
        key = (cluster, topic)
        tid = self._topic_of.get(key)
        if tid is None:
            tid = self._topic_of[key] = len(self.topic_key)
            self.topic_key.append(key)
        return tid

    def _tables_for(
        self, cluster: str, topics: list[str], topic_codes: np.ndarray, partitions: np.ndarray
    ) -> np.ndarray:
        """The LEO table of each ``(topics[topic_codes[i]], partitions[i])`` of ``cluster``
        (pairs distinct), new ones made in the order given."""
        tids = np.asarray([self._topic_id(cluster, t) for t in topics], dtype=np.int64)
        wanted_topics = tids[topic_codes]
        found = self._find_tables(wanted_topics, partitions)
        missing = found < 0
        if missing.any():
            count = int(missing.sum())
            self._reserve_tables(self._tables_used + count)
            new = np.arange(count, dtype=np.int64) + self._tables_used
            self.table_topic[new] = wanted_topics[missing]
            self.table_partition[new] = partitions[missing]
            self._tables_used += count
            self._table_index_stale = True
            found[missing] = new
        return found

    def _find_tables(self, topics: np.ndarray, partitions: np.ndarray) -> np.ndarray:
        """The table of each (topic id, partition); -1 where the store has none."""
        if self._table_index_stale:
            used = self._tables_used
            keys = _pair_key(self.table_topic[:used], self.table_partition[:used])
            order = np.argsort(keys, kind="stable")
            self._table_index_keys, self._table_index_ids = keys[order], order.astype(np.int64)
            self._table_index_stale = False
        keys, ids = self._table_index_keys, self._table_index_ids
        if keys.size == 0:
            return np.full(topics.size, -1, dtype=np.int64)
        wanted = _pair_key(topics, partitions)
        at = np.minimum(np.searchsorted(keys, wanted), keys.size - 1)
        return np.where(keys[at] == wanted, ids[at], -1)

    def table_key_of(self, table: int) -> tuple[str, str, int]:
        """(cluster, topic, partition) of a LEO table."""
        if not 0 <= table < self._tables_used:
            raise KeyError(f"LEO table {table} is not in use")
        cluster, topic = self.topic_key[int(self.table_topic[table])]
        return cluster, topic, int(self.table_partition[table])

    def topics(self, cluster: str) -> list[str]:
        """The topics of ``cluster`` with a LEO table, sorted."""
        return sorted(t for c, t in self._topic_of if c == cluster)

    def topic_tables(self, cluster: str, topic: str) -> dict[int, int]:
        """The LEO table of each partition of ``topic`` in ``cluster`` (empty: unknown)."""
        tid = self._topic_of.get((cluster, topic))
        if tid is None:
            return {}
        tables = np.flatnonzero(self.table_topic[: self._tables_used] == tid)
        return dict(zip(self.table_partition[tables].tolist(), tables.tolist(), strict=True))

    def table_keys(self) -> list[tuple[str, str, int]]:
        """Every LEO table's (cluster, topic, partition), by table id."""
        return [
            (*self.topic_key[t], p)
            for t, p in zip(
                self.table_topic[: self._tables_used].tolist(),
                self.table_partition[: self._tables_used].tolist(),
                strict=True,
            )
        ]

    def _add_rows(self, gids: np.ndarray, tables: np.ndarray) -> np.ndarray:
        """New rows for (group id, table) pairs not in the store, freed rows first (most
        recently freed first), then fresh ones."""
        count = gids.size
        reused = [self._free_rows.pop() for _ in range(min(count, len(self._free_rows)))]
        fresh = count - len(reused)
        self._reserve_rows(self._rows_used + fresh)
        rows = np.concatenate(
            [np.asarray(reused, dtype=np.int64), np.arange(fresh, dtype=np.int64) + self._rows_used]
        )
        self._rows_used += fresh
        self.row_group[rows] = gids
        self.row_table[rows] = tables
        self.row_alive[rows] = True
        self.row_epoch[rows] = self._epoch + 1 + np.arange(count)
        self._epoch += count
        self._index_stale = True
        return rows

    def restore_keys(
        self,
        rows_in_use: int,
        group_key: list[tuple[str, str] | None],
        table_key: list[tuple[str, str, int]],
        free_rows: list[int],
        free_groups: list[int],
        epoch: int,
    ) -> None:
        """After a checkpoint filled the columns: what names the rows, groups and tables."""
        self._rows_used = rows_in_use
        self.group_key = group_key
        self._group_of = {k: i for i, k in enumerate(group_key) if k is not None}
        self.topic_key, self._topic_of = [], {}
        self._tables_used = 0
        self._reserve_tables(len(table_key))
        if table_key:
            self.table_topic[: len(table_key)] = [self._topic_id(c, t) for c, t, _ in table_key]
            self.table_partition[: len(table_key)] = [p for _, _, p in table_key]
        self._tables_used = len(table_key)
        self._table_index_stale = True
        self._free_rows = list(free_rows)
        self._free_groups = list(free_groups)
        self._epoch = epoch
        self._last_scan.clear()
        self._index_stale = True

    def _row_index(self) -> tuple[np.ndarray, np.ndarray]:
        """The rows in use, sorted by their (group id, table) key, and those keys."""
        if self._index_stale:
            alive = self.alive_rows()
            keys = _pair_key(self.row_group[alive], self.row_table[alive])
            order = np.argsort(keys, kind="stable")
            self._index_keys, self._index_rows = keys[order], alive[order]
            self._index_stale = False
        return self._index_keys, self._index_rows

    def _find_rows(self, gids: np.ndarray, tables: np.ndarray) -> np.ndarray:
        """The row of each (group id, table) pair; -1 where the store has none."""
        keys, rows = self._row_index()
        if keys.size == 0:
            return np.full(gids.size, -1, dtype=np.int64)
        wanted = _pair_key(gids, tables)
        at = np.minimum(np.searchsorted(keys, wanted), keys.size - 1)
        return np.where((keys[at] == wanted) & (gids >= 0) & (tables >= 0), rows[at], -1)

    def _reset_rows(self, rows: np.ndarray) -> None:
        for column in self.row_columns:
            if column.reset:
                self.column(column.name)[rows] = column.fill

    def array_bytes(self) -> int:
        """What the store's arrays take, as allocated (spare capacity included): its columns,
        their bases and dictionary, and the arrays naming and indexing rows and tables."""
        columns = (*self.row_columns, *TABLE_COLUMNS)
        bases = sum(b.nbytes for b in self.bases.values()) + self.times.nbytes
        held = sum(self.column(c.name).nbytes for c in columns)
        held += sum(c.nbytes for c in self.group_columns.values())
        naming: tuple[np.ndarray, ...] = (
            self.group_epoch,
            self.table_topic,
            self.table_partition,
            self._index_keys,
            self._index_rows,
            self._table_index_keys,
            self._table_index_ids,
            *(kept[2] for kept in self._last_scan.values()),
            *(kept[3] for kept in self._last_scan.values()),
        )
        return int(held + bases + sum(a.nbytes for a in naming))

    def ring_times(self, index: slice | np.ndarray) -> RowsOf | np.ndarray:
        """The commit rings' times of the rows at ``index``, decoded where read."""
        if isinstance(self.r_ts, NarrowColumn):
            return RowsOf(self.r_ts, index)
        return self.r_ts[index]

    @property
    def row_partition(self) -> RowPartition:
        """``row_partition[rows]``: each row's partition, its LEO table's."""
        return RowPartition(self)

    # The newest sample of each row: the last entry of its window.
    @property
    def latest_committed(self) -> NewestEntry:
        return NewestEntry(self.s_committed)

    @property
    def latest_leo(self) -> NewestEntry:
        return NewestEntry(self.s_leo)

    @property
    def latest_log_start(self) -> NewestEntry:
        return NewestEntry(self.s_log_start)

    @property
    def latest_state(self) -> np.ndarray:
        return self.s_state[:, -1]

    @property
    def latest_members(self) -> NewestEntry:
        return NewestEntry(self.s_members)

    # ---------------------------------------------------------------- lookups

    @property
    def rows_in_use(self) -> int:
        """Rows handed out so far (freed ones included: they are reused first)."""
        return self._rows_used

    def row_key_of(self, row: int) -> tuple[str, str, str, int]:
        """(cluster, group, topic, partition) of a row in use."""
        if not 0 <= row < self._rows_used or not self.row_alive[row]:
            raise KeyError(f"row {row} is not in use")
        cluster, group = self.group_key_of(int(self.row_group[row]))
        _, topic, partition = self.table_key_of(int(self.row_table[row]))
        return cluster, group, topic, partition

    def group_key_of(self, gid: int) -> tuple[str, str]:
        """(cluster, group) of a group id in use."""
        key = self.group_key[gid]
        if key is None:
            raise KeyError(f"group id {gid} is not in use")
        return key

    def row(self, cluster: str, group: str, topic: str, partition: int) -> int | None:
        gid = self._group_of.get((cluster, group))
        tid = self._topic_of.get((cluster, topic))
        if gid is None or tid is None:
            return None
        [table] = self._find_tables(np.asarray([tid]), np.asarray([partition])).tolist()
        if table < 0:
            return None
        [row] = self._find_rows(np.asarray([gid]), np.asarray([table])).tolist()
        return None if row < 0 else int(row)

    def group_id(self, cluster: str, group: str) -> int | None:
        return self._group_of.get((cluster, group))

    def groups(self, cluster: str | None = None) -> list[tuple[str, str]]:
        return sorted(k for k in self._group_of if cluster is None or k[0] == cluster)

    def clusters(self) -> list[str]:
        return sorted({k[0] for k in self._group_of})

    def alive_rows(self) -> np.ndarray:
        return np.nonzero(self.row_alive[: self.rows_in_use])[0]

    # ---------------------------------------------------------------- ingest

    def ingest_scan(self, scan: ScanColumns) -> np.ndarray:
        """Add one successful scan of one cluster; returns the rows it touched. The partitions
        whose LEO tables it reset are in :attr:`leo_resets` until the next scan."""
        if len(scan) == 0:
            self.leo_resets = []
            self.last_scan_ts[scan.cluster] = scan.ts
            return np.zeros(0, dtype=np.int64)
        rows = self._rows_for(scan)
        ts = scan.ts
        self._append_samples(rows, scan)
        tables = self.row_table[rows]
        unique_tables, first = np.unique(tables, return_index=True)
        newest_leo = self.t_leo[unique_tables, -1]
        reset = lagtime.append_points(
            self.t_leo,
            self.t_time,
            self.t_count,
            unique_tables,
            scan.log_end[first],
            np.full(unique_tables.size, ts, dtype=np.int64),
        )
        self.leo_resets = lagtime.resets_in_scan(scan, first[reset], newest_leo[reset])
        self._record_commits(rows, scan)
        self.last_scan_ts[scan.cluster] = ts
        return rows

    def _rows_for(self, scan: ScanColumns) -> np.ndarray:
        # Most scans see exactly the same group-partitions as the previous one: reuse the rows.
        previous = self._last_scan.get(scan.cluster)
        if (
            previous is not None
            and previous[0] == scan.group
            and previous[1] == scan.topic
            and np.array_equal(previous[2], scan.partition)
        ):
            return previous[3].astype(np.int64)
        cluster = scan.cluster
        n = len(scan)
        # One dict look-up per distinct name, not per row.
        group_code = {name: code for code, name in enumerate(dict.fromkeys(scan.group))}
        topic_code = {name: code for code, name in enumerate(dict.fromkeys(scan.topic))}
        groups = np.fromiter(map(group_code.__getitem__, scan.group), np.int64, n)
        topics = np.fromiter(map(topic_code.__getitem__, scan.topic), np.int64, n)
        partitions = scan.partition.astype(np.int64)
        # The scan's distinct (topic, partition) pairs in the order they first appear (the
        # order new LEO tables are made in).
        pairs, first, inverse = np.unique(
            topics << 32 | partitions, return_index=True, return_inverse=True
        )
        order = np.argsort(first, kind="stable")
        rank = np.empty_like(order)
        rank[order] = np.arange(order.size)
        pairs, pair_of_row = pairs[order], rank[inverse.reshape(-1)]
        if np.unique(_pair_key(groups, pair_of_row)).size != n:
            raise ValueError(f"scan of {cluster!r} at {scan.ts} lists a group-partition twice")
        group_names = list(group_code)
        known = [self._group_of.get((cluster, name)) for name in group_names]
        table_of = self._tables_for(cluster, list(topic_code), pairs >> 32, pairs & 0xFFFFFFFF)
        gid_of = [
            self._new_group((cluster, name)) if gid is None else gid
            for name, gid in zip(group_names, known, strict=True)
        ]
        gids = np.asarray(gid_of, dtype=np.int64)[groups]
        tables = table_of[pair_of_row]
        rows = self._find_rows(gids, tables)
        missing = rows < 0
        if missing.any():
            rows[missing] = self._add_rows(gids[missing], tables[missing])
        # Kept to recognize the next scan's layout, with the rows' own names: the scan's lists
        # hold a string object per row.
        own_groups = [self.group_key_of(g)[1] for g in gid_of]
        own_topics = [self.topic_key[t][1] for t in self.table_topic[table_of].tolist()]
        self._last_scan[cluster] = (
            list(map(own_groups.__getitem__, groups.tolist())),
            list(map(own_topics.__getitem__, pair_of_row.tolist())),
            scan.partition.astype(np.int32),
            rows.astype(np.int32),  # half the bytes of the int64 rows handed out
        )
        return rows

    def _append_samples(self, rows: np.ndarray, scan: ScanColumns) -> None:
        index = as_index(rows)
        previous_ts = self.s_ts[index, -1].copy()
        previous_committed = self.latest_committed[index].copy()
        previous_log_end = self.latest_leo[index].copy()
        for name, values in (
            ("s_ts", scan.ts),
            ("s_committed", scan.committed),
            ("s_leo", scan.log_end),
            ("s_log_start", scan.log_start),
            ("s_state", scan.state),
            ("s_members", scan.members),
        ):
            _push(getattr(self, name), index, values)
        had_sample = self.s_count[index] > 0
        changed = had_sample & (self.last_hash[index] != scan.member_hash)
        _push(self.s_member_changed, index, changed)
        self.last_hash[index] = scan.member_hash
        self.s_count[index] = np.minimum(self.s_count[index] + 1, self.width)
        evidence.update(
            self.evidence,
            self.evidence_kinds,
            index,
            evidence.ScanView(
                ts=scan.ts,
                committed=scan.committed,
                log_end=scan.log_end,
                state=scan.state,
                members=scan.members,
                member_changed=changed,
                had_sample=had_sample,
                previous_ts=previous_ts,
                previous_committed=previous_committed,
                previous_log_end=previous_log_end,
                log_start=scan.log_start,
            ),
            self.churn_gap_ms,
            self.scan_interval_ms,
            self.max_gap_ms,
            row_group=self.row_group[index],
            by_group={name: c.by_group() for name, c in self.group_columns.items()},
        )

    def usual_wait_ms(self, rows: np.ndarray) -> UsualWait:
        """How long each row's offset usually waits before it moves, and how many waits that
        was learned from; at least the configured ``assumed_commit_interval`` until the habit
        has been seen often enough to trust (and what was learned so far, without that floor).

        A commit cadence is the consumer's habit, not a partition's: it is pooled over the rows
        of each group within ``rows`` (the longest wait any of its partitions needed), so a
        partition that happened to see only short waits lately is not judged by them alone."""
        learned = self.evidence["e_usual_wait_ms"][rows]
        count = self.evidence["e_waits_learned"][rows].astype(np.float64)
        gids = self.row_group[rows].astype(np.int64)
        if rows.size:
            _, slot = np.unique(gids, return_inverse=True)
            pooled = np.zeros(int(slot.max()) + 1)
            np.maximum.at(pooled, slot, learned)
            learned = pooled[slot]
            count = np.bincount(slot, weights=count)[slot]
        # The longest of n waits falls short of the longest there will be by about 1/n of it.
        learned = learned * (count + 1) / np.maximum(count, 1)
        assumed = self.settings.assumed_commit_interval * 1000.0
        trusted = count >= evidence.WAITS_TO_LEARN
        return UsualWait(np.where(trusted, learned, np.maximum(learned, assumed)), learned, count)

    def _record_commits(self, rows: np.ndarray, scan: ScanColumns) -> None:
        committed = scan.committed
        count = self.r_count[rows]
        newest = self.r_offset[rows, -1]
        moved = (committed != NULL) & ((count == 0) | (committed != newest))
        if not moved.any():
            return
        self.add_commits(
            rows[moved],
            committed[moved],
            np.full(int(moved.sum()), scan.ts, dtype=np.int64),
            np.full(int(moved.sum()), scan.ts, dtype=np.int64),
            scan.log_end[moved],
        )

    def add_commits(
        self,
        rows: np.ndarray,
        offsets: np.ndarray,
        orders: np.ndarray,
        timestamps: np.ndarray,
        broker_offsets: np.ndarray,
    ) -> None:
        """Burrow's commit-ring insertion for one commit per row (rows unique).

        A commit newer (by ``order``) than the ring's newest is appended with its lag, or,
        when it comes less than ``min-distance`` after the newest, replaces it and keeps the
        newest's timestamp. An older commit is inserted in order with no lag, merged into its
        predecessor under ``min-distance``, and dropped when the ring is full and it is older
        than everything in it. Scans only ever append; insertion serves offsets replayed
        out of order.
        """
        if rows.size == 0:
            return
        count = self.r_count[rows]
        newest_order = self.r_order[rows, -1]
        appending = (count == 0) | (orders > newest_order)
        if appending.any():
            self._append_commits(
                rows[appending],
                offsets[appending],
                orders[appending],
                timestamps[appending],
                broker_offsets[appending],
            )
        for i in np.nonzero(~appending)[0]:
            self._insert_commit(int(rows[i]), int(offsets[i]), int(orders[i]), int(timestamps[i]))

    def _append_commits(self, rows, offsets, orders, timestamps, broker_offsets) -> None:
        lag = np.maximum(0, broker_offsets - offsets)
        count = self.r_count[rows]
        merge = (count > 0) & (timestamps - self.r_ts[rows, -1] < self.min_distance_ms)
        if merge.any():
            target = rows[merge]
            self.r_offset[target, -1] = offsets[merge]
            self.r_order[target, -1] = orders[merge]
            self.r_lag[target, -1] = lag[merge]
        push = ~merge
        if push.any():
            target = as_index(rows[push])
            for name, values in (
                ("r_offset", offsets[push]),
                ("r_order", orders[push]),
                ("r_ts", timestamps[push]),
                ("r_lag", lag[push]),
            ):
                _push(getattr(self, name), target, values)
            self.r_count[target] = np.minimum(self.r_count[target] + 1, self.ring_size)

    def _insert_commit(self, row: int, offset: int, order: int, timestamp: int) -> None:
        size = self.ring_size
        n = int(self.r_count[row])
        held = [self.r_offset[row], self.r_order[row], self.r_ts[row], self.r_lag[row]]
        entries = [[int(column[j]) for column in held] for j in range(size - n, size)]
        if any(e[1] == order for e in entries):
            return  # the same commit seen twice
        position = sum(1 for e in entries if e[1] < order)
        if position == 0 and n >= size:
            return  # older than everything in a full ring
        if position > 0 and timestamp - entries[position - 1][2] < self.min_distance_ms:
            entries[position - 1][0] = offset
            entries[position - 1][1] = order
            entries[position - 1][3] = NULL
        else:
            entries.insert(position, [offset, order, timestamp, NULL])
            if len(entries) > size:
                entries.pop(0)
        n = len(entries)
        for name, column in (("r_offset", 0), ("r_order", 1), ("r_ts", 2), ("r_lag", 3)):
            values = np.full(size, 0 if name == "r_ts" else NULL, dtype=np.int64)
            values[size - n :] = [e[column] for e in entries]
            getattr(self, name)[row] = values
        self.r_count[row] = n

    # ---------------------------------------------------------------- reading

    def ring(self, row: int) -> list[CommitPoint]:
        """The commit ring of one row, oldest first."""
        n = int(self.r_count[row])
        offsets, times, lags = self.r_offset[row], self.r_ts[row], self.r_lag[row]
        return [
            CommitPoint(
                offset=int(offsets[j]),
                timestamp=int(times[j]),
                lag=None if lags[j] == NULL else int(lags[j]),
            )
            for j in range(self.ring_size - n, self.ring_size)
        ]

    def ring_orders(self, row: int) -> list[int]:
        n = int(self.r_count[row])
        return [int(v) for v in self.r_order[row, self.ring_size - n :]]

    def samples(self, row: int) -> list[dict[str, Any]]:
        """The sample window of one row, oldest first (for the API and evidence)."""

        n = int(self.s_count[row])
        out = []
        ts, committed_at, leo_at = self.s_ts[row], self.s_committed[row], self.s_leo[row]
        log_start_at, members = self.s_log_start[row], self.s_members[row]
        for j in range(self.width - n, self.width):
            committed = int(committed_at[j])
            log_start = int(log_start_at[j])
            leo = int(leo_at[j])
            out.append(
                {
                    "ts": int(ts[j]),
                    "committed_offset": None if committed == NULL else committed,
                    "log_end_offset": leo,
                    "log_start_offset": None if log_start == NULL else log_start,
                    "lag": None if committed == NULL else max(0, leo - committed),
                    "group_state": GROUP_STATES[int(self.s_state[row, j])],
                    "members": int(members[j]),
                    "member_set_changed": bool(self.s_member_changed[row, j]),
                }
            )
        return out

    def leo_table(self, row: int) -> list[tuple[int, int]]:
        table = int(self.row_table[row])
        n = int(self.t_count[table])
        leos, times = self.t_leo[table], self.t_time[table]
        return [(int(leos[j]), int(times[j])) for j in range(self.points - n, self.points)]

    def lag_seconds(
        self, rows: np.ndarray, now_ms: int, committed: np.ndarray | None = None
    ) -> np.ndarray:
        """Seconds behind for each row's latest committed offset (``committed``, when the
        caller has read it already; NaN: unknown). The rows' LEO tables are read a chunk at a
        time, their filled points only."""
        index = as_index(rows)
        tables = self.row_table[index]
        if committed is None:
            committed = self.latest_committed[index]
        out = np.empty(tables.size)
        for start in range(0, tables.size, _EVALUATE_CHUNK):
            part = slice(start, start + _EVALUATE_CHUNK)
            chunk = tables[part].astype(np.int64)
            counts = self.t_count[as_index(chunk)]
            points = max(2, int(counts.max()) if counts.size else 0)
            held = as_index(chunk)
            out[part] = lagtime.lag_seconds(
                _newest_points(self.t_leo, held, points),
                _newest_points(self.t_time, held, points),
                counts,
                np.arange(chunk.size),
                committed[part],
                now_ms,
            )
        return out

    # ---------------------------------------------------------------- forgetting

    def remove_rows(self, rows_to_forget: Iterable[int]) -> None:
        asked = np.unique(np.fromiter(rows_to_forget, np.int64))
        in_use = asked[(asked >= 0) & (asked < self._rows_used)]
        rows = in_use[self.row_alive[in_use]]
        if rows.size == 0:
            return
        gids = set(int(g) for g in self.row_group[rows])
        for gid in gids:
            key = self.group_key[gid]
            if key is not None:
                self._last_scan.pop(key[0], None)
        self._free_rows.extend(rows.tolist())
        self._reset_rows(rows)
        self._index_stale = True
        alive = self.alive_rows()
        still_used = set(np.unique(self.row_group[alive]).tolist())
        for gid in gids - still_used:
            key = self.group_key[gid]
            if key is not None:
                del self._group_of[key]
                self.group_key[gid] = None
                self._free_groups.append(gid)

    def remove_groups(self, keys: Iterable[tuple[str, str]]) -> list[tuple[str, str]]:
        """Forget whole groups (gone from the cluster); returns the keys that were known."""
        wanted = {k for k in keys if k in self._group_of}
        if not wanted:
            return []
        gids = np.array([self._group_of[k] for k in wanted], dtype=np.int32)
        alive = self.alive_rows()
        self.remove_rows(alive[np.isin(self.row_group[alive], gids)])
        return sorted(wanted)

    def remove_group_topic(self, key: tuple[str, str], topic: str) -> int:
        """Forget one group's partitions of one topic (Burrow's DELETE of a consumer's topic);
        returns how many partitions were forgotten."""
        gid = self._group_of.get(key)
        if gid is None:
            return 0
        cluster = key[0]
        tid = self._topic_of.get((cluster, topic))
        if tid is None:
            return 0
        tables = np.flatnonzero(self.table_topic[: self._tables_used] == tid)
        alive = self.alive_rows()
        rows = alive[(self.row_group[alive] == gid) & np.isin(self.row_table[alive], tables)]
        self.remove_rows(rows)
        return int(rows.size)

    def expire(self, now_ms: int) -> list[tuple[str, str]]:
        """Burrow's expire-group: drop groups whose offsets have not moved for ``expire_group``.

        The "last commit" of a row is when the scan first saw its newest offset; a row that
        never had a commit counts from its newest sample.
        """
        alive = self.alive_rows()
        if alive.size == 0:
            return []
        last = np.where(self.r_count[alive] > 0, self.r_ts[alive, -1], self.s_ts[alive, -1])
        limit = now_ms - int(self.settings.expire_group * 1000)
        gids = self.row_group[alive]
        n_groups = len(self.group_key)
        fresh = np.bincount(gids, weights=(last >= limit), minlength=n_groups)
        present = np.bincount(gids, minlength=n_groups)
        expired = np.nonzero((present > 0) & (fresh == 0))[0]
        keys = [self.group_key[g] for g in expired.tolist()]
        return self.remove_groups(k for k in keys if k is not None)

    # ---------------------------------------------------------------- moving groups

    def rows_of_group(self, cluster: str, group: str) -> np.ndarray:
        """The rows in use of one group, by (topic, partition)."""
        gid = self._group_of.get((cluster, group))
        if gid is None:
            return np.zeros(0, dtype=np.int64)
        alive = self.alive_rows()
        rows = alive[self.row_group[alive] == gid]
        return np.asarray(sorted(rows.tolist(), key=lambda r: self.row_key_of(r)[2:]), np.int64)

    def rows_by_group(self, cluster: str) -> dict[str, np.ndarray]:
        """The rows in use of each group of ``cluster`` (one pass over the store)."""
        alive = self.alive_rows()
        gids = self.row_group[alive]
        order = np.argsort(gids, kind="stable")
        alive, gids = alive[order], gids[order]
        starts = np.flatnonzero(np.r_[True, gids[1:] != gids[:-1]]) if gids.size else gids
        out = {}
        for start, end in zip(starts.tolist(), [*starts[1:].tolist(), gids.size]):
            key = self.group_key[int(gids[start])]
            if key is not None and key[0] == cluster:
                out[key[1]] = alive[start:end]
        return out

    def latest_scan(
        self, cluster: str, rows_by_group: dict[str, np.ndarray], ts: int
    ) -> ScanColumns:
        """The samples the scan at ``ts`` left in the rows of the given groups, as the scan's
        columns (rows that scan did not see are left out): what :meth:`replay_scan` takes."""
        picked = [rows for rows in rows_by_group.values() if rows.size]
        rows = np.concatenate(picked) if picked else np.zeros(0, dtype=np.int64)
        rows = rows[self.s_ts[rows, -1] == ts]
        keys = [self.row_key_of(r) for r in rows.tolist()]
        return ScanColumns(
            cluster=cluster,
            ts=ts,
            group=[k[1] for k in keys],
            topic=[k[2] for k in keys],
            partition=self.row_partition[rows].astype(np.int32),
            committed=self.latest_committed[rows],
            log_end=self.latest_leo[rows],
            log_start=self.latest_log_start[rows],
            state=self.latest_state[rows],
            members=self.latest_members[rows],
            member_hash=self.last_hash[rows],
        )

    def export_group(self, cluster: str, group: str) -> GroupRows | None:
        """Everything the store holds of one group (None: nothing), for :meth:`import_group`
        in another store with the same window settings."""
        rows = self.rows_of_group(cluster, group)
        if rows.size == 0:
            return None
        tables = self.row_table[rows]
        return GroupRows(
            cluster=cluster,
            group=group,
            partitions=[(key[2], key[3]) for key in map(self.row_key_of, rows.tolist())],
            columns={name: self.column(name)[rows] for name in self.portable_row_columns},
            tables={name: getattr(self, name)[tables] for name in TABLE_COLUMN_NAMES},
        )

    def import_group(self, exported: GroupRows) -> int:
        """Install a group exported by another store in place of whatever this one held of it;
        returns its group id (a new one: per-group state elsewhere must be installed anew). A
        LEO table this store already holds for a partition is kept when it is the newer."""
        cluster, group = exported.cluster, exported.group
        self.remove_groups([(cluster, group)])
        rows = np.asarray(
            [self._new_row((cluster, group, t, p)) for t, p in exported.partitions], np.int64
        )
        for name, values in exported.columns.items():
            # A column the exporting process has and this one lacks (a kind registered there
            # only) is left out; one it lacks keeps its initial value here.
            if name in self.portable_row_columns:
                self.column(name)[rows] = values
        tables = self.row_table[rows]
        theirs = exported.tables
        newer = (self.t_count[tables] == 0) | (theirs["t_time"][:, -1] > self.t_time[tables, -1])
        for name in TABLE_COLUMN_NAMES:
            getattr(self, name)[tables[newer]] = theirs[name][newer]
        self._last_scan.pop(cluster, None)
        return self._group_of[(cluster, group)]

    def replay_scan(self, scan: ScanColumns) -> np.ndarray:
        """Ingest a scan another store already ingested for some of its groups (a shard taken
        over): as :meth:`ingest_scan`, except that the cluster's latest scan time never goes
        back."""
        latest = self.last_scan_ts.get(scan.cluster)
        rows = self.ingest_scan(scan)
        if latest is not None and latest > scan.ts:
            self.last_scan_ts[scan.cluster] = latest
        self._last_scan.pop(scan.cluster, None)  # a part of a scan: not the cluster's layout
        return rows


class GroupColumn:
    """Evidence held once per group (``KindEvidence.per_group``), read and written by row like
    the store's other columns: ``column[rows]`` gives each row its group's value, and
    ``column[rows] = values`` sets the groups of those rows (checkpoints and hand-overs move
    evidence by row; rows of one group carry one value). A free row reads as ``fill``.
    Per-group updates write :meth:`by_group` directly."""

    def __init__(self, name: str, dtype: type, fill: float, store: WindowStore) -> None:
        self.name = name
        # A group's state is held once: nothing gained by narrowing it.
        self.dtype = np.dtype(np.float64 if dtype is WholeFloat else dtype)
        self.fill = self.dtype.type(fill)
        self._store = store
        self._values = np.full(0, self.fill, dtype=self.dtype)

    def by_group(self) -> np.ndarray:
        """The values by group id, for every group id the store has handed out."""
        self._reserve(len(self._store.group_key))
        return self._values

    def reset(self, gid: int) -> None:
        """A new group has this id: it starts from ``fill``."""
        self._reserve(gid + 1)
        self._values[gid] = self.fill

    @property
    def nbytes(self) -> int:
        return int(self._values.nbytes)

    def _reserve(self, groups: int) -> None:
        if groups > self._values.size:
            # As rows grow: once per scan that brings many groups, an eighth to spare.
            grown = np.full(max(1024, groups + groups // 8), self.fill, self.dtype)
            grown[: self._values.size] = self._values
            self._values = grown

    def __getitem__(self, rows: Any) -> Any:
        gids = np.asarray(self._store.row_group[rows], dtype=np.int64)
        self._reserve(int(gids.max(initial=-1)) + 1)
        read = self._values[np.maximum(gids, 0)]
        if gids.ndim == 0:
            return read if gids >= 0 else self.fill
        return np.where(gids >= 0, read, self.fill)

    def __setitem__(self, rows: Any, values: Any) -> None:
        gids = np.atleast_1d(np.asarray(self._store.row_group[rows], dtype=np.int64))
        values = np.broadcast_to(np.asarray(values, dtype=self.dtype), gids.shape)
        used = np.flatnonzero(gids >= 0)
        self._reserve(int(gids.max(initial=-1)) + 1)
        # Rows of one group may carry different values (a checkpoint or a hand-over from a
        # store that held this evidence per row, where a partition added later had its own):
        # the group takes its oldest row's, the one that saw the most of it.
        epochs = np.atleast_1d(np.asarray(self._store.row_epoch[rows]))[used]
        order = used[np.lexsort((epochs, gids[used]))]
        _, first = np.unique(gids[order], return_index=True)
        oldest = order[first]
        self._values[gids[oldest]] = values[oldest]


def _declared_columns(shapes: tuple[str, ...]) -> tuple[Column, ...]:
    return tuple(
        c for c in vars(WindowStore).values() if isinstance(c, Column) and c.shape in shapes
    )


DECLARED_ROW_COLUMNS = _declared_columns(("row", "window", "ring"))
"""The per-row columns :class:`WindowStore` declares, in declaration order (a store adds its
evidence columns: ``WindowStore.row_columns``)."""
TABLE_COLUMNS = _declared_columns(("table", "points"))
"""Every per-LEO-table column of :class:`WindowStore`."""
TABLE_COLUMN_NAMES = tuple(c.name for c in TABLE_COLUMNS)


class RowKeys:
    """``store.row_key[row]``: (cluster, group, topic, partition) of a row, None when free;
    read from the store's columns, nothing held per row."""

    __slots__ = ("_store",)

    def __init__(self, store: WindowStore) -> None:
        self._store = store

    def __len__(self) -> int:
        return self._store.rows_in_use

    def __getitem__(self, row: int) -> tuple[str, str, str, int] | None:
        store = self._store
        if not 0 <= row < store.rows_in_use or not store.row_alive[row]:
            return None
        return store.row_key_of(row)

    def __iter__(self) -> Iterator[tuple[str, str, str, int] | None]:
        return (self[row] for row in range(len(self)))


class RowPartition:
    """``store.row_partition[rows]``: the partition of each row, read from its LEO table (NULL
    for a row never handed out)."""

    __slots__ = ("_store",)

    def __init__(self, store: WindowStore) -> None:
        self._store = store

    def __getitem__(self, rows: Any) -> Any:
        tables = self._store.row_table[rows]
        partitions = self._store.table_partition[np.maximum(tables, 0)]
        return np.where(tables >= 0, partitions, np.int32(NULL))


class NewestEntry:
    """``store.latest_committed[rows]``: the last entry of each row's window, read from it (a
    copy of each newest sample would cost as much as the window's codes)."""

    __slots__ = ("_column",)

    def __init__(self, column: NarrowColumn | np.ndarray) -> None:
        self._column = column

    def __getitem__(self, rows: Any) -> Any:
        return self._column[rows, -1]


def _push(array: np.ndarray | NarrowColumn, index: slice | np.ndarray, newest: object) -> None:
    """Drop the oldest entry of each row of a ``(rows, width)`` column at ``index`` and put
    ``newest`` last. A run of rows is one block of memory: moved left by one entry as a whole
    (each row's last slot takes the next row's first, then ``newest``), in place; shifting it
    row-wise had numpy copy the block first (80 MB per column at a million rows)."""
    if isinstance(array, NarrowColumn):
        array.push(index, newest)
        return
    if isinstance(index, slice) and array.flags.c_contiguous:
        flat = array[index].view()
        flat.shape = (-1,)  # raises rather than copy: the move must happen in the column
        if flat.size:
            flat[:-1] = flat[1:]
    else:
        array[index, :-1] = array[index, 1:]
    array[index, -1] = newest


def _pair_key(gids: np.ndarray, tables: np.ndarray) -> np.ndarray:
    """One int64 per (group id, table) pair, ordered as the pairs are."""
    return gids.astype(np.int64) << 32 | tables.astype(np.int64)


def _newest_points(
    points: np.ndarray | NarrowColumn, tables: slice | np.ndarray, count: int
) -> np.ndarray:
    """The newest ``count`` points of each of ``tables``."""
    if isinstance(points, NarrowColumn):
        return points.newest(tables, count)
    return np.ascontiguousarray(points[tables][:, points.shape[1] - count :])


def _evidence_narrow(name: str, dtype: type, fill: float) -> dict[str, Any]:
    """How an evidence column's values are held: a time (unset as UNSET_TS, or named
    ``..._ts``) as a code into the store's scan times, an offset against the row's base. A
    guess that is wrong for some column costs memory (its rows move their base, its values
    take codes of their own, or spill), never a value. A :class:`WholeFloat` is held as int32
    codes."""
    if dtype is WholeFloat:
        return {"narrow": "zero"}
    if np.dtype(dtype) != np.int64:
        return {}
    if fill == UNSET_TS or name.endswith("_ts"):
        return {"narrow": "times", "code": np.uint16}
    return {"narrow": "offsets"}


def _declared(name: str) -> bool:
    return isinstance(vars(WindowStore).get(name), Column)


def as_index(rows: np.ndarray) -> slice | np.ndarray:
    """A slice when ``rows`` is a run of consecutive integers (a view, no fancy-index copy)."""
    if (
        rows.size
        and rows[-1] - rows[0] == rows.size - 1
        and (rows.size < 3 or bool(np.all(np.diff(rows) == 1)))
    ):
        return slice(int(rows[0]), int(rows[-1]) + 1)
    return rows
