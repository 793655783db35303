"""The replay's input: samples as flat numpy columns, strings factorized.

:class:`SampleArrays` is built once per replay, from pandas (a Spark task's frame) or from Arrow
(:func:`~notifier.history.read_history`), so that each scan is a slice of arrays handed to the
store, with no per-scan Arrow or pandas.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import cast

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from notifier.history import HistorySchemaError
from notifier.types import (
    GROUP_STATE_CODE,
    OPTIONAL_SAMPLE_COLUMNS,
    REQUIRED_WHERE_AVAILABLE,
    SAMPLE_SCHEMA,
)

_UNKNOWN_STATE = GROUP_STATE_CODE["Unknown"]
_NOT_NULL = tuple(
    f.name for f in SAMPLE_SCHEMA if not f.nullable and f.name not in OPTIONAL_SAMPLE_COLUMNS
)


@dataclass(slots=True)
class SampleArrays:
    """Samples as flat numpy columns, strings factorized (codes into name arrays); offsets use
    -1 for null as the store does. The input of
    :func:`~notifier.backtest.replay.replay`."""

    ts: np.ndarray
    cluster: np.ndarray
    group: np.ndarray
    topic: np.ndarray
    partition: np.ndarray
    committed: np.ndarray
    log_end: np.ndarray
    log_start: np.ndarray
    state: np.ndarray
    members: np.ndarray
    member_hash: np.ndarray
    cluster_names: np.ndarray
    group_names: np.ndarray
    topic_names: np.ndarray
    available: np.ndarray | None = None
    """False for the rows of partitions a scan could not read (their log offsets are -1);
    None: every row is available (a history written before the column existed)."""

    def __len__(self) -> int:
        return int(self.ts.size)

    @classmethod
    def from_pandas(cls, frame: pd.DataFrame) -> SampleArrays:
        """From a frame with the sample columns (``ts`` as epoch ms or timestamps)."""
        available = frame["available"].to_numpy(bool) if "available" in frame.columns else None
        nulls = [
            f"{name} ({int(frame[name].isna().sum())} rows)"
            for name in _NOT_NULL
            if frame[name].isna().any()
        ]
        for name in REQUIRED_WHERE_AVAILABLE:
            missing = frame[name].isna().to_numpy()
            if available is not None:
                missing &= available
            if missing.any():
                nulls.append(f"{name} ({int(missing.sum())} rows)")
        if nulls:
            raise HistorySchemaError(
                "null values in columns that may not be null: " + ", ".join(nulls)
            )
        ts = frame["ts"]
        if pd.api.types.is_datetime64_any_dtype(ts.dtype):
            ts = ts.dt.tz_localize("UTC") if ts.dt.tz is None else ts
            ts_ms = ts.dt.tz_convert("UTC").astype("datetime64[ms, UTC]").astype(np.int64)
        else:
            ts_ms = ts.astype(np.int64)
        cluster, cluster_names = pd.factorize(frame["cluster"])
        group, group_names = pd.factorize(frame["group"])
        topic, topic_names = pd.factorize(frame["topic"])
        states, state_names = pd.factorize(frame["group_state"])
        lookup = np.array(
            [GROUP_STATE_CODE.get(s, _UNKNOWN_STATE) for s in state_names], dtype=np.int8
        )
        return cls(
            ts=np.ascontiguousarray(ts_ms, dtype=np.int64),
            cluster=cluster.astype(np.int32),
            group=group.astype(np.int32),
            topic=topic.astype(np.int32),
            partition=frame["partition"].to_numpy(np.int32),
            committed=_offsets(frame["committed_offset"]),
            log_end=_offsets(frame["log_end_offset"]),
            log_start=_offsets(frame["log_start_offset"]),
            state=lookup[states] if lookup.size else np.zeros(0, np.int8),
            members=frame["members"].to_numpy(np.int32),
            member_hash=frame["member_hash"].to_numpy(np.int64),
            cluster_names=np.asarray(cluster_names, dtype=object),
            group_names=np.asarray(group_names, dtype=object),
            topic_names=np.asarray(topic_names, dtype=object),
            available=available,
        )

    @classmethod
    def from_arrow(cls, table: pa.Table) -> SampleArrays:
        """From a table in :data:`~notifier.types.SAMPLE_SCHEMA` (what
        :func:`~notifier.history.read_history` returns)."""

        def codes(name: str) -> tuple[np.ndarray, np.ndarray]:
            encoded = pc.dictionary_encode(table.column(name).combine_chunks())
            names = np.asarray(encoded.dictionary.to_pylist(), dtype=object)
            return encoded.indices.to_numpy(zero_copy_only=False).astype(np.int32), names

        def integers(name: str, dtype: type) -> np.ndarray:
            column = pc.fill_null(table.column(name), -1)
            return cast(np.ndarray, column.to_numpy().astype(dtype, copy=False))  # pyarrow: untyped

        cluster, cluster_names = codes("cluster")
        group, group_names = codes("group")
        topic, topic_names = codes("topic")
        states, state_names = codes("group_state")
        lookup = np.array(
            [GROUP_STATE_CODE.get(s, _UNKNOWN_STATE) for s in state_names], dtype=np.int8
        )
        return cls(
            ts=table.column("ts").cast(pa.int64()).to_numpy().astype(np.int64, copy=False),
            cluster=cluster,
            group=group,
            topic=topic,
            partition=integers("partition", np.int32),
            committed=integers("committed_offset", np.int64),
            log_end=integers("log_end_offset", np.int64),
            log_start=integers("log_start_offset", np.int64),
            state=lookup[states] if lookup.size else np.zeros(0, np.int8),
            members=integers("members", np.int32),
            member_hash=integers("member_hash", np.int64),
            cluster_names=cluster_names,
            group_names=group_names,
            topic_names=topic_names,
            available=(
                table.column("available").to_numpy(zero_copy_only=False).astype(bool)
                if "available" in table.column_names
                else None
            ),
        )


_PER_ROW = ("ts", "cluster", "group", "topic", "partition", "committed", "log_end", "log_start",
            "state", "members", "member_hash")  # fmt: skip
"""The per-row arrays (the rest are the names the codes index)."""

Unavailable = dict[tuple[int, int], tuple[tuple[str, int], ...]]
"""``(cluster code, scan time)`` → the ``(topic, partition)`` that scan could not read."""


def split_unavailable(samples: SampleArrays) -> tuple[SampleArrays, Unavailable]:
    """The available rows (what the window stores ingest), and per scan the partitions
    marked unavailable (whose windows the step keeps, as the live service does)."""
    mask = samples.available
    if mask is None or bool(mask.all()):
        return samples, {}
    lost: dict[tuple[int, int], set[tuple[str, int]]] = {}
    for i in np.flatnonzero(~mask).tolist():
        key = (int(samples.cluster[i]), int(samples.ts[i]))
        pair = (str(samples.topic_names[samples.topic[i]]), int(samples.partition[i]))
        lost.setdefault(key, set()).add(pair)
    per_row = {name: getattr(samples, name)[mask] for name in _PER_ROW}
    kept = dataclasses.replace(samples, **per_row, available=None)
    return kept, {key: tuple(sorted(pairs)) for key, pairs in lost.items()}


def _offsets(series: pd.Series) -> np.ndarray:
    if series.isna().any():
        return series.fillna(-1).to_numpy(np.int64)
    return series.to_numpy(np.int64)
