"""/metrics as the dashboards built on kafka_exporter and Kafka Lag Exporter read it: their
families by name, labels, type and help text, with the values those exporters would show; the
config switch choosing which; and an exposition that passes promtool's checks."""

from __future__ import annotations

import dataclasses
import re
import shutil
import subprocess
from pathlib import Path

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from notifier.api import create_app
from notifier.collect import ClusterLayout, PartitionLayout, ScanResult
from notifier.config import ConfigError, parse_service_config
from notifier.rules import RulesConfig
from notifier.types import GroupMember, Sample, samples_to_table

from .scripted import drive, service

# The families the issue names, with the labels each exporter gives them (kafka_exporter's
# series carry notifier's cluster as the constant label `--kafka.labels cluster=NAME` would).
KAFKA_EXPORTER = {
    "kafka_consumergroup_lag": {"cluster", "consumergroup", "topic", "partition"},
    "kafka_consumergroup_lag_sum": {"cluster", "consumergroup", "topic"},
    "kafka_consumergroup_members": {"cluster", "consumergroup"},
    "kafka_topic_partition_current_offset": {"cluster", "topic", "partition"},
    "kafka_topic_partition_oldest_offset": {"cluster", "topic", "partition"},
}
_MEMBER = {"member_host", "consumer_id", "client_id"}
KAFKA_LAG_EXPORTER = {
    "kafka_consumergroup_group_lag": {"cluster_name", "group", "topic", "partition"} | _MEMBER,
    "kafka_consumergroup_group_lag_seconds": {"cluster_name", "group", "topic", "partition"}
    | _MEMBER,
    "kafka_consumergroup_group_max_lag": {"cluster_name", "group"},
    "kafka_consumergroup_group_max_lag_seconds": {"cluster_name", "group"},
    "kafka_consumergroup_group_sum_lag": {"cluster_name", "group"},
}
# Their help texts, as kafka_exporter.go and Kafka Lag Exporter's Metrics.scala write them.
HELP = {
    "kafka_consumergroup_lag": "Current Approximate Lag of a ConsumerGroup at Topic/Partition",
    "kafka_consumergroup_lag_sum": "Current Approximate Lag of a ConsumerGroup at Topic for all "
    "partitions",
    "kafka_consumergroup_members": "Amount of members in a consumer group",
    "kafka_topic_partition_current_offset": "Current Offset of a Broker at Topic/Partition",
    "kafka_topic_partition_oldest_offset": "Oldest Offset of a Broker at Topic/Partition",
    "kafka_consumergroup_group_lag": "Group offset lag of a partition",
    "kafka_consumergroup_group_lag_seconds": "Group time lag of a partition",
    "kafka_consumergroup_group_max_lag": "Max group offset lag",
    "kafka_consumergroup_group_max_lag_seconds": "Max group time lag",
    "kafka_consumergroup_group_sum_lag": "Sum of group offset lag",
}

T0 = 1_800_000_000_000
# As the collector keeps it: Kafka's "/10.0.0.7" without the slash (see protocol.group_member).
OWNER = GroupMember(member_id="orders-app-3f2a", client_id="orders-app", client_host="10.0.0.7")


def _scans(count: int = 6) -> list[ScanResult]:
    """`orders` reads topic `t` (p0 behind by 10 and falling further, p1 caught up, p2 assigned
    and never committed) with two members; `audit` committed nothing on `u` (assigned only);
    `idle` is listed and has no partitions."""
    scans = []
    for i in range(count):
        ts = T0 + i * 10_000
        leo = 100 + 10 * i
        rows = [
            Sample(ts=ts, cluster="prod", group="orders", topic="t", partition=0,
                   committed_offset=90 + 5 * i, log_end_offset=leo, log_start_offset=20,
                   group_state="Stable", members=2),
            Sample(ts=ts, cluster="prod", group="orders", topic="t", partition=1,
                   committed_offset=50, log_end_offset=50, log_start_offset=0,
                   group_state="Stable", members=2),
            Sample(ts=ts, cluster="prod", group="orders", topic="t", partition=2,
                   committed_offset=None, log_end_offset=7, group_state="Stable", members=2),
            Sample(ts=ts, cluster="prod", group="audit", topic="u", partition=0,
                   committed_offset=None, log_end_offset=3, group_state="Stable", members=1),
        ]  # fmt: skip
        scans.append(
            ScanResult(
                cluster="prod",
                ts=ts,
                samples=samples_to_table(rows),
                requests={"ListGroups": 1},
                group_states={"orders": "Stable", "audit": "Stable", "idle": "Empty"},
                group_members={"orders": 2, "audit": 1, "idle": 0},
                owners={"orders": {("t", 0): OWNER, ("t", 1): OWNER}},
            )
        )
    return scans


