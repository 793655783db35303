"""Prometheus ``/metrics``: notifier's own ``notifier_*`` families (group status, scan health,
history, delivery, open incidents) and, as the config's ``metrics.families`` chooses (both by
default), the consumer-lag families of two exporters under their exact names, labels and help
texts, so the dashboards and alerts people already run on them keep working:

* danielqsj/kafka_exporter (``kafka_exporter``): ``kafka_consumergroup_lag``,
  ``kafka_consumergroup_current_offset`` per group-partition, their ``_sum`` per group and
  topic, ``kafka_consumergroup_members``, ``kafka_topic_partition_current_offset`` and
  ``_oldest_offset``. kafka_exporter watches one cluster per process and names it with a
  constant label (``--kafka.labels cluster=NAME``); notifier watches several, so its series
  carry ``cluster`` that way. As there, a partition of a topic the group consumes that has no
  committed offset shows lag and offset -1, and topics the group never committed to are left out.
* Kafka Lag Exporter (``kafka_lag_exporter``): ``kafka_consumergroup_group_offset``,
  ``_group_lag``, ``_group_lag_seconds`` per group-partition (labels ``cluster_name``,
  ``group``, ``topic``, ``partition``, ``member_host``, ``consumer_id``, ``client_id``: the
  member the partition is assigned to, ``unknown`` when none is), ``_group_max_lag``,
  ``_group_max_lag_seconds``, ``_group_sum_lag`` per group, ``_group_topic_sum_lag`` per group
  and topic, ``kafka_partition_latest_offset`` and ``_earliest_offset``. As there, an unknown
  offset, lag or lag in seconds is NaN.

A cluster whose data is stale (no successful scan within a few intervals) exports no group or
partition series at all, only its scan health and the age of its data: Prometheus marks the
vanished series stale at once, so graphs show the gap and alerts on them stop, rather than a
frozen lag looking current (explicit timestamps would be the other way, and Prometheus
advises exporters against them).

A scrape does no work on Kafka and little in Python: the group and partition lines of a
cluster are rendered once per evaluation (tens of thousands of group-partitions take tens of
milliseconds) and reused by every scrape until the next scan; only the cluster, history and
notification series are rendered per scrape.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass
from typing import Any, Literal, cast

import numpy as np
from fastapi import APIRouter
from fastapi.responses import PlainTextResponse, Response
from prometheus_client.utils import floatToGoString

from notifier.api.context import Api
from notifier.api.sources import ClusterView, CoordinatorView, NotifierView
from notifier.api.views import freshness, state_summaries
from notifier.collect import ClusterLayout
from notifier.collect.requestcount import KAFKA_REQUESTS, KafkaRequests
from notifier.config import EXPORTER_FAMILIES
from notifier.rules import NULL, Evaluation
from notifier.types import PARTITION_STATUS_CODES, GroupMember, GroupStatus

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"

Source = Literal["notifier", "burrow", "kafka_exporter", "kafka_lag_exporter"]


@dataclass(frozen=True, slots=True)
class Family:
    """One metric family as ``/metrics`` writes it: ``# HELP`` and ``# TYPE`` and its samples."""

    name: str
    help: str
    type: Literal["gauge", "counter"]
    labels: tuple[str, ...]
    source: Source


def _family(source: Source, kind: Literal["gauge", "counter"], name: str, labels: str,
            help_text: str) -> Family:  # fmt: skip
    return Family(name, help_text, kind, tuple(labels.split()), source)


_B: Source = "burrow"
_KE: Source = "kafka_exporter"
_KLE: Source = "kafka_lag_exporter"
_N: Source = "notifier"
_KE_GP = "cluster consumergroup topic partition"
_KLE_GP = "cluster_name group topic partition member_host consumer_id client_id"
_B_GP = "cluster consumer_group topic partition"

