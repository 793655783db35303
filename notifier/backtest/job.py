"""Backtest rule thresholds on stored history: what a grid of configurations would have sent.

``notifier backtest`` (or ``spark-submit notifier/backtest.py``) replays a sample history through
the live code path — :class:`~notifier.rules.store.WindowStore`,
:class:`~notifier.rules.evaluate.Evaluator`,
:class:`~notifier.rules.evaluate.TransitionTracker` and the notification core
(:class:`~notifier.notify.notifier.Dispatcher`) — once per configuration of a parameter grid, and
reports
for each configuration how many incidents it would have opened, how many notifications the routes
would have sent, how long it alerted, how often it flapped and, against labelled incidents, what
it caught, what it missed and how late.

Why it is built this way:

* **The same code as the service, scan by scan.** Each cluster gets its own store, evaluator and
  transition tracker, evaluated after each of its scans, exactly as the coordinator does; a
  group-partition missing from a scan is dropped and a group that lost every partition resolves
  as gone; ``expire_group`` runs every 60 s of history. So ``for``, ``keep_firing_for``, the
  complete-flag gate, incidents, escalations, repeats and resolves are the service's own.
* **Groups are independent, so the work splits by group.** Spark hashes (cluster, group) into
  buckets and each task replays *many* groups at once through the vectorized engine: the
  evaluator's cost per call is mostly fixed up to a few thousand rows, so a task amortizes it
  over all its rows. About two tasks per core: as many buckets as keep ~2,000 rows of a scan in
  each (:data:`ROWS_PER_TASK_SCAN`), times slices of the configurations when the fleet is too
  small for that (:func:`plan_tasks`). Every task sees every scan time of its clusters
  (broadcast from the driver), so a group behaves the same whichever bucket it lands in, and the
  Spark result equals the single-process :func:`replay` over the whole history, row for row.
  Routes that batch several groups into one notification (``group_by`` without ``group``)
  keep those groups in one bucket.
* **One store per window setting, one evaluator per configuration.** Configurations that share
  the ``window`` section share the ingest; only evaluation repeats, so cost grows linearly with
  history × configurations.
* **Lean per-scan loop.** Samples are sorted once; each scan is a slice of numpy arrays handed to
  the store as :class:`~notifier.rules.store.ScanColumns` directly, with no per-scan Arrow or
  pandas.

Lag in seconds for the unlabelled recommendation comes from the same LEO tables
(:mod:`notifier.rules.lagtime`) the ``lag_seconds`` rule uses, in configuration 0's store.
"""

from __future__ import annotations

import os
import sys

if __name__ == "__main__" and not __package__:
    # Run as a script (`spark-submit notifier/backtest/job.py`): import the package from the folder
    # above it, and keep this folder off the path (its types.py would shadow the standard one).
    _HERE = os.path.dirname(os.path.abspath(__file__))
    sys.path[:] = [p for p in sys.path if os.path.abspath(p or os.curdir) != _HERE]
    sys.path.insert(0, os.path.dirname(os.path.dirname(_HERE)))

import argparse
import base64
import enum
import html
import io
import itertools
import math
import re
import tempfile
import time
import warnings
import zipfile
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import yaml

from notifier.config import (
    ConfigError,
    NotifyConfig,
    RouteConfig,
    RulesConfig,
    WindowSettings,
    format_duration,
    load_rules,
    parse_duration,
    parse_notify,
    parse_rules,
    read_yaml,
    with_parameters,
)
from notifier.history import (
    HistoryEmptyError,
    HistoryError,
    HistoryNotFoundError,
    HistorySchemaError,
    load_incidents,
    read_history,
    to_ms,
    validate_schema,
)
from notifier.notify import Dispatcher, Route
from notifier.rules import Evaluator, ScanColumns, TransitionTracker, WindowStore
from notifier.types import GROUP_STATE_CODE, SAMPLE_SCHEMA, Incident, Transition

if TYPE_CHECKING:
    from pyspark.sql import DataFrame as SparkFrame
    from pyspark.sql import SparkSession

Echo = Callable[[str], None]

MINUTE_MS = 60_000
DAY_MS = 86_400_000
EXPIRE_EVERY_MS = 60_000
"""How often the service runs Burrow's expire-group (its scheduler job every 60 s)."""
DEFAULT_WARMUP_S = 1800.0
"""A cold start is not what a running service sees: until a rarely committing group's commit
ring spans a few commits, Burrow's STOP rule fires on it. Thirty minutes covers groups that
commit every five minutes."""

DEFAULT_ROUTE = RouteConfig.model_validate(
    {
        "receiver": "backtest",
        "group_by": ["..."],
        "group_wait": 0,
        "repeat_interval": "4h",
        "send_resolved": True,
    }
)
"""Without ``--routes``: one receiver, one notification per incident, sent at once, repeated
every 4 h while open, and a resolve."""

_UNKNOWN_STATE = GROUP_STATE_CODE["Unknown"]
_NOT_NULL = tuple(f.name for f in SAMPLE_SCHEMA if not f.nullable)


# --------------------------------------------------------------------------------------------
# The grid


@dataclass(frozen=True, slots=True)
class GridConfig:
    """One configuration: its id (0 = the rules file unchanged), the grid parameters as the
    rules model holds them (durations in seconds), and the resulting rules."""

    config_id: int
    parameters: dict[str, Any]
    rules: RulesConfig


def parse_grid(data: Any, source: str = "<grid>") -> dict[str, list[Any]]:
    """``{parameters: {dotted.path: [values, ...]}}`` → ``{dotted.path: [values]}``.

    Only the shape is checked here; :func:`expand_grid` checks that each parameter exists and
    each value is valid for it.
    """
    usage = "expected a mapping `parameters: {dotted.path: [value, ...]}`"
    if not isinstance(data, dict) or "parameters" not in data:
        raise ConfigError(source, [("", usage)])
    problems = [(key, "unknown field") for key in data if key != "parameters"]
    parameters = data["parameters"]
    if not isinstance(parameters, dict) or not parameters:
        raise ConfigError(source, [("parameters", usage)])
    grid: dict[str, list[Any]] = {}
    for name, values in parameters.items():
        where = f"parameters.{name}"
        if not isinstance(values, list) or not values:
            problems.append((where, "expected a non-empty list of values"))
            continue
        seen: list[Any] = []
        for value in values:
            if value in seen:
                problems.append((where, f"value {value!r} is listed twice"))
            seen.append(value)
        grid[str(name)] = values
    if problems:
        raise ConfigError(source, problems)
    return grid


def load_grid(path: str | os.PathLike[str]) -> dict[str, list[Any]]:
    """Read and shape-check a grid file (YAML)."""
    return parse_grid(read_yaml(Path(path)), str(path))


def parameter_value(config: RulesConfig, dotted: str) -> Any:
    """The value a dotted parameter has in ``config`` (``burrow.allowed_lag``,
    ``rules.lag-seconds-warn.for``); durations in seconds, enums as their value."""
    section, *rest = dotted.split(".")
    if section == "window":
        node, key = config.window, rest[0]
    elif section == "burrow":
        node, key = config.burrow, rest[0]
    else:
        node, key = config.rule(rest[0]), rest[1]
    value = getattr(node, "for_" if key == "for" else key)
    return value.value if isinstance(value, enum.Enum) else value


def expand_grid(
    rules: RulesConfig, grid: Mapping[str, Sequence[Any]], source: str = "<grid>"
) -> list[GridConfig]:
    """Configuration 0 (``rules`` unchanged), then the cartesian product of the grid, in the
    order the file lists parameters and values (the last parameter varies fastest).

    Every configuration is built and validated here, before any work starts: a parameter that
    does not exist, or a combination the rules reject (a value out of range, a
    ``stuck_rebalance`` rule needing more samples than ``window.intervals``) raises
    :class:`ConfigError` naming ``source`` and the parameter. Values are judged together, never
    alone, since one parameter may make another's value valid.
    """
    names = list(grid)
    problems: list[tuple[str, str]] = []
    for name in names:
        try:
            with_parameters(rules, {name: grid[name][0]})
        except KeyError as exc:
            message = str(exc.args[0]) if exc.args else name
            problems.append((f"parameters.{name}", f"no such parameter: {message}"))
        except ConfigError:
            pass  # judged with the other parameters below
    if problems:
        raise ConfigError(source, problems)
    configs = [GridConfig(0, {n: parameter_value(rules, n) for n in names}, rules)]
    invalid = 0
    combinations = itertools.product(*(grid[n] for n in names)) if names else iter(())
    for config_id, combination in enumerate(combinations, 1):
        chosen = dict(zip(names, combination))
        try:
            config = with_parameters(rules, chosen)
        except ConfigError as exc:
            invalid += 1
            if invalid <= 10:
                shown = ", ".join(f"{k}={v!r}" for k, v in chosen.items())
                reasons = "; ".join(f"{path}: {message}" for path, message in exc.problems)
                problems.append((f"configuration {config_id} ({shown})", reasons))
            continue
        configs.append(
            GridConfig(config_id, {n: parameter_value(config, n) for n in names}, config)
        )
    if invalid > 10:
        problems.append(("", f"… and {invalid - 10} more invalid configurations"))
    if problems:
        raise ConfigError(source, problems)
    return configs


# --------------------------------------------------------------------------------------------
# Samples as arrays


@dataclass(slots=True)
class SampleArrays:
    """Samples as flat numpy columns, strings factorized (codes into name arrays); offsets use
    -1 for null as the store does. The input of :func:`replay`."""

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

    def __len__(self) -> int:
        return int(self.ts.size)

    @classmethod
    def from_pandas(cls, frame: pd.DataFrame) -> SampleArrays:
        """From a frame with the sample columns (``ts`` as epoch ms or timestamps)."""
        nulls = [
            f"{name} ({int(frame[name].isna().sum())} rows)"
            for name in _NOT_NULL
            if frame[name].isna().any()
        ]
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
            log_end=frame["log_end_offset"].to_numpy(np.int64),
            log_start=_offsets(frame["log_start_offset"]),
            state=lookup[states] if lookup.size else np.zeros(0, np.int8),
            members=frame["members"].to_numpy(np.int32),
            member_hash=frame["member_hash"].to_numpy(np.int64),
            cluster_names=np.asarray(cluster_names, dtype=object),
            group_names=np.asarray(group_names, dtype=object),
            topic_names=np.asarray(topic_names, dtype=object),
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
            return column.to_numpy().astype(dtype, copy=False)

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
        )


def _offsets(series: pd.Series) -> np.ndarray:
    if series.isna().any():
        return series.fillna(-1).to_numpy(np.int64)
    return series.to_numpy(np.int64)


# --------------------------------------------------------------------------------------------
# The replay


@dataclass(frozen=True, slots=True)
class ReplayOptions:
    """What a replay needs besides the configurations."""

    scan_interval_s: float = 10.0
    notify: NotifyConfig | None = None
    """Routes and silences; ``None`` uses :data:`DEFAULT_ROUTE`."""
    slo_s: float = 300.0
    """Lag in seconds above which a group is in breach of its SLO."""
    slo_for_s: float = 0.0
    """How long a breach must last to count."""
    count_from_ms: int | None = None
    """Before this (the warm-up) the replay only primes windows, commit rings and LEO tables:
    incidents opened and SLO breaches begun earlier, and what is sent about them, don't count."""


INCIDENT_COLUMNS = (
    "config_id",
    "cluster",
    "group",
    "rule",
    "status",
    "start_ms",
    "end_ms",
    "close_reason",
)
COUNTER_COLUMNS = (
    "notifications",
    "alerts",
    "opens",
    "escalations",
    "repeats",
    "resolves",
    "transitions",
)
_EVENT_COLUMNS = {"open": "opens", "escalate": "escalations", "repeat": "repeats",
                  "resolve": "resolves"}  # fmt: skip