async def _scrape(tmp_path: Path, families=None) -> str:
    scans = _scans()
    coord, _ = service(tmp_path, scans, RulesConfig(), cluster="prod")
    await drive(coord, len(scans), "prod")
    kwargs = {} if families is None else {"metric_families": families}
    app = create_app(coord, clock=lambda: T0 + 55_000, **kwargs)
    async with httpx.AsyncClient(
        transport=httpx.ASGITransport(app=app), base_url="http://notifier"
    ) as http:
        response = await http.get("/metrics")
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/plain; version=0.0.4")
    return response.text


def _families(text: str) -> dict:
    return {f.name: f for f in text_string_to_metric_families(text)}


def _values(family) -> dict[tuple, float]:
    return {tuple(sorted(s.labels.items())): s.value for s in family.samples}


def _one(family, **labels) -> float:
    (value,) = [s.value for s in family.samples if labels.items() <= s.labels.items()]
    return value


async def test_both_exporters_families_are_offered_by_default_as_they_name_and_label_them(
    tmp_path,
):
    text = await _scrape(tmp_path)
    families = _families(text)
    for name, labels in (KAFKA_EXPORTER | KAFKA_LAG_EXPORTER).items():
        family = families[name]
        assert family.type == "gauge", name
        assert family.documentation == HELP[name], name
        assert family.samples, name
        for sample in family.samples:
            assert set(sample.labels) == labels, (name, sample.labels)

    # kafka_exporter: -1 for a partition without a commit in a topic the group consumes; a
    # topic the group never committed to is left out; the sum is per group and topic.
    lag = families["kafka_consumergroup_lag"]
    assert _one(lag, consumergroup="orders", partition="0") == 150 - 115
    assert _one(lag, consumergroup="orders", partition="1") == 0
    assert _one(lag, consumergroup="orders", partition="2") == -1
    assert not [s for s in lag.samples if s.labels["consumergroup"] == "audit"]
    assert _values(families["kafka_consumergroup_lag_sum"]) == {
        (("cluster", "prod"), ("consumergroup", "orders"), ("topic", "t")): 35
    }
    members = families["kafka_consumergroup_members"]
    assert {s.labels["consumergroup"]: s.value for s in members.samples} == {
        "orders": 2, "audit": 1, "idle": 0
    }  # fmt: skip
    oldest = families["kafka_topic_partition_oldest_offset"]
    assert _one(oldest, topic="t", partition="0") == 20
    assert _one(families["kafka_topic_partition_current_offset"], topic="t", partition="0") == 150

    # Kafka Lag Exporter: each partition labelled with its member ("unknown" when none is),
    # NaN where the offset is unknown; the group's figures over the partitions it knows.
    group_lag = families["kafka_consumergroup_group_lag"]
    p0 = next(s for s in group_lag.samples if s.labels["partition"] == "0")
    assert p0.labels == {"cluster_name": "prod", "group": "orders", "topic": "t",
                         "partition": "0", "member_host": "10.0.0.7",
                         "consumer_id": "orders-app-3f2a", "client_id": "orders-app"}  # fmt: skip
    assert p0.value == 35
    p2 = next(s for s in group_lag.samples if s.labels["partition"] == "2")
    assert p2.labels["member_host"] == p2.labels["client_id"] == "unknown"
    assert p2.value != p2.value  # NaN
    seconds = _one(families["kafka_consumergroup_group_lag_seconds"], group="orders",
                   partition="0")  # fmt: skip
    assert seconds == pytest.approx(35)  # offset 115 was the end 35 s before the last scan
    assert _one(families["kafka_consumergroup_group_max_lag"], group="orders") == 35
    assert _one(families["kafka_consumergroup_group_sum_lag"], group="orders") == 35
    assert _one(families["kafka_consumergroup_group_max_lag_seconds"], group="orders") == seconds
    assert _one(families["kafka_consumergroup_group_topic_sum_lag"], group="orders") == 35
    latest = families["kafka_partition_latest_offset"]
    assert _one(latest, cluster_name="prod", topic="t", partition="0") == 150

    # notifier's own families stay, whatever the switch says.
    assert _one(families["notifier_group_lag"], consumergroup="orders") == 35
    assert _one(families["notifier_group_max_lag_seconds"], consumergroup="orders") == seconds
    assert "notifier_scans" in families and "notifier_group_status" in families