FAMILIES: tuple[Family, ...] = (
    # Burrow (linkedin/Burrow), names, labels and help texts as its httpserver/prometheus.go
    # defines them.
    _family(_B, "gauge", "burrow_kafka_consumer_lag_total", "cluster consumer_group",
            "The sum of all partition current lag values for the group"),
    _family(_B, "gauge", "burrow_kafka_consumer_status", "cluster consumer_group",
            "The status of the consumer group. It is calculated from the highest status for the "
            "individual partitions. Statuses are an index list from NOTFOUND, OK, WARN, or ERR"),
    _family(_B, "gauge", "burrow_kafka_topic_partition_status", _B_GP,
            "The status of topic partition. It is calculated from the highest status for the "
            "individual partitions. Statuses are an index list from OK, WARN, STOP, STALL, REWIND"),
    _family(_B, "gauge", "burrow_kafka_consumer_current_offset", _B_GP,
            "Latest offset that Burrow is storing for this partition"),
    _family(_B, "gauge", "burrow_kafka_consumer_partition_lag", _B_GP,
            "Number of messages the consumer group is behind by for a partition as reported by "
            "Burrow"),
    _family(_B, "gauge", "burrow_kafka_topic_partition_offset", "cluster topic partition",
            "Latest offset the topic that Burrow is storing for this partition"),
    # danielqsj/kafka_exporter, names and help texts as its kafka_exporter.go defines them.
    _family(_KE, "gauge", "kafka_consumergroup_current_offset", _KE_GP,
            "Current Offset of a ConsumerGroup at Topic/Partition"),
    _family(_KE, "gauge", "kafka_consumergroup_current_offset_sum", "cluster consumergroup topic",
            "Current Offset of a ConsumerGroup at Topic for all partitions"),
    _family(_KE, "gauge", "kafka_consumergroup_lag", _KE_GP,
            "Current Approximate Lag of a ConsumerGroup at Topic/Partition"),
    _family(_KE, "gauge", "kafka_consumergroup_lag_sum", "cluster consumergroup topic",
            "Current Approximate Lag of a ConsumerGroup at Topic for all partitions"),
    _family(_KE, "gauge", "kafka_consumergroup_members", "cluster consumergroup",
            "Amount of members in a consumer group"),
    _family(_KE, "gauge", "kafka_topic_partition_current_offset", "cluster topic partition",
            "Current Offset of a Broker at Topic/Partition"),
    _family(_KE, "gauge", "kafka_topic_partition_oldest_offset", "cluster topic partition",
            "Oldest Offset of a Broker at Topic/Partition"),
    # kafka_exporter's broker and topic families, from the metadata the scans read.
    _family(_KE, "gauge", "kafka_brokers", "cluster", "Number of Brokers in the Kafka Cluster."),
    _family(_KE, "gauge", "kafka_broker_info", "cluster id address",
            "Information about the Kafka Broker."),
    _family(_KE, "gauge", "kafka_topic_partitions", "cluster topic",
            "Number of partitions for this Topic"),
    _family(_KE, "gauge", "kafka_topic_partition_leader", "cluster topic partition",
            "Leader Broker ID of this Topic/Partition"),
    _family(_KE, "gauge", "kafka_topic_partition_replicas", "cluster topic partition",
            "Number of Replicas for this Topic/Partition"),
    _family(_KE, "gauge", "kafka_topic_partition_in_sync_replica", "cluster topic partition",
            "Number of In-Sync Replicas for this Topic/Partition"),
    _family(_KE, "gauge", "kafka_topic_partition_leader_is_preferred", "cluster topic partition",
            "1 if Topic/Partition is using the Preferred Broker"),
    _family(_KE, "gauge", "kafka_topic_partition_under_replicated_partition",
            "cluster topic partition", "1 if Topic/Partition is under Replicated"),
    # Kafka Lag Exporter (seglo/kafka-lag-exporter), as its Metrics.scala defines them.
    _family(_KLE, "gauge", "kafka_consumergroup_poll_time_ms", "cluster_name",
            "Group time poll time"),
    _family(_KLE, "gauge", "kafka_partition_latest_offset", "cluster_name topic partition",
            "Latest offset of a partition"),
    _family(_KLE, "gauge", "kafka_partition_earliest_offset", "cluster_name topic partition",
            "Earliest offset of a partition"),
    _family(_KLE, "gauge", "kafka_consumergroup_group_max_lag", "cluster_name group",
            "Max group offset lag"),
    _family(_KLE, "gauge", "kafka_consumergroup_group_max_lag_seconds", "cluster_name group",
            "Max group time lag"),
    _family(_KLE, "gauge", "kafka_consumergroup_group_offset", _KLE_GP,
            "Last group consumed offset of a partition"),
    _family(_KLE, "gauge", "kafka_consumergroup_group_lag", _KLE_GP,
            "Group offset lag of a partition"),
    _family(_KLE, "gauge", "kafka_consumergroup_group_lag_seconds", _KLE_GP,
            "Group time lag of a partition"),
    _family(_KLE, "gauge", "kafka_consumergroup_group_sum_lag", "cluster_name group",
            "Sum of group offset lag"),
    _family(_KLE, "gauge", "kafka_consumergroup_group_topic_sum_lag", "cluster_name group topic",
            "Sum of group offset lag across topic partitions"),
    # notifier's own: what the rules decided, per group.
    _family(_N, "gauge", "notifier_group_status", "cluster consumergroup",
            "Group status: 0 OK, 1 WARN, 2 ERR."),
    _family(_N, "gauge", "notifier_group_complete", "cluster consumergroup",
            "Fraction of the group's partitions whose window is complete."),
    _family(_N, "gauge", "notifier_group_partial", "cluster consumergroup",
            "1 when the group's result is partial (gated: it cannot notify)."),
    _family(_N, "gauge", "notifier_group_lag", "cluster consumergroup",
            "Total lag of the group: the sum of its partitions' lag (records)."),
    _family(_N, "gauge", "notifier_group_max_lag_seconds", "cluster consumergroup",
            "Seconds behind of the group's furthest-behind partition."),
    _family(_N, "gauge", "notifier_incident_open", "cluster consumergroup incident_id",
            "An open incident: 1 while WARN, 2 while ERR (consumergroup empty: the cluster is "
            "down)."),
    # notifier's own: scan health per cluster.
    _family(_N, "counter", "notifier_scans_total", "cluster", "Successful scans."),
    _family(_N, "counter", "notifier_scan_errors_total", "cluster",
            "Failed scans (each is a gap)."),
    _family(_N, "gauge", "notifier_scan_duration_seconds", "cluster",
            "Duration of the last successful scan."),
    _family(_N, "gauge", "notifier_scan_requests", "cluster api",
            "Kafka requests the last scan sent, by API."),
    _family(_N, "gauge", "notifier_last_scan_timestamp_seconds", "cluster",
            "When the last successful scan observed the cluster."),
    _family(_N, "gauge", "notifier_evaluation_seconds", "cluster",
            "Time to ingest and evaluate the last scan."),
    _family(_N, "gauge", "notifier_cluster_down", "cluster",
            "1 while the cluster cannot be scanned."),
    _family(_N, "gauge", "notifier_cluster_stale", "cluster",
            "1 while the cluster's data is stale (its group series are then not exported)."),
    _family(_N, "gauge", "notifier_cluster_data_age_seconds", "cluster",
            "Seconds since the last successful scan observed the cluster."),
    # notifier's own: what this process costs Kafka.
    _family(_N, "counter", "notifier_kafka_requests_total", "client api",
            "Kafka requests this process sent, by client (scan: the scans; fleet_membership, "
            "fleet_state, fleet_view: a fleet instance's group membership, state topic and "
            "fleet view) and API; each new connection's ApiVersions included, logins (SASL) "
            "and a client's bootstrap Metadata not."),
    # notifier's own: the history writer (when history is enabled).
    _family(_N, "gauge", "notifier_history_writing", "",
            "1 while the history is written, 0 while writes fail."),
    _family(_N, "counter", "notifier_history_write_errors_total", "",
            "Failed history writes (journal, roll, prune)."),
    _family(_N, "gauge", "notifier_history_queued_rows", "",
            "Sample rows waiting to be written to the history."),
    _family(_N, "counter", "notifier_history_dropped_rows_total", "",
            "Sample rows dropped because writes kept failing and the queue was full."),
    # notifier's own: state files the disk refused (the notification store, checkpoints).
    _family(_N, "gauge", "notifier_state_writing", "path",
            "1 while the state file is written, 0 while the disk refuses its writes (full, "
            "read-only, removed): what was decided is kept in memory meanwhile."),
    _family(_N, "gauge", "notifier_state_unwritten_changes", "path",
            "Changes kept in memory because the disk refused them."),
    _family(_N, "counter", "notifier_state_write_errors_total", "path",
            "Writes of the state file the disk refused (every retry counts)."),
    # notifier's own: delivery (when notifications are configured).
    _family(_N, "counter", "notifier_notifications_sent_total", "channel",
            "Notifications delivered, by channel."),
    _family(_N, "counter", "notifier_notifications_failed_total", "channel",
            "Notifications that failed for good, by channel."),
    _family(_N, "counter", "notifier_notifications_retried_total", "channel",
            "Delivery attempts retried, by channel."),
    _family(_N, "gauge", "notifier_outbox_depth", "", "Notifications waiting in the outbox."),
    _family(_N, "gauge", "notifier_outbox_oldest_pending_seconds", "",
            "Age of the oldest pending notification."),
    # notifier's own: this instance's share of a fleet (with coordination: only).
    _family(_N, "gauge", "notifier_fleet_coordination_up", "instance",
            "1 while the coordination cluster answers, 0 while it is unreachable (the instance "
            "then keeps its shards and keeps watching them)."),
    _family(_N, "gauge", "notifier_fleet_shards_owned", "instance",
            "Shards (state topic partitions) this instance owns and watches."),
)  # fmt: skip
"""Every family ``/metrics`` can write, in the order it writes them."""

