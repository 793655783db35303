"""The backtest: grid expansion, a hand-written history whose incidents are known, matching
edge cases, Spark against the single-process replay row for row, every input error, the CLI.

Spark tests share one local[2] session (module fixture); the whole file runs in well under
three minutes.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import yaml
from click.testing import CliRunner

from notifier.backtest import (
    COUNTER_COLUMNS,
    INCIDENT_COLUMNS,
    BacktestRequest,
    GridConfig,
    HistorySpan,
    ReplayOptions,
    ReplayOutput,
    SampleArrays,
    TaskPlan,
    aggregation_scope,
    expand_grid,
    match_incidents,
    parse_grid,
    plan_tasks,
    read_history_spark,
    recommend,
    replay,
    rules_yaml,
    run_backtest,
    spark_replay,
    spark_scans,
    summarize,
)
from notifier.backtest.__main__ import build_parser
from notifier.backtest.job import _scan_calendar, default_slo_for
from notifier.backtest.replay import _sorted_incidents
from notifier.cli import main
from notifier.config import ConfigError
from notifier.history import (
    HistoryEmptyError,
    HistoryNotFoundError,
    HistorySchemaError,
    IncidentsError,
    read_history,
)
from notifier.notify.config import parse_notify
from notifier.rules import load_rules, parse_rules
from notifier.synth import synthesize
from notifier.types import SAMPLE_SCHEMA, Sample, samples_to_table

ROOT = Path(__file__).resolve().parents[1]
MINUTE = 60_000
T0 = int(datetime(2026, 3, 2, tzinfo=UTC).timestamp() * 1000)
SCANS = 110

# --------------------------------------------------------------------------------------------
# A hand-written history: one partition per group, the log end grows 100 per one-minute scan,
# windows of 4 scans, Burrow's rules only. What each group does (t = scan number):
#
#   stall  committed frozen at t=9's offset for t=10..19, members present -> STALL (ERR)
#   slow   lag 5, 10, ... 50 for t=30..39 (offsets still move)          -> WARN if allowed_lag 0
#   gone   lag 10 .. 80 for t=40..47, then absent from every scan        -> WARN, closed as gone
#   big    lag 50, 100, ... 500 for t=50..59                             -> WARN at either lag
#   blip   lag 10 .. 60 for t=70..75 (not labelled)                      -> a false positive
#   flap   lag 10 .. 60 for t=85..90, caught up at 91, lag again 92..98  -> WARN, OK, WARN
#   quiet  always caught up (labelled anyway: a miss for every config)


def lag_of(group: str, t: int) -> int:
    ramps = {
        "slow": (30, 39, 5, 29),
        "gone": (40, 47, 10, 39),
        "big": (50, 59, 50, 49),
        "blip": (70, 75, 10, 69),
    }
    if group in ramps:
        first, last, step, base = ramps[group]
        return step * (t - base) if first <= t <= last else 0
    if group == "flap":
        if 85 <= t <= 90:
            return 10 * (t - 84)
        if 92 <= t <= 98:
            return 10 * (t - 91)
    return 0


GROUPS = ("stall", "slow", "gone", "big", "blip", "flap", "quiet")
RULES = {"window": {"intervals": 4}, "burrow": {"allowed_lag": 0, "minimum_complete": 1.0}}
GRID = {"burrow.allowed_lag": [0, 100]}
LABELS = [  # cluster, group, first scan, last scan, kind
    ("c1", "stall", 10, 19, "stalled"),
    ("c1", "slow", 30, 39, "lagging"),
    ("c1", "big", 50, 59, "lagging"),
    ("c1", "quiet", 5, 8, "stalled"),
]


def at(t: int) -> int:
    return T0 + t * MINUTE


def handmade_samples() -> list[Sample]:
    samples = []
    for t in range(SCANS):
        log_end = 1000 + 100 * t
        for group in GROUPS:
            if group == "gone" and t > 47:
                continue
            committed = log_end - lag_of(group, t)
            if group == "stall" and 10 <= t <= 19:
                committed = 1000 + 100 * 9
            samples.append(
                Sample(at(t), "c1", group, f"t-{group}", 0, committed, log_end, 0, "Stable", 1, 7)
            )
    return samples


# Would-be incidents: (config ids, group, rule, status, first scan, closing scan, close reason)
EXPECTED = [
    ((0, 1, 2), "stall", "burrow", "ERR", 13, 20, "recovered"),
    ((0, 1), "slow", "burrow", "WARN", 33, 40, "recovered"),
    ((0, 1), "gone", "burrow", "WARN", 43, 48, "gone"),
    ((0, 1), "big", "burrow", "WARN", 53, 60, "recovered"),
    ((2,), "big", "burrow", "WARN", 55, 60, "recovered"),
    ((0, 1), "blip", "burrow", "WARN", 73, 76, "recovered"),
    ((0, 1), "flap", "burrow", "WARN", 88, 91, "recovered"),
    ((0, 1), "flap", "burrow", "WARN", 95, 99, "recovered"),
]


def expected_incidents() -> pd.DataFrame:
    rows = [
        (config_id, "c1", group, rule, status, at(first), at(last), reason)
        for configs, group, rule, status, first, last, reason in EXPECTED
        for config_id in configs
    ]
    frame = pd.DataFrame(rows, columns=list(INCIDENT_COLUMNS))
    return _sorted_incidents(frame)


@pytest.fixture(scope="module")
def configs() -> list[GridConfig]:
    return expand_grid(parse_rules(RULES), GRID)


@pytest.fixture(scope="module")
def handmade(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("handmade")
    history = root / "history"
    part = history / "date=2026-03-02"
    part.mkdir(parents=True)
    pq.write_table(samples_to_table(handmade_samples()), part / "part-0000000000000-a.parquet")
    labels = pd.DataFrame(
        [
            (
                c,
                g,
                pd.Timestamp(at(a), unit="ms", tz="UTC"),
                pd.Timestamp(at(b), unit="ms", tz="UTC"),
                k,
            )
            for c, g, a, b, k in LABELS
        ],
        columns=["cluster", "group", "start", "end", "kind"],
    )
    labels["start"] = labels["start"].dt.strftime("%Y-%m-%dT%H:%M:%SZ")
    labels["end"] = labels["end"].dt.strftime("%Y-%m-%dT%H:%M:%SZ")
    labels.to_csv(history / "incidents.csv", index=False)
    rules = root / "rules.yaml"
    rules.write_text(yaml.safe_dump(RULES))
    grid = root / "grid.yaml"
    grid.write_text(yaml.safe_dump({"parameters": GRID}))
    return {"history": history, "rules": rules, "grid": grid, "root": root}


def make_request(paths: dict[str, Path], out: Path, **changes: Any) -> BacktestRequest:
    fields: dict[str, Any] = {
        "history": str(paths["history"]),
        "rules": paths["rules"],
        "grid": paths["grid"],
        "out": out,
        "incidents": paths["history"] / "incidents.csv",
        "interval_s": 60.0,
        "warmup_s": 0.0,
        "engine": "local",
    }
    fields.update(changes)
    return BacktestRequest(**fields)


def quiet(_: str) -> None:
    """Swallow progress lines."""


# --------------------------------------------------------------------------------------------
# Spark


# --------------------------------------------------------------------------------------------
# The grid


def test_grid_is_config_zero_then_the_cartesian_product_in_file_order() -> None:
    rules = load_rules(ROOT / "rules.yaml")
    grid = parse_grid(
        {
            "parameters": {
                "burrow.minimum_complete": [0.0, 0.5, 1.0],
                "burrow.allowed_lag": [0, 100],
                "rules.lag-seconds-critical.for": ["2m", "10m"],
            }
        }
    )
    configs = expand_grid(rules, grid)
    assert [c.config_id for c in configs] == list(range(13))
    assert configs[0].rules == rules
    assert configs[0].parameters == {
        "burrow.minimum_complete": 1.0,
        "burrow.allowed_lag": 0,
        "rules.lag-seconds-critical.for": 120.0,
    }
    combos = [tuple(c.parameters.values()) for c in configs[1:]]
    assert combos[:3] == [(0.0, 0, 120.0), (0.0, 0, 600.0), (0.0, 100, 120.0)]
    assert combos[-1] == (1.0, 100, 600.0)
    assert len(set(combos)) == 12
    last = configs[-1].rules
    assert last.burrow.allowed_lag == 100 and last.rule("lag-seconds-critical").for_ == 600.0
    untouched = [r for r in rules.rules if r.name != "lag-seconds-critical"]
    assert [r for r in last.rules if r.name != "lag-seconds-critical"] == untouched


def test_an_unknown_parameter_is_named() -> None:
    rules = load_rules(ROOT / "rules.yaml")
    with pytest.raises(ConfigError) as caught:
        expand_grid(rules, {"burrow.allowed_lagg": [1], "rules.nope.threshold": [1]}, "g.yaml")
    text = str(caught.value)
    assert "g.yaml" in text and "2 problem(s)" in text
    assert "parameters.burrow.allowed_lagg: no such parameter" in text
    assert "parameters.rules.nope.threshold: no such parameter" in text and "no rule named" in text


def test_values_are_judged_together_and_bad_ones_named() -> None:
    rules = load_rules(ROOT / "rules.yaml")
    # stuck-rebalance needs 6 samples: a window of 4 is only valid with fewer samples.
    grid = {"window.intervals": [4, 10], "rules.stuck-rebalance.samples": [3]}
    assert [c.parameters["window.intervals"] for c in expand_grid(rules, grid)] == [10, 4, 10]
    with pytest.raises(ConfigError) as caught:
        expand_grid(rules, {"burrow.minimum_complete": [0.5, 2.0]}, "g.yaml")
    assert "configuration 2 (burrow.minimum_complete=2.0)" in str(caught.value)
    assert "less than or equal to 1" in str(caught.value)


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({"burrow.allowed_lag": [0]}, "expected a mapping `parameters:"),
        ({"parameters": {"burrow.allowed_lag": 5}}, "expected a non-empty list"),
        ({"parameters": {"burrow.allowed_lag": []}}, "expected a non-empty list"),
        ({"parameters": {"burrow.allowed_lag": [1, 1]}}, "listed twice"),
        ({"parameters": {}, "extra": 1}, "parameters"),
    ],
)
def test_grid_file_shape_errors(data: Any, message: str) -> None:
    with pytest.raises(ConfigError, match=re.escape(message)):
        parse_grid(data, "grid.yaml")


def test_task_plan_is_one_large_task_per_core() -> None:
    configs = expand_grid(parse_rules(RULES), {"burrow.allowed_lag": [0, 1, 2, 3, 4, 5, 6]})
    small = plan_tasks(200, 100_000, 2, configs)  # a small fleet: split the configurations
    assert (small.buckets, len(small.slices)) == (1, 2)
    assert sorted(k for chunk in small.slices for k in chunk) == list(range(8))
    big = plan_tasks(10_000, 10_000_000, 2, configs)  # 5,000 rows a scan per task
    assert (big.buckets, len(big.slices)) == (2, 1)
    huge = plan_tasks(10_000, 100_000_000, 2, configs)  # memory: 20M samples a task at most
    assert (huge.buckets, len(huge.slices)) == (5, 1)
    assert plan_tasks(10_000, 10_000_000, 2, configs, scope="all").buckets == 1
    assert plan_tasks(200, 100_000, 2, configs, buckets=3).tasks == 3


# --------------------------------------------------------------------------------------------
# The hand-written history, single process


def test_each_configuration_opens_exactly_the_known_incidents(configs: list[GridConfig]) -> None:
    samples = SampleArrays.from_arrow(samples_to_table(handmade_samples()))
    output = replay(samples, configs, ReplayOptions(scan_interval_s=60))
    pd.testing.assert_frame_equal(output.incidents, expected_incidents())
    counters = output.counters.set_index("config_id")
    # Each incident: an open, then a resolve (default route: group_wait 0, repeat 4h).
    assert counters.loc[0, "notifications"] == 14 and counters.loc[2, "notifications"] == 4
    assert counters.loc[0, "opens"] == 7 and counters.loc[0, "resolves"] == 7
    assert counters.loc[0, "repeats"] == 0 and counters.loc[0, "escalations"] == 0
    assert (counters["samples"] == len(samples)).all()
    # Lag in seconds passes 300 s only for the stall, from t=15 (6 scans behind) to t=19.
    assert output.breaches.values.tolist() == [["c1", "stall", at(15), at(19)]]
    assert len(output.groups) == len(GROUPS)


def test_a_row_written_twice_counts_once(configs: list[GridConfig]) -> None:
    samples = handmade_samples()
    doubled = SampleArrays.from_arrow(samples_to_table(samples + samples[100:300]))
    output = replay(doubled, configs, ReplayOptions(scan_interval_s=60))
    pd.testing.assert_frame_equal(output.incidents, expected_incidents())


def test_a_group_alone_in_a_task_still_sees_every_scan(configs: list[GridConfig]) -> None:
    """Its incident closes as gone at the first scan without it, as in the full replay."""
    table = samples_to_table(handmade_samples())
    alone = table.filter(pa.compute.equal(table.column("group"), "gone"))
    calendar = {"c1": np.array([at(t) for t in range(SCANS)], dtype=np.int64)}
    output = replay(SampleArrays.from_arrow(alone), configs, ReplayOptions(60), calendar)
    expected = expected_incidents()
    pd.testing.assert_frame_equal(
        output.incidents, expected[expected["group"] == "gone"].reset_index(drop=True)
    )
    without = replay(SampleArrays.from_arrow(alone), configs, ReplayOptions(60))
    assert (without.incidents["end_ms"] == -1).all()  # never told it was gone: still open


def test_scores_and_recommendation_on_the_hand_written_history(
    handmade: dict[str, Path], tmp_path: Path
) -> None:
    result = run_backtest(make_request(handmade, tmp_path / "out"), echo=quiet)
    summary = result.summary.set_index("config_id")
    first, strict = summary.loc[0], summary.loc[2]
    assert (first["incidents"], first["notifications"], first["flaps"]) == (7, 14, 1)
    assert first["alert_minutes"] == 7 + 7 + 5 + 7 + 3 + 3 + 4
    assert (first["tp"], first["fp"], first["fn"]) == (3, 4, 1)
    assert first["precision"] == pytest.approx(3 / 7, abs=1e-4) and first["recall"] == 0.75
    assert first["delay_p50_s"] == 180 and first["delay_p90_s"] == 180
    assert (strict["incidents"], strict["notifications"], strict["flaps"]) == (2, 4, 0)
    assert (strict["tp"], strict["fp"], strict["fn"]) == (2, 0, 2)
    assert strict["precision"] == 1.0 and strict["recall"] == 0.5
    assert strict["delay_p50_s"] == 240 and strict["delay_p90_s"] == 288
    assert summary["slo_breaches"].eq(1).all() and summary["slo_missed"].eq(0).all()
    assert summary.loc[1].drop("recommended").equals(first.drop("recommended"))
    assert result.span.days == pytest.approx((SCANS - 1) / (24 * 60))
    # No configuration reaches recall 0.95: the best recall wins, and says so.
    assert result.recommendation.config_id == 0 and not result.recommendation.met
    assert "no configuration reaches recall 0.95" in result.recommendation.reason
    alerts = pd.read_parquet(result.files["alerts.parquet"])
    assert len(alerts) == 16 and alerts["matched"].sum() == 3 + 3 + 2
    lenient = run_backtest(make_request(handmade, tmp_path / "out2", recall_target=0.5), echo=quiet)
    assert lenient.recommendation.config_id == 2 and lenient.recommendation.met
    recommended = load_rules(lenient.files["recommended-rules.yaml"])
    assert recommended.burrow.allowed_lag == 100 and recommended.window.intervals == 4


def test_warm_up_and_from_count_only_what_opens_after(
    handmade: dict[str, Path], tmp_path: Path
) -> None:
    warm = run_backtest(make_request(handmade, tmp_path / "w", warmup_s=30 * 60), echo=quiet)
    assert warm.span.counted_from_ms == T0 + 109 * MINUTE // 4  # a quarter of the history
    # The stall (opened t=13) no longer counts, nor does its label; the slow lag does.
    first = warm.summary.set_index("config_id").loc[0]
    assert (first["incidents"], first["tp"], first["fn"]) == (6, 2, 0)
    assert len(warm.labels) == 2
    ranged = run_backtest(
        make_request(handmade, tmp_path / "r", start="2026-03-02T00:50:00Z", warmup_s=600),
        echo=quiet,
    )
    assert ranged.span.start_ms == at(40) and ranged.span.counted_from_ms == at(50)
    opened = ranged.alerts.loc[ranged.alerts["config_id"] == 0, "start_ms"]
    assert sorted(opened) == [at(53), at(73), at(88), at(95)]


# --------------------------------------------------------------------------------------------
# Matching


def _alerts(*starts: int, group: str = "g", ends: tuple[int, ...] | None = None) -> pd.DataFrame:
    ends = ends or tuple(s + MINUTE for s in starts)
    return pd.DataFrame(
        {
            "config_id": 0,
            "cluster": "c",
            "group": group,
            "start_ms": list(starts),
            "end_ms": list(ends),
        }
    )


LABEL = pd.DataFrame(
    {"label_id": [0], "cluster": ["c"], "group": ["g"], "start_ms": [T0], "end_ms": [T0 + 600_000]}
)


@pytest.mark.parametrize(
    ("start", "matched"),
    [
        (T0 - MINUTE, True),  # exactly at start - tolerance
        (T0 - MINUTE - 1, False),  # just before it
        (T0 + 600_000, True),  # exactly at the end
        (T0 + 600_001, False),  # after the end
        (T0 + 1, True),
    ],
)
def test_matching_window_edges(start: int, matched: bool) -> None:
    result = match_incidents(_alerts(start), LABEL, tolerance_ms=MINUTE)
    assert result.alert_matched.tolist() == [matched]
    assert len(result.first) == int(matched)


def test_matching_needs_the_same_cluster_and_group() -> None:
    result = match_incidents(_alerts(T0 + 1, group="other"), LABEL, tolerance_ms=MINUTE)
    assert not result.alert_matched.any() and result.first.empty


def test_two_would_be_incidents_for_one_label_count_once_from_the_first() -> None:
    alerts = _alerts(T0 + 300_000, T0 - 30_000)
    result = match_incidents(alerts, LABEL, tolerance_ms=MINUTE)
    assert result.alert_matched.tolist() == [True, True]
    assert result.first.values.tolist() == [[0, 0, T0 - 30_000]]
    configs = expand_grid(parse_rules(RULES), {})
    output = ReplayOutput(
        incidents=alerts.assign(rule="burrow", status="WARN", close_reason="recovered"),
        counters=pd.DataFrame({"config_id": [0], "samples": [1]}).assign(
            **dict.fromkeys(COUNTER_COLUMNS, 0)
        ),
        breaches=pd.DataFrame(columns=["cluster", "group", "start_ms", "end_ms"]),
        groups=pd.DataFrame(columns=["cluster", "group", "start_ms", "end_ms"]),
    )
    span = HistorySpan(1, 1, 1, T0 - 3_600_000, T0 + 3_600_000, T0 - 3_600_000)
    summary, _ = summarize(configs, output, span, 10.0, MINUTE, LABEL.assign(kind=""))
    row = summary.iloc[0]
    assert (row["tp"], row["fp"], row["fn"], row["precision"]) == (1, 0, 0, 1.0)
    assert row["delay_p50_s"] == -30.0


def test_news_for_an_incident_already_open_catches_a_label_but_is_no_page() -> None:
    """A group paged as stopped before an operator rewinds its offsets: the page itself is
    no match (it opened before the rewind), the notice of the rewind catches it."""
    early = _alerts(T0 - 2 * MINUTE, ends=(-1,))
    notices = pd.DataFrame(
        {"config_id": [0, 0, 0], "cluster": ["c"] * 3, "group": ["g", "g", "other"],
         "start_ms": [T0 - 3 * MINUTE, T0 + 20_000, T0 + 1]}
    )  # fmt: skip
    result = match_incidents(early, LABEL, tolerance_ms=MINUTE, notices=notices)
    assert result.alert_matched.tolist() == [False]
    assert result.first.values.tolist() == [[0, 0, T0 + 20_000]]
    assert match_incidents(early, LABEL, tolerance_ms=MINUTE).first.empty


def test_the_slo_waits_as_long_as_the_quickest_enabled_lag_seconds_rule() -> None:
    def rules(*entries: dict[str, Any]) -> Any:
        return parse_rules({"rules": list(entries)})

    behind = {"kind": "lag_seconds", "threshold": "5m"}
    assert default_slo_for(rules()) == 0.0
    assert default_slo_for(rules({"kind": "lag", "name": "l", "threshold": 9, "for": "10s"})) == 0
    assert default_slo_for(rules(
        {**behind, "name": "slow", "for": "3m"},
        {**behind, "name": "quick", "for": "1m"},
        {**behind, "name": "off", "for": "5s", "enabled": False},
        {"kind": "lag", "name": "records", "threshold": 9, "for": "10s"},
    )) == 60.0  # fmt: skip


def test_slo_breaches_count_an_alert_already_open_when_they_begin() -> None:
    breach = LABEL.copy()
    open_before = _alerts(T0 - 3_600_000, ends=(-1,))
    assert match_incidents(open_before, breach, MINUTE, overlap=True).alert_matched.all()
    assert not match_incidents(open_before, breach, MINUTE).alert_matched.any()
    closed_before = _alerts(T0 - 3_600_000, ends=(T0 - 2 * MINUTE,))
    assert not match_incidents(closed_before, breach, MINUTE, overlap=True).alert_matched.any()


def test_recommendation_without_labels_is_the_quietest_that_catches_every_breach() -> None:
    summary = pd.DataFrame(
        {
            "config_id": [0, 1, 2, 3],
            "notifications": [50, 10, 20, 20],
            "incidents": [25, 5, 10, 9],
            "alert_minutes": [1.0, 1.0, 1.0, 1.0],
            "slo_breaches": [3, 3, 3, 3],
            "slo_missed": [0, 2, 0, 0],
        }
    )
    chosen = recommend(summary, labelled=False, recall_target=0.95)
    assert chosen.config_id == 3 and chosen.met and "all 3 SLO breaches" in chosen.reason
    missing = recommend(summary.assign(slo_missed=[1, 2, 1, 3]), False, 0.95)
    assert missing.config_id == 2 and not missing.met


def test_ties_go_to_the_configuration_closest_to_the_rules_file() -> None:
    summary = pd.DataFrame(
        {
            "config_id": [0, 1, 2],
            "burrow.allowed_lag": [0, 100, 0],
            "burrow.for": [0.0, 120.0, 120.0],
            "notifications": [10, 5, 5],
            "incidents": [5, 3, 3],
            "alert_minutes": [1.0, 1.0, 1.0],
            "recall": [1.0, 1.0, 1.0],
        }
    )
    assert recommend(summary, labelled=True, recall_target=0.95).config_id == 2


def test_recommended_rules_round_trip_with_readable_durations() -> None:
    rules = load_rules(ROOT / "rules.yaml")
    text = rules_yaml(rules, ["a header"])
    assert text.startswith("# a header\n")
    assert parse_rules(yaml.safe_load(text)) == rules
    assert "for: 2m" in text and "expire_group: 1w" in text and "threshold: 30m" in text
    assert "lasting:" in text and "assumed_commit_interval: 10m" in text


# --------------------------------------------------------------------------------------------
# Spark against the single-process replay


@pytest.mark.spark
def test_spark_equals_the_single_process_replay_on_the_hand_written_history(
    spark: Any, handmade: dict[str, Path], tmp_path: Path
) -> None:
    local = run_backtest(make_request(handmade, tmp_path / "local"), echo=quiet)
    distributed = run_backtest(
        make_request(handmade, tmp_path / "spark", engine="spark", buckets=3),
        echo=quiet,
        spark=spark,
    )
    pd.testing.assert_frame_equal(distributed.output.incidents, local.output.incidents)
    pd.testing.assert_frame_equal(distributed.output.incidents, expected_incidents())
    pd.testing.assert_frame_equal(distributed.output.counters, local.output.counters)
    pd.testing.assert_frame_equal(distributed.summary, local.summary)
    assert pd.read_parquet(distributed.files["alerts.parquet"]).equals(
        pd.read_parquet(local.files["alerts.parquet"])
    )
    # A time range (with its warm-up before it) and a group filter read the same rows.
    narrow = {"start": "2026-03-02T00:50:00Z", "warmup_s": 600, "groups": "^(big|flap|gone)$"}
    local = run_backtest(make_request(handmade, tmp_path / "l2", **narrow), echo=quiet)
    distributed = run_backtest(
        make_request(handmade, tmp_path / "s2", engine="spark", **narrow), echo=quiet, spark=spark
    )
    pd.testing.assert_frame_equal(distributed.output.incidents, local.output.incidents)
    assert set(local.output.groups["group"]) == {"big", "flap", "gone"}
    assert sorted(local.alerts.loc[local.alerts["config_id"] == 0, "start_ms"]) == [
        at(53),
        at(88),
        at(95),
    ]


@pytest.mark.spark
def test_spark_equals_the_single_process_replay_on_a_synthetic_fleet(
    spark: Any, tmp_path: Path
) -> None:
    """Two clusters with their own scan times and gaps, groups spread over 3 buckets × 2
    configuration slices (6 tasks), the default rules and the live notification logic."""
    history = tmp_path / "synth"
    synthesize(history, groups=24, partitions=3, hours=1.0, seed=5, clusters=2)
    rules = load_rules(ROOT / "rules.yaml")
    configs = expand_grid(rules, {"rules.lag-seconds-critical.threshold": ["30m", "45m"]})
    options = ReplayOptions(10.0, None, 300.0, 120.0, None)
    local = replay(SampleArrays.from_arrow(read_history(history)), configs, options)
    frame = read_history_spark(spark, str(history))
    scans = spark_scans(frame, str(history))
    plan = TaskPlan(buckets=3, slices=[[0, 2], [1]])
    distributed = spark_replay(
        spark, frame, configs, options, _scan_calendar(scans), plan, "group", str(history)
    )
    assert len(local.incidents) > 10  # the comparison means something
    pd.testing.assert_frame_equal(distributed.incidents, local.incidents)
    pd.testing.assert_frame_equal(distributed.counters, local.counters)
    pd.testing.assert_frame_equal(distributed.breaches, local.breaches)
    pd.testing.assert_frame_equal(distributed.groups, local.groups)

    # Routes that batch a cluster's groups into one notification keep each cluster in a task.
    notify = parse_notify(
        {
            "receivers": {"team": [{"webhook": {"url": "http://127.0.0.1:9/hook"}}]},
            "route": {"receiver": "team", "group_by": ["cluster"], "group_wait": "30s"},
        }
    )
    assert aggregation_scope(notify) == "cluster"
    batched = ReplayOptions(10.0, notify, 300.0, 120.0, None)
    local = replay(SampleArrays.from_arrow(read_history(history)), configs, batched)
    distributed = spark_replay(
        spark, frame, configs, batched, _scan_calendar(scans), plan, "cluster", str(history)
    )
    pd.testing.assert_frame_equal(distributed.incidents, local.incidents)
    pd.testing.assert_frame_equal(distributed.counters, local.counters)
    per_incident = local.counters["notifications"].sum()
    assert per_incident < 2 * len(local.incidents)  # batched: fewer than an open + resolve each


# --------------------------------------------------------------------------------------------
# Bad input names the path and what is wrong


def _write(path: Path, table: pa.Table) -> Path:
    part = path / "date=2026-03-02"
    part.mkdir(parents=True)
    pq.write_table(table, part / "part-0000000000000-x.parquet")
    return path


def _small_table() -> pa.Table:
    return samples_to_table(handmade_samples()[:40])


@pytest.fixture(params=["local", pytest.param("spark", marks=pytest.mark.spark)])
def engine(request: pytest.FixtureRequest) -> str:
    if request.param == "spark":
        request.getfixturevalue("spark")
    return request.param


def test_missing_history_path(engine: str, handmade: dict[str, Path], tmp_path: Path) -> None:
    missing = tmp_path / "nowhere"
    with pytest.raises(HistoryNotFoundError, match=f"history path {re.escape(str(missing))}"):
        run_backtest(
            make_request(handmade, tmp_path / "o", history=str(missing), engine=engine), quiet
        )


def test_missing_columns_are_listed(engine: str, handmade: dict[str, Path], tmp_path: Path) -> None:
    history = _write(tmp_path / "h", _small_table().drop_columns(["members", "member_hash"]))
    with pytest.raises(HistorySchemaError) as caught:
        run_backtest(
            make_request(handmade, tmp_path / "o", history=str(history), engine=engine), quiet
        )
    assert str(history) in str(caught.value)
    assert "missing columns: members, member_hash" in str(caught.value)


def test_mistyped_columns_are_listed(
    engine: str, handmade: dict[str, Path], tmp_path: Path
) -> None:
    table = _small_table()
    table = table.set_column(
        table.schema.get_field_index("partition"),
        "partition",
        table.column("partition").cast(pa.string()),
    )
    table = table.set_column(
        table.schema.get_field_index("committed_offset"),
        "committed_offset",
        table.column("committed_offset").cast(pa.float64()),
    )
    history = _write(tmp_path / "h", table)
    with pytest.raises(HistorySchemaError) as caught:
        run_backtest(
            make_request(handmade, tmp_path / "o", history=str(history), engine=engine), quiet
        )
    text = str(caught.value)
    assert str(history) in text and "mistyped columns" in text
    assert "partition (expected int32, found string)" in text
    assert "committed_offset (expected int64, found double)" in text


def test_no_rows_in_the_time_range(engine: str, handmade: dict[str, Path], tmp_path: Path) -> None:
    with pytest.raises(HistoryEmptyError, match="has no rows in the range"):
        run_backtest(
            make_request(
                handmade, tmp_path / "o", start="2027-01-01", end="2027-01-02", engine=engine
            ),
            quiet,
        )


@pytest.mark.spark
def test_nulls_in_a_required_column_are_named(
    spark: Any, handmade: dict[str, Path], tmp_path: Path
) -> None:
    table = _small_table()
    members = pa.array([None] + [1] * (table.num_rows - 1), pa.int32())
    schema = pa.schema([f.with_nullable(True) for f in SAMPLE_SCHEMA])
    table = table.set_column(table.schema.get_field_index("members"), "members", members)
    history = _write(tmp_path / "h", table.cast(schema))
    with pytest.raises(HistorySchemaError, match=r"members \(1 rows\)") as caught:
        run_backtest(
            make_request(handmade, tmp_path / "o", history=str(history), engine="spark"),
            quiet,
            spark,
        )
    assert str(history) in str(caught.value)


def test_grid_errors_come_before_any_history_work(
    handmade: dict[str, Path], tmp_path: Path
) -> None:
    grid = tmp_path / "grid.yaml"
    grid.write_text("parameters:\n  burrow.allowed_lagg: [1, 2]\n")
    with pytest.raises(ConfigError, match=r"burrow\.allowed_lagg: no such parameter"):
        # The history path does not exist either, and Spark is never started.
        run_backtest(
            make_request(handmade, tmp_path / "o", grid=grid, history="/nowhere", engine="spark"),
            quiet,
        )


def test_a_bad_incidents_file_is_named(handmade: dict[str, Path], tmp_path: Path) -> None:
    labels = tmp_path / "labels.csv"
    labels.write_text("cluster,group,start\nc1,stall,2026-03-02T00:10:00Z\n")
    with pytest.raises(IncidentsError, match=f"{re.escape(str(labels))} lacks column"):
        run_backtest(make_request(handmade, tmp_path / "o", incidents=labels), quiet)


# --------------------------------------------------------------------------------------------
# The command line


def test_spark_submit_parser_takes_the_same_options_as_the_command() -> None:
    command = main.commands["backtest"]
    clicked = {opt for param in command.params for opt in param.opts if opt.startswith("--")}
    parsed = {
        opt
        for action in build_parser()._actions
        for opt in action.option_strings
        if opt.startswith("--") and opt != "--help"
    }
    assert clicked == parsed


@pytest.mark.spark
def test_cli_synth_then_backtest_writes_every_output(spark: Any, tmp_path: Path) -> None:
    runner = CliRunner()
    history = tmp_path / "h"
    made = runner.invoke(
        main,
        f"history synth --out {history} --groups 8 --partitions 2 --hours 1 --seed 3".split(),
    )
    assert made.exit_code == 0, made.output
    assert "labelled incidents" in made.output and (history / "incidents.csv").exists()
    out = tmp_path / "bt"
    ran = runner.invoke(
        main,
        f"backtest --history {history} --rules {ROOT / 'rules.yaml'} --out {out} "
        f"--grid {ROOT / 'examples' / 'grid.yaml'} --incidents {history / 'incidents.csv'} "
        "--master local[2]".split(),
    )
    assert ran.exit_code == 0, ran.output
    lines = ran.output.splitlines()
    assert [line[:5] for line in lines[:5]] == ["[1/5]", "[2/5]", "[3/5]", "[4/5]", "[5/5]"]
    assert "* recommended: config" in ran.output
    for name in ("summary.csv", "summary.parquet", "alerts.parquet", "report.html"):
        assert (out / name).stat().st_size > 0
    summary = pd.read_csv(out / "summary.csv")
    assert len(summary) == 17 and summary["recommended"].sum() == 1
    for column in ("config_id", "burrow.minimum_complete", "rules.falling-behind.ratio"):
        assert column in summary
    for column in ("incidents", "notifications", "alert_minutes", "flaps", "tp", "fp", "fn"):
        assert column in summary
    for column in ("precision", "recall", "delay_p50_s", "delay_p90_s"):
        assert column in summary
    assert pd.read_parquet(out / "summary.parquet").shape == summary.shape
    alerts = pd.read_parquet(out / "alerts.parquet")
    assert {"config_id", "cluster", "group", "rule", "status", "start", "end"} <= set(alerts)
    page = (out / "report.html").read_text()
    assert page.count('<img alt="') == 4 and page.count("data:image/png;base64,iVBOR") == 4
    assert '<table class="summary">' in page and "http" not in page.split("<body>")[1]
    recommended = load_rules(out / "recommended-rules.yaml")
    chosen = int(summary.loc[summary["recommended"], "config_id"].iloc[0])
    row = summary.set_index("config_id").loc[chosen]
    assert recommended.burrow.minimum_complete == row["burrow.minimum_complete"]
    assert recommended.rule("falling-behind").ratio == row["rules.falling-behind.ratio"]


def test_cli_reports_bad_input_with_exit_code_2(tmp_path: Path) -> None:
    result = CliRunner().invoke(
        main,
        f"backtest --history {tmp_path / 'none'} --grid {tmp_path / 'g.yaml'} "
        f"--out {tmp_path / 'o'} --rules {ROOT / 'rules.yaml'}".split(),
    )
    assert result.exit_code == 2 and f"no such file: {tmp_path / 'g.yaml'}" in result.output
    taken = tmp_path / "taken"
    taken.mkdir()
    (taken / "x").write_text("")
    made = CliRunner().invoke(
        main,
        f"history synth --out {taken} --groups 2 --partitions 1 --hours 1 --seed 1".split(),
    )
    assert made.exit_code == 2 and "not an empty directory" in made.output
