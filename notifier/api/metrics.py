"""Prometheus ``/metrics``: lag and offsets per group-partition, status per group, scan health
per cluster, and the notifier's delivery counters when notifications are configured.

A cluster whose data is stale (no successful scan within a few intervals) exports no group or
partition series at all, only its scan health and the age of its data: Prometheus marks the
vanished series stale at once, so graphs show the gap and alerts on them stop, rather than a
frozen lag looking current (explicit timestamps would be the other way, and Prometheus
advises exporters against them).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.metrics_core import Metric

from notifier.api.sources import CoordinatorView, NotifierView
from notifier.api.views import freshness
from notifier.rules import NULL


class ServiceMetrics:
    """A prometheus_client collector reading the last evaluations (a scrape does no work on
    Kafka). Names follow the ``kafka_consumergroup_*`` exporters where the meaning is the same."""

    def __init__(
        self,
        coordinator: CoordinatorView,
        notifier: NotifierView | None,
        clock: Callable[[], int],
    ):
        self.coordinator = coordinator
        self.notifier = notifier
        self.clock = clock

    def collect(self) -> Iterator[Metric]:
        labels = ["cluster", "consumergroup", "topic", "partition"]
        lag = GaugeMetricFamily(
            "kafka_consumergroup_lag",
            "Current lag (LEO - committed) of a group-partition.",
            labels=labels,
        )
        lag_s = GaugeMetricFamily(
            "kafka_consumergroup_lag_seconds",
            "Estimated seconds a group-partition is behind.",
            labels=labels,
        )
        offset = GaugeMetricFamily(
            "kafka_consumergroup_current_offset",
            "Committed offset of a group-partition.",
            labels=labels,
        )
        leo = GaugeMetricFamily(
            "kafka_topic_partition_current_offset",
            "Log-end offset of a partition.",
            labels=["cluster", "topic", "partition"],
        )
        oldest = GaugeMetricFamily(
            "kafka_topic_partition_oldest_offset",
            "Log-start offset of a partition.",
            labels=["cluster", "topic", "partition"],
        )
        status = GaugeMetricFamily(
            "notifier_group_status",
            "Group status: 0 OK, 1 WARN, 2 ERR.",
            labels=["cluster", "consumergroup"],
        )
        complete = GaugeMetricFamily(
            "notifier_group_complete",
            "Fraction of the group's partitions whose window is complete.",
            labels=["cluster", "consumergroup"],
        )
        partial = GaugeMetricFamily(
            "notifier_group_partial",
            "1 when the group's result is partial (gated: it cannot notify).",
            labels=["cluster", "consumergroup"],
        )
        total = GaugeMetricFamily(
            "kafka_consumergroup_lag_sum",
            "Total lag of a group.",
            labels=["cluster", "consumergroup"],
        )
        max_s = GaugeMetricFamily(
            "kafka_consumergroup_max_lag_seconds",
            "Seconds behind of the group's furthest-behind partition.",
            labels=["cluster", "consumergroup"],
        )
        scans = CounterMetricFamily("notifier_scans", "Successful scans.", labels=["cluster"])
        errors = CounterMetricFamily(
            "notifier_scan_errors", "Failed scans (each is a gap).", labels=["cluster"]
        )
        duration = GaugeMetricFamily(
            "notifier_scan_duration_seconds",
            "Duration of the last successful scan.",
            labels=["cluster"],
        )
        requests = GaugeMetricFamily(
            "notifier_scan_requests",
            "Kafka requests the last scan sent, by API.",
            labels=["cluster", "api"],
        )
        last = GaugeMetricFamily(
            "notifier_last_scan_timestamp_seconds",
            "When the last successful scan observed the cluster.",
            labels=["cluster"],
        )
        evaluate = GaugeMetricFamily(
            "notifier_evaluation_seconds",
            "Time to ingest and evaluate the last scan.",
            labels=["cluster"],
        )
        down = GaugeMetricFamily(
            "notifier_cluster_down", "1 while the cluster cannot be scanned.", labels=["cluster"]
        )
        stale = GaugeMetricFamily(
            "notifier_cluster_stale",
            "1 while the cluster's data is stale (its group series are then not exported).",
            labels=["cluster"],
        )
        age = GaugeMetricFamily(
            "notifier_cluster_data_age_seconds",
            "Seconds since the last successful scan observed the cluster.",
            labels=["cluster"],
        )
        now = self.clock()
        for name, state in self.coordinator.clusters.items():
            m = state.metrics
            scans.add_metric([name], m.scans)
            errors.add_metric([name], m.failures)
            duration.add_metric([name], m.last_duration_s)
            evaluate.add_metric([name], m.last_evaluate_s)
            down.add_metric([name], 1 if m.down else 0)
            for api, count in m.last_requests.items():
                requests.add_metric([name, api], count)
            if m.last_success_ms is not None:
                last.add_metric([name], m.last_success_ms / 1000)
            fresh = freshness(state, now)
            stale.add_metric([name], 1 if fresh.stale else 0)
            if fresh.age_seconds is not None:
                age.add_metric([name], fresh.age_seconds)
            evaluation = state.evaluation
            if evaluation is None or fresh.stale:
                continue
            store = state.store
            seen_tables: set[int] = set()
            for i, row in enumerate(evaluation.rows.tolist()):
                _, group, topic, part = store.row_key_of(row)
                key = [name, group, topic, str(part)]
                current = int(evaluation.current_lag[i])
                if current >= 0:
                    lag.add_metric(key, current)
                    offset.add_metric(key, int(store.latest_committed[row]))
                seconds = float(evaluation.lag_seconds[i])
                if not math.isnan(seconds):
                    lag_s.add_metric(key, seconds)
                table = int(store.row_table[row])
                if table not in seen_tables:
                    seen_tables.add(table)
                    leo.add_metric([name, topic, str(part)], int(store.latest_leo[row]))
                    if store.latest_log_start[row] != NULL:
                        oldest.add_metric(
                            [name, topic, str(part)], int(store.latest_log_start[row])
                        )
            for gid in evaluation.group_ids.tolist():
                _, group = store.group_key_of(gid)
                status.add_metric([name, group], int(evaluation.group_status[gid]))
                complete.add_metric([name, group], float(evaluation.group_complete[gid]))
                partial.add_metric([name, group], 1 if evaluation.group_partial[gid] else 0)
                total.add_metric([name, group], int(evaluation.group_total_lag[gid]))
                seconds = float(evaluation.group_max_lag_seconds[gid])
                if not math.isnan(seconds):
                    max_s.add_metric([name, group], seconds)
        yield from (lag, lag_s, offset, leo, oldest, status, complete, partial, total, max_s,
                    scans, errors, duration, requests, last, evaluate, down, stale,
                    age)  # fmt: skip
        yield from self._history_metrics()
        yield from self._notification_metrics()

    def _history_metrics(self) -> Iterator[Metric]:
        history = self.coordinator.history
        if history is None:
            return
        writing = GaugeMetricFamily(
            "notifier_history_writing", "1 while the history is written, 0 while writes fail."
        )
        writing.add_metric([], 0 if history.failing else 1)
        errors = CounterMetricFamily(
            "notifier_history_write_errors", "Failed history writes (journal, roll, prune)."
        )
        errors.add_metric([], history.errors)
        queued = GaugeMetricFamily(
            "notifier_history_queued_rows", "Sample rows waiting to be written to the history."
        )
        queued.add_metric([], history.queued_rows)
        dropped = CounterMetricFamily(
            "notifier_history_dropped_rows",
            "Sample rows dropped because writes kept failing and the queue was full.",
        )
        dropped.add_metric([], history.dropped_rows)
        yield from (writing, errors, queued, dropped)

    def _notification_metrics(self) -> Iterator[Metric]:
        if self.notifier is None:
            return
        snapshot = self.notifier.metrics()
        for key, help_text in (
            ("sent", "Notifications delivered, by channel."),
            ("failed", "Notifications that failed for good, by channel."),
            ("retried", "Delivery attempts retried, by channel."),
        ):
            family = CounterMetricFamily(
                f"notifier_notifications_{key}", help_text, labels=["channel"]
            )
            for channel, value in dict(snapshot.get(key, {})).items():
                family.add_metric([channel], value)
            yield family
        depth = GaugeMetricFamily("notifier_outbox_depth", "Notifications waiting in the outbox.")
        depth.add_metric([], snapshot.get("outbox_depth", 0))
        yield depth
        age = GaugeMetricFamily(
            "notifier_outbox_oldest_pending_seconds", "Age of the oldest pending notification."
        )
        age.add_metric([], snapshot.get("oldest_pending_age_seconds", 0) or 0)
        yield age
