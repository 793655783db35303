"""A cluster's state restored when the coordinator starts watching it (at start, or when a
reload adds it).

After a crash: the checkpoint gives the windows as they were when it was saved; the scans the
history recorded after it are replayed through the same step, so the windows resume where the
last process stopped and the gap is the downtime, not the time since the last checkpoint
(without a checkpoint yet, the scans of the span the windows hold are replayed); and the open
statuses are taken from the sink (the notifier's incidents, committed with every transition),
so a transition handled after the checkpoint is neither repeated (no incident opened twice) nor
missed (no incident left open).
"""

from __future__ import annotations

import logging
from pathlib import Path

import pyarrow.compute as pc

from notifier.history import (
    HistoryEmptyError,
    HistoryNotFoundError,
    HistoryWriter,
    read_history,
)
from notifier.rules import ClusterPipeline, RulesConfig, WindowStore, scans
from notifier.service import checkpoint
from notifier.service.cluster import ClusterState, wall_clock_ms
from notifier.service.sink import TransitionSink

log = logging.getLogger("notifier.service.coordinator")
"""The coordinator's: every part of it logs under one name, the one operators filter on."""


def restore(
    state: ClusterState,
    checkpoint_path: Path,
    rules: RulesConfig,
    history: HistoryWriter | None,
    sink: TransitionSink,
) -> tuple[bool, int]:
    """Checkpoint, then the scans the history holds after it, then the sink's open
    statuses; returns whether a checkpoint was loaded and how many scans were replayed."""
    name = state.config.name
    try:
        restored = checkpoint.load(checkpoint_path, state.store, state.evaluator, state.tracker)
    except checkpoint.CheckpointError:  # logged; drop whatever was half loaded
        state.pipeline = ClusterPipeline(rules, state.config.scan_interval)
        restored = False
    replayed = replay_history(state, history)
    held = sink.open_statuses(name)
    if held is not None:
        statuses = {(name, group): status for group, status in held.items()}
        if statuses != state.tracker.statuses:
            log.info(
                "open statuses taken from the notifier (the checkpoint was older)",
                extra={"event": "statuses_from_sink", "cluster": name,
                       "checkpoint": len(state.tracker.statuses), "open": len(statuses)},
            )  # fmt: skip
        state.tracker.restore(statuses)
    return restored, replayed


def replay_history(state: ClusterState, history: HistoryWriter | None) -> int:
    """Step the cluster's pipeline through the scans the history recorded after the
    checkpoint, or, without one (a ``kill -9`` before the first checkpoint, a damaged
    one), through those of the span the windows remember (:func:`remembered_span_ms`).
    Their transitions were handled before the crash: they are dropped."""
    name = state.config.name
    if history is None:
        return 0
    since = state.store.last_scan_ts.get(name)
    start = since + 1 if since is not None else wall_clock_ms() - remembered_span_ms(state.store)
    try:
        table = read_history(history.root, start=start)
    except (HistoryEmptyError, HistoryNotFoundError):
        return 0
    except Exception as exc:  # a damaged file costs the replay, never the start
        log.warning("history after the checkpoint cannot be read; windows keep a gap",
                    extra={"event": "history_replay_failed", "cluster": name,
                           "error": str(exc)})  # fmt: skip
        return 0
    replayed = 0
    for scan in scans(table.filter(pc.equal(table.column("cluster"), name))):
        state.evaluation, _ = state.pipeline.step(scan)
        replayed += 1
    return replayed


def remembered_span_ms(store: WindowStore) -> int:
    """How far back the scans reach that a running service's windows are built from: a sample
    window holds ``intervals`` scans, a LEO table ``lag_time_points`` (the commit rings keep
    older changes too; replaying more than this would cost every start without a checkpoint
    a read of up to ``retention_days`` of history)."""
    settings = store.settings
    return max(settings.intervals, settings.lag_time_points) * store.scan_interval_ms
