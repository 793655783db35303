"""What the synthetic history generators (``basic``, ``production``) share: argument checks,
names, scan times, small array helpers and the Parquet writer of whole-run arrays.

A generator fills a :class:`HistoryArrays` (one value per scan for every group, group-partition
and topic-partition) and hands it to :func:`write_history`, which writes the Hive-partitioned
layout of :mod:`notifier.history` in :data:`~notifier.types.SAMPLE_SCHEMA`: one file per date
partition, rows in scan order, strings dictionary-encoded.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, fields
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
from numpy.typing import NDArray

from notifier.history import (
    DAY_MS,
    PARQUET_COMPRESSION,
    day_of_ms,
    part_file_name,
    partition_name,
    write_parquet_atomic,
)
from notifier.types import GROUP_STATES, SAMPLE_SCHEMA

INCIDENTS_FILE = "incidents.csv"
DEFAULT_START = datetime(2026, 1, 5, tzinfo=UTC)
"""Used when no start is given, so that a seed alone fixes the output."""

ROW_GROUP_ROWS = 1 << 20

TEAMS = (
    "billing", "orders", "payments", "search", "fraud", "inventory", "shipping", "users",
    "ads", "metrics", "audit", "email", "pricing", "catalog", "reco", "ledger",
)  # fmt: skip
ROLES = (
    "indexer", "writer", "enricher", "sink", "aggregator", "notifier", "scorer", "archiver",
    "router", "sync", "projector", "exporter",
)  # fmt: skip
ENTITIES = (
    "events", "orders", "clicks", "payments", "updates", "logs", "metrics", "audit",
    "commands", "changes",
)  # fmt: skip


def scan_count(
    out: Path, groups: int, partitions: int, hours: float, interval_s: float, clusters: int
) -> int:
    """Check a generator's sizes and output directory; return the number of scans per cluster.

    Raises :class:`ValueError` for sizes that make no history and :class:`FileExistsError`
    when ``out`` exists and is not an empty directory.
    """
    if groups < 1 or partitions < 1 or clusters < 1:
        raise ValueError("groups, partitions and clusters must be at least 1")
    if clusters > groups:
        raise ValueError(f"{clusters} clusters need at least as many groups (got {groups})")
    if interval_s <= 0 or hours <= 0:
        raise ValueError("hours and interval_s must be positive")
    n_scans = round(hours * 3600 / interval_s)
    if n_scans < 1:
        raise ValueError(f"{hours} h at {interval_s} s per scan is not a single scan")
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise FileExistsError(f"{out} exists and is not an empty directory")
    return n_scans


def group_names(rng: np.random.Generator, count: int) -> list[str]:
    """``team-role-NNNN`` names, numbered so that they are unique."""
    teams = rng.integers(0, len(TEAMS), count)
    roles = rng.integers(0, len(ROLES), count)
    return [
        f"{TEAMS[t]}-{ROLES[r]}-{g:04d}" for g, (t, r) in enumerate(zip(teams, roles, strict=True))
    ]


def topic_names(rng: np.random.Generator, count: int) -> list[str]:
    """``team.entity-NNNN`` names, numbered so that they are unique."""
    owner_team = rng.integers(0, len(TEAMS), count)
    entity = rng.integers(0, len(ENTITIES), count)
    return [
        f"{TEAMS[a]}.{ENTITIES[b]}-{t:04d}"
        for t, (a, b) in enumerate(zip(owner_team, entity, strict=True))
    ]


def scan_times(
    rng: np.random.Generator, clusters: int, scans: int, interval_s: float, t0_ms: int
) -> np.ndarray:
    """``(clusters, scans)`` scan times in epoch ms: every ``interval_s``, cluster ``c`` offset
    by ``c`` staggers (at most half a second each), each scan jittered by up to one stagger."""
    interval_ms = round(interval_s * 1000)
    stagger = max(1, min(500, interval_ms // (4 * clusters)))
    jitter = ((np.arange(clusters)[:, None] + rng.random((clusters, scans))) * stagger).astype(
        np.int64
    )
    return t0_ms + np.arange(scans, dtype=np.int64)[None, :] * interval_ms + jitter


def ms_to_datetime(ms: int) -> datetime:
    return datetime.fromtimestamp(ms / 1000, tz=UTC)


def iso_ms(ms: int) -> str:
    """ISO 8601 in UTC with milliseconds and ``Z``, as the incidents files hold times."""
    return ms_to_datetime(ms).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def last_true_index(mask: np.ndarray) -> np.ndarray:
    """Per row, the index of the latest True at or before each column (0 before the first).

    The workhorse of "a value holds until the next event": commits, retention checks,
    bursts and membership changes all become ``values[row, last_true_index(events)]``.
    """
    columns = np.arange(mask.shape[1], dtype=np.int32)
    return np.maximum.accumulate(np.where(mask, columns, 0).astype(np.int32), axis=1)


def splitmix64(x: np.ndarray) -> np.ndarray:
    """A 64-bit mixer: distinct (group, generation) inputs give unrelated-looking hashes."""
    z = x.astype(np.uint64) + np.uint64(0x9E3779B97F4A7C15)
    z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return z ^ (z >> np.uint64(31))


@dataclass(slots=True)
class HistoryArrays:
    """A whole synthetic run as arrays, ready for :func:`write_history`.

    Shapes: per cluster ``(C, S)``, per group ``(G, S)``, per group-partition ``(G·P, S)`` and
    per topic-partition ``(T·P, S)``, where row ``g·P + p`` is partition ``p`` of group ``g``
    (topics likewise) and column ``s`` is scan ``s`` of the row's cluster.
    """

    partitions: int
    cluster_names: list[str]
    group_names: list[str]
    topic_names: list[str]
    cluster_of_group: np.ndarray
    topic_of_group: np.ndarray
    tp_of_gp: np.ndarray
    """Per group-partition row, the topic-partition row it reads."""
    scan_ts: np.ndarray
    scan_ok: np.ndarray
    """False where the cluster's scan failed: it writes no rows."""
    committed: np.ndarray
    committed_null: np.ndarray | None
    """True where the group has no committed offset yet (written as null)."""
    leo: np.ndarray
    log_start: np.ndarray
    state: np.ndarray
    """Codes of :data:`~notifier.types.GROUP_STATES`."""
    members: np.ndarray
    generation: np.ndarray
    """Counts member-set changes; ``member_hash`` mixes it with ``group_salt`` (0 when no
    members), so the hash changes exactly when the member set does."""
    group_salt: np.ndarray
    present: np.ndarray | None = None
    """False where the group does not exist (not created yet, or deleted): no rows."""