BY_NAME: Mapping[str, Family] = {f.name: f for f in FAMILIES}

NOTFOUND_RANK = GroupStatus.NOTFOUND.rank
BURROW_GROUP_STATUS = {
    status.rank: code for code, status in enumerate(
        (GroupStatus.NOTFOUND, GroupStatus.OK, GroupStatus.WARN, GroupStatus.ERR)
    )
}  # fmt: skip
"""A group status rank (``GroupStatus.rank``) as Burrow's exporter writes it: the index in
Burrow's NOTFOUND, OK, WARN, ERR, STOP, STALL, REWIND."""
BURROW_PARTITION_STATUS = [
    ("NOTFOUND", "OK", "WARN", "ERR", "STOP", "STALL", "REWIND").index(status.value)
    for status in PARTITION_STATUS_CODES
]
"""A partition status code (index into ``PARTITION_STATUS_CODES``) as Burrow writes it."""

_UNKNOWN_OWNER = ("unknown", "unknown", "unknown")
_NO_OWNERS: Mapping[tuple[str, int], GroupMember] = {}
"""Kafka Lag Exporter's ``client_id``, ``consumer_id`` and ``member_host`` for a partition no
member is assigned to (a group without members)."""


def _escape_help(text: str) -> str:
    return text.replace("\\", "\\\\").replace("\n", "\\n")