OUTPUT_SCHEMA = (
    "record string, config_id int, cluster string, group string, rule string, status string, "
    "start_ms long, end_ms long, close_reason string, samples long, task_ms long, "
    + ", ".join(f"{name} long" for name in COUNTER_COLUMNS)
)
"""What each Spark task returns: one frame holding incidents, counters, SLO breaches and the
groups it replayed, told apart by ``record``."""


@dataclass(slots=True)
class ReplayOutput:
    """What a replay found. ``end_ms`` is -1 for an incident still open when the history ends.

    * ``incidents``: config_id, cluster, group, rule (the rules that fired, comma-separated),
      status (the peak), start_ms, end_ms, close_reason (``recovered`` or ``gone``)
    * ``counters``: config_id, samples and what the dispatcher sent (:data:`COUNTER_COLUMNS`)
    * ``breaches``: cluster, group, start_ms, end_ms: lag in seconds above the SLO long enough
    * ``groups``: cluster, group, start_ms, end_ms: every group replayed, first and last sample
    * ``tasks``: samples, task_ms: how long each replay (each Spark task) took
    """

    incidents: pd.DataFrame
    counters: pd.DataFrame
    breaches: pd.DataFrame
    groups: pd.DataFrame
    tasks: pd.DataFrame = field(
        default_factory=lambda: pd.DataFrame({"samples": [], "task_ms": []}, dtype=np.int64)
    )

    def to_frame(self) -> pd.DataFrame:
        """All four in one frame in :data:`OUTPUT_SCHEMA` (what a Spark task returns)."""
        parts = (
            ("incident", self.incidents),
            ("counters", self.counters),
            ("breach", self.breaches),
            ("group", self.groups),
            ("task", self.tasks),
        )
        columns: dict[str, np.ndarray] = {}
        for name, kind in _output_columns():
            pieces = []
            for record, frame in parts:
                if name == "record":
                    pieces.append(np.full(len(frame), record, dtype=object))
                elif name in frame:
                    pieces.append(frame[name].to_numpy(dtype=object if kind == "string" else None))
                elif kind == "string":
                    pieces.append(np.full(len(frame), None, dtype=object))
                else:
                    pieces.append(np.full(len(frame), -1 if kind == "int" else 0, dtype=np.int64))
            values = np.concatenate(pieces)
            if kind == "int":
                values = values.astype(np.int32)
            elif kind == "long":
                values = values.astype(np.int64)
            columns[name] = values
        return pd.DataFrame(columns)

    @classmethod
    def from_frame(cls, frame: pd.DataFrame) -> ReplayOutput:
        """The inverse of :meth:`to_frame` (over the frames of many tasks)."""
        record = frame["record"]
        incidents = frame.loc[record == "incident", list(INCIDENT_COLUMNS)]
        counters = frame.loc[record == "counters", ["config_id", "samples", *COUNTER_COLUMNS]]
        counters = _sorted_counters(counters.groupby("config_id", as_index=False).sum())
        breaches = frame.loc[record == "breach", ["cluster", "group", "start_ms", "end_ms"]]
        groups = frame.loc[record == "group", ["cluster", "group", "start_ms", "end_ms"]]
        groups = groups.drop_duplicates()  # every configuration slice of a bucket reports them
        tasks = frame.loc[record == "task", ["samples", "task_ms"]].reset_index(drop=True)
        return cls(
            incidents=_sorted_incidents(incidents),
            counters=counters,
            breaches=_sorted_spans(breaches),
            groups=_sorted_spans(groups),
            tasks=tasks.astype(np.int64),
        )


def _output_columns() -> list[tuple[str, str]]:
    return [tuple(item.rsplit(" ", 1)) for item in OUTPUT_SCHEMA.split(", ")]  # type: ignore[misc]


def _sorted_spans(frame: pd.DataFrame) -> pd.DataFrame:
    frame = frame.astype({"start_ms": np.int64, "end_ms": np.int64}, copy=True)
    return frame.sort_values(["cluster", "group", "start_ms"]).reset_index(drop=True)


def _sorted_counters(frame: pd.DataFrame) -> pd.DataFrame:
    types = {name: np.int64 for name in ("samples", *COUNTER_COLUMNS)}
    frame = frame.astype({"config_id": np.int32, **types}, copy=True)
    return frame.sort_values("config_id").reset_index(drop=True)


def _sorted_incidents(frame: pd.DataFrame) -> pd.DataFrame:
    frame = frame.astype(
        {"config_id": np.int32, "start_ms": np.int64, "end_ms": np.int64}, copy=True
    )
    return frame.sort_values(["config_id", "cluster", "group", "start_ms"]).reset_index(drop=True)


class _SloEpisodes:
    """Per group, the runs of evaluations whose lag in seconds is above the SLO; a run that
    lasted at least ``for`` is a breach (the ground truth when there are no labels)."""

    def __init__(self, threshold_s: float, for_ms: int) -> None:
        self.threshold_s = threshold_s
        self.for_ms = for_ms
        self.since = np.full(0, -1, dtype=np.int64)
        self.last = np.full(0, -1, dtype=np.int64)
        self.found: list[tuple[str, str, int, int]] = []

    def _grow(self, size: int) -> None:
        if self.since.size >= size:
            return
        for name in ("since", "last"):
            grown = np.full(max(size, 2 * self.since.size, 64), -1, dtype=np.int64)
            old = getattr(self, name)
            grown[: old.size] = old
            setattr(self, name, grown)

    def update(self, keys: list[tuple[str, str] | None], evaluation: Any) -> None:
        gids = evaluation.group_ids
        self._grow(len(keys))
        seconds = evaluation.group_max_lag_seconds[gids]
        with np.errstate(invalid="ignore"):
            above = seconds > self.threshold_s
        running = self.since[gids] >= 0
        ended = gids[running & ~above]
        if ended.size:
            self.close(ended, keys)
        started = gids[above & ~running]
        self.since[started] = evaluation.now
        self.last[gids[above]] = evaluation.now

    def close(self, gids: Iterable[int], keys: Sequence[tuple[str, str] | None]) -> None:
        """End the runs of ``gids`` (``keys`` names them; read before the store forgets)."""
        for gid in np.asarray(list(gids), dtype=np.int64).tolist():
            if gid >= self.since.size or self.since[gid] < 0:
                continue
            start, end = int(self.since[gid]), int(self.last[gid])
            key = keys[gid]
            if key is not None and end - start >= self.for_ms:
                self.found.append((key[0], key[1], start, end))
            self.since[gid] = self.last[gid] = -1


class _ClusterReplay:
    """The live service's per-cluster state: a store per window setting, an evaluator and a
    transition tracker per configuration."""

    __slots__ = ("evaluators", "name", "next_expire", "slo", "stores", "touched", "trackers")

    def __init__(self, name: str, engine: _Replay) -> None:
        self.name = name
        interval = engine.options.scan_interval_s
        self.stores = [WindowStore(settings, interval) for settings, _ in engine.window_groups]
        self.evaluators: list[Evaluator] = [None] * len(engine.configs)  # type: ignore[list-item]
        for w, (_, members) in enumerate(engine.window_groups):
            for k in members:
                self.evaluators[k] = Evaluator(engine.configs[k].rules, self.stores[w])
        self.trackers = [TransitionTracker() for _ in engine.configs]
        self.touched: list[np.ndarray | None] = [None] * len(self.stores)
        self.next_expire = [-1] * len(self.stores)
        self.slo = _SloEpisodes(engine.options.slo_s, round(engine.options.slo_for_s * 1000))


def _gone_groups(
    store: WindowStore, before: list[tuple[str, str] | None]
) -> tuple[list[tuple[str, str]], np.ndarray | None]:
    """The groups known in ``before`` (the id → key table) that the store has since forgotten."""
    gids = [g for g, key in enumerate(before) if key is not None and store.group_key[g] is None]
    if not gids:
        return [], None
    keys = sorted(before[g] for g in gids)  # type: ignore[type-var]
    return keys, np.asarray(gids, dtype=np.int64)  # type: ignore[return-value]