class SynthModel:
    """What every generator's model has: its sizes, its random generator, and the whole-run
    arrays (the fields of :class:`HistoryArrays`, filled by the subclass's ``build``) that
    :meth:`arrays` hands to the writer."""

    cluster_names: list[str]
    group_names: list[str]
    cluster_of_group: np.ndarray
    scan_ts: np.ndarray
    scan_ok: np.ndarray
    committed_null: np.ndarray | None
    present: np.ndarray | None = None

    def __init__(
        self,
        rng: np.random.Generator,
        n_groups: int,
        n_partitions: int,
        n_scans: int,
        n_clusters: int,
        interval_s: float,
        t0_ms: int,
    ) -> None:
        self.rng = rng
        self.G, self.P, self.S, self.C = n_groups, n_partitions, n_scans, n_clusters
        self.interval_s = interval_s
        self.t0_ms = t0_ms
        self.n_topics = 0

    @property
    def partitions(self) -> int:
        return self.P

    def arrays(self) -> HistoryArrays:
        return HistoryArrays(**{f.name: getattr(self, f.name) for f in fields(HistoryArrays)})

    def label(self, group: int, first: int, last: int, kind: str) -> dict[str, str]:
        """An ``incidents.csv`` row: the group's cluster, its name, the times of the first and
        the last labelled scan, the kind."""
        c = int(self.cluster_of_group[group])
        return {
            "cluster": self.cluster_names[c],
            "group": self.group_names[group],
            "start": iso_ms(int(self.scan_ts[c, first])),
            "end": iso_ms(int(self.scan_ts[c, last])),
            "kind": kind,
        }

    def result_counts(self, rows: int, files: int, began: float) -> dict[str, Any]:
        """The counts every generator's result reports (``began``: its ``perf_counter``)."""
        return {
            "rows": rows,
            "clusters": self.C,
            "groups": self.G,
            "partitions": self.P,
            "topics": self.n_topics,
            "scans": self.S,
            "missed_scans": int((~self.scan_ok).sum()),
            "files": files,
            "start": ms_to_datetime(self.t0_ms),
            "end": ms_to_datetime(int(self.scan_ts.max())),
            "seconds": time.perf_counter() - began,
        }


def write_history(out: Path, token: str, arrays: HistoryArrays) -> tuple[int, int]:
    """Write ``arrays`` into ``out``; return (rows, files).

    One file per date partition named with ``token``, rows in scan order then group-partition,
    row groups of about 1 Mi rows.
    """
    return _Writer(arrays).write(out, token)