@pytest.mark.parametrize(
    ("chosen", "present", "absent"),
    [
        (["kafka_exporter"], KAFKA_EXPORTER, KAFKA_LAG_EXPORTER),
        (["kafka_lag_exporter"], KAFKA_LAG_EXPORTER, KAFKA_EXPORTER),
        ([], {}, KAFKA_EXPORTER | KAFKA_LAG_EXPORTER),
    ],
)
async def test_the_config_switch_chooses_which_exporters_families(
    tmp_path, chosen, present, absent
):
    config = parse_service_config(
        {"clusters": [{"name": "prod", "bootstrap_servers": "k:9092"}],
         "metrics": {"families": chosen}}, "notifier.yaml"
    )  # fmt: skip
    families = _families(await _scrape(tmp_path, config.metrics.families))
    assert set(present) <= set(families)
    assert not set(absent) & set(families)
    assert "notifier_group_status" in families and "notifier_scans" in families


def test_an_unknown_family_in_the_switch_is_an_error_naming_file_field_and_choices():
    with pytest.raises(ConfigError) as caught:
        parse_service_config(
            {"clusters": [{"name": "prod", "bootstrap_servers": "k:9092"}],
             "metrics": {"families": ["kafka_exporter", "jmx_exporter"]}}, "notifier.yaml"
        )  # fmt: skip
    message = str(caught.value)
    assert "notifier.yaml" in message and "metrics.families[1]" in message
    assert "'kafka_exporter' or 'kafka_lag_exporter'" in message and "'jmx_exporter'" in message
    assert "'burrow'" in message


def test_the_switch_takes_one_family_as_a_string_and_defaults_to_all_three():
    base = {"clusters": [{"name": "prod", "bootstrap_servers": "k:9092"}]}
    assert parse_service_config(base, "f").metrics.families == [
        "burrow", "kafka_exporter", "kafka_lag_exporter"
    ]  # fmt: skip
    one = parse_service_config(base | {"metrics": {"families": "kafka_exporter"}}, "f")
    assert one.metrics.families == ["kafka_exporter"]


# Burrow's families as its httpserver/prometheus.go registers them: names, label sets, help.
BURROW = {
    "burrow_kafka_consumer_lag_total": ({"cluster", "consumer_group"},
        "The sum of all partition current lag values for the group"),
    "burrow_kafka_consumer_status": ({"cluster", "consumer_group"},
        "The status of the consumer group. It is calculated from the highest status for the "
        "individual partitions. Statuses are an index list from NOTFOUND, OK, WARN, or ERR"),
    "burrow_kafka_topic_partition_status": ({"cluster", "consumer_group", "topic", "partition"},
        "The status of topic partition. It is calculated from the highest status for the "
        "individual partitions. Statuses are an index list from OK, WARN, STOP, STALL, REWIND"),
    "burrow_kafka_consumer_current_offset": ({"cluster", "consumer_group", "topic", "partition"},
        "Latest offset that Burrow is storing for this partition"),
    "burrow_kafka_consumer_partition_lag": ({"cluster", "consumer_group", "topic", "partition"},
        "Number of messages the consumer group is behind by for a partition as reported by "
        "Burrow"),
    "burrow_kafka_topic_partition_offset": ({"cluster", "topic", "partition"},
        "Latest offset the topic that Burrow is storing for this partition"),
}  # fmt: skip