class _Replay:
    """One replay over many groups and configurations (a Spark task, or the whole history)."""

    def __init__(self, configs: Sequence[GridConfig], options: ReplayOptions) -> None:
        if not configs:
            raise ValueError("no configurations to replay")
        self.configs = list(configs)
        self.options = options
        groups: dict[str, tuple[WindowSettings, list[int]]] = {}
        for k, config in enumerate(self.configs):
            key = config.rules.window.model_dump_json()
            groups.setdefault(key, (config.rules.window, []))[1].append(k)
        self.window_groups = list(groups.values())
        # Breaches of the SLO are measured once, with configuration 0's store and evaluator.
        self.slo_config = next((k for k, c in enumerate(self.configs) if c.config_id == 0), -1)
        self.slo_window = next(
            (w for w, (_, ks) in enumerate(self.window_groups) if self.slo_config in ks), -1
        )
        self.dispatchers = [_dispatcher(options.notify) for _ in self.configs]
        self.count_from = -(2**62) if options.count_from_ms is None else options.count_from_ms
        self.transitions = [0] * len(self.configs)
        self.sent = [dict.fromkeys(COUNTER_COLUMNS, 0) for _ in self.configs]
        self.closed: list[tuple[Any, ...]] = []
        self.clusters: dict[int, _ClusterReplay] = {}

    # ---------------------------------------------------------------- the loop

    def run(
        self, samples: SampleArrays, scan_times: Mapping[str, np.ndarray] | None
    ) -> ReplayOutput:
        n = len(samples)
        order = np.lexsort(
            (samples.partition, samples.topic, samples.group, samples.cluster, samples.ts)
        )
        ts = samples.ts[order]
        cluster = samples.cluster[order]
        group = samples.group[order]
        topic = samples.topic[order]
        partition = np.ascontiguousarray(samples.partition[order])
        columns = {
            name: np.ascontiguousarray(getattr(samples, name)[order])
            for name in ("committed", "log_end", "log_start", "state", "members", "member_hash")
        }
        width = int(partition.max()) + 1 if n else 1
        row_key = (group.astype(np.int64) * len(samples.topic_names) + topic) * width + partition
        repeated = np.zeros(n, dtype=bool)
        repeated[1:] = (
            (ts[1:] == ts[:-1]) & (cluster[1:] == cluster[:-1]) & (row_key[1:] == row_key[:-1])
        )
        if repeated.any():
            # The same group-partition twice in one scan (a file written twice): the store
            # takes a scan's rows once, so keep the first.
            keep = ~repeated
            ts, cluster, group, topic = ts[keep], cluster[keep], group[keep], topic[keep]
            partition, row_key = partition[keep], row_key[keep]
            columns = {name: values[keep] for name, values in columns.items()}
            n = int(keep.sum())

        change = np.ones(n, dtype=bool)
        change[1:] = (ts[1:] != ts[:-1]) | (cluster[1:] != cluster[:-1])
        starts = np.flatnonzero(change)
        ends = np.append(starts[1:], n)
        found = {(int(c), int(t)): i for i, (c, t) in enumerate(zip(cluster[starts], ts[starts]))}
        events = self._timeline(samples, cluster[starts], ts[starts], scan_times)

        layouts: dict[int, tuple[np.ndarray, list[str], list[str]]] = {}
        names = samples.cluster_names
        group_names, topic_names = samples.group_names, samples.topic_names
        empty = _empty_scan()
        position = 0
        since_cleanup = 0
        while position < len(events):
            now = events[position][0]
            self._tick_before(now)
            while position < len(events) and events[position][0] == now:
                _, name, code = events[position]
                position += 1
                index = found.get((code, now))
                state = self.clusters.get(code)
                if index is None:
                    if state is None:
                        continue
                    scan = empty
                    scan.cluster, scan.ts = name, now
                else:
                    if state is None:
                        state = self.clusters[code] = _ClusterReplay(str(names[code]), self)
                    lo, hi = int(starts[index]), int(ends[index])
                    keys = row_key[lo:hi]
                    layout = layouts.get(code)
                    if layout is None or not np.array_equal(layout[0], keys):
                        layout = (
                            keys,
                            group_names[group[lo:hi]].tolist(),
                            topic_names[topic[lo:hi]].tolist(),
                        )
                        layouts[code] = layout
                    scan = ScanColumns(
                        cluster=state.name,
                        ts=now,
                        group=layout[1],
                        topic=layout[2],
                        partition=partition[lo:hi],
                        committed=columns["committed"][lo:hi],
                        log_end=columns["log_end"][lo:hi],
                        log_start=columns["log_start"][lo:hi],
                        state=columns["state"][lo:hi],
                        members=columns["members"][lo:hi],
                        member_hash=columns["member_hash"][lo:hi],
                    )
                self._scan(state, scan, now)
            for k in range(len(self.dispatchers)):
                self._tick(k, now)
            since_cleanup += 1
            if since_cleanup >= 256:
                since_cleanup = 0
                for dispatcher in self.dispatchers:
                    dispatcher.take_changes()  # nobody persists them here: keep memory flat
        return self._output(samples, n, cluster, group, ts)

    def _timeline(
        self,
        samples: SampleArrays,
        scan_clusters: np.ndarray,
        scan_ts: np.ndarray,
        scan_times: Mapping[str, np.ndarray] | None,
    ) -> list[tuple[int, str, int]]:
        """Every scan of every cluster this replay has rows of, in time order: from the data,
        plus (in a Spark task) the scans in which none of this task's groups had rows."""
        events: list[tuple[int, str, int]] = []
        for code in np.unique(scan_clusters).tolist():
            name = str(samples.cluster_names[code])
            times = scan_ts[scan_clusters == code]
            if scan_times is not None and name in scan_times:
                times = np.union1d(times, np.asarray(scan_times[name], dtype=np.int64))
            events.extend((t, name, code) for t in times.tolist())
        events.sort()
        return events

    def _tick_before(self, now: int) -> None:
        """Flush what falls due between scans (repeats, group intervals) at its own time."""
        for k, dispatcher in enumerate(self.dispatchers):
            due = dispatcher.next_due()
            while due is not None and due < now:
                self._tick(k, due)
                due = dispatcher.next_due()

    def _tick(self, k: int, now: int) -> None:
        """Flush configuration ``k``'s due notifications and count what would have been sent
        (alerts about incidents opened in the warm-up excepted)."""
        sent = self.sent[k]
        for notification in self.dispatchers[k].tick(now):
            counted = [a for a in notification.alerts if a.incident.opened_at >= self.count_from]
            if counted:
                sent["notifications"] += 1
                sent["alerts"] += len(counted)
                for alert in counted:
                    sent[_EVENT_COLUMNS[alert.event.value]] += 1

    def _scan(self, state: _ClusterReplay, scan: ScanColumns, now: int) -> None:
        """One successful scan of one cluster, as the coordinator processes it: ingest, drop
        the rows the scan no longer lists (their groups resolve as gone), Burrow's
        expire-group every minute, evaluate, track transitions, notify."""
        for w, (_, members) in enumerate(self.window_groups):
            store = state.stores[w]
            touched = store.ingest_scan(scan)
            # The store hands back the same rows array while a cluster's layout is unchanged:
            # then nothing can have vanished.
            vanish_check = touched is not state.touched[w]
            expire_due = now >= state.next_expire[w]
            gone: list[tuple[str, str]] = []
            gone_gids: np.ndarray | None = None
            if vanish_check or (expire_due and state.next_expire[w] >= 0):
                before = list(store.group_key)
                if vanish_check:
                    state.touched[w] = touched
                    alive = store.alive_rows()
                    if alive.size != touched.size:
                        store.remove_rows(np.setdiff1d(alive, touched, assume_unique=True))
                if expire_due and state.next_expire[w] >= 0:
                    store.expire(now)
                gone, gone_gids = _gone_groups(store, before)
                if gone_gids is not None and w == self.slo_window:
                    state.slo.close(gone_gids, before)
            if expire_due:
                state.next_expire[w] = now + EXPIRE_EVERY_MS
            alive_rows = store.alive_rows().size > 0
            for k in members:
                evaluator = state.evaluators[k]
                tracker = state.trackers[k]
                transitions: list[Transition] = tracker.gone(gone, now) if gone else []
                if alive_rows:
                    evaluation = evaluator.evaluate(now)
                    if k == self.slo_config:
                        state.slo.update(store.group_key, evaluation)
                    changed = tracker.update(evaluation)
                    if changed:
                        transitions.extend(changed)
                if transitions:
                    self._dispatch(k, transitions, now)

    def _dispatch(self, k: int, transitions: list[Transition], now: int) -> None:
        if now >= self.count_from:
            self.transitions[k] += len(transitions)
        for change in self.dispatchers[k].handle(transitions, now):
            incident = change.incident
            if change.kind == "closed" and incident.opened_at >= self.count_from:
                self.closed.append(_incident_row(self.configs[k].config_id, incident))

    # ---------------------------------------------------------------- results

    def _output(
        self,
        samples: SampleArrays,
        n: int,
        cluster: np.ndarray,
        group: np.ndarray,
        ts: np.ndarray,
    ) -> ReplayOutput:
        rows = list(self.closed)
        counters = []
        for k, config in enumerate(self.configs):
            still_open = self.dispatchers[k].book.open.values()
            rows.extend(
                _incident_row(config.config_id, incident)
                for incident in still_open
                if incident.opened_at >= self.count_from
            )
            counters.append(
                {"config_id": config.config_id, "samples": n}
                | self.sent[k]
                | {"transitions": self.transitions[k]}
            )
        breaches = []
        for state in self.clusters.values() if self.slo_window >= 0 else ():
            slo = state.slo
            store = state.stores[self.slo_window]
            slo.close(np.flatnonzero(slo.since >= 0), store.group_key)
            breaches.extend(b for b in slo.found if b[2] >= self.count_from)
        incidents = pd.DataFrame(rows, columns=list(INCIDENT_COLUMNS))
        return ReplayOutput(
            incidents=_sorted_incidents(incidents),
            counters=_sorted_counters(
                pd.DataFrame(counters, columns=["config_id", "samples", *COUNTER_COLUMNS])
            ),
            breaches=_sorted_spans(
                pd.DataFrame(breaches, columns=["cluster", "group", "start_ms", "end_ms"])
            ),
            groups=_sorted_spans(_group_spans(samples, cluster, group, ts)),
        )


def _group_spans(
    samples: SampleArrays, cluster: np.ndarray, group: np.ndarray, ts: np.ndarray
) -> pd.DataFrame:
    """First and last sample of each (cluster, group); ``ts`` is sorted."""
    if ts.size == 0:
        return pd.DataFrame(columns=["cluster", "group", "start_ms", "end_ms"])
    key = cluster.astype(np.int64) * max(1, len(samples.group_names)) + group
    _, first = np.unique(key, return_index=True)
    _, last_reversed = np.unique(key[::-1], return_index=True)
    last = ts.size - 1 - last_reversed
    return pd.DataFrame(
        {
            "cluster": samples.cluster_names[cluster[first]].astype(str),
            "group": samples.group_names[group[first]].astype(str),
            "start_ms": ts[first],
            "end_ms": ts[last],
        }
    ).reset_index(drop=True)


def _incident_row(config_id: int, incident: Incident) -> tuple[Any, ...]:
    rules = ",".join(sorted({f.rule for f in incident.findings}))
    return (
        config_id,
        incident.cluster,
        incident.group,
        rules,
        incident.peak_status.value,
        incident.opened_at,
        -1 if incident.closed_at is None else incident.closed_at,
        incident.close_reason,
    )


def _empty_scan() -> ScanColumns:
    return ScanColumns(
        cluster="",
        ts=0,
        group=[],
        topic=[],
        partition=np.zeros(0, np.int32),
        committed=np.zeros(0, np.int64),
        log_end=np.zeros(0, np.int64),
        log_start=np.zeros(0, np.int64),
        state=np.zeros(0, np.int8),
        members=np.zeros(0, np.int32),
        member_hash=np.zeros(0, np.int64),
    )


def _dispatcher(notify: NotifyConfig | None) -> Dispatcher:
    return Dispatcher(DEFAULT_ROUTE) if notify is None else Dispatcher.from_config(notify)


def replay(
    samples: SampleArrays,
    configs: Sequence[GridConfig],
    options: ReplayOptions,
    scan_times: Mapping[str, np.ndarray] | None = None,
) -> ReplayOutput:
    """Replay ``samples`` once per configuration through the live code path.

    Each cluster is evaluated after each of its scans: the scans in the data, plus those in
    ``scan_times`` (cluster → epoch ms), which a Spark task gets so that a scan in which none of
    its groups had rows still counts as a scan (and those groups as gone), exactly as in a
    replay of the whole history. The result for a group does not depend on which other groups
    are replayed with it, unless the routes batch several groups into one notification.
    """
    began = time.perf_counter()
    output = _Replay(configs, options).run(samples, scan_times)
    elapsed = round((time.perf_counter() - began) * 1000)
    output.tasks = pd.DataFrame({"samples": [len(samples)], "task_ms": [elapsed]}, dtype=np.int64)
    return output


def aggregation_scope(notify: NotifyConfig | None) -> Literal["group", "cluster", "all"]:
    """How much of the fleet one notification may cover under these routes: a route whose
    ``group_by`` lacks ``group`` batches groups of a cluster together (or of every cluster when
    it lacks ``cluster`` too), so those must be replayed in one task."""
    if notify is None:
        return "group"
    scope: Literal["group", "cluster", "all"] = "group"
    for route in Route.build(notify.route).walk():
        labels = ("cluster", "group") if route.group_by is None else route.group_by
        if "group" not in labels:
            if "cluster" not in labels:
                return "all"
            scope = "cluster"
    return scope


# --------------------------------------------------------------------------------------------
# Matching would-be incidents to labelled ones


@dataclass(slots=True)
class Matches:
    """How would-be incidents and labelled incidents of the same cluster and group pair up.

    ``alert_matched``: per alert (aligned with the alerts frame), whether it matches a label.
    ``first``: per (config_id, label_id) with a match, the earliest matching open (ms).
    """

    alert_matched: np.ndarray
    first: pd.DataFrame


def match_incidents(
    alerts: pd.DataFrame,
    labels: pd.DataFrame,
    tolerance_ms: int,
    *,
    overlap: bool = False,
) -> Matches:
    """Pair would-be incidents (``config_id, cluster, group, start_ms, end_ms``; ``end_ms`` -1
    while open) with labelled ones (``label_id, cluster, group, start_ms, end_ms``).

    A would-be incident matches a label of the same cluster and group when it opens within
    ``[label start - tolerance, label end]`` (both ends included). One alert may match several
    labels and one label several alerts; the label's delay is measured from the first.
    With ``overlap`` (for SLO breaches, where an alert already open when the lag crossed the
    SLO counts), it matches when it is open at any time in ``[start - tolerance, end]``.
    """
    flags = np.zeros(len(alerts), dtype=bool)
    empty = pd.DataFrame({"config_id": [], "label_id": [], "first_ms": []})
    if alerts.empty or labels.empty:
        return Matches(flags, empty)
    left = alerts[["config_id", "cluster", "group", "start_ms", "end_ms"]].copy()
    left["alert"] = np.arange(len(alerts))
    right = labels[["label_id", "cluster", "group", "start_ms", "end_ms"]].rename(
        columns={"start_ms": "label_start", "end_ms": "label_end"}
    )
    pairs = left.merge(right, on=["cluster", "group"], how="inner")
    earliest = pairs["label_start"] - tolerance_ms
    if overlap:
        still_open = (pairs["end_ms"] < 0) | (pairs["end_ms"] >= earliest)
        hit = (pairs["start_ms"] <= pairs["label_end"]) & still_open
    else:
        hit = (pairs["start_ms"] >= earliest) & (pairs["start_ms"] <= pairs["label_end"])
    pairs = pairs[hit]
    flags[pairs["alert"].to_numpy()] = True
    first = (
        pairs.groupby(["config_id", "label_id"], as_index=False)["start_ms"]
        .min()
        .rename(columns={"start_ms": "first_ms"})
    )
    return Matches(flags, first)