class _Writer:
    def __init__(self, arrays: HistoryArrays) -> None:
        self.a = arrays
        G, P = len(arrays.group_names), arrays.partitions
        self.G, self.P = G, P
        gp = np.arange(G * P)
        self._row_group = gp // P
        self._row_cluster = arrays.cluster_of_group[self._row_group]
        self._row_topic = arrays.topic_of_group[self._row_group].astype(np.int32)
        self._row_partition = (gp % P).astype(np.int32)
        self._dictionaries = {
            "cluster": pa.array(arrays.cluster_names, pa.string()),
            "group": pa.array(arrays.group_names, pa.string()),
            "topic": pa.array(arrays.topic_names, pa.string()),
            "group_state": pa.array(GROUP_STATES, pa.string()),
        }

    def write(self, out: Path, token: str) -> tuple[int, int]:
        G, P = self.G, self.P
        scan_ts, scan_ok = self.a.scan_ts, self.a.scan_ok
        # Strings go out dictionary-encoded (fast, small) without the Arrow schema in the file
        # footer, so every reader gets plain strings: the files are in SAMPLE_SCHEMA.
        schema = pa.schema(
            [
                pa.field(f.name, pa.dictionary(pa.int32(), pa.string()), nullable=f.nullable)
                if f.name in self._dictionaries
                else f
                for f in SAMPLE_SCHEMA
            ]
        )
        days = scan_ts // DAY_MS
        rows = files = 0
        for day in np.unique(days[scan_ok]):
            mask = scan_ok & (days == day)
            scans = np.flatnonzero(mask.any(axis=0))
            first_ms = int(scan_ts[mask].min())
            path = (
                out / partition_name(day_of_ms(int(day) * DAY_MS)) / part_file_name(first_ms, token)
            )
            written = 0

            def write_day(handle: Any, mask: np.ndarray = mask, scans: np.ndarray = scans) -> None:
                nonlocal written
                per_batch = max(1, ROW_GROUP_ROWS // (G * P))
                with pq.ParquetWriter(
                    handle, schema, compression=PARQUET_COMPRESSION, store_schema=False
                ) as writer:
                    for i in range(0, scans.size, per_batch):
                        batch = self._batch(mask, scans[i : i + per_batch], schema)
                        if batch.num_rows:
                            writer.write_table(batch, row_group_size=batch.num_rows)
                            written += batch.num_rows

            write_parquet_atomic(path, write_day)
            rows += written
            files += 1
        return rows, files

    def _batch(self, mask: np.ndarray, scans: np.ndarray, schema: pa.Schema) -> pa.Table:
        """The rows of a run of consecutive scans, ordered by scan then group-partition."""
        a = self.a
        first, last = int(scans[0]), int(scans[-1]) + 1
        span = slice(first, last)
        keep: NDArray[np.bool_] = mask[:, span].T[:, self._row_cluster]  # (scans, G·P)
        if a.present is not None:
            keep &= a.present[:, span].T[:, self._row_group]

        def rows_of(per_row: np.ndarray) -> np.ndarray:
            return np.broadcast_to(per_row, keep.shape)[keep]

        def by_group(values: np.ndarray) -> np.ndarray:
            return values[:, span].T[:, self._row_group][keep]

        def by_topic(values: np.ndarray) -> np.ndarray:
            return values[a.tp_of_gp, span].T[keep]

        members = by_group(a.members)
        hashes = splitmix64(
            a.group_salt[:, None] * np.int64(1_000_003) + a.generation[:, span]
        ).view(np.int64)
        hashes = np.where(members == 0, 0, hashes.T[:, self._row_group][keep])
        committed = a.committed[:, span].T[keep]
        null = None if a.committed_null is None else a.committed_null[:, span].T[keep]

        def encoded(name: str, indices: np.ndarray) -> pa.Array:
            return pa.DictionaryArray.from_arrays(
                pa.array(indices.astype(np.int32)), self._dictionaries[name]
            )

        columns = {
            "ts": pa.array(
                a.scan_ts[:, span].T[:, self._row_cluster][keep], pa.timestamp("ms", "UTC")
            ),
            "cluster": encoded("cluster", rows_of(self._row_cluster)),
            "group": encoded("group", rows_of(self._row_group)),
            "topic": encoded("topic", rows_of(self._row_topic)),
            "partition": pa.array(rows_of(self._row_partition)),
            "committed_offset": pa.array(committed, pa.int64(), mask=null),
            "log_end_offset": pa.array(by_topic(a.leo)),
            "log_start_offset": pa.array(by_topic(a.log_start)),
            "group_state": encoded("group_state", by_group(a.state)),
            "members": pa.array(members.astype(np.int32)),
            "member_hash": pa.array(hashes),
            # A synthetic broker always answers: a failed scan is a gap, never a lost leader.
            "available": pa.repeat(pa.scalar(True), len(hashes)),
        }
        return pa.Table.from_pydict(columns, schema=schema)
