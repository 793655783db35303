"""/metrics as the dashboards built on kafka_exporter and Kafka Lag Exporter read it: their
families by name, labels, type and help text, with the values those exporters would show; the
config switch choosing which; and an exposition that passes promtool's checks."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from notifier.api import create_app
from notifier.collect import ScanResult
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
             "metrics": {"families": ["kafka_exporter", "burrow"]}}, "notifier.yaml"
        )  # fmt: skip
    message = str(caught.value)
    assert "notifier.yaml" in message and "metrics.families[1]" in message
    assert "'kafka_exporter' or 'kafka_lag_exporter'" in message and "'burrow'" in message


def test_the_switch_takes_one_family_as_a_string_and_defaults_to_both():
    base = {"clusters": [{"name": "prod", "bootstrap_servers": "k:9092"}]}
    assert parse_service_config(base, "f").metrics.families == [
        "kafka_exporter", "kafka_lag_exporter"
    ]  # fmt: skip
    one = parse_service_config(base | {"metrics": {"families": "kafka_exporter"}}, "f")
    assert one.metrics.families == ["kafka_exporter"]


_NAME = re.compile(r"^[a-zA-Z_:][a-zA-Z0-9_:]*$")
_LABEL = re.compile(r"^[a-zA-Z_][a-zA-Z0-9_]*$")
_NOT_BASE_UNIT = re.compile(
    r"_(milli|micro|nano)?(seconds?|minutes?|hours?|days?|weeks?|ms|us|ns|sec|min)_"
    r"|_(milliseconds|microseconds|nanoseconds|minutes|hours|days|kilobytes|megabytes)(_|$)"
)
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


# kafka_exporter's own names break one of promtool's lint rules; they are kept as it names
# them (dashboards query them), and nothing else may.
KAFKA_EXPORTER_SUMS = [
    f'{name} non-histogram and non-summary metrics should not have "_sum" suffix'
    for name in ("kafka_consumergroup_current_offset_sum", "kafka_consumergroup_lag_sum")
]


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
    assert sorted(lint_exposition(both)) == KAFKA_EXPORTER_SUMS
    assert _promtool(both) == KAFKA_EXPORTER_SUMS
    lag_exporter = await _scrape(tmp_path / "kle", ["kafka_lag_exporter"])
    assert lint_exposition(lag_exporter) == []
    assert _promtool(lag_exporter) == []


def test_the_lint_finds_what_promtool_finds():
    bad = ("# HELP scans Scans.\n# TYPE scans counter\nscans 1\n"
           "# TYPE lag gauge\nlag{group=\"a\"} 1\nlag{group=\"a\"} 2\n")  # fmt: skip
    problems = lint_exposition(bad)
    assert 'scans counter metrics should have "_total" suffix' in problems
    assert "lag no HELP or TYPE" in problems
    assert any("duplicate series" in p for p in problems)