def _labels_frame(frame: pd.DataFrame) -> pd.DataFrame:
    """Labelled incidents (from :func:`~notifier.history.load_incidents`) in epoch ms."""
    out = pd.DataFrame(
        {
            "cluster": frame["cluster"].astype(str),
            "group": frame["group"].astype(str),
            "start_ms": frame["start"].astype("datetime64[ms, UTC]").astype(np.int64),
            "end_ms": frame["end"].astype("datetime64[ms, UTC]").astype(np.int64),
            "kind": frame["kind"].astype(str) if "kind" in frame else "",
        }
    )
    out.insert(0, "label_id", np.arange(len(out)))
    return out


# --------------------------------------------------------------------------------------------
# Scoring


@dataclass(frozen=True, slots=True)
class HistorySpan:
    """What was replayed: samples, scans, clusters, the first and last scan, and from when
    on incidents count (after the warm-up); times in epoch ms."""

    samples: int
    scans: int
    clusters: int
    start_ms: int
    end_ms: int
    counted_from_ms: int

    @property
    def days(self) -> float:
        """Days counted (at least a minute's worth, so rates stay finite)."""
        return max(self.end_ms - self.counted_from_ms, MINUTE_MS) / DAY_MS


def summarize(
    configs: Sequence[GridConfig],
    output: ReplayOutput,
    span: HistorySpan,
    scan_interval_s: float,
    tolerance_ms: int,
    labels: pd.DataFrame | None = None,
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """One row per configuration, and the alerts with their match flags.

    Columns: ``config_id``, one per grid parameter, ``incidents``, ``notifications``,
    ``alerts_per_day``, ``notifications_per_day``, ``alert_minutes`` (incidents still open at
    the end count up to the last scan), ``flaps`` (incidents opening within one window —
    ``intervals`` × scan interval — of the same group's previous incident closing); with labels
    ``tp, fp, fn, precision, recall, delay_p50_s, delay_p90_s``; always ``slo_breaches,
    slo_missed, slo_delay_p50_s`` against the lag-in-seconds breaches; then the dispatcher's
    ``opens, escalations, repeats, resolves`` and ``transitions``.
    """
    alerts = output.incidents.reset_index(drop=True)
    ids = [c.config_id for c in configs]
    by_config = alerts.groupby("config_id")
    summary = pd.DataFrame({"config_id": ids})
    for name in configs[0].parameters:
        summary[name] = [c.parameters[name] for c in configs]
    summary["incidents"] = by_config.size().reindex(ids, fill_value=0).to_numpy()
    counters = output.counters.set_index("config_id").reindex(ids, fill_value=0)
    summary["notifications"] = counters["notifications"].to_numpy()
    summary["alerts_per_day"] = (summary["incidents"] / span.days).round(3)
    summary["notifications_per_day"] = (summary["notifications"] / span.days).round(3)
    end = np.where(alerts["end_ms"] < 0, span.end_ms, alerts["end_ms"])
    minutes = pd.Series((end - alerts["start_ms"].to_numpy()) / MINUTE_MS, index=alerts.index)
    summary["alert_minutes"] = (
        minutes.groupby(alerts["config_id"]).sum().reindex(ids, fill_value=0.0).round(2).to_numpy()
    )
    summary["flaps"] = _flaps(alerts, configs, scan_interval_s).reindex(ids, fill_value=0).values

    alerts = alerts.copy()
    if labels is not None:
        matches = match_incidents(alerts, labels, tolerance_ms)
        alerts["matched"] = matches.alert_matched
        summary = summary.join(_label_scores(ids, alerts, labels, matches), on="config_id")
    else:
        alerts["matched"] = pd.array([pd.NA] * len(alerts), dtype="boolean")
    breaches = output.breaches.reset_index(drop=True).copy()
    breaches.insert(0, "label_id", np.arange(len(breaches)))
    slo = match_incidents(alerts, breaches, tolerance_ms, overlap=True)
    caught = slo.first.groupby("config_id").size().reindex(ids, fill_value=0)
    summary["slo_breaches"] = len(breaches)
    summary["slo_missed"] = (len(breaches) - caught).to_numpy()
    delays = slo.first.merge(breaches[["label_id", "start_ms"]], on="label_id")
    delays["delay_s"] = np.maximum(0, delays["first_ms"] - delays["start_ms"]) / 1000
    summary["slo_delay_p50_s"] = _percentile(delays, ids, 50)
    for name in ("opens", "escalations", "repeats", "resolves", "transitions"):
        summary[name] = counters[name].to_numpy()
    return summary, alerts


def _label_scores(
    ids: list[int], alerts: pd.DataFrame, labels: pd.DataFrame, matches: Matches
) -> pd.DataFrame:
    scores = pd.DataFrame(index=pd.Index(ids, name="config_id"))
    tp = matches.first.groupby("config_id").size().reindex(ids, fill_value=0)
    total = alerts.groupby("config_id").size().reindex(ids, fill_value=0)
    matched = alerts.groupby("config_id")["matched"].sum().reindex(ids, fill_value=0)
    scores["tp"] = tp.astype(np.int64)
    scores["fp"] = (total - matched).astype(np.int64)
    scores["fn"] = (len(labels) - tp).astype(np.int64)
    with np.errstate(invalid="ignore", divide="ignore"):
        scores["precision"] = np.where(total > 0, matched / total.clip(lower=1), np.nan).round(4)
        scores["recall"] = (tp / len(labels)).round(4) if len(labels) else np.nan
    delays = matches.first.merge(labels[["label_id", "start_ms"]], on="label_id")
    delays["delay_s"] = (delays["first_ms"] - delays["start_ms"]) / 1000
    scores["delay_p50_s"] = _percentile(delays, ids, 50)
    scores["delay_p90_s"] = _percentile(delays, ids, 90)
    return scores


def _percentile(delays: pd.DataFrame, ids: list[int], q: float) -> np.ndarray:
    if delays.empty:
        return np.full(len(ids), np.nan)
    values = delays.groupby("config_id")["delay_s"].quantile(q / 100)
    return values.reindex(ids).round(1).to_numpy()


def _flaps(
    alerts: pd.DataFrame, configs: Sequence[GridConfig], scan_interval_s: float
) -> pd.Series:
    """Per configuration, incidents that opened within one window after the same group's
    previous incident closed."""
    if alerts.empty:
        return pd.Series(dtype=np.int64)
    window_ms = pd.Series(
        {c.config_id: c.rules.window.intervals * scan_interval_s * 1000 for c in configs}
    )
    ordered = alerts.sort_values(["config_id", "cluster", "group", "start_ms"])
    same = (
        (ordered["config_id"] == ordered["config_id"].shift())
        & (ordered["cluster"] == ordered["cluster"].shift())
        & (ordered["group"] == ordered["group"].shift())
    )
    previous_end = ordered["end_ms"].shift()
    gap = ordered["start_ms"] - previous_end
    limit = ordered["config_id"].map(window_ms)
    flap = same & (previous_end >= 0) & (gap <= limit)
    return flap.groupby(ordered["config_id"]).sum().astype(np.int64)


@dataclass(frozen=True, slots=True)
class Recommendation:
    config_id: int
    reason: str
    met: bool
    """Whether the chosen configuration meets the target (recall, or every SLO breach)."""


def recommend(summary: pd.DataFrame, labelled: bool, recall_target: float) -> Recommendation:
    """With labels: the configuration with the fewest notifications whose recall reaches the
    target. Without: the quietest that still fires for every SLO breach. Ties go to fewer
    incidents, then fewer alert minutes, then to the configuration that changes the fewest
    parameters of the rules file (configuration 0), then the lower id; when nothing qualifies,
    the best recall (or fewest missed breaches) wins and ``met`` is false."""
    parameters = [c for c in summary.columns if "." in c]
    base = summary.loc[summary["config_id"] == 0, parameters]
    changed = (
        (summary[parameters] != base.iloc[0]).sum(axis=1)
        if parameters and not base.empty
        else pd.Series(0, index=summary.index)
    )
    summary = summary.assign(_changed=changed)
    order = ["notifications", "incidents", "alert_minutes", "_changed", "config_id"]
    if labelled:
        eligible = summary[summary["recall"] >= recall_target - 1e-12]
        if not eligible.empty:
            row = eligible.sort_values(order).iloc[0]
            return Recommendation(
                int(row["config_id"]),
                f"the fewest notifications ({int(row['notifications'])}) with recall "
                f"{row['recall']:.2f} >= target {recall_target:.2f}",
                True,
            )
        best = summary.assign(_r=-summary["recall"].fillna(-1)).sort_values(["_r", *order])
        row = best.iloc[0]
        return Recommendation(
            int(row["config_id"]),
            f"no configuration reaches recall {recall_target:.2f}; the best recall is "
            f"{row['recall']:.2f} ({int(row['notifications'])} notifications)",
            False,
        )
    breaches = int(summary["slo_breaches"].iloc[0]) if len(summary) else 0
    eligible = summary[summary["slo_missed"] == 0]
    if not eligible.empty:
        row = eligible.sort_values(order).iloc[0]
        quietest = f"the quietest ({int(row['notifications'])} notifications)"
        reason = (
            f"{quietest} that fires for all {breaches} SLO breaches"
            if breaches
            else f"no group breached the SLO in this history, so simply {quietest}"
        )
        return Recommendation(int(row["config_id"]), reason, True)
    row = summary.sort_values(["slo_missed", *order]).iloc[0]
    return Recommendation(
        int(row["config_id"]),
        f"every configuration misses an SLO breach; this one misses the fewest "
        f"({int(row['slo_missed'])} of {breaches})",
        False,
    )


_DURATION_FIELDS = {"for", "keep_firing_for", "min_distance", "expire_group"}


def is_duration(config: RulesConfig, dotted: str) -> bool:
    """Whether a dotted parameter is a duration (shown as ``2m`` rather than ``120``)."""
    section, *rest = dotted.split(".")
    key = rest[-1]
    if key in _DURATION_FIELDS:
        return True
    return section == "rules" and key == "threshold" and config.rule(rest[0]).kind == "lag_seconds"


def show_parameter(config: RulesConfig, dotted: str, value: Any) -> str:
    """A parameter value as a person reads it."""
    if is_duration(config, dotted) and isinstance(value, int | float):
        return format_duration(float(value))
    return _short(value)


def rules_yaml(config: RulesConfig, header: Sequence[str] = ()) -> str:
    """The whole rules file for ``config``, durations written as ``30s``/``5m``; checked to
    load back into the same configuration."""
    data = config.model_dump(by_alias=True, exclude_none=True, mode="json")
    for section in (data["window"], data["burrow"], *data["rules"]):
        for key in list(section):
            if key in _DURATION_FIELDS or (
                key == "threshold" and section.get("kind") == "lag_seconds"
            ):
                section[key] = format_duration(float(section[key]))
        if section.get("match") == {}:
            del section["match"]
        if section.get("overrides") == []:
            del section["overrides"]
    text = yaml.safe_dump(data, sort_keys=False, allow_unicode=True)
    if parse_rules(yaml.safe_load(text), "recommended rules") != config:
        raise AssertionError("the recommended rules do not load back into the same configuration")
    comments = "".join(f"# {line}\n" if line else "#\n" for line in header)
    return comments + text


# --------------------------------------------------------------------------------------------
# The report

_STATUS_COLOURS = {"WARN": "#e8a33d", "ERR": "#d9534f"}
_LABEL_COLOUR = "#9db4d3"


def _png(figure: Any) -> str:
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=96, bbox_inches="tight")
    return base64.b64encode(buffer.getvalue()).decode("ascii")


