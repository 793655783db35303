"""A recorded corpus on disk, written by :func:`write_corpus` and read by :func:`load_corpus`::

    <corpus>/history/date=YYYY-MM-DD/part-*.parquet   the service's history, to the end
    <corpus>/incidents.csv   labels: cluster, group, start, end, kind, onset, scenario
    <corpus>/groups.csv      one row per group: cluster, group, topic, scenario, kind, client,
                             commit, partitions, rate, description
    <corpus>/corpus.json     how it was recorded: broker, scan interval, warm-up, times, command

``incidents.csv`` is what :func:`notifier.history.load_incidents` and ``notifier backtest
--incidents`` read; ``kind`` is empty in ``groups.csv`` for a healthy or benign group.
"""

from __future__ import annotations

import csv
import functools
import json
import shutil
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from notifier.history import (
    DAY_MS,
    PARQUET_COMPRESSION,
    day_of_ms,
    load_incidents,
    part_file_name,
    partition_name,
    read_history,
    write_parquet_atomic,
)
from notifier.recorder.stage import Label, Plan

CLUSTER = "recorded"
"""The cluster name the recording's service scans under (every row and label carries it)."""
GROUP_COLUMNS = ("cluster", "group", "topic", "scenario", "kind", "client", "commit",
                 "partitions", "rate", "description")  # fmt: skip
LABEL_COLUMNS = ("cluster", "group", "start", "end", "kind", "onset", "scenario")


@dataclass
class RecordedCorpus:
    """A corpus read back: the history, its labels, its groups and how it was recorded."""

    path: Path
    table: pa.Table
    labels: pd.DataFrame
    """As :func:`~notifier.history.load_incidents` reads them (UTC timestamps)."""
    groups: pd.DataFrame
    meta: dict[str, Any]

    @property
    def scan_interval_s(self) -> float:
        return float(self.meta["scan_interval_s"])

    @property
    def warmup_s(self) -> float:
        return float(self.meta["warmup_s"])


def iso_ms(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, UTC).isoformat(timespec="milliseconds")[:-6] + "Z"


def copy_history(source: Path, target: Path, until_ms: int) -> int:
    """Copy the scans of the history ``source`` up to ``until_ms`` (the recording's end: the
    service may have scanned once or twice more before it stopped) into ``target`` (replaced),
    in the service's layout, one file per date partition; returns the rows copied."""
    return write_history(read_history(source), target, until_ms)


def write_history(table: pa.Table, target: Path, until_ms: int) -> int:
    """Write the scans of ``table`` up to ``until_ms`` into ``target`` (replaced), in the
    service's layout, one file per date partition; returns the rows written."""
    table = table.filter(pc.less_equal(table.column("ts").cast(pa.int64()), until_ms))
    if target.exists():
        shutil.rmtree(target)
    days = table.column("ts").cast(pa.int64()).to_numpy() // DAY_MS
    for day in sorted(set(days.tolist())):
        rows = table.filter(pa.array(days == day))
        path = target / partition_name(day_of_ms(day * DAY_MS)) / part_file_name(day * DAY_MS)
        write_parquet_atomic(path, functools.partial(_write_table, rows))
    return int(table.num_rows)


def _write_table(table: pa.Table, handle: Any) -> None:
    pq.write_table(table, handle, compression=PARQUET_COMPRESSION)


def write_corpus(
    out: Path,
    history: Path | pa.Table,
    plans: Sequence[Plan],
    labels: Sequence[Label],
    meta: dict[str, Any],
    *,
    cluster: str = CLUSTER,
) -> None:
    """Write a corpus into ``out`` (replacing one there): ``history``'s scans (a history
    directory, or a table in the sample schema) up to the recording's end
    (``meta["ended_ms"]``), the labels, the groups and ``meta``; ``cluster`` is the cluster
    name the history's rows carry (a generated corpus has its own)."""
    out.mkdir(parents=True, exist_ok=True)
    if isinstance(history, pa.Table):
        write_history(history, out / "history", int(meta["ended_ms"]))
    else:
        copy_history(history, out / "history", int(meta["ended_ms"]))
    with open(out / "incidents.csv", "w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(LABEL_COLUMNS)
        for lb in sorted(labels, key=lambda lb: (lb.start_ms, lb.group)):
            writer.writerow([cluster, lb.group, iso_ms(lb.start_ms), iso_ms(lb.end_ms), lb.kind,
                             iso_ms(lb.onset_ms), lb.scenario])  # fmt: skip
    with open(out / "groups.csv", "w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(GROUP_COLUMNS)
        for plan in plans:
            row = asdict(plan) | {"cluster": cluster}
            writer.writerow([row[c] for c in GROUP_COLUMNS])
    summary = {
        **meta,
        "started": iso_ms(int(meta["started_ms"])),
        "ended": iso_ms(int(meta["ended_ms"])),
        "groups": len(plans),
        "labels": len(labels),
        "labels_by_kind": pd.Series([lb.kind for lb in labels], dtype=str)
        .value_counts()
        .sort_index()
        .to_dict(),
    }
    (out / "corpus.json").write_text(json.dumps(summary, indent=2) + "\n")


def load_corpus(path: Path) -> RecordedCorpus:
    """Read a corpus :func:`write_corpus` wrote; raises :class:`ValueError` naming the file and
    what is wrong with it (a file missing, a field missing, a label on a group the corpus does
    not list)."""
    path = Path(path)
    meta_file = path / "corpus.json"
    if not meta_file.is_file():
        raise ValueError(f"{path} is no recorded corpus: {meta_file} is missing")
    meta = json.loads(meta_file.read_text())
    for key in ("scan_interval_s", "warmup_s", "broker"):
        if key not in meta:
            raise ValueError(f"{meta_file}: field {key!r} is missing")
    groups_file = path / "groups.csv"
    if not groups_file.is_file():
        raise ValueError(f"{path} is no recorded corpus: {groups_file} is missing")
    groups = pd.read_csv(groups_file, dtype={"group": str, "kind": str}, keep_default_na=False)
    missing = [c for c in GROUP_COLUMNS if c not in groups.columns]
    if missing:
        raise ValueError(f"{groups_file}: column(s) {', '.join(missing)} missing")
    labels = load_incidents(path / "incidents.csv")
    unknown = sorted(set(labels["group"]) - set(groups["group"]))
    if unknown:
        raise ValueError(f"{path / 'incidents.csv'}: labels on groups {unknown} that "
                         f"{groups_file} does not list")  # fmt: skip
    table = read_history(path / "history")
    return RecordedCorpus(path, table, labels, groups, meta)