def _quote(value: str) -> str:
    """A label value in the text format: quoted, with backslash, quote and newline escaped."""
    escaped = value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
    return f'"{escaped}"'


class _Quoted(dict[str, str]):
    """Quoted label values, each worked out once per rendering (names repeat on every row)."""

    def __missing__(self, value: str) -> str:
        quoted = self[value] = _quote(value)
        return quoted


def _value(value: float) -> str:
    return cast(str, floatToGoString(value))  # prometheus_client leaves it unannotated


def _values(array: np.ndarray, unknown: np.ndarray | None, missing: str) -> list[str]:
    """Integers as written by Go's exporters (``123``), ``missing`` where ``unknown``."""
    out = [str(v) for v in array.tolist()]
    if unknown is not None:
        for i in np.flatnonzero(unknown).tolist():
            out[i] = missing
    return out


def _seconds(array: np.ndarray) -> list[str]:
    return ["NaN" if math.isnan(v) else repr(v) for v in array.tolist()]


@dataclass(slots=True)
class _Rows:
    """A cluster's evaluated group-partitions, with their label values quoted once."""

    keys: list[tuple[str, str, str, int]]
    groups: list[str]
    topics: list[str]
    partitions: list[str]
    lag: np.ndarray
    lag_unknown: np.ndarray
    committed: np.ndarray
    no_commit: np.ndarray


@dataclass(slots=True)
class _Rendered:
    """A cluster's group and partition lines for one evaluation, by family name."""

    evaluation: Evaluation
    chunks: dict[str, bytes]