def _figure(width: float, height: float) -> Any:
    # The object API, not pyplot: no global state, no GUI backend, safe in any process.
    from matplotlib.figure import Figure

    return Figure(figsize=(width, height))


def _time_axis(axes: Any) -> None:
    import matplotlib.dates as mdates

    locator = mdates.AutoDateLocator()
    axes.xaxis.set_major_locator(locator)
    axes.xaxis.set_major_formatter(mdates.ConciseDateFormatter(locator))


def _plot_parameters(
    summary: pd.DataFrame, parameters: list[str], show: Callable[[str, Any], str]
) -> str | None:
    """Alerts (and notifications) per day against each grid parameter."""
    grid = summary[summary["config_id"] > 0]
    if not parameters or grid.empty:
        return None
    columns = min(3, len(parameters))
    rows = math.ceil(len(parameters) / columns)
    figure = _figure(4.6 * columns, 3.4 * rows)
    base = summary[summary["config_id"] == 0].iloc[0]
    for index, name in enumerate(parameters):
        axes = figure.add_subplot(rows, columns, index + 1)
        values = sorted(grid[name].unique(), key=_sort_key)
        position = {value: i for i, value in enumerate(values)}
        x = grid[name].map(position).to_numpy(dtype=float)
        jitter = (grid["config_id"].to_numpy() % 7 - 3) * 0.03
        for column, marker, colour in (
            ("alerts_per_day", "o", "#3b6ea8"),
            ("notifications_per_day", "s", "#c0504d"),
        ):
            axes.scatter(x + jitter, grid[column], marker=marker, s=18, alpha=0.6, color=colour)
            means = grid.groupby(name)[column].mean()
            axes.plot(
                [position[v] for v in values],
                [means[v] for v in values],
                color=colour,
                label=column.replace("_", " "),
            )
            axes.axhline(base[column], color=colour, linestyle=":", linewidth=1)
        axes.set_xticks(range(len(values)), [show(name, v) for v in values])
        axes.set_xlabel(name)
        axes.set_ylabel("per day")
        axes.grid(alpha=0.3)
        if index == 0:
            axes.legend(fontsize=8, title="dotted: config 0", title_fontsize=7)
    figure.tight_layout()
    return _png(figure)


def _sort_key(value: Any) -> tuple[int, Any]:
    return (0, value) if isinstance(value, int | float) else (1, str(value))


def _short(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:g}"
    return str(value)


def _pareto(x: np.ndarray, y: np.ndarray, higher_is_better: bool) -> np.ndarray:
    """Indexes of the configurations no other beats on both noise (x, lower) and y."""
    score = y if higher_is_better else -y
    order = np.lexsort((-score, x))
    best = -np.inf
    front = []
    for i in order.tolist():
        if not np.isnan(score[i]) and score[i] > best:
            front.append(i)
            best = score[i]
    return np.asarray(front, dtype=np.int64)


def _plot_frontier(summary: pd.DataFrame, labelled: bool, chosen: int, recall_target: float) -> str:
    """Noise (notifications) against recall, or against the SLO detection delay."""
    figure = _figure(7.5, 4.6)
    axes = figure.add_subplot(1, 1, 1)
    x = summary["notifications"].to_numpy(dtype=float)
    if labelled:
        y = summary["recall"].to_numpy(dtype=float)
        axes.set_ylabel("recall (labelled incidents caught)")
        axes.axhline(recall_target, color="grey", linestyle="--", linewidth=1)
        axes.set_ylim(-0.05, 1.05)
        colour = summary["delay_p50_s"].to_numpy(dtype=float)
        front = _pareto(x, y, higher_is_better=True)
    else:
        y = summary["slo_delay_p50_s"].to_numpy(dtype=float)
        axes.set_ylabel("median delay after an SLO breach (s)")
        colour = summary["slo_missed"].to_numpy(dtype=float)
        front = _pareto(x, y, higher_is_better=False)
    points = axes.scatter(x, y, c=colour, cmap="viridis", s=36, zorder=3)
    colourbar = figure.colorbar(points, ax=axes)
    colourbar.set_label("median delay (s)" if labelled else "SLO breaches missed")
    if front.size:
        axes.plot(x[front], y[front], color="#555", linewidth=1, zorder=2, label="frontier")
    for config_id, xi, yi in zip(summary["config_id"], x, y):
        if not np.isnan(yi):
            axes.annotate(
                str(config_id), (xi, yi), fontsize=7, xytext=(3, 3), textcoords="offset points"
            )
    picked = summary["config_id"].to_numpy() == chosen
    axes.scatter(x[picked], y[picked], marker="*", s=260, facecolor="none", edgecolor="#d9534f",
                 linewidth=1.5, zorder=4, label=f"recommended ({chosen})")  # fmt: skip
    if x.size and x.max() > 50 * max(1.0, x.min()):
        axes.set_xscale("symlog")
    axes.set_xlabel("notifications (noise)")
    axes.grid(alpha=0.3)
    axes.legend(fontsize=8, loc="lower right" if labelled else "upper right")
    figure.tight_layout()
    return _png(figure)


def _plot_timelines(
    title: str,
    rows: list[tuple[str, pd.DataFrame, pd.DataFrame]],
    span: HistorySpan,
) -> str:
    """One line per (cluster/group): labelled spans behind, would-be incidents on top."""
    figure = _figure(11, 0.42 * max(len(rows), 1) + 1.4)
    axes = figure.add_subplot(1, 1, 1)
    for y, (_, incidents, labels) in enumerate(rows):
        for start, end in zip(labels["start_ms"], labels["end_ms"]):
            axes.broken_barh([(start / DAY_MS, max(end - start, MINUTE_MS) / DAY_MS)],
                             (y - 0.4, 0.8), color=_LABEL_COLOUR, alpha=0.7)  # fmt: skip
        for start, end, status in zip(
            incidents["start_ms"], incidents["end_ms"], incidents["status"]
        ):
            stop = span.end_ms if end < 0 else end
            width = max(stop - start, MINUTE_MS / 2) / DAY_MS
            colour = _STATUS_COLOURS.get(status, "#777")
            axes.broken_barh([(start / DAY_MS, width)], (y - 0.25, 0.5), color=colour)
    axes.set_yticks(range(len(rows)), [name for name, _, _ in rows], fontsize=8)
    axes.set_ylim(-0.8, max(len(rows), 1) - 0.2)
    axes.invert_yaxis()
    axes.set_xlim(span.start_ms / DAY_MS, span.end_ms / DAY_MS)
    if span.counted_from_ms > span.start_ms:
        axes.axvspan(span.start_ms / DAY_MS, span.counted_from_ms / DAY_MS, color="#eee", zorder=0)
    _time_axis(axes)
    axes.set_title(title, fontsize=10)
    axes.grid(axis="x", alpha=0.3)
    from matplotlib.patches import Patch

    axes.legend(
        handles=[
            Patch(color=_LABEL_COLOUR, label="labelled / SLO breach"),
            Patch(color=_STATUS_COLOURS["WARN"], label="would-be WARN"),
            Patch(color=_STATUS_COLOURS["ERR"], label="would-be ERR"),
            Patch(color="#eee", label="warm-up (not counted)"),
        ],
        fontsize=7,
        loc="upper right",
        bbox_to_anchor=(1.0, 1.12),
        ncol=4,
    )
    figure.tight_layout()
    return _png(figure)


def _noisiest(
    alerts: pd.DataFrame, truth: pd.DataFrame, config_id: int, limit: int = 12
) -> list[tuple[str, pd.DataFrame, pd.DataFrame]]:
    mine = alerts[alerts["config_id"] == config_id]
    if mine.empty:
        return []
    counts = mine.groupby(["cluster", "group"]).size().sort_values(ascending=False).head(limit)
    return [
        (
            f"{cluster}/{group} ({count})",
            mine[(mine["cluster"] == cluster) & (mine["group"] == group)],
            truth[(truth["cluster"] == cluster) & (truth["group"] == group)],
        )
        for (cluster, group), count in counts.items()
    ]


def _missed(
    alerts: pd.DataFrame, truth: pd.DataFrame, caught: set[int], config_id: int, limit: int = 15
) -> list[tuple[str, pd.DataFrame, pd.DataFrame]]:
    mine = alerts[alerts["config_id"] == config_id]
    missed = truth[~truth["label_id"].isin(caught)].head(limit)
    rows = []
    for _, label in missed.iterrows():
        same = (mine["cluster"] == label["cluster"]) & (mine["group"] == label["group"])
        kind = f" {label['kind']}" if label.get("kind") else ""
        rows.append((f"{label['cluster']}/{label['group']}{kind}", mine[same], label.to_frame().T))
    return rows


def write_report(
    path: Path,
    summary: pd.DataFrame,
    alerts: pd.DataFrame,
    labels: pd.DataFrame | None,
    breaches: pd.DataFrame,
    recommendation: Recommendation,
    span: HistorySpan,
    context: Mapping[str, str],
    tolerance_ms: int,
    recall_target: float,
    rules: RulesConfig | None = None,
) -> int:
    """One self-contained HTML page (plots inline as base64 PNG); returns how many images.
    ``rules`` (configuration 0) lets duration parameters read as ``5m``."""
    parameters = [c for c in summary.columns if "." in c]
    labelled = labels is not None
    chosen = recommendation.config_id
    truth = labels if labelled else breaches.assign(label_id=np.arange(len(breaches)), kind="")
    truth = truth if truth is not None else pd.DataFrame()
    images: list[tuple[str, str]] = []

    def show(name: str, value: Any) -> str:
        return _short(value) if rules is None else show_parameter(rules, name, value)

    parameter_plot = _plot_parameters(summary, parameters, show)
    if parameter_plot:
        images.append(("Alerts per day against each parameter", parameter_plot))
    frontier = "noise versus recall" if labelled else "noise versus detection delay"
    images.append(
        (
            f"The {frontier} frontier (numbers are config ids)",
            _plot_frontier(summary, labelled, chosen, recall_target),
        )
    )
    noisiest = _noisiest(alerts, truth, chosen)
    images.append(
        (
            f"The noisiest groups under config {chosen} (incident count in brackets)",
            _plot_timelines("noisiest groups", noisiest, span),
        )
    )
    if not truth.empty:
        mine = alerts[alerts["config_id"] == chosen]
        matches = match_incidents(mine, truth, tolerance_ms, overlap=not labelled)
        caught = set(matches.first["label_id"].tolist())
    else:
        caught = set()
    missed = _missed(alerts, truth, caught, chosen) if not truth.empty else []
    what = "labelled incidents" if labelled else "SLO breaches"
    images.append(
        (
            f"{what.capitalize()} missed by config {chosen}" + ("" if missed else ": none"),
            _plot_timelines(f"missed {what}", missed, span),
        )
    )
    body = [
        "<h1>notifier backtest</h1>",
        '<table class="facts">',
        *(
            f"<tr><th>{html.escape(k)}</th><td>{html.escape(v)}</td></tr>"
            for k, v in context.items()
        ),
        "</table>",
        f'<p class="pick"><b>Recommended: config {chosen}</b> — '
        f"{html.escape(recommendation.reason)}. "
        "Its rules are in <code>recommended-rules.yaml</code>.</p>",
    ]
    for caption, data in images:
        body.append(
            f'<figure><img alt="{html.escape(caption)}" src="data:image/png;base64,{data}">'
            f"<figcaption>{html.escape(caption)}</figcaption></figure>"
        )
    body.append("<h2>Summary</h2>")
    body.append(_html_table(summary, chosen))
    body.append(
        '<p class="note">A would-be incident matches a labelled one of the same cluster and '
        "group when it opens within [start − tolerance, end]; delay = open − labelled start. "
        "An SLO breach counts as caught when an incident of the group is open at any time "
        "within it. Flaps: incidents reopening within one window of the previous one closing."
        "</p>"
    )
    page = _PAGE.format(body="\n".join(body))
    path.write_text(page, encoding="utf-8")
    return len(images)