async def test_burrows_families_with_burrows_names_labels_and_values(tmp_path):
    """Values as Burrow's exporter sets them from the group's full status: statuses as the
    index in NOTFOUND, OK, WARN, ERR, STOP, STALL, REWIND; every partition's current lag (0
    when unknown); the window's last offset and the partition's status only where its window
    is complete; the topic's latest offsets."""
    scans = _scans()
    rules = RulesConfig.model_validate({"window": {"intervals": 3}})
    coord, _ = service(tmp_path, scans, rules, cluster="prod")
    await drive(coord, len(scans), "prod")
    app = create_app(coord, clock=lambda: T0 + 55_000)
    async with httpx.AsyncClient(
        transport=httpx.ASGITransport(app=app), base_url="http://notifier"
    ) as http:
        text = (await http.get("/metrics")).text
        lag = (await http.get("/v3/kafka/prod/consumer/orders/lag")).json()["status"]
    families = _families(text)
    for name, (labels, help_text) in BURROW.items():
        family = families[name]
        assert family.type == "gauge" and family.documentation == help_text, name
        assert family.samples, name
        for sample in family.samples:
            assert set(sample.labels) == labels, (name, sample.labels)

    # The same figures as Burrow's /lag for the group: p0 is WARN (lag growing), complete.
    assert lag["status"] == "WARN" and lag["partitions"][0]["status"] == "WARN"
    assert _one(families["burrow_kafka_consumer_status"], consumer_group="orders") == 2
    assert _one(families["burrow_kafka_consumer_status"], consumer_group="audit") == 1
    assert _one(families["burrow_kafka_consumer_lag_total"], consumer_group="orders") == 35
    partition_lag = families["burrow_kafka_consumer_partition_lag"]
    assert {s.labels["partition"]: s.value for s in partition_lag.samples
            if s.labels["consumer_group"] == "orders"} == {"0": 35, "1": 0, "2": 0}  # fmt: skip
    # Only p0's window (3 commits) is complete: offset and status for it alone.
    current = families["burrow_kafka_consumer_current_offset"]
    assert _values(current) == {(("cluster", "prod"), ("consumer_group", "orders"),
                                 ("partition", "0"), ("topic", "t")): lag["partitions"][0]["end"]
                                ["offset"]}  # fmt: skip
    status = families["burrow_kafka_topic_partition_status"]
    assert [(s.labels["partition"], s.value) for s in status.samples] == [("0", 2)]
    offsets = families["burrow_kafka_topic_partition_offset"]
    assert _one(offsets, topic="t", partition="0") == 150
    assert _one(offsets, topic="u", partition="0") == 3

    # Switched off, they are gone.
    only = _families(await _scrape(tmp_path / "ke", ["kafka_exporter"]))
    assert not [name for name in only if name.startswith("burrow_")]


# kafka_exporter's broker and topic families (kafka_exporter.go: the Desc of each).
KAFKA_EXPORTER_LAYOUT = {
    "kafka_brokers": ({"cluster"}, "Number of Brokers in the Kafka Cluster."),
    "kafka_broker_info": ({"cluster", "id", "address"}, "Information about the Kafka Broker."),
    "kafka_topic_partitions": ({"cluster", "topic"}, "Number of partitions for this Topic"),
    "kafka_topic_partition_leader": ({"cluster", "topic", "partition"},
                                     "Leader Broker ID of this Topic/Partition"),
    "kafka_topic_partition_replicas": ({"cluster", "topic", "partition"},
                                       "Number of Replicas for this Topic/Partition"),
    "kafka_topic_partition_in_sync_replica": ({"cluster", "topic", "partition"},
                                              "Number of In-Sync Replicas for this "
                                              "Topic/Partition"),
    "kafka_topic_partition_leader_is_preferred": ({"cluster", "topic", "partition"},
                                                  "1 if Topic/Partition is using the Preferred "
                                                  "Broker"),
    "kafka_topic_partition_under_replicated_partition": ({"cluster", "topic", "partition"},
                                                         "1 if Topic/Partition is under "
                                                         "Replicated"),
}  # fmt: skip

LAYOUT = ClusterLayout(
    brokers={1: "kafka-1:9092", 2: "kafka-2:9092", 3: "kafka-3:9092"},
    topics={
        # t/0 led by its preferred replica, all in sync; t/1 led by its second replica with
        # one replica out of sync; t/2 without a leader; `quiet` is read by no group.
        "t": {0: PartitionLayout(1, (1, 2, 3), (1, 2, 3)),
              1: PartitionLayout(3, (2, 3), (3,)),
              2: PartitionLayout(-1, (2, 1), ())},
        "quiet": {0: PartitionLayout(2, (2,), (2,))},
    },
)  # fmt: skip


