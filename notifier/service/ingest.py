"""What a scan's outcome does to its cluster: a successful one goes through the step into the
windows, its transitions to the sink and its samples to the history; a failed one is counted,
backed off and, after enough in a row, reported to the sink as the cluster being down.

A scan that fails is a gap: nothing is ingested, nothing is evaluated, so it can never become
an alert. It is logged and counted. A cluster no broker of which answers is tried again at every
tick: such a scan stops at its first connection attempts, as cheap as a probe, and the cluster
is scanned within one interval of answering again. A cluster that answers but whose scans fail
(a struggling one) is spared: the next tries back off exponentially, to at most
:data:`MAX_BACKOFF_INTERVALS` scan intervals. After ``down_after_failures`` failures in a row
the cluster is reported down to the sink (which mutes its groups and raises one cluster alert)
until a scan succeeds again.

Each scan's time, the ``now`` of everything the rules judge, comes from the cluster's
:class:`~notifier.service.scanclock.ScanClock`; the history gets the same times as the windows.
"""

from __future__ import annotations

import logging
import time

import pyarrow as pa

from notifier.collect import ScanResult
from notifier.history import HistoryWriter
from notifier.rules import LeoReset, ScanColumns, unavailable_samples
from notifier.service.cluster import ClusterState, wall_clock_ms
from notifier.service.sink import TransitionSink
from notifier.types import Transition

log = logging.getLogger("notifier.service.coordinator")
"""The coordinator's: every part of it logs under one name, the one operators filter on."""

MAX_BACKOFF_INTERVALS = 3
"""Scans that fail although the cluster answers back off to at most this many scan intervals:
enough to spare a struggling cluster, short enough that its recovery is noticed within a few
intervals. (A cluster that does not answer at all is tried at every tick.)"""


def ingest(
    state: ClusterState,
    result: ScanResult,
    sink: TransitionSink,
    history: HistoryWriter | None,
) -> list[Transition]:
    """Ingest a successful scan, evaluate, hand transitions to the sink and the samples to
    the history; returns the transitions."""
    name = state.config.name
    m = state.metrics
    m.scans += 1
    if m.scans == 1:
        log.info(
            "cluster ready: first scan succeeded",
            extra={"event": "cluster_ready", "cluster": name,
                   "groups": len(result.group_states), "rows": result.samples.num_rows,
                   "duration_s": round(result.duration_s, 3)},
        )  # fmt: skip
    m.consecutive_failures = 0
    m.last_success_ms = result.ts
    m.last_duration_s = result.duration_s
    m.last_requests = dict(result.requests)
    state.retry_at = 0.0
    if m.down:
        m.down = False
        sink.cluster_up(name, result.ts)

    started = time.perf_counter()
    ts = state.clock.stamp(result.ts, result.elapsed_at, state.store.last_scan_ts.get(name))
    samples = result.samples if ts == result.ts else _restamped(result.samples, ts)
    scan = ScanColumns.from_table(samples, name, ts)
    # The previous evaluation goes before the step makes the next: with both alive at once
    # the cycle's peak would hold one more (~70 MB at 10^6 windows). Nothing reads it in
    # between: the step does not yield to the event loop (a reader that still serves from it,
    # the API's cache, holds its own reference).
    state.evaluation = None
    state.evaluation, transitions = state.pipeline.step(
        scan, result.group_states, result.unavailable_partitions
    )
    m.last_evaluate_s = time.perf_counter() - started
    state.groups = dict(result.group_states)
    state.not_evaluated = dict(result.skipped_groups)
    state.group_members, state.owners = result.group_members, result.owners
    state.layout = result.layout
    for transition in transitions:
        owners = result.owners.get(transition.group)
        if transition.result is not None and owners:
            transition.result.attach_owners(owners)
    for reset in state.store.leo_resets:
        _leo_reset(state, reset)
    if transitions:
        # The sink schedules on the wall clock; the transitions carry their scan time.
        sink.handle(transitions, result.ts)
    if history is not None:
        # The windows the step kept for partitions the scan could not read go in too, so
        # that a replay of the history keeps them as well.
        lost = unavailable_samples(state.store, name, ts, result.unavailable_partitions)
        recorded = pa.concat_tables([samples, lost]) if lost.num_rows else samples
        if recorded.num_rows:
            history.append(recorded)
    return transitions


def scan_failed(
    state: ClusterState, error: str, sink: TransitionSink, answered: bool = True
) -> None:
    """Count a failed scan and set when the cluster is tried next. ``answered``: whether a
    broker answered before the scan failed (see the module's docstring: a cluster that
    answers backs off, one that does not is tried every tick)."""
    m = state.metrics
    m.failures += 1
    m.consecutive_failures += 1
    m.last_error = error
    interval = state.config.scan_interval
    backoff = interval
    if answered:
        backoff *= min(MAX_BACKOFF_INTERVALS, 2 ** (m.consecutive_failures - 1))
    state.retry_at = time.monotonic() + backoff - interval
    name = state.config.name
    log.warning(
        "scan failed", extra={"event": "scan_failed", "cluster": name, "error": error,
                              "consecutive_failures": m.consecutive_failures,
                              "next_try_s": round(backoff, 1)},
    )  # fmt: skip
    if not m.down and m.consecutive_failures >= state.config.down_after_failures:
        m.down = True
        sink.cluster_down(name, wall_clock_ms(), error)


def _leo_reset(state: ClusterState, reset: LeoReset) -> None:
    state.leo_resets[(reset.topic, reset.partition)] = reset
    log.warning(
        "log-end offset went backwards: the partition's log started over (topic recreated "
        "or cluster rebuilt); lag in seconds starts again from this scan",
        extra={"event": "log_end_offset_reset", "cluster": reset.cluster,
               "topic": reset.topic, "partition": reset.partition,
               "previous_log_end_offset": reset.previous, "log_end_offset": reset.current},
    )  # fmt: skip


def _restamped(samples: pa.Table, ts: int) -> pa.Table:
    """The scan's rows with their time replaced by its scan time, so that the history replays
    exactly what the windows saw."""
    index = samples.schema.get_field_index("ts")
    column = samples.schema.field(index)
    times = pa.repeat(pa.scalar(ts, column.type), samples.num_rows)
    return samples.set_column(index, column, times)