def _html_table(summary: pd.DataFrame, chosen: int) -> str:
    head = "".join(f"<th>{html.escape(str(c))}</th>" for c in summary.columns)
    lines = [f'<table class="summary"><thead><tr>{head}</tr></thead><tbody>']
    for _, row in summary.iterrows():
        css = ' class="chosen"' if int(row["config_id"]) == chosen else ""
        cells = "".join(f"<td>{html.escape(_cell(v))}</td>" for v in row.tolist())
        lines.append(f"<tr{css}>{cells}</tr>")
    lines.append("</tbody></table>")
    return "\n".join(lines)


def _cell(value: Any) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "–"
    if isinstance(value, float):
        return f"{value:,.4g}" if abs(value) < 1e6 else f"{value:,.0f}"
    if isinstance(value, bool | np.bool_):
        return "yes" if value else "no"
    return str(value)


_PAGE = """<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>notifier backtest</title>
<style>
body {{ font: 14px/1.45 system-ui, sans-serif; margin: 2em auto; max-width: 1200px; color: #222; }}
h1 {{ font-size: 1.6em; }} figure {{ margin: 1.5em 0; }} img {{ max-width: 100%; }}
figcaption {{ color: #555; font-size: 0.9em; }}
table {{ border-collapse: collapse; }} th, td {{ padding: 2px 8px; text-align: right; }}
table.facts th {{ text-align: left; color: #555; font-weight: normal; }}
table.facts td {{ text-align: left; }}
table.summary {{ font-size: 12px; }} table.summary th {{ border-bottom: 1px solid #999; }}
table.summary tr:nth-child(even) {{ background: #f4f6f8; }}
table.summary tr.chosen {{ background: #fdebd0; font-weight: bold; }}
.pick {{ background: #eef6ee; padding: 0.6em 1em; border-left: 4px solid #5cb85c; }}
.note {{ color: #555; font-size: 0.9em; }}
</style></head><body>
{body}
</body></html>
"""


# --------------------------------------------------------------------------------------------
# Spark

_QUIET_LOG4J = """\
rootLogger.level = error
rootLogger.appenderRef.stderr.ref = stderr
appender.stderr.type = Console
appender.stderr.name = stderr
appender.stderr.target = SYSTEM_ERR
appender.stderr.layout.type = PatternLayout
appender.stderr.layout.pattern = %d{HH:mm:ss} %p %c{1}: %m%n
logger.gateway.name = org.apache.spark.api.python.PythonGatewayServer
logger.gateway.level = error
"""


def spark_session(
    master: str | None = None, conf: Mapping[str, str] | None = None
) -> tuple[SparkSession, bool]:
    """The active Spark session, or a new one; returns it and whether it was created here.

    A new session runs ``master`` (default ``local[*]``, or what ``spark-submit`` was given),
    with Spark's console progress bar off, UTC as the session time zone, Arrow on and logging
    at ERROR: the backtest prints its own progress, one line per stage. A local session uses
    this Python for its workers; on a cluster the notifier package is shipped to executors.
    """
    from pyspark import SparkContext
    from pyspark.sql import SparkSession

    active = SparkSession.getActiveSession()
    if active is not None:
        return active, False
    if SparkContext._active_spark_context is not None:  # a session made in another thread
        return SparkSession.builder.getOrCreate(), False
    builder = SparkSession.builder.appName("notifier-backtest")
    submitted = "PYSPARK_GATEWAY_PORT" in os.environ  # launched by spark-submit
    if master or not submitted:
        master = master or "local[*]"
        builder = builder.master(master)
    settings = {
        "spark.ui.showConsoleProgress": "false",
        "spark.sql.session.timeZone": "UTC",
        "spark.sql.execution.arrow.pyspark.enabled": "true",
    }
    if not submitted and (master or "").startswith("local"):
        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
        log4j = Path(tempfile.gettempdir()) / "notifier-backtest-log4j2.properties"
        log4j.write_text(_QUIET_LOG4J)
        settings["spark.driver.extraJavaOptions"] = f"-Dlog4j2.configurationFile=file:{log4j}"
        settings["spark.driver.memory"] = "4g"
    settings.update(conf or {})
    for key, value in settings.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    _ship_package(spark)
    return spark, True


def _ship_package(spark: SparkSession) -> None:
    """Executors need this package: send it along unless they run here with it installed."""
    from importlib import metadata

    master = spark.sparkContext.master
    try:
        metadata.distribution("notifier")
        installed = True
    except metadata.PackageNotFoundError:
        installed = False
    if master.startswith("local") and installed:
        return
    package = Path(__file__).resolve().parents[1]
    target = Path(tempfile.mkdtemp(prefix="notifier-py-")) / "notifier.zip"
    with zipfile.ZipFile(target, "w", zipfile.ZIP_DEFLATED) as archive:
        for file in package.rglob("*"):
            if file.is_file() and "__pycache__" not in file.parts:
                archive.write(file, Path("notifier") / file.relative_to(package))
    spark.sparkContext.addPyFile(str(target))


def _spark_error(exc: Exception) -> str:
    """The first line of what went wrong, without the JVM stack."""
    text = str(exc).strip()
    for marker in ("HistorySchemaError: ", "AnalysisException: ", "Exception: "):
        if marker in text:
            text = text.split(marker, 1)[1]
            break
    return text.splitlines()[0][:500] if text else type(exc).__name__


def _arrow_schema(schema: Any) -> pa.Schema:
    """A Spark schema as Arrow, to check it with :func:`~notifier.history.validate_schema`."""
    from pyspark.sql.pandas.types import to_arrow_type

    fields = []
    for spark_field in schema.fields:
        try:
            kind = to_arrow_type(spark_field.dataType, timezone="UTC")
        except TypeError:  # an older PySpark without the time zone argument
            kind = to_arrow_type(spark_field.dataType)
        except Exception:  # a type Arrow cannot hold: certainly not a sample column
            kind = pa.binary()
        fields.append(pa.field(spark_field.name, kind))
    return pa.schema(fields)


def read_history_spark(
    spark: SparkSession,
    path: str,
    start_ms: int | None = None,
    end_ms: int | None = None,
    groups: str | None = None,
) -> SparkFrame:
    """The history at ``path`` (any URI Spark reads) as the replay's input columns: ``ts`` in
    epoch ms, null offsets as -1, rows in ``[start, end)`` of groups matching ``groups``.

    A dataset root is read as ``PATH/date=*`` with ``basePath`` (so ``incidents.csv`` and other
    files beside the partitions stay out); anything else as Parquet. Raises
    :class:`~notifier.history.HistoryNotFoundError` for a missing path and
    :class:`~notifier.history.HistorySchemaError` listing missing and mistyped columns.
    """
    from pyspark.sql import functions as F

    root = path.rstrip("/") or path
    partitioned = False
    try:
        jvm = spark.sparkContext._jvm
        hadoop_path = jvm.org.apache.hadoop.fs.Path(root)  # type: ignore[union-attr]
        fs = hadoop_path.getFileSystem(spark.sparkContext._jsc.hadoopConfiguration())  # type: ignore[union-attr]
        if not fs.exists(hadoop_path):
            raise HistoryNotFoundError(f"history path {path} does not exist")
        pattern = jvm.org.apache.hadoop.fs.Path(root + "/date=*")  # type: ignore[union-attr]
        partitioned = bool(fs.globStatus(pattern))
    except HistoryError:
        raise
    except Exception:  # no JVM access (Spark Connect): let the reader decide
        partitioned = False
    try:
        if partitioned:
            frame = spark.read.option("basePath", root).parquet(root + "/date=*")
        else:
            frame = spark.read.parquet(root)
        schema = frame.schema
    except Exception as exc:
        message = _spark_error(exc)
        if "PATH_NOT_FOUND" in str(exc) or "does not exist" in message:
            raise HistoryNotFoundError(f"history path {path} does not exist") from None
        raise HistoryError(f"cannot read history at {path}: {message}") from None
    validate_schema(_arrow_schema(schema), path)

    ts = F.col("ts").cast("timestamp")
    if start_ms is not None:
        frame = frame.where(ts >= F.lit(_utc(start_ms)))
    if end_ms is not None:
        frame = frame.where(ts < F.lit(_utc(end_ms)))
    if groups is not None:
        frame = frame.where(F.col("group").rlike(groups))
    return frame.select(
        F.unix_millis(ts).alias("ts"),
        F.col("cluster").cast("string").alias("cluster"),
        F.col("group").cast("string").alias("group"),
        F.col("topic").cast("string").alias("topic"),
        F.col("partition").cast("int").alias("partition"),
        F.coalesce(F.col("committed_offset").cast("long"), F.lit(-1)).alias("committed_offset"),
        F.col("log_end_offset").cast("long").alias("log_end_offset"),
        F.coalesce(F.col("log_start_offset").cast("long"), F.lit(-1)).alias("log_start_offset"),
        F.col("group_state").cast("string").alias("group_state"),
        F.col("members").cast("int").alias("members"),
        F.col("member_hash").cast("long").alias("member_hash"),
    )


def _utc(ms: int) -> datetime:
    return datetime.fromtimestamp(ms / 1000, tz=UTC)


ROWS_PER_TASK_SCAN = 2000
"""Rows of one scan below which a task should not be split further. The evaluator's cost per
call is mostly fixed up to a few thousand rows (about 1 ms, then 0.5 µs a row), so splitting a
fleet's scans over more tasks adds work: small fleets split the configurations instead."""

MAX_SAMPLES_PER_TASK = 20_000_000
"""A task holds its samples in memory (about 150 bytes each as pandas): beyond this many, the
groups are split into more buckets whatever the cores."""


@dataclass(frozen=True, slots=True)
class TaskPlan:
    """How the replay is cut into Spark tasks: ``buckets`` of groups (by a stable hash of
    cluster and group) times ``slices`` of configurations (indexes into the configurations)."""

    buckets: int
    slices: list[list[int]]

    @property
    def tasks(self) -> int:
        return self.buckets * len(self.slices)


