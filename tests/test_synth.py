"""The synthetic history: layout, counts, determinism, and that each labelled fault shows."""

from __future__ import annotations

import time
from datetime import UTC, datetime
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow.parquet as pq
import pytest

from notifier.history import history_files, load_incidents, read_history
from notifier.synth import INCIDENT_KINDS, SynthResult, synthesize
from notifier.types import SAMPLE_SCHEMA

INTERVAL_S = 10


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> tuple[SynthResult, pd.DataFrame, pd.DataFrame]:
    out = tmp_path_factory.mktemp("synth") / "history"
    result = synthesize(out, groups=40, partitions=3, hours=1.5, seed=11, clusters=2)
    data = read_history(out).to_pandas()
    incidents = load_incidents(result.incidents_path)
    return result, data, incidents


def test_files_are_in_the_sample_schema(
    run: tuple[SynthResult, pd.DataFrame, pd.DataFrame],
) -> None:
    result, _, _ = run
    files = history_files(result.out)
    assert len(files) == result.files >= 1
    for file in files:
        assert pq.read_schema(file).equals(SAMPLE_SCHEMA)
        assert file.parent.name.startswith("date=")
        assert file.name.startswith("part-") and file.name.endswith(".parquet")
    assert read_history(result.out).schema.equals(SAMPLE_SCHEMA)


def test_row_count_is_group_partitions_times_successful_scans(
    run: tuple[SynthResult, pd.DataFrame, pd.DataFrame],
) -> None:
    result, data, _ = run
    assert len(data) == result.rows
    scans = round(1.5 * 3600 / INTERVAL_S)
    assert result.scans == scans
    per_scan = data.groupby(["cluster", "ts"]).size()
    group_partitions = data.groupby("cluster")[["group", "partition"]].apply(
        lambda frame: len(frame.drop_duplicates())
    )
    # Every successful scan holds every group-partition of its cluster, once.
    assert (per_scan == group_partitions.reindex(per_scan.index.get_level_values(0)).values).all()
    assert not data.duplicated(["cluster", "ts", "group", "topic", "partition"]).any()
    assert group_partitions.sum() == 40 * 3
    successful = data.groupby("cluster")["ts"].nunique()
    assert successful.sum() == 2 * scans - result.missed_scans
    assert (successful * group_partitions).sum() == result.rows


def test_failed_scans_leave_gaps(run: tuple[SynthResult, pd.DataFrame, pd.DataFrame]) -> None:
    result, data, _ = run
    assert result.missed_scans > 0
    gaps = 0
    for _, frame in data.groupby("cluster"):
        steps = np.diff(np.sort(frame["ts"].astype("int64").unique()))
        assert steps.min() > 0
        gaps += int((steps > 1.5 * INTERVAL_S * 1000).sum())
    assert gaps > 0


def test_rows_are_in_time_order_and_partitioned_by_utc_date(tmp_path: Path) -> None:
    start = datetime(2026, 3, 1, 23, 40, tzinfo=UTC)
    result = synthesize(tmp_path / "h", groups=3, partitions=2, hours=0.5, seed=3, start=start)
    files = history_files(result.out)
    assert [f.parent.name for f in files] == ["date=2026-03-01", "date=2026-03-02"]
    for file in files:
        ts = pq.read_table(file).column("ts").to_pandas()
        assert ts.is_monotonic_increasing
        assert (ts.dt.strftime("date=%Y-%m-%d") == file.parent.name).all()


def test_same_seed_same_history(tmp_path: Path) -> None:
    args = {"groups": 14, "partitions": 2, "hours": 0.25, "clusters": 2}
    first = synthesize(tmp_path / "a", seed=5, **args)
    second = synthesize(tmp_path / "b", seed=5, **args)
    other = synthesize(tmp_path / "c", seed=6, **args)
    assert read_history(first.out).equals(read_history(second.out))
    assert first.incidents_path.read_text() == second.incidents_path.read_text()
    assert not read_history(first.out).equals(read_history(other.out))


def test_every_incident_kind_is_labelled_on_distinct_groups(
    run: tuple[SynthResult, pd.DataFrame, pd.DataFrame],
) -> None:
    result, data, incidents = run
    assert set(incidents["kind"]) == set(INCIDENT_KINDS)
    assert incidents["group"].is_unique
    assert result.incidents == len(incidents) == sum(result.incidents_by_kind.values())
    assert (incidents["start"] < incidents["end"]).all()
    known = set(zip(data["cluster"], data["group"], strict=True))
    assert all((r.cluster, r.group) in known for r in incidents.itertuples())


def test_share_of_groups_with_an_incident(tmp_path: Path) -> None:
    result = synthesize(tmp_path / "h", groups=200, partitions=1, hours=0.2, seed=2)
    assert 0.10 * 200 <= result.incidents <= 0.20 * 200


def _window(data: pd.DataFrame, incident: pd.Series) -> pd.DataFrame:
    rows = data[(data["cluster"] == incident["cluster"]) & (data["group"] == incident["group"])]
    inside = rows[(rows["ts"] >= incident["start"]) & (rows["ts"] <= incident["end"])]
    assert len(inside) > 0
    return inside.sort_values(["partition", "ts"])