class MetricsExposition:
    """The text of ``/metrics``, read from the coordinator's last evaluations (a scrape does no
    work on Kafka) and the notifier's counters."""

    def __init__(
        self,
        coordinator: CoordinatorView,
        notifier: NotifierView | None,
        clock: Callable[[], int],
        families: Collection[str] = EXPORTER_FAMILIES,
        instance: str | None = None,
        requests: KafkaRequests = KAFKA_REQUESTS,
    ):
        """``instance``: in a fleet, this instance's name, a label on every series so that
        Prometheus can sum the instances (each exports only the groups it owns).
        ``requests``: the Kafka requests counted (the process's)."""
        self.coordinator = coordinator
        self.requests = requests
        self.instance_label = None if instance is None else f"instance={_quote(instance)}"
        self.notifier = notifier
        self.clock = clock
        self.sources: frozenset[str] = frozenset(families) | {"notifier"}
        self.families = tuple(f for f in FAMILIES if f.source in self.sources)
        self._rendered: dict[str, _Rendered] = {}
        self._layouts: dict[str, tuple[ClusterLayout, dict[str, bytes]]] = {}

    def render(self) -> bytes:
        """The whole exposition, every family with its ``# HELP`` and ``# TYPE``."""
        lines: dict[str, list[str]] = {f.name: [] for f in self.families}
        chunks: dict[str, list[bytes]] = {f.name: [] for f in self.families}
        now = self.clock()
        kept: dict[str, _Rendered] = {}
        layouts: dict[str, tuple[ClusterLayout, dict[str, bytes]]] = {}
        for name, state in self.coordinator.clusters.items():
            self._cluster_lines(name, state, now, lines)
            evaluation = state.evaluation
            if evaluation is None or freshness(state, now).stale:
                continue
            layout = state.layout
            if layout is not None and _KE in self.sources:
                drawn = self._layouts.get(name)
                if drawn is None or drawn[0] is not layout:
                    drawn = (
                        layout,
                        {
                            family: self._labelled("".join(text)).encode()
                            for family, text in _layout_lines(name, layout).items()
                        },
                    )
                layouts[name] = drawn
                for family_name, chunk in drawn[1].items():
                    chunks[family_name].append(chunk)
            rendered = self._rendered.get(name)
            if rendered is None or rendered.evaluation is not evaluation:
                grouped = self._group_lines(name, state, evaluation)
                encoded = {
                    family: self._labelled("".join(text)).encode()
                    for family, text in grouped.items()
                }
                rendered = _Rendered(evaluation, encoded)
            kept[name] = rendered
            for family_name, chunk in rendered.chunks.items():
                chunks[family_name].append(chunk)
        self._rendered = kept
        self._layouts = layouts
        self._incident_lines(lines)
        self._request_lines(lines)
        self._history_lines(lines)
        self._state_lines(lines)
        self._notification_lines(lines)
        self._fleet_lines(lines)
        out: list[bytes] = []
        for family in self.families:
            head = [f"# HELP {family.name} {_escape_help(family.help)}\n",
                    f"# TYPE {family.name} {family.type}\n",
                    self._labelled("".join(lines[family.name]))]  # fmt: skip
            out.append("".join(head).encode())
            out.extend(chunks[family.name])
        return b"".join(out)

    def _labelled(self, text: str) -> str:
        """``text`` (sample lines) with the instance label first on every line, in a fleet."""
        label = self.instance_label
        if label is None or not text:
            return text
        out = []
        for line in text.splitlines(keepends=True):
            # A metric name holds neither a brace nor a space: whichever comes first ends it.
            brace, space = line.find("{"), line.find(" ")
            if 0 <= brace < space:
                out.append(f"{line[: brace + 1]}{label},{line[brace + 1 :]}")
            else:
                out.append(f"{line[:space]}{{{label}}}{line[space:]}")
        return "".join(out)

    # ---- per scrape: a few series per cluster, the history and the notifier

    def _cluster_lines(
        self, name: str, state: ClusterView, now: int, lines: dict[str, list[str]]
    ) -> None:
        m = state.metrics
        cluster = f"cluster={_quote(name)}"
        fresh = freshness(state, now)
        values: list[tuple[str, float | None]] = [
            ("notifier_scans_total", m.scans),
            ("notifier_scan_errors_total", m.failures),
            ("notifier_scan_duration_seconds", m.last_duration_s),
            ("notifier_evaluation_seconds", m.last_evaluate_s),
            ("notifier_cluster_down", 1 if m.down else 0),
            ("notifier_cluster_stale", 1 if fresh.stale else 0),
            ("notifier_last_scan_timestamp_seconds",
             None if m.last_success_ms is None else m.last_success_ms / 1000),
            ("notifier_cluster_data_age_seconds", fresh.age_seconds),
        ]  # fmt: skip
        for family, value in values:
            if value is not None:
                lines[family].append(f"{family}{{{cluster}}} {_value(value)}\n")
        if _KLE in self.sources and m.last_duration_s is not None:
            lines["kafka_consumergroup_poll_time_ms"].append(
                f"kafka_consumergroup_poll_time_ms{{cluster_name={_quote(name)}}} "
                f"{round(m.last_duration_s * 1000)}\n"
            )
        for api, count in m.last_requests.items():
            lines["notifier_scan_requests"].append(
                f"notifier_scan_requests{{{cluster},api={_quote(api)}}} {_value(count)}\n"
            )

    def _request_lines(self, lines: dict[str, list[str]]) -> None:
        out = lines["notifier_kafka_requests_total"]
        for (client, api), count in self.requests.counts().items():
            out.append(f"notifier_kafka_requests_total{{client={_quote(client)},"
                       f"api={_quote(api)}}} {count}\n")  # fmt: skip

    def _incident_lines(self, lines: dict[str, list[str]]) -> None:
        if self.notifier is None:
            return
        out = lines["notifier_incident_open"]
        for incident in self.notifier.incidents(open_only=True):
            labels = (f"cluster={_quote(incident.cluster)},consumergroup={_quote(incident.group)},"
                      f"incident_id={_quote(incident.id)}")  # fmt: skip
            out.append(f"notifier_incident_open{{{labels}}} {_value(incident.status.rank)}\n")

    def _history_lines(self, lines: dict[str, list[str]]) -> None:
        history = self.coordinator.history
        if history is None:
            return
        for family, value in (
            ("notifier_history_writing", 0 if history.failing else 1),
            ("notifier_history_write_errors_total", history.errors),
            ("notifier_history_queued_rows", history.queued_rows),
            ("notifier_history_dropped_rows_total", history.dropped_rows),
        ):
            lines[family].append(f"{family} {_value(value)}\n")

    def _state_lines(self, lines: dict[str, list[str]]) -> None:
        for state in state_summaries(self.coordinator, self.notifier):
            path = f"{{path={_quote(state['path'])}}}"
            for family, value in (
                ("notifier_state_writing", 1 if state["writing"] else 0),
                ("notifier_state_unwritten_changes", state["unwritten"]),
                ("notifier_state_write_errors_total", state["errors"]),
            ):
                lines[family].append(f"{family}{path} {_value(value)}\n")

    def _notification_lines(self, lines: dict[str, list[str]]) -> None:
        if self.notifier is None:
            return
        snapshot = self.notifier.metrics()
        for key in ("sent", "failed", "retried"):
            family = f"notifier_notifications_{key}_total"
            for channel, value in dict(snapshot.get(key, {})).items():
                lines[family].append(f"{family}{{channel={_quote(channel)}}} {_value(value)}\n")
        depth = snapshot.get("outbox_depth", 0)
        age = snapshot.get("oldest_pending_age_seconds", 0) or 0
        lines["notifier_outbox_depth"].append(f"notifier_outbox_depth {_value(depth)}\n")
        lines["notifier_outbox_oldest_pending_seconds"].append(
            f"notifier_outbox_oldest_pending_seconds {_value(age)}\n"
        )

    def _fleet_lines(self, lines: dict[str, list[str]]) -> None:
        fleet = getattr(self.coordinator, "fleet", None)
        if fleet is None:
            return
        # With the fleet view, every line gets the instance label already (_labelled).
        labels = "" if self.instance_label else f"{{instance={_quote(fleet.instance)}}}"
        up = 1 if fleet.coordination_ok else 0
        lines["notifier_fleet_coordination_up"].append(
            f"notifier_fleet_coordination_up{labels} {up}\n"
        )
        lines["notifier_fleet_shards_owned"].append(
            f"notifier_fleet_shards_owned{labels} {len(fleet.owned)}\n"
        )

    # ---- once per evaluation: every group-partition, group and partition of a cluster

    def _group_lines(
        self, cluster: str, state: ClusterView, evaluation: Evaluation
    ) -> dict[str, list[str]]:
        store = state.store
        rows = evaluation.rows
        quoted = _Quoted()
        keys = [store.row_key_of(row) for row in rows.tolist()]
        committed = store.latest_committed[rows]
        lag = evaluation.current_lag
        each = _Rows(
            keys=keys,
            groups=[quoted[k[1]] for k in keys],
            topics=[quoted[k[2]] for k in keys],
            partitions=[str(k[3]) for k in keys],
            lag=lag,
            lag_unknown=lag < 0,
            committed=committed,
            no_commit=committed == NULL,
        )
        c = quoted[cluster]
        out = self._partition_lines(c, store.row_table[rows], store, rows, each)
        group_ids = evaluation.group_ids
        group_names = [quoted[store.group_key_of(gid)[1]] for gid in group_ids.tolist()]
        if _B in self.sources:
            out.update(self._burrow_lines(c, store, rows, evaluation, each, group_names))
        if _KE in self.sources:
            out.update(self._kafka_exporter_lines(c, state, quoted, each))
        if _KLE in self.sources:
            out.update(self._lag_exporter_lines(c, state, evaluation, each, group_names))

        labels = [f"cluster={c},consumergroup={g}" for g in group_names]
        for family, values in (
            ("notifier_group_status", evaluation.group_status[group_ids].tolist()),
            ("notifier_group_complete", evaluation.group_complete[group_ids].tolist()),
            ("notifier_group_partial", evaluation.group_partial[group_ids].astype(int).tolist()),
            ("notifier_group_lag", evaluation.group_total_lag[group_ids].tolist()),
        ):
            out[family] = [f"{family}{{{lbl}}} {_value(v)}\n" for lbl, v in zip(labels, values)]
        out["notifier_group_max_lag_seconds"] = [
            f"notifier_group_max_lag_seconds{{{lbl}}} {v!r}\n"
            for lbl, v in zip(labels, evaluation.group_max_lag_seconds[group_ids].tolist())
            if not math.isnan(v)
        ]
        return out

    def _partition_lines(
        self, c: str, tables: np.ndarray, store: Any, rows: np.ndarray, each: _Rows
    ) -> dict[str, list[str]]:
        """One series per (topic, partition), however many groups read it."""
        _, first = np.unique(tables, return_index=True)
        leo = store.latest_leo[rows[first]].tolist()
        log_start = store.latest_log_start[rows[first]].tolist()
        tp = [(f'topic={each.topics[i]},partition="{each.partitions[i]}"', leo[j], log_start[j])
              for j, i in enumerate(first.tolist())]  # fmt: skip
        out: dict[str, list[str]] = {}
        names = {
            _KE: ("cluster", "kafka_topic_partition_current_offset",
                  "kafka_topic_partition_oldest_offset"),
            _KLE: ("cluster_name", "kafka_partition_latest_offset",
                   "kafka_partition_earliest_offset"),
        }  # fmt: skip
        for source, (cluster_label, latest, earliest) in names.items():
            if source not in self.sources:
                continue
            out[latest] = [
                f"{latest}{{{cluster_label}={c},{labels}}} {end}\n" for labels, end, _ in tp
            ]
            out[earliest] = [
                f"{earliest}{{{cluster_label}={c},{labels}}} {start}\n"
                for labels, _, start in tp
                if start != NULL
            ]
        return out

    def _burrow_lines(
        self, c: str, store: Any, rows: np.ndarray, evaluation: Evaluation, each: _Rows,
        group_names: list[str],
    ) -> dict[str, list[str]]:  # fmt: skip
        """Burrow skips the groups it does not find, writes every partition's lag (0 when
        unknown, as its ``current_lag``), and the last offset of the commit window and the
        partition's status only where the window is complete; its statuses are the indexes of
        NOTFOUND, OK, WARN, ERR, STOP, STALL, REWIND."""
        group_ids = evaluation.group_ids
        ranks = evaluation.group_status[group_ids].tolist()
        totals = evaluation.group_total_lag[group_ids].tolist()
        found = [rank != NOTFOUND_RANK for rank in ranks]
        group_labels = [f"cluster={c},consumer_group={g}" for g in group_names]
        status_lines = [
            f"burrow_kafka_consumer_status{{{lbl}}} {BURROW_GROUP_STATUS[rank]}\n"
            for lbl, rank, ok in zip(group_labels, ranks, found)
            if ok
        ]
        total_lines = [
            f"burrow_kafka_consumer_lag_total{{{lbl}}} {total}\n"
            for lbl, total, ok in zip(group_labels, totals, found)
            if ok
        ]
        listed = set(np.asarray(group_ids)[np.asarray(found, dtype=bool)].tolist())
        complete = (evaluation.burrow_complete >= 1.0) & (store.r_count[rows] > 0)
        end_offsets = store.r_offset[rows, -1].tolist()
        statuses = evaluation.status.tolist()
        lags = np.where(each.lag_unknown, 0, each.lag).tolist()
        gids = evaluation.gids.tolist()
        lag_lines: list[str] = []
        offset_lines: list[str] = []
        partition_status_lines: list[str] = []
        for i, is_complete in enumerate(complete.tolist()):
            if gids[i] not in listed:
                continue
            labels = (f"cluster={c},consumer_group={each.groups[i]},topic={each.topics[i]},"
                      f'partition="{each.partitions[i]}"')  # fmt: skip
            lag_lines.append(f"burrow_kafka_consumer_partition_lag{{{labels}}} {lags[i]}\n")
            if is_complete:
                offset_lines.append(
                    f"burrow_kafka_consumer_current_offset{{{labels}}} {end_offsets[i]}\n"
                )
                partition_status_lines.append(
                    f"burrow_kafka_topic_partition_status{{{labels}}} "
                    f"{BURROW_PARTITION_STATUS[statuses[i]]}\n"
                )
        tables = store.row_table[rows]
        _, first = np.unique(tables, return_index=True)
        leo = store.latest_leo[rows[first]].tolist()
        topic_lines = [
            f"burrow_kafka_topic_partition_offset{{cluster={c},topic={each.topics[i]},"
            f'partition="{each.partitions[i]}"}} {leo[j]}\n'
            for j, i in enumerate(first.tolist())
        ]
        return {
            "burrow_kafka_consumer_status": status_lines,
            "burrow_kafka_consumer_lag_total": total_lines,
            "burrow_kafka_consumer_partition_lag": lag_lines,
            "burrow_kafka_consumer_current_offset": offset_lines,
            "burrow_kafka_topic_partition_status": partition_status_lines,
            "burrow_kafka_topic_partition_offset": topic_lines,
        }

    def _kafka_exporter_lines(
        self, c: str, state: ClusterView, quoted: _Quoted, each: _Rows
    ) -> dict[str, list[str]]:
        """kafka_exporter leaves out the topics a group has no committed offset in, writes -1
        for a partition without one in a topic it has, and sums per group and topic."""
        by_topic: dict[tuple[str, str], list[int]] = {}
        for i, key in enumerate(each.keys):
            by_topic.setdefault((key[1], key[2]), []).append(i)
        has_commit = ~each.no_commit
        lag_text = _values(each.lag, each.lag_unknown, "-1")
        offset_text = _values(each.committed, each.no_commit, "-1")
        lag_known = np.where(each.lag_unknown, 0, each.lag)
        offset_known = np.where(each.no_commit, 0, each.committed)
        lags: list[str] = []
        offsets: list[str] = []
        lag_sums: list[str] = []
        offset_sums: list[str] = []
        for (group, topic), members in by_topic.items():
            index = np.asarray(members)
            if not has_commit[index].any():
                continue
            pair = f"cluster={c},consumergroup={quoted[group]},topic={quoted[topic]}"
            for i in members:
                labels = f'{pair},partition="{each.partitions[i]}"'
                lags.append(f"kafka_consumergroup_lag{{{labels}}} {lag_text[i]}\n")
                offsets.append(f"kafka_consumergroup_current_offset{{{labels}}} {offset_text[i]}\n")
            lag_sum = int(lag_known[index].sum())
            offset_sum = int(offset_known[index].sum())
            lag_sums.append(f"kafka_consumergroup_lag_sum{{{pair}}} {lag_sum}\n")
            offset_sums.append(f"kafka_consumergroup_current_offset_sum{{{pair}}} {offset_sum}\n")
        return {
            "kafka_consumergroup_lag": lags,
            "kafka_consumergroup_current_offset": offsets,
            "kafka_consumergroup_lag_sum": lag_sums,
            "kafka_consumergroup_current_offset_sum": offset_sums,
            "kafka_consumergroup_members": [
                f"kafka_consumergroup_members{{cluster={c},consumergroup={quoted[g]}}} {count}\n"
                for g, count in sorted(state.group_members.items())
            ],
        }

    def _lag_exporter_lines(
        self, c: str, state: ClusterView, evaluation: Evaluation, each: _Rows,
        group_names: list[str],
    ) -> dict[str, list[str]]:  # fmt: skip
        """Kafka Lag Exporter labels each partition with its member and writes NaN for what it
        does not know; its group figures are over the partitions whose lag is known."""
        owners = state.owners
        owner_labels: dict[GroupMember | None, str] = {}
        lag_text = _values(each.lag, each.lag_unknown, "NaN")
        offset_text = _values(each.committed, each.no_commit, "NaN")
        seconds_text = _seconds(evaluation.lag_seconds)
        offsets: list[str] = []
        lags: list[str] = []
        seconds: list[str] = []
        for i, key in enumerate(each.keys):
            owner = owners.get(key[1], _NO_OWNERS).get(key[2:])
            member = owner_labels.get(owner)
            if member is None:
                host, consumer_id, client_id = (
                    (owner.client_host, owner.member_id, owner.client_id)
                    if owner is not None
                    else _UNKNOWN_OWNER
                )
                member = owner_labels[owner] = (
                    f"member_host={_quote(host)},consumer_id={_quote(consumer_id)},"
                    f"client_id={_quote(client_id)}"
                )
            labels = (f"cluster_name={c},group={each.groups[i]},topic={each.topics[i]},"
                      f'partition="{each.partitions[i]}",{member}')  # fmt: skip
            offsets.append(f"kafka_consumergroup_group_offset{{{labels}}} {offset_text[i]}\n")
            lags.append(f"kafka_consumergroup_group_lag{{{labels}}} {lag_text[i]}\n")
            seconds.append(f"kafka_consumergroup_group_lag_seconds{{{labels}}} {seconds_text[i]}\n")

        group_ids = evaluation.group_ids
        known = ~each.lag_unknown
        max_lag = np.full(int(group_ids.max()) + 1 if group_ids.size else 0, -1, dtype=np.int64)
        np.maximum.at(max_lag, evaluation.gids[known], each.lag[known])
        topic_sums: dict[tuple[str, str], int] = {}
        for i in np.flatnonzero(known).tolist():
            pair = (each.groups[i], each.topics[i])
            topic_sums[pair] = topic_sums.get(pair, 0) + int(each.lag[i])
        group_labels = [f"cluster_name={c},group={g}" for g in group_names]
        max_seconds = _seconds(evaluation.group_max_lag_seconds[group_ids])
        sums = evaluation.group_total_lag[group_ids].tolist()
        maxima = ["NaN" if v < 0 else str(v) for v in max_lag[group_ids].tolist()]
        name = "kafka_consumergroup_group"
        return {
            f"{name}_offset": offsets,
            f"{name}_lag": lags,
            f"{name}_lag_seconds": seconds,
            f"{name}_max_lag": [
                f"{name}_max_lag{{{lbl}}} {v}\n" for lbl, v in zip(group_labels, maxima)
            ],
            f"{name}_max_lag_seconds": [
                f"{name}_max_lag_seconds{{{lbl}}} {v}\n"
                for lbl, v in zip(group_labels, max_seconds)
            ],
            f"{name}_sum_lag": [
                f"{name}_sum_lag{{{lbl}}} {v}\n" for lbl, v in zip(group_labels, sums)
            ],
            f"{name}_topic_sum_lag": [
                f"{name}_topic_sum_lag{{cluster_name={c},group={g},topic={t}}} {v}\n"
                for (g, t), v in topic_sums.items()
            ],
        }