async def test_kafka_exporters_broker_and_topic_families_from_the_metadata(tmp_path):
    scans = [dataclasses.replace(scan, layout=LAYOUT) for scan in _scans()]
    coord, _ = service(tmp_path, scans, RulesConfig(), cluster="prod")
    await drive(coord, len(scans), "prod")
    app = create_app(coord, clock=lambda: T0 + 55_000)
    async with httpx.AsyncClient(
        transport=httpx.ASGITransport(app=app), base_url="http://notifier"
    ) as http:
        text = (await http.get("/metrics")).text
        assert (await http.get("/metrics")).text == text  # drawn once per metadata
    families = _families(text)
    for name, (labels, help_text) in KAFKA_EXPORTER_LAYOUT.items():
        family = families[name]
        assert family.type == "gauge" and family.documentation == help_text, name
        for sample in family.samples:
            assert set(sample.labels) == labels, (name, sample.labels)
    assert _one(families["kafka_brokers"], cluster="prod") == 3
    assert {(s.labels["id"], s.labels["address"]) for s in families["kafka_broker_info"].samples} \
        == {("1", "kafka-1:9092"), ("2", "kafka-2:9092"), ("3", "kafka-3:9092")}  # fmt: skip
    assert _values(families["kafka_topic_partitions"]) == {
        (("cluster", "prod"), ("topic", "t")): 3, (("cluster", "prod"), ("topic", "quiet")): 1
    }  # fmt: skip

    def per_partition(name: str) -> dict[tuple[str, str], float]:
        return {(s.labels["topic"], s.labels["partition"]): s.value
                for s in families[name].samples}  # fmt: skip

    assert per_partition("kafka_topic_partition_leader") == {
        ("t", "0"): 1, ("t", "1"): 3, ("quiet", "0"): 2
    }  # fmt: skip
    assert per_partition("kafka_topic_partition_replicas") == {
        ("t", "0"): 3, ("t", "1"): 2, ("t", "2"): 2, ("quiet", "0"): 1
    }  # fmt: skip
    assert per_partition("kafka_topic_partition_in_sync_replica") == {
        ("t", "0"): 3, ("t", "1"): 1, ("t", "2"): 0, ("quiet", "0"): 1
    }  # fmt: skip
    assert per_partition("kafka_topic_partition_leader_is_preferred") == {
        ("t", "0"): 1, ("t", "1"): 0, ("t", "2"): 0, ("quiet", "0"): 1
    }  # fmt: skip
    assert per_partition("kafka_topic_partition_under_replicated_partition") == {
        ("t", "0"): 0, ("t", "1"): 1, ("t", "2"): 1, ("quiet", "0"): 0
    }  # fmt: skip

    # Kafka Lag Exporter's poll time: how long the last scan took, in ms.
    poll = families["kafka_consumergroup_poll_time_ms"]
    assert poll.documentation == "Group time poll time"
    (sample,) = poll.samples
    assert sample.labels == {"cluster_name": "prod"}
    duration = coord.clusters["prod"].metrics.last_duration_s
    assert sample.value == round(duration * 1000)

    # promtool finds nothing in them (only the exporters' own names it always finds).
    assert _promtool(text) == sorted(BURROW_TOTAL + KAFKA_EXPORTER_SUMS + POLL_TIME_MS)

    # Without kafka_exporter's families chosen, none of them.
    only = _families(await _scrape(tmp_path / "kle", ["kafka_lag_exporter"]))
    assert not set(KAFKA_EXPORTER_LAYOUT) & set(only)


_NAME = re.compile(r"^[a-zA-Z_:][a-zA-Z0-9_:]*$")
_LABEL = re.compile(r"^[a-zA-Z_][a-zA-Z0-9_]*$")
_NOT_BASE_UNIT = re.compile(
    r"_(milli|micro|nano)?(seconds?|minutes?|hours?|days?|weeks?|ms|us|ns|sec|min)_"
    r"|_(milliseconds|microseconds|nanoseconds|minutes|hours|days|kilobytes|megabytes)(_|$)"
)
_ABBREVIATED_UNITS = {"s", "ms", "us", "ns", "sec", "b", "kb", "mb", "gb", "tb", "pb", "m", "h",
                      "d"}  # fmt: skip
"""promtool's list (client_golang's promlint, lintUnitAbbreviations)."""
_SAMPLE = re.compile(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{.*\})? (\S+)$")