def plan_tasks(
    rows_per_scan: float,
    samples: int,
    parallelism: int,
    configs: Sequence[GridConfig],
    scope: str = "group",
    buckets: int | None = None,
) -> TaskPlan:
    """About one task per core, each as large as it can be: the more rows an evaluation
    covers, the less its fixed cost weighs. Groups are split into as many buckets as keeps
    :data:`ROWS_PER_TASK_SCAN` rows of a scan in each, up to the cores (or more, to keep
    :data:`MAX_SAMPLES_PER_TASK`; ``buckets`` overrides); cores still idle take slices of the
    configurations. Slices keep configurations with the same window settings together, so
    they share a store."""
    cores = max(1, parallelism)
    if scope == "all":
        groups = 1
    elif buckets:
        groups = max(1, buckets)
    else:
        groups = int(min(cores, max(1, rows_per_scan // ROWS_PER_TASK_SCAN)))
        groups = max(groups, math.ceil(samples / MAX_SAMPLES_PER_TASK))
    count = max(1, min(len(configs), math.ceil(cores / groups)))
    order = sorted(
        range(len(configs)), key=lambda k: (configs[k].rules.window.model_dump_json(), k)
    )
    slices = [chunk.tolist() for chunk in np.array_split(np.asarray(order, np.int64), count)]
    return TaskPlan(groups, [sorted(chunk) for chunk in slices if chunk])


def _task_labels(spark: SparkSession, tasks: int) -> list[int]:
    """A label per task such that ``repartition(tasks, label)`` puts each task in a partition
    of its own (Spark hash-partitions by murmur3(label) mod n, which would otherwise put two
    tasks in one partition now and then and leave a core idle)."""
    from pyspark.sql import functions as F

    value = F.col("id").cast("int")
    rows = (
        spark.range(0, 64 * tasks)
        .select(value.alias("v"), F.pmod(F.hash(value), F.lit(tasks)).alias("p"))
        .collect()
    )
    first: dict[int, int] = {}
    for row in rows:
        first.setdefault(int(row["p"]), int(row["v"]))
    if len(first) < tasks:
        return list(range(tasks))
    return [first[p] for p in range(tasks)]


def _task(
    configs: Sequence[GridConfig], plan: TaskPlan, options: ReplayOptions, scan_times: Any
) -> Callable[[pd.DataFrame], pd.DataFrame]:
    def replay_task(frame: pd.DataFrame) -> pd.DataFrame:
        chosen = [configs[k] for k in plan.slices[int(frame["slice"].iloc[0])]]
        samples = SampleArrays.from_pandas(frame)
        return replay(samples, chosen, options, scan_times.value).to_frame()

    return replay_task


def _spark_replay(
    spark: SparkSession,
    frame: SparkFrame,
    configs: Sequence[GridConfig],
    options: ReplayOptions,
    scan_times: dict[str, np.ndarray],
    plan: TaskPlan,
    scope: str,
    path: str,
) -> ReplayOutput:
    from pyspark.sql import functions as F

    count = len(plan.slices)
    if scope == "all" or plan.buckets == 1:
        bucket = F.lit(0)
    else:
        keys = (F.col("cluster"),) if scope == "cluster" else (F.col("cluster"), F.col("group"))
        bucket = F.pmod(F.hash(*keys), F.lit(plan.buckets))
    if count > 1:
        frame = frame.withColumn("slice", F.explode(F.array(*(F.lit(i) for i in range(count)))))
    else:
        frame = frame.withColumn("slice", F.lit(0))
    labels = F.array(*(F.lit(v) for v in _task_labels(spark, plan.tasks)))
    index = bucket * F.lit(count) + F.col("slice") + F.lit(1)
    shared = spark.sparkContext.broadcast(scan_times)
    try:
        result = (
            frame.withColumn("task", F.element_at(labels, index.cast("int")))
            .repartition(plan.tasks, "task")
            .groupBy("task")
            .applyInPandas(_task(configs, plan, options, shared), OUTPUT_SCHEMA)
        )
        try:
            with warnings.catch_warnings():
                # PySpark warns that Arrow failed before raising the task's own error.
                warnings.simplefilter("ignore", UserWarning)
                collected = result.toPandas()
        except Exception as exc:
            if "HistorySchemaError" in str(exc):
                raise HistorySchemaError(f"{path}: {_spark_error(exc)}") from None
            raise
    finally:
        shared.unpersist()
    return ReplayOutput.from_frame(collected)


def _spark_scans(frame: SparkFrame, path: str) -> pd.DataFrame:
    """Rows per (cluster, scan time): the scan calendar every task needs, the sample count,
    the time span, and a null check of the two key columns on the way."""
    stats = frame.groupBy("cluster", "ts").count().toPandas()
    for column in ("cluster", "ts"):
        if stats[column].isna().any():
            rows = int(stats.loc[stats[column].isna(), "count"].sum())
            raise HistorySchemaError(
                f"{path}: column {column} has {rows} null values but may not be null"
            )
    return stats.rename(columns={"count": "rows"})


# --------------------------------------------------------------------------------------------
# The job


@dataclass(slots=True)
class BacktestRequest:
    """Everything ``notifier backtest`` is given (durations in seconds)."""

    history: str
    rules: Path
    grid: Path
    out: Path
    incidents: Path | None = None
    routes: Path | None = None
    master: str | None = None
    start: str | None = None
    end: str | None = None
    groups: str | None = None
    interval_s: float = 10.0
    recall_target: float = 0.95
    slo_s: float = 300.0
    slo_for_s: float | None = None
    """Default: the shortest ``for`` of the rules file's ``lag_seconds`` rules (0 if none)."""
    tolerance_s: float | None = None
    """Default: one scan interval."""
    warmup_s: float | None = None
    """Replayed but not counted, to prime windows, commit rings and LEO tables as a running
    service has them. Default :data:`DEFAULT_WARMUP_S`, at most a quarter of the history;
    with ``start`` the replay begins this long before it."""
    buckets: int | None = None
    """Default: twice Spark's default parallelism (the cores of a local master)."""
    engine: Literal["spark", "local"] = "spark"
    """``local`` replays in this process without Spark (small histories, no Java)."""


@dataclass(slots=True)
class BacktestResult:
    configs: list[GridConfig]
    summary: pd.DataFrame
    alerts: pd.DataFrame
    output: ReplayOutput
    recommendation: Recommendation
    span: HistorySpan
    files: dict[str, Path]
    timings: dict[str, float] = field(default_factory=dict)
    labels: pd.DataFrame | None = None


def load_routes(path: str | os.PathLike[str]) -> NotifyConfig:
    """A notify config: a file with ``receivers`` and ``route``, or a service config's
    ``notify:`` section. Unset ``${ENV}`` secrets are fine: nothing is sent."""
    data = read_yaml(Path(path))
    if isinstance(data, dict) and "route" not in data and isinstance(data.get("notify"), dict):
        data = data["notify"]
    return parse_notify(data, str(path), strict_env=False)


def default_slo_for(rules: RulesConfig) -> float:
    """How long lag in seconds must exceed the SLO to count: the shortest ``for`` of the
    enabled ``lag_seconds`` rules, as a team paging on lag in seconds would wait."""
    waits = [r.for_ for r in rules.rules if r.kind == "lag_seconds" and r.enabled]
    return min(waits) if waits else 0.0


def _time_arg(value: str | None, option: str) -> int | None:
    if value is None:
        return None
    try:
        return int(value) if value.strip().isdigit() else to_ms(value)
    except (ValueError, TypeError) as exc:
        raise HistoryError(
            f"{option} {value!r} is not a time (use ISO 8601, e.g. 2026-01-05T06:00Z)"
        ) from exc


def _when(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, tz=UTC).strftime("%Y-%m-%d %H:%M")


def _span_of(scans: pd.DataFrame, start_ms: int | None, warmup_s: float | None) -> HistorySpan:
    first, last = int(scans["ts"].min()), int(scans["ts"].max())
    if start_ms is not None:
        counted_from = max(start_ms, first)
    else:
        warmup_ms = round((DEFAULT_WARMUP_S if warmup_s is None else warmup_s) * 1000)
        counted_from = first + min(warmup_ms, (last - first) // 4)
    return HistorySpan(
        samples=int(scans["rows"].sum()),
        scans=len(scans),
        clusters=int(scans["cluster"].nunique()),
        start_ms=first,
        end_ms=last,
        counted_from_ms=counted_from,
    )


def _scan_calendar(scans: pd.DataFrame) -> dict[str, np.ndarray]:
    return {
        str(cluster): np.sort(part["ts"].to_numpy(np.int64))
        for cluster, part in scans.groupby("cluster")
    }


def _spacing_warning(calendar: Mapping[str, np.ndarray], interval_s: float) -> str | None:
    gaps = np.concatenate([np.diff(t) for t in calendar.values() if t.size > 1] or [np.zeros(0)])
    if gaps.size == 0:
        return None
    typical = float(np.median(gaps)) / 1000
    if abs(typical - interval_s) > 0.25 * interval_s:
        return (
            f"note: scans are typically {typical:.1f} s apart but --interval is {interval_s:g} s; "
            "windows and gaps are judged by --interval"
        )
    return None


def run_backtest(
    request: BacktestRequest, echo: Echo = print, spark: SparkSession | None = None
) -> BacktestResult:
    """Run the whole backtest: check inputs, read the history, replay, score, write ``out``.

    Every input is checked on the driver before any Spark work starts. Raises
    :class:`~notifier.config.rules.ConfigError` (rules, grid, routes) or
    :class:`~notifier.history.HistoryError` (history, incidents, time range) with a message
    naming the file and what is wrong.
    """
    timings: dict[str, float] = {}
    began = clock = time.perf_counter()

    def lap(stage: str) -> float:
        nonlocal clock
        now = time.perf_counter()
        timings[stage] = now - clock
        clock = now
        return timings[stage]

    # 1. inputs -------------------------------------------------------------------------------
    rules = load_rules(request.rules)
    grid = load_grid(request.grid)
    configs = expand_grid(rules, grid, str(request.grid))
    notify = load_routes(request.routes) if request.routes is not None else None
    labels_in = load_incidents(request.incidents) if request.incidents is not None else None
    start_ms = _time_arg(request.start, "--from")
    end_ms = _time_arg(request.end, "--to")
    if start_ms is not None and end_ms is not None and end_ms <= start_ms:
        raise HistoryError(
            f"empty time range: --to {request.end} is not after --from {request.start}"
        )
    if request.groups is not None:
        try:
            re.compile(request.groups)
        except re.error as exc:
            raise HistoryError(f"invalid --groups regex {request.groups!r}: {exc}") from None
    if not 0 < request.recall_target <= 1:
        raise ConfigError("--recall-target", [("", "expected a fraction in (0, 1]")])
    slo_for_s = default_slo_for(rules) if request.slo_for_s is None else request.slo_for_s
    tolerance_s = request.interval_s if request.tolerance_s is None else request.tolerance_s
    warmup_s = DEFAULT_WARMUP_S if request.warmup_s is None else request.warmup_s
    read_from = None if start_ms is None else start_ms - round(warmup_s * 1000)
    scope = aggregation_scope(notify)
    routes = f"routes from {request.routes}" if request.routes else "default route"
    labelled = (
        f"{len(labels_in)} labelled incidents from {request.incidents}"
        if labels_in is not None
        else f"no labels (SLO: lag > {format_duration(request.slo_s)} for "
        f"{format_duration(slo_for_s)})"
    )
    echo(
        f"[1/5] inputs: {len(configs)} configurations (0 = {request.rules}, "
        f"1-{len(configs) - 1} = {' × '.join(f'{k} ({len(v)})' for k, v in grid.items())}); "
        f"{routes}; {labelled}  ({lap('inputs'):.1f} s)"
    )

    created = False
    try:
        # 2. history --------------------------------------------------------------------------
        if request.engine == "local":
            table = read_history(request.history, read_from, end_ms, request.groups)
            samples = SampleArrays.from_arrow(table)
            scans = (
                pd.DataFrame({"cluster": samples.cluster_names[samples.cluster], "ts": samples.ts})
                .groupby(["cluster", "ts"], as_index=False)
                .size()
                .rename(columns={"size": "rows"})
            )
            where = "in this process"
        else:
            if spark is None:
                spark, created = spark_session(request.master)
            frame = read_history_spark(spark, request.history, read_from, end_ms, request.groups)
            scans = _spark_scans(frame, request.history)
            where = f"on Spark {spark.sparkContext.master}"
        if scans.empty:
            window = f"[{request.start or '…'}, {request.end or '…'})"
            which = f" for groups matching {request.groups!r}" if request.groups else ""
            raise HistoryEmptyError(
                f"history at {request.history} has no rows"
                + (f" in the range {window}" if start_ms or end_ms else "")
                + which
            )
        span = _span_of(scans, start_ms, request.warmup_s)
        if span.counted_from_ms >= span.end_ms:
            raise HistoryEmptyError(
                f"history at {request.history} ends at {_when(span.end_ms)} UTC, before "
                f"counting would start at {_when(span.counted_from_ms)} UTC"
            )
        calendar = _scan_calendar(scans)
        options = ReplayOptions(
            request.interval_s, notify, request.slo_s, slo_for_s, span.counted_from_ms
        )
        warm = format_duration(round((span.counted_from_ms - span.start_ms) / 1000))
        echo(
            f"[2/5] history {request.history}: {span.samples:,} samples in {span.scans:,} scans "
            f"of {span.clusters} cluster(s), {_when(span.start_ms)} → {_when(span.end_ms)} UTC; "
            f"counting from {_when(span.counted_from_ms)} after a {warm} warm-up "
            f"({span.days:.2f} days)  ({lap('history'):.1f} s)"
        )
        warning = _spacing_warning(calendar, request.interval_s)
        if warning:
            echo(warning)

        # 3. replay ---------------------------------------------------------------------------
        if request.engine == "local":
            tasks = "1 task"
            output = replay(samples, configs, options)
        else:
            assert spark is not None
            plan = plan_tasks(
                span.samples / span.scans,
                span.samples,
                spark.sparkContext.defaultParallelism,
                configs,
                scope,
                request.buckets,
            )
            tasks = (
                f"{plan.tasks} tasks ({plan.buckets} group bucket(s) × "
                f"{len(plan.slices)} configuration slice(s))"
            )
            output = _spark_replay(
                spark, frame, configs, options, calendar, plan, scope, request.history
            )
        seconds = lap("replay")
        work = span.samples * len(configs)
        if len(output.tasks) > 1:
            lengths = output.tasks["task_ms"] / 1000
            tasks += f" of {lengths.min():.1f}–{lengths.max():.1f} s"
        batching = {"group": "", "cluster": ", by cluster (routes batch a cluster's groups)",
                    "all": ", in one task (routes batch across clusters)"}[scope]  # fmt: skip
        echo(
            f"[3/5] replay {where}: {len(configs)} configurations × {span.samples:,} samples "
            f"of {len(output.groups):,} groups in {tasks}{batching}: "
            f"{work:,} sample-configurations, {work / max(seconds, 1e-9):,.0f}/s  ({seconds:.1f} s)"
        )
    finally:
        if created and spark is not None:
            spark.stop()

    # 4. scoring ------------------------------------------------------------------------------
    labels = None
    dropped = 0
    if labels_in is not None:
        labels = _labels_frame(labels_in)
        known = output.groups[["cluster", "group"]].drop_duplicates()
        inside = labels.merge(known, on=["cluster", "group"], how="inner")
        counted = (inside["start_ms"] >= span.counted_from_ms) & (inside["start_ms"] <= span.end_ms)
        inside = inside[counted]
        dropped = len(labels) - len(inside)
        labels = inside.sort_values("label_id").reset_index(drop=True)
    tolerance_ms = round(tolerance_s * 1000)
    summary, alerts = summarize(configs, output, span, request.interval_s, tolerance_ms, labels)
    recommendation = recommend(summary, labels is not None, request.recall_target)
    summary["recommended"] = summary["config_id"] == recommendation.config_id
    if labels is not None:
        score = (
            f"against {len(labels)} labelled incidents"
            + (f" ({dropped} outside the counted time or groups ignored)" if dropped else "")
            + f": recall {summary['recall'].min():.2f}–{summary['recall'].max():.2f}"
        )
    else:
        score = (
            f"against {len(output.breaches)} SLO breaches: missed "
            f"{summary['slo_missed'].min()}–{summary['slo_missed'].max()}"
        )
    echo(
        f"[4/5] scored {len(configs)} configurations {score}; notifications "
        f"{summary['notifications'].min():,}–{summary['notifications'].max():,}  "
        f"({lap('scoring'):.1f} s)"
    )

    # 5. outputs ------------------------------------------------------------------------------
    out = Path(request.out)
    out.mkdir(parents=True, exist_ok=True)
    files = {
        "summary.csv": out / "summary.csv",
        "summary.parquet": out / "summary.parquet",
        "alerts.parquet": out / "alerts.parquet",
        "report.html": out / "report.html",
        "recommended-rules.yaml": out / "recommended-rules.yaml",
    }
    summary.to_csv(files["summary.csv"], index=False)
    summary.to_parquet(files["summary.parquet"], index=False)
    _alerts_table(alerts).to_parquet(files["alerts.parquet"], index=False)
    chosen = next(c for c in configs if c.config_id == recommendation.config_id)
    row = summary[summary["config_id"] == chosen.config_id].iloc[0]
    header = [
        f"Recommended by `notifier backtest` on {datetime.now(UTC):%Y-%m-%d %H:%M} UTC:",
        f"configuration {chosen.config_id} of {len(configs)} over {request.history}",
        f"({_when(span.start_ms)} to {_when(span.end_ms)} UTC, {span.samples:,} samples).",
        f"Why: {recommendation.reason}.",
        *(
            f"  {name} = {show_parameter(chosen.rules, name, value)}"
            for name, value in chosen.parameters.items()
        ),
        f"It would have opened {int(row['incidents'])} incidents and sent "
        f"{int(row['notifications'])} notifications.",
        "",
    ]
    files["recommended-rules.yaml"].write_text(rules_yaml(chosen.rules, header))
    context = {
        "history": f"{request.history} ({span.samples:,} samples, {span.scans:,} scans, "
        f"{len(output.groups):,} groups, {_when(span.start_ms)} → {_when(span.end_ms)} UTC)",
        "rules": f"{request.rules} (config 0)",
        "grid": f"{request.grid}: " + ", ".join(f"{k} {v}" for k, v in grid.items()),
        "routes": routes,
        "labels": labelled
        + (f"; {dropped} outside the replay ignored" if dropped else "")
        + (f"; tolerance {format_duration(tolerance_s)}" if labels is not None else ""),
        "SLO": f"lag in seconds > {format_duration(request.slo_s)} for at least "
        f"{format_duration(slo_for_s)}: {len(output.breaches)} breaches",
        "engine": f"{where}, {tasks}, replay {timings['replay']:.1f} s",
        "generated": f"{datetime.now(UTC):%Y-%m-%d %H:%M:%S} UTC",
    }
    images = write_report(
        files["report.html"],
        summary,
        alerts,
        labels,
        output.breaches,
        recommendation,
        span,
        context,
        tolerance_ms,
        request.recall_target,
        rules,
    )
    echo(
        f"[5/5] wrote {', '.join(files)} ({images} plots) to {out}  "
        f"({lap('outputs'):.1f} s; {time.perf_counter() - began:.1f} s in all)"
    )
    return BacktestResult(
        configs=configs,
        summary=summary,
        alerts=alerts,
        output=output,
        recommendation=recommendation,
        span=span,
        files=files,
        timings=timings,
        labels=labels,
    )


def _alerts_table(alerts: pd.DataFrame) -> pd.DataFrame:
    """alerts.parquet: every would-be incident with real timestamps (end null while open)."""
    end = alerts["end_ms"].where(alerts["end_ms"] >= 0)
    return pd.DataFrame(
        {
            "config_id": alerts["config_id"].astype(np.int32),
            "cluster": alerts["cluster"].astype(str),
            "group": alerts["group"].astype(str),
            "rule": alerts["rule"].astype(str),
            "status": alerts["status"].astype(str),
            "start": pd.to_datetime(alerts["start_ms"], unit="ms", utc=True),
            "end": pd.to_datetime(end, unit="ms", utc=True),
            "duration_s": ((end - alerts["start_ms"]) / 1000).astype("float64"),
            "close_reason": alerts["close_reason"].astype(object),
            "matched": alerts["matched"].astype("boolean"),
        }
    )


def summary_text(result: BacktestResult, limit: int = 40) -> str:
    """The summary as a plain table for the terminal (the key columns, recommended marked)."""
    summary = result.summary
    columns = ["config_id", *result.configs[0].parameters, "incidents", "notifications"]
    columns += ["alert_minutes", "flaps"]
    if "recall" in summary:
        columns += ["tp", "fp", "fn", "precision", "recall", "delay_p50_s", "delay_p90_s"]
    columns += ["slo_missed"]
    shown = summary[columns].head(limit).copy()
    shown.insert(0, " ", np.where(summary["recommended"].head(limit), "*", ""))
    text = shown.to_string(index=False, float_format=lambda v: f"{v:g}")
    more = f"\n… {len(summary) - limit} more in summary.csv" if len(summary) > limit else ""
    chosen = result.recommendation
    return f"{text}{more}\n* recommended: config {chosen.config_id} — {chosen.reason}" + (
        "" if chosen.met else " (target not met)"
    )


# --------------------------------------------------------------------------------------------
# Command line (for spark-submit; `notifier backtest` takes the same options)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="backtest.py",
        description="Backtest rule thresholds on stored history (see `notifier backtest -h`).",
    )
    parser.add_argument("--history", required=True, help="history dataset or file (any URI)")
    parser.add_argument("--rules", default="rules.yaml", help="the rules file (config 0)")
    parser.add_argument("--grid", required=True, help="grid.yaml: dotted parameters → values")
    parser.add_argument("--incidents", help="labelled incidents (CSV or Parquet)")
    parser.add_argument("--out", required=True, help="output directory")
    parser.add_argument("--master", help="Spark master (default local[*] or spark-submit's)")
    parser.add_argument("--from", dest="start", help="first time to replay (ISO 8601)")
    parser.add_argument("--to", dest="end", help="replay up to this time (exclusive)")
    parser.add_argument("--groups", help="only groups matching this regex")
    parser.add_argument("--interval", default="10s", help="scan interval of the history")
    parser.add_argument("--routes", help="notify config with the routes (default: one route)")
    parser.add_argument("--recall-target", type=float, default=0.95)
    parser.add_argument("--slo", default="300s", help="lag in seconds that breaches the SLO")
    parser.add_argument("--slo-for", help="how long a breach must last (default: rules' for)")
    parser.add_argument("--tolerance", help="matching tolerance (default: one scan interval)")
    parser.add_argument("--warmup", help="replayed but not counted (default 30m)")
    parser.add_argument("--buckets", type=int, help="group buckets (default: one task a core)")
    parser.add_argument("--engine", choices=("spark", "local"), default="spark")
    return parser


def request_from_options(options: Mapping[str, Any]) -> BacktestRequest:
    """A :class:`BacktestRequest` from parsed options (durations as strings)."""

    def seconds(name: str) -> float | None:
        value = options.get(name)
        if value is None:
            return None
        try:
            return parse_duration(value)
        except ValueError as exc:
            raise ConfigError(f"--{name.replace('_', '-')}", [("", str(exc))]) from None

    def path(name: str) -> Path | None:
        value = options.get(name)
        return None if value is None else Path(value)

    return BacktestRequest(
        history=str(options["history"]),
        rules=Path(options.get("rules") or "rules.yaml"),
        grid=Path(options["grid"]),
        out=Path(options["out"]),
        incidents=path("incidents"),
        routes=path("routes"),
        master=options.get("master"),
        start=options.get("start"),
        end=options.get("end"),
        groups=options.get("groups"),
        interval_s=seconds("interval") or 10.0,
        recall_target=float(options.get("recall_target") or 0.95),
        slo_s=seconds("slo") if options.get("slo") is not None else 300.0,  # type: ignore[arg-type]
        slo_for_s=seconds("slo_for"),
        tolerance_s=seconds("tolerance"),
        warmup_s=seconds("warmup"),
        buckets=options.get("buckets"),
        engine=options.get("engine") or "spark",
    )


def main(argv: Sequence[str] | None = None) -> int:
    """``spark-submit notifier/backtest.py --history ... --grid ... --out ...``"""
    args = build_parser().parse_args(argv)
    try:
        request = request_from_options(vars(args))
        result = run_backtest(request, echo=lambda line: print(line, flush=True))
    except (ConfigError, HistoryError) as exc:
        print(str(exc), file=sys.stderr)
        return 2
    print(summary_text(result))
    return 0


if __name__ == "__main__":
    from notifier.backtest.job import main as _package_main

    sys.exit(_package_main())