def _layout_lines(cluster: str, layout: ClusterLayout) -> dict[str, list[str]]:
    """kafka_exporter's broker and topic families: every topic of the metadata (internal ones
    too, as its default topic filter lets through); no leader series for a partition without
    a leader, as there."""
    c = f"cluster={_quote(cluster)}"
    out: dict[str, list[str]] = {
        "kafka_brokers": [f"kafka_brokers{{{c}}} {len(layout.brokers)}\n"],
        "kafka_broker_info": [
            f"kafka_broker_info{{{c},id={_quote(str(node))},address={_quote(address)}}} 1\n"
            for node, address in sorted(layout.brokers.items())
        ],
        "kafka_topic_partitions": [],
        "kafka_topic_partition_leader": [],
        "kafka_topic_partition_replicas": [],
        "kafka_topic_partition_in_sync_replica": [],
        "kafka_topic_partition_leader_is_preferred": [],
        "kafka_topic_partition_under_replicated_partition": [],
    }
    for topic, partitions in sorted(layout.topics.items()):
        t = f"{c},topic={_quote(topic)}"
        out["kafka_topic_partitions"].append(f"kafka_topic_partitions{{{t}}} {len(partitions)}\n")
        for partition, where in sorted(partitions.items()):
            labels = f'{t},partition="{partition}"'
            preferred = 1 if where.replicas and where.leader == where.replicas[0] else 0
            under = 1 if len(where.in_sync) < len(where.replicas) else 0
            if where.leader >= 0:
                out["kafka_topic_partition_leader"].append(
                    f"kafka_topic_partition_leader{{{labels}}} {where.leader}\n"
                )
            for family, value in (
                ("kafka_topic_partition_replicas", len(where.replicas)),
                ("kafka_topic_partition_in_sync_replica", len(where.in_sync)),
                ("kafka_topic_partition_leader_is_preferred", preferred),
                ("kafka_topic_partition_under_replicated_partition", under),
            ):
                out[family].append(f"{family}{{{labels}}} {value}\n")
    return out


router = APIRouter(tags=["ops"])


@router.get("/metrics", response_class=PlainTextResponse)
def metrics(api: Api) -> Response:
    """The Prometheus exposition (text format 0.0.4)."""
    return Response(api.metrics.render(), media_type=CONTENT_TYPE)


__all__ = [
    "BY_NAME",
    "CONTENT_TYPE",
    "FAMILIES",
    "Family",
    "MetricsExposition",
    "router",
]