def _signature(kind: str, data: pd.DataFrame, incident: pd.Series) -> None:
    """Assert that the labelled window shows what the fault does (the detectors' ground truth)."""
    window = _window(data, incident)
    by_partition = window.groupby("partition")
    committed_constant = (by_partition["committed_offset"].nunique() == 1).all()
    leo_grows = (by_partition["log_end_offset"].agg(lambda s: s.iloc[-1] - s.iloc[0]) > 0).all()
    lag = window["log_end_offset"] - window["committed_offset"]
    lag_first = lag.groupby(window["partition"]).first()
    lag_last = lag.groupby(window["partition"]).last()
    if kind == "stalled":
        assert committed_constant and leo_grows
        assert (window["members"] > 0).all()
        assert (window["group_state"] == "Stable").all()
    elif kind == "stopped":
        assert committed_constant and leo_grows
        assert (window["members"] == 0).all()
        assert (window["group_state"] == "Empty").all()
    elif kind == "stuck_rebalance":
        assert committed_constant and leo_grows
        assert window["group_state"].isin(["PreparingRebalance", "CompletingRebalance"]).all()
        assert window["member_hash"].nunique() > 1
    elif kind == "lagging":
        assert not committed_constant  # still consuming
        assert (lag_last > lag_first).all()
    elif kind == "rewound":
        rows = data[(data["cluster"] == incident["cluster"]) & (data["group"] == incident["group"])]
        rows = rows[rows["ts"] <= incident["end"]].sort_values(["partition", "ts"])
        drops = rows.groupby("partition")["committed_offset"].diff() < 0
        assert drops.groupby(rows["partition"]).any().all()
        assert rows.loc[drops, "ts"].min() >= incident["start"]
    elif kind == "retention_loss":
        assert (window["committed_offset"] < window["log_start_offset"]).any()
        assert (lag_last > lag_first).any()
    else:
        raise AssertionError(kind)


@pytest.mark.parametrize("kind", INCIDENT_KINDS)
def test_each_incident_shows_its_signature(
    run: tuple[SynthResult, pd.DataFrame, pd.DataFrame], kind: str
) -> None:
    _, data, incidents = run
    chosen = incidents[incidents["kind"] == kind]
    assert len(chosen) >= 1
    for _, incident in chosen.iterrows():
        _signature(kind, data, incident)


def test_healthy_groups_look_healthy(run: tuple[SynthResult, pd.DataFrame, pd.DataFrame]) -> None:
    _, data, incidents = run
    healthy = data[~data["group"].isin(incidents["group"])].sort_values(
        ["group", "partition", "ts"]
    )
    committed = healthy["committed_offset"]
    assert (committed.dropna() <= healthy.loc[committed.notna(), "log_end_offset"]).all()
    assert not (committed < healthy["log_start_offset"]).any()
    assert (healthy["log_start_offset"] <= healthy["log_end_offset"]).all()
    assert not (healthy.groupby(["group", "partition"])["committed_offset"].diff() < 0).any()
    assert (healthy["group_state"] == "Stable").mean() > 0.98
    assert (healthy["members"] > 0).all()
    # A member hash only changes together with a new member set, rarely.
    changes = healthy.groupby(["group", "partition"])["member_hash"].nunique()
    assert changes.median() <= 3


def test_realistic_shapes(run: tuple[SynthResult, pd.DataFrame, pd.DataFrame]) -> None:
    _, data, _ = run
    per_topic = data.groupby(["cluster", "topic", "partition"])
    produced = per_topic["log_end_offset"].agg(lambda s: s.max() - s.min())
    assert (produced == 0).any() or len(produced) < 20  # idle topics exist in larger runs
    assert (produced > 0).mean() > 0.5
    moved = per_topic["log_start_offset"].agg(lambda s: s.max() - s.min())
    assert (moved > 0).mean() > 0.3  # retention moves the log start forward
    # Commit cadence differs: some groups change their committed offset at most every 5 min.
    updates = data.groupby(["group", "partition"])["committed_offset"].agg(
        lambda s: (s.diff() != 0).mean()
    )
    assert updates.min() < 0.3 < updates.max()


def test_out_must_be_empty(tmp_path: Path) -> None:
    (tmp_path / "h").mkdir()
    (tmp_path / "h" / "old.parquet").write_bytes(b"")
    with pytest.raises(FileExistsError, match="not an empty directory"):
        synthesize(tmp_path / "h", groups=2, partitions=1, hours=0.1, seed=1)


@pytest.mark.parametrize(
    "kwargs",
    [{"groups": 0}, {"partitions": 0}, {"hours": 0}, {"clusters": 5, "groups": 2}],
)
def test_rejects_bad_sizes(tmp_path: Path, kwargs: dict[str, float]) -> None:
    args: dict = {"groups": 2, "partitions": 1, "hours": 0.1, "seed": 1} | kwargs
    with pytest.raises(ValueError):
        synthesize(tmp_path / "h", **args)


def test_a_million_samples_is_fast(tmp_path: Path) -> None:
    began = time.perf_counter()
    result = synthesize(tmp_path / "h", groups=200, partitions=10, hours=500 * 10 / 3600, seed=9)
    elapsed = time.perf_counter() - began
    assert result.rows > 950_000
    assert elapsed < 15, f"{result.rows} samples took {elapsed:.1f} s"
