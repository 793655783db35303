"""What goes into a window store and what one store hands another: one scan of one cluster
as arrays (:class:`ScanColumns`), one group's windows (:class:`GroupRows`)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import cast

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from numpy.typing import NDArray

from notifier.rules.evidence import NULL
from notifier.types import (
    GROUP_STATE_CODE,
    GROUP_STATES,
    Sample,
    available_rows,
    unavailable_partitions,
)

_STATE_NAMES = pa.array(GROUP_STATES)


@dataclass(slots=True)
class GroupRows:
    """One group's windows as a store exports them for another store: its partitions, the
    portable columns of their rows and the LEO tables of those partitions (in that order)."""

    cluster: str
    group: str
    partitions: list[tuple[str, int]]
    columns: dict[str, np.ndarray]
    tables: dict[str, np.ndarray]


@dataclass(slots=True)
class ScanColumns:
    """One scan of one cluster as arrays (what :meth:`WindowStore.ingest_scan` takes)."""

    cluster: str
    ts: int
    group: list[str]
    topic: list[str]
    partition: np.ndarray
    committed: np.ndarray
    log_end: np.ndarray
    log_start: np.ndarray
    state: np.ndarray
    members: np.ndarray
    member_hash: np.ndarray
    unavailable: tuple[tuple[str, int], ...] = field(default=(), init=False)
    """``(topic, partition)`` the scan could not read: no rows above, windows kept (set after
    the columns, by whoever read the scan's rows marked unavailable)."""

    def __len__(self) -> int:
        return len(self.group)

    @classmethod
    def from_table(cls, table: pa.Table, cluster: str, ts: int) -> ScanColumns:
        """From rows of one cluster and one scan time in the sample schema; the rows of
        partitions marked unavailable become :attr:`unavailable`."""
        unavailable = unavailable_partitions(table)
        if unavailable:
            table = available_rows(table)
        # A state's code is its index in GROUP_STATES; a name not there is "Unknown".
        codes = pc.index_in(table.column("group_state"), value_set=_STATE_NAMES)
        states = pc.fill_null(codes, GROUP_STATE_CODE["Unknown"]).to_numpy().astype(np.int8)
        scan = cls(
            cluster=cluster,
            ts=ts,
            group=_shared_strings(table.column("group")),
            topic=_shared_strings(table.column("topic")),
            partition=_numbers(table.column("partition"), np.int32),
            committed=_int_column(table, "committed_offset"),
            log_end=_int_column(table, "log_end_offset"),
            log_start=_int_column(table, "log_start_offset"),
            state=states,
            members=_numbers(table.column("members"), np.int32),
            member_hash=_numbers(table.column("member_hash"), np.int64),
        )
        scan.unavailable = unavailable
        return scan

    @classmethod
    def from_samples(cls, samples: list[Sample]) -> ScanColumns:
        first = samples[0]
        unavailable = tuple(sorted({(s.topic, s.partition) for s in samples if not s.available}))
        samples = [s for s in samples if s.available]
        scan = cls(
            cluster=first.cluster,
            ts=first.ts,
            group=[s.group for s in samples],
            topic=[s.topic for s in samples],
            partition=np.array([s.partition for s in samples], dtype=np.int32),
            committed=np.array(
                [NULL if s.committed_offset is None else s.committed_offset for s in samples],
                dtype=np.int64,
            ),
            log_end=np.array([s.log_end_offset for s in samples], dtype=np.int64),
            log_start=np.array(
                [NULL if s.log_start_offset is None else s.log_start_offset for s in samples],
                dtype=np.int64,
            ),
            state=np.array(
                [GROUP_STATE_CODE.get(s.group_state, GROUP_STATE_CODE["Unknown"]) for s in samples],
                dtype=np.int8,
            ),
            members=np.array([s.members for s in samples], dtype=np.int32),
            member_hash=np.array([s.member_hash for s in samples], dtype=np.int64),
        )
        scan.unavailable = unavailable
        return scan


def _shared_strings(column: pa.ChunkedArray) -> list[str]:
    """A string column as a list whose equal values are one string object (a group's or a
    topic's name repeats on every row; ``to_pylist`` makes a new object per row, and a list
    of indices an int object per row)."""
    encoded = pc.dictionary_encode(column).combine_chunks()
    names = np.empty(len(encoded.dictionary), dtype=object)
    names[:] = encoded.dictionary.to_pylist()
    return cast("list[str]", names[encoded.indices.to_numpy(zero_copy_only=False)].tolist())


def _numbers(column: pa.ChunkedArray, dtype: type) -> np.ndarray:
    """A column without nulls as an array of ``dtype``: the table's own buffer (read only)
    when it is one chunk of that type already, a copy otherwise. A scan's columns are read,
    never written, downstream."""
    return np.asarray(column.to_numpy(), dtype=dtype)


def _int_column(table: pa.Table, name: str) -> NDArray[np.int64]:
    column = table.column(name)  # pyarrow is untyped
    if column.null_count:
        column = pc.fill_null(column, NULL)
    return cast("NDArray[np.int64]", _numbers(column, np.int64))
