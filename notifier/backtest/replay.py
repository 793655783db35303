"""The replay engine: a sample history through the live code path, once per configuration.

A replay drives :class:`~notifier.rules.store.WindowStore`,
:class:`~notifier.rules.evaluate.Evaluator`, :class:`~notifier.rules.transitions.TransitionTracker`
and the notification core (:class:`~notifier.notify.Dispatcher`) exactly as the service does, and
returns what each configuration would have opened and sent (:class:`ReplayOutput`). Why it is
built this way:

* **The same code as the service, scan by scan.** Each cluster gets its own store, evaluator and
  transition tracker, evaluated after each of its scans, exactly as the coordinator does; a
  group-partition missing from a scan is dropped and a group that lost every partition resolves
  as gone; ``expire_group`` runs every 60 s of history. So ``for``, ``keep_firing_for``, the
  complete-flag gate, incidents, escalations, repeats and resolves are the service's own.
* **One store per window setting, one evaluator per configuration.** Configurations that share
  the ``window`` section share the ingest; only evaluation repeats, so cost grows linearly with
  history × configurations.
* **Lean per-scan loop.** Samples are sorted once; each scan is a slice of numpy arrays handed to
  the store as :class:`~notifier.rules.store.ScanColumns` directly, with no per-scan Arrow or
  pandas.

Lag in seconds for the SLO breaches (the truth when there are no labels) comes from the same LEO
tables (:mod:`notifier.rules.lagtime`) the ``lag_seconds`` rule uses, in configuration 0's store.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from notifier.backtest.grid import GridConfig
from notifier.backtest.samples import SampleArrays, split_unavailable
from notifier.config import NotifyConfig, RouteConfig, WindowSettings
from notifier.notify import Dispatcher
from notifier.rules import (
    Evaluator,
    ScanColumns,
    StoreStep,
    TransitionTracker,
    WindowStore,
    evaluate_step,
)
from notifier.types import Incident, Transition

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
    * ``notices``: config_id, cluster, group, start_ms: news for an incident already open (it
      escalated, or a rule began firing at its status): what a person is told then
    """

    incidents: pd.DataFrame
    counters: pd.DataFrame
    breaches: pd.DataFrame
    groups: pd.DataFrame
    tasks: pd.DataFrame = field(
        default_factory=lambda: pd.DataFrame({"samples": [], "task_ms": []}, dtype=np.int64)
    )
    notices: pd.DataFrame = field(default_factory=lambda: _notices_frame([]))

    def to_frame(self) -> pd.DataFrame:
        """All four in one frame in :data:`OUTPUT_SCHEMA` (what a Spark task returns)."""
        parts = (
            ("incident", self.incidents),
            ("counters", self.counters),
            ("breach", self.breaches),
            ("group", self.groups),
            ("task", self.tasks),
            ("notice", self.notices),
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
        notices = frame.loc[record == "notice", list(NOTICE_COLUMNS)]
        return cls(
            incidents=_sorted_incidents(incidents),
            counters=counters,
            breaches=_sorted_spans(breaches),
            groups=_sorted_spans(groups),
            tasks=tasks.astype(np.int64),
            notices=_notices_frame(notices),
        )


NOTICE_COLUMNS = ("config_id", "cluster", "group", "start_ms")


def _notices_frame(rows: Any) -> pd.DataFrame:
    frame = pd.DataFrame(rows, columns=list(NOTICE_COLUMNS))
    frame = frame.astype({"config_id": np.int32, "start_ms": np.int64})
    return frame.sort_values(["config_id", "cluster", "group", "start_ms"]).reset_index(drop=True)


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

    __slots__ = ("evaluators", "name", "slo", "steps", "stores", "trackers")

    def __init__(self, name: str, engine: _Replay) -> None:
        self.name = name
        interval = engine.options.scan_interval_s
        self.stores = [WindowStore(settings, interval) for settings, _ in engine.window_groups]
        self.evaluators: list[Evaluator] = [None] * len(engine.configs)  # type: ignore[list-item]
        for w, (_, members) in enumerate(engine.window_groups):
            for k in members:
                self.evaluators[k] = Evaluator(engine.configs[k].rules, self.stores[w])
        self.trackers = [TransitionTracker() for _ in engine.configs]
        self.steps = [StoreStep(store) for store in self.stores]
        self.slo = _SloEpisodes(engine.options.slo_s, round(engine.options.slo_for_s * 1000))


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
        self.notices: list[tuple[int, str, str, int]] = []
        self.clusters: dict[int, _ClusterReplay] = {}
        self.on_transitions: Callable[[int, list[Transition]], None] | None = None

    # ---------------------------------------------------------------- the loop

    def run(
        self, samples: SampleArrays, scan_times: Mapping[str, np.ndarray] | None
    ) -> ReplayOutput:
        samples, unavailable = split_unavailable(samples)
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
        # A scan whose rows are all of unavailable partitions is a scan all the same.
        lost_scans = np.asarray(list(unavailable), dtype=np.int64).reshape(-1, 2)
        events = self._timeline(
            samples,
            np.concatenate([cluster[starts], lost_scans[:, 0]]),
            np.concatenate([ts[starts], lost_scans[:, 1]]),
            scan_times,
        )

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
                    scan.unavailable = unavailable.get((code, now), ())
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
                    scan.unavailable = unavailable.get((code, now), ())
                self._scan(state, scan, now)
            for k in range(len(self.dispatchers)):
                self._tick(k, now)
            since_cleanup += 1
            if since_cleanup >= 256:
                since_cleanup = 0
                for dispatcher in self.dispatchers:
                    dispatcher.take_changes()  # nobody persists them here: keep memory flat
        # The history ends at the last scan of any cluster, the same for every Spark task (its
        # calendar names every cluster's scans): what fell due by then was sent.
        last_scans = [events[-1][0]] if events else []
        last_scans += [int(np.max(t)) for t in (scan_times or {}).values() if len(t)]
        if last_scans:
            self._tick_before(max(last_scans) + 1)
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
            times = np.unique(scan_ts[scan_clusters == code])
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
        """One successful scan of one cluster, through the service's own step
        (:mod:`notifier.rules.step`): once per window setting for the store, then once per
        configuration for evaluation and transitions, which go to that configuration's
        dispatcher."""
        for w, (_, members) in enumerate(self.window_groups):
            change = state.steps[w].advance(scan)
            gone_ids, keys_before = change.gone_ids, change.keys_before
            if gone_ids is not None and keys_before is not None and w == self.slo_window:
                state.slo.close(gone_ids, keys_before)
            for k in members:
                evaluation, transitions = evaluate_step(
                    state.evaluators[k], state.trackers[k], change.gone, now
                )
                if evaluation is not None and k == self.slo_config:
                    state.slo.update(state.stores[w].group_key, evaluation)
                if transitions:
                    if self.on_transitions is not None:
                        self.on_transitions(self.configs[k].config_id, transitions)
                    self._dispatch(k, transitions, now)

    def _dispatch(self, k: int, transitions: list[Transition], now: int) -> None:
        if now >= self.count_from:
            self.transitions[k] += len(transitions)
        config_id = self.configs[k].config_id
        for transition in transitions:
            for change in self.dispatchers[k].handle((transition,), now):
                incident = change.incident
                if incident.opened_at < self.count_from:
                    continue
                if change.kind == "closed":
                    self.closed.append(_incident_row(config_id, incident))
                elif change.kind == "escalated" or (change.kind == "updated" and transition.news):
                    self.notices.append((config_id, incident.cluster, incident.group, now))

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
        breaches: list[tuple[str, str, int, int]] = []
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
            notices=_notices_frame(self.notices),
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
    on_transitions: Callable[[int, list[Transition]], None] | None = None,
) -> ReplayOutput:
    """Replay ``samples`` once per configuration through the live code path.

    Each cluster is evaluated after each of its scans: the scans in the data, plus those in
    ``scan_times`` (cluster → epoch ms), which a Spark task gets so that a scan in which none of
    its groups had rows still counts as a scan (and those groups as gone), exactly as in a
    replay of the whole history. The result for a group does not depend on which other groups
    are replayed with it, unless the routes batch several groups into one notification.
    ``on_transitions(config_id, transitions)`` sees every configuration's transitions.
    """
    began = time.perf_counter()
    engine = _Replay(configs, options)
    engine.on_transitions = on_transitions
    output = engine.run(samples, scan_times)
    elapsed = round((time.perf_counter() - began) * 1000)
    output.tasks = pd.DataFrame({"samples": [len(samples)], "task_ms": [elapsed]}, dtype=np.int64)
    return output