def lint_exposition(text: str) -> list[str]:
    """promtool's `check metrics` rules, for machines without promtool: every family has HELP
    and TYPE before its samples and its samples together, counters end in _total, names and
    label names are valid, no series twice, every value a number."""
    problems: list[str] = []
    helped: set[str] = set()
    typed: dict[str, str] = {}
    finished: set[str] = set()
    current: str | None = None
    for line in text.splitlines():
        if line.startswith("# HELP "):
            name, _, help_text = line[7:].partition(" ")
            if not help_text:
                problems.append(f"{name} empty HELP")
            helped.add(name)
        elif line.startswith("# TYPE "):
            name, _, kind = line[7:].partition(" ")
            typed[name] = kind
            if kind == "counter" and not name.endswith("_total"):
                problems.append(f'{name} counter metrics should have "_total" suffix')
            if set(name.split("_")) & _ABBREVIATED_UNITS:
                problems.append(f"{name} metric names should not contain abbreviated units")
            if kind != "counter" and name.endswith("_total"):
                problems.append(f'{name} non-counter metrics should not have "_total" suffix')
            reserved = [s for s in ("_sum", "_count", "_bucket") if name.endswith(s)]
            if reserved and kind not in ("histogram", "summary"):
                problems.append(f"{name} non-histogram and non-summary metrics should not have "
                                f"\"{reserved[0]}\" suffix")  # fmt: skip
            if _NOT_BASE_UNIT.search(name) or name != name.lower() or ":" in name:
                problems.append(f"{name} use base units, snake_case and no colons")
            if not _NAME.match(name):
                problems.append(f"{name} invalid metric name")
            if current is not None and current != name:
                finished.add(current)
            current = name
        elif line and not line.startswith("#"):
            match = _SAMPLE.match(line)
            if match is None:
                problems.append(f"unparseable line {line!r}")
                continue
            name = match.group(1)
            if name != current or name in finished:
                problems.append(f"{name} sample outside its family's block")
            if name not in helped or name not in typed:
                problems.append(f"{name} no HELP or TYPE")
            try:
                float(match.group(3))
            except ValueError:
                problems.append(f"{name} value {match.group(3)!r} is not a number")
    seen: set[tuple] = set()
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            for label in sample.labels:
                if not _LABEL.match(label) or label.startswith("__"):
                    problems.append(f"{sample.name} invalid label name {label!r}")
            key = (sample.name, tuple(sorted(sample.labels.items())))
            if key in seen:
                problems.append(f"{sample.name}{sample.labels}: duplicate series")
            seen.add(key)
    return problems


# kafka_exporter's and Burrow's own names break two of promtool's lint rules; they are kept
# as those exporters name them (dashboards query them), and nothing else may.
KAFKA_EXPORTER_SUMS = [
    f'{name} non-histogram and non-summary metrics should not have "_sum" suffix'
    for name in ("kafka_consumergroup_current_offset_sum", "kafka_consumergroup_lag_sum")
]
BURROW_TOTAL = ['burrow_kafka_consumer_lag_total non-counter metrics should not have "_total" '
                'suffix']  # fmt: skip
POLL_TIME_MS = ["kafka_consumergroup_poll_time_ms metric names should not contain abbreviated "
                "units"]  # fmt: skip


def _promtool(text: str) -> list[str]:
    """What `promtool check metrics` says of ``text`` (Debian's `prometheus` package ships it;
    without it, :func:`lint_exposition`'s rules stand in)."""
    promtool = shutil.which("promtool")
    if promtool is None:
        return lint_exposition(text)
    checked = subprocess.run([promtool, "check", "metrics"], input=text, capture_output=True,
                             text=True, timeout=60)  # fmt: skip
    assert checked.returncode in (0, 3), checked.stderr  # 3: lint problems, listed
    return sorted(line for line in (checked.stdout + checked.stderr).splitlines() if line)


async def test_the_exposition_passes_promtools_checks(tmp_path):
    both = await _scrape(tmp_path / "both")
    theirs = sorted(BURROW_TOTAL + KAFKA_EXPORTER_SUMS + POLL_TIME_MS)
    assert sorted(lint_exposition(both)) == theirs
    assert _promtool(both) == theirs
    own = await _scrape(tmp_path / "own", [])
    assert lint_exposition(own) == []
    assert _promtool(own) == []
    lag_exporter = await _scrape(tmp_path / "kle", ["kafka_lag_exporter"])
    assert lint_exposition(lag_exporter) == POLL_TIME_MS
    assert _promtool(lag_exporter) == POLL_TIME_MS


def test_the_lint_finds_what_promtool_finds():
    bad = ("# HELP scans Scans.\n# TYPE scans counter\nscans 1\n"
           "# TYPE lag gauge\nlag{group=\"a\"} 1\nlag{group=\"a\"} 2\n")  # fmt: skip
    problems = lint_exposition(bad)
    assert 'scans counter metrics should have "_total" suffix' in problems
    assert "lag no HELP or TYPE" in problems
    assert any("duplicate series" in p for p in problems)
