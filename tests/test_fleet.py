"""The fleet profile: determinism, layout, benign patterns that stay benign, and labels that sit
where an on-call engineer would want to hear about each fault."""

from __future__ import annotations

import hashlib
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner

from notifier.backtest.scoring import labels_frame
from notifier.cli import main
from notifier.history import history_files, load_incidents, read_history
from notifier.synth import FLEET_INCIDENT_KINDS, FleetResult, synthesize_fleet
from notifier.synth.production import CONSUMER_MODES, PATTERN_COLUMNS, PRODUCER_KINDS
from notifier.types import SAMPLE_SCHEMA

INTERVAL_S = 10.0
SIZES = {"groups": 48, "partitions": 2, "hours": 2.0, "clusters": 2}

Run = tuple[FleetResult, pd.DataFrame, pd.DataFrame, pd.DataFrame]


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> Run:
    out = tmp_path_factory.mktemp("fleet") / "history"
    result = synthesize_fleet(out, seed=7, **SIZES)
    data = read_history(out).to_pandas().sort_values(["group", "partition", "ts"])
    incidents = load_incidents(result.incidents_path)
    patterns = pd.read_csv(result.patterns_path, keep_default_na=False)
    return result, data.reset_index(drop=True), incidents, patterns


def _digests(root: Path) -> dict[str, str]:
    return {
        str(f.relative_to(root)): hashlib.sha256(f.read_bytes()).hexdigest()
        for f in sorted(root.rglob("*"))
        if f.is_file()
    }


def _group(data: pd.DataFrame, name: str) -> pd.DataFrame:
    return data[data["group"] == name]


def _label(data: pd.DataFrame, incident: pd.Series) -> pd.DataFrame:
    rows = _group(data, incident["group"])
    inside = rows[(rows["ts"] >= incident["start"]) & (rows["ts"] <= incident["end"])]
    assert len(inside) > 0
    return inside


# -- files ---------------------------------------------------------------------------------------


def test_files_are_in_the_sample_schema(run: Run) -> None:
    result, data, _, _ = run
    files = history_files(result.out)
    assert len(files) == result.files >= 1
    for file in files:
        assert pq.read_schema(file).equals(SAMPLE_SCHEMA)
    assert read_history(result.out).schema.equals(SAMPLE_SCHEMA)
    assert len(data) == result.rows
    assert sorted(p.name for p in result.out.iterdir() if p.is_file()) == [
        "incidents.csv",
        "patterns.csv",
    ]


def test_same_seed_same_files_other_seed_other_files(tmp_path: Path) -> None:
    sizes = {"groups": 12, "partitions": 2, "hours": 0.5, "clusters": 2}
    first = synthesize_fleet(tmp_path / "a", seed=5, **sizes)
    second = synthesize_fleet(tmp_path / "b", seed=5, **sizes)
    other = synthesize_fleet(tmp_path / "c", seed=6, **sizes)
    assert _digests(first.out) == _digests(second.out)
    assert not read_history(first.out).equals(read_history(other.out))
    assert first.patterns_path.read_text() != other.patterns_path.read_text()


def test_out_must_be_empty_and_sizes_sensible(tmp_path: Path) -> None:
    (tmp_path / "h").mkdir()
    (tmp_path / "h" / "old.parquet").write_bytes(b"")
    with pytest.raises(FileExistsError, match="not an empty directory"):
        synthesize_fleet(tmp_path / "h", groups=2, partitions=1, hours=0.1, clusters=1)
    with pytest.raises(ValueError, match="clusters"):
        synthesize_fleet(tmp_path / "g", groups=2, partitions=1, hours=0.1, clusters=3)


def test_every_successful_scan_holds_every_live_group_partition(run: Run) -> None:
    result, data, _, patterns = run
    live = patterns[(patterns["appears_at"] == "") & (patterns["deleted_at"] == "")]
    rows = data[data["group"].isin(live["group"])]
    per_scan = rows.groupby(["cluster", "ts"]).size()
    expected = live.groupby("cluster").size() * SIZES["partitions"]
    assert (per_scan == expected.reindex(per_scan.index.get_level_values(0)).to_numpy()).all()
    assert not data.duplicated(["cluster", "ts", "group", "partition"]).any()
    assert result.missed_scans > 0


def test_clusters_miss_scans(run: Run) -> None:
    _, data, _, _ = run
    gaps = 0
    for _, rows in data.groupby("cluster"):
        steps = np.diff(np.sort(rows["ts"].astype("int64").unique())) / 1000
        assert steps.min() > INTERVAL_S - 1
        gaps += int((steps > 1.5 * INTERVAL_S).sum())
    assert gaps >= 3


def test_a_cluster_is_unreachable_once_or_twice_in_six_hours(tmp_path: Path) -> None:
    result = synthesize_fleet(tmp_path / "h", groups=3, partitions=1, hours=6, clusters=3)
    data = read_history(result.out).to_pandas()
    for _, rows in data.groupby("cluster"):
        steps = np.diff(np.sort(rows["ts"].astype("int64").unique())) / 1000
        outages = steps[steps >= 120]
        assert 1 <= len(outages) <= 2
        assert (outages <= 8 * 60 + INTERVAL_S).all()


# -- benign patterns -------------------------------------------------------------------------


def test_patterns_list_every_group_once(run: Run) -> None:
    result, data, incidents, patterns = run
    assert tuple(patterns.columns) == PATTERN_COLUMNS
    assert patterns["group"].is_unique and len(patterns) == SIZES["groups"]
    assert set(patterns["group"]) == set(data["group"])
    assert set(patterns["producer"]) <= set(PRODUCER_KINDS)
    assert set(patterns["consumer"]) == set(CONSUMER_MODES)
    labelled = patterns[patterns["incident"] != ""].set_index("group")["incident"]
    assert labelled.to_dict() == incidents.set_index("group")["kind"].to_dict()
    topics = data.groupby("group")["topic"].first()
    assert patterns.set_index("group")["topic"].to_dict() == topics.to_dict()
    assert result.patterns_by_kind["restarts"] == (patterns["restarts"] > 0).sum() > 0
    assert result.patterns_by_kind["deploys"] > 0 and result.patterns_by_kind["rebalances"] > 0
    assert result.patterns_by_kind["shared_topic"] > 0


def test_offsets_stay_consistent(run: Run) -> None:
    _, data, incidents, _ = run
    committed = data["committed_offset"]
    assert (committed.dropna() <= data.loc[committed.notna(), "log_end_offset"]).all()
    assert (data["log_start_offset"] <= data["log_end_offset"]).all()
    rewound = set(incidents.loc[incidents["kind"] == "rewound", "group"])
    steps = data.groupby(["group", "partition"])["committed_offset"].diff()
    assert set(data.loc[steps < 0, "group"]) == rewound
    benign = data[~data["group"].isin(incidents["group"])]
    assert not (benign["committed_offset"] < benign["log_start_offset"]).any()


def _runs(flags: np.ndarray) -> list[tuple[int, int]]:
    """[first, last] index pairs of the runs of True."""
    edges = np.diff(np.concatenate([[0], flags.astype(np.int8), [0]]))
    return list(zip(np.flatnonzero(edges == 1), np.flatnonzero(edges == -1) - 1, strict=True))


def test_restarts_are_over_within_a_minute(run: Run) -> None:
    _, data, _, patterns = run
    benign = patterns[(patterns["incident"] == "") & (patterns["deleted_at"] == "")]
    seen = 0
    for name in benign["group"]:
        rows = _group(data, name)
        rows = rows[rows["partition"] == 0]
        ts = rows["ts"].to_numpy()
        for first, last in _runs((rows["group_state"] == "Empty").to_numpy()):
            seen += 1
            assert last + 1 < len(rows), f"{name} ends Empty"
            assert ts[last] - ts[first] < np.timedelta64(60, "s")
            # It comes back with a new member set and has not lost its place.
            assert rows["member_hash"].iloc[last + 1] != rows["member_hash"].iloc[first - 1]
            assert rows["committed_offset"].iloc[last + 1] >= rows["committed_offset"].iloc[first]
    assert seen >= (benign["restarts"] > 0).sum() // 2


def test_deploys_are_over_within_three_minutes(run: Run) -> None:
    _, data, _, patterns = run
    deploying = patterns[
        (patterns["deploys"] == 1)
        & (patterns["restarts"] == 0)
        & (patterns["rebalances"] == 0)
        & (patterns["incident"] == "")
        & (patterns["appears_at"] == "")
        & (patterns["deleted_at"] == "")
    ]
    assert len(deploying) > 0
    for name in deploying["group"]:
        rows = _group(data, name)
        rows = rows[rows["partition"] == 0]
        changed = rows["member_hash"].diff().fillna(0) != 0
        assert changed.sum() >= 1
        # A change happened after the scan before it: an outage may hide when exactly.
        latest_first = rows.loc[changed, "ts"].min()
        earliest_last = rows["ts"].shift()[changed].max()
        assert earliest_last - latest_first <= pd.Timedelta("3min")
        assert (rows["group_state"] == "Stable").mean() > 0.97


def test_new_and_deleted_groups(run: Run) -> None:
    _, data, _, patterns = run
    new = patterns[patterns["appears_at"] != ""]
    deleted = patterns[patterns["deleted_at"] != ""]
    assert len(new) >= 1 and len(deleted) >= 1
    for row in new.itertuples():
        rows = _group(data, row.group)
        assert rows["ts"].min() >= pd.Timestamp(row.appears_at)
        assert rows["ts"].min() > data["ts"].min() + pd.Timedelta("5min")
        first = rows[rows["ts"] == rows["ts"].min()]
        assert first["committed_offset"].isna().all() or first["committed_offset"].notna().all()
    assert data.loc[data["committed_offset"].isna(), "group"].isin(new["group"]).all()
    for row in deleted.itertuples():
        rows = _group(data, row.group)
        deleted_at = pd.Timestamp(row.deleted_at)
        assert rows["ts"].max() < deleted_at
        # The members leave a scan or two before the group is deleted (unless those scans
        # failed); every other scan of its cluster before then has its rows.
        leaving = rows[rows["ts"] > deleted_at - pd.Timedelta(seconds=1.1 * INTERVAL_S)]
        assert (leaving["group_state"] == "Empty").all() and (leaving["members"] == 0).all()
        assert leaving["committed_offset"].notna().all()
        scans = data.loc[(data["cluster"] == row.cluster) & (data["ts"] < deleted_at), "ts"]
        assert set(scans) == set(rows["ts"])


# -- incidents ---------------------------------------------------------------------------------


def test_every_kind_is_labelled_once_per_group(run: Run) -> None:
    result, _, incidents, _ = run
    assert set(incidents["kind"]) == set(FLEET_INCIDENT_KINDS)
    assert incidents["group"].is_unique
    assert result.incidents == len(incidents) == sum(result.incidents_by_kind.values())
    assert len(incidents) == round(0.2 * SIZES["groups"])
    assert list(incidents.columns) == ["cluster", "group", "start", "end", "kind", "onset"]
    # The backtest reads the labels as they are.
    labels = labels_frame(incidents)
    assert (labels["end_ms"] >= labels["start_ms"]).all()


def test_labels_sit_on_scan_times_after_the_onset(run: Run) -> None:
    result, data, incidents, _ = run
    for incident in incidents.itertuples():
        rows = _group(data, incident.group)
        assert (rows["cluster"] == incident.cluster).all()
        scans = set(rows["ts"])
        assert incident.start in scans and incident.end in scans
        onset = pd.Timestamp(incident.onset)
        assert onset >= pd.Timestamp(result.start) + pd.Timedelta("40min")
        assert onset <= incident.start <= incident.end
        if incident.kind in ("stopped", "consumers_gone", "stuck_rebalance"):
            assert incident.start - onset >= pd.Timedelta("60s")
        if incident.kind == "rebalance_storm":
            assert incident.start - onset >= pd.Timedelta("3min")
        if incident.kind not in ("consumers_gone", "rewound", "retention_loss"):
            assert incident.end < rows["ts"].max(), "the group recovers before the run ends"


def test_fault_topics_carry_traffic(run: Run) -> None:
    _, data, incidents, _ = run
    for incident in incidents.itertuples():
        rows = _group(data, incident.group)
        produced = rows.groupby("partition")["log_end_offset"].agg(lambda s: s.max() - s.min())
        seconds = (rows["ts"].max() - rows["ts"].min()).total_seconds()
        assert (produced / seconds > 0.5).all()


def _signature(kind: str, data: pd.DataFrame, incident: pd.Series) -> None:
    """What the labelled window shows of each fault."""
    window = _label(data, incident)
    rows = _group(data, incident["group"])
    by_partition = window.groupby("partition")
    committed_constant = (by_partition["committed_offset"].nunique() == 1).all()
    leo_grows = (by_partition["log_end_offset"].agg(lambda s: s.iloc[-1] - s.iloc[0]) > 0).all()
    lag = (window["log_end_offset"] - window["committed_offset"]).groupby(window["ts"]).sum()
    onset = pd.Timestamp(incident["onset"])
    before = rows[(rows["ts"] < onset) & (rows["ts"] >= onset - pd.Timedelta("10min"))]
    lag_before = (before["log_end_offset"] - before["committed_offset"]).groupby(before["ts"]).sum()
    if kind == "stalled":
        assert committed_constant and leo_grows
        assert (window["group_state"] == "Stable").all() and (window["members"] > 0).all()
        assert window["member_hash"].nunique() == 1
    elif kind == "stopped":
        assert committed_constant and leo_grows
        assert (window["group_state"] == "Empty").all() and (window["members"] == 0).all()
        after = rows[rows["ts"] > incident["end"]]
        assert (after["members"] > 0).any()
    elif kind == "consumers_gone":
        assert committed_constant and leo_grows
        assert window["group_state"].isin(["Empty", "Dead"]).all()
        assert (window["members"] == 0).all() and incident["end"] == rows["ts"].max()
    elif kind == "stuck_rebalance":
        assert committed_constant and leo_grows
        assert window["group_state"].isin(["PreparingRebalance", "CompletingRebalance"]).all()
        assert window["member_hash"].nunique() > 1
    elif kind == "lagging":
        assert not committed_constant  # still committing
        assert (window["group_state"] == "Stable").all()
        # Lag that no longer falls back: lowest near the end above the lowest before the onset.
        last_quarter = lag[lag.index >= incident["end"] - (incident["end"] - onset) / 4]
        assert last_quarter.min() > lag_before.min()
    elif kind == "rebalance_storm":
        assert not committed_constant
        minutes = (incident["end"] - incident["start"]).total_seconds() / 60
        assert window["member_hash"].nunique() >= minutes
        assert (window["group_state"] == "Stable").mean() > 0.5
    elif kind == "rewound":
        steps = rows.groupby("partition")["committed_offset"].diff()
        drops = rows.loc[steps < 0]
        assert set(drops["partition"]) == set(rows["partition"])
        assert (drops["ts"] == incident["start"]).all()
        assert (drops["committed_offset"] >= drops["log_start_offset"]).all()
        assert incident["end"] - incident["start"] >= pd.Timedelta("10min")
    elif kind == "retention_loss":
        lost = window["committed_offset"] < window["log_start_offset"]
        assert lost.any() and lost[window["ts"] == incident["end"]].any()
        assert not (window.loc[window["ts"] == incident["start"], "committed_offset"].isna().any())
        after = rows[rows["ts"] > incident["end"]]
        assert not (after["committed_offset"] < after["log_start_offset"]).any()
    else:
        raise AssertionError(kind)


@pytest.mark.parametrize("kind", FLEET_INCIDENT_KINDS)
def test_each_fault_shows_in_its_label(run: Run, kind: str) -> None:
    _, data, incidents, _ = run
    chosen = incidents[incidents["kind"] == kind]
    assert len(chosen) >= 1
    for _, incident in chosen.iterrows():
        _signature(kind, data, incident)


def test_stalled_label_starts_at_the_first_missed_commit(run: Run) -> None:
    _, data, incidents, patterns = run
    for incident in incidents[incidents["kind"] == "stalled"].itertuples():
        rows = _group(data, incident.group)
        rows = rows[rows["partition"] == 0]
        frozen = rows.loc[rows["ts"] == incident.start, "committed_offset"].iloc[0]
        onset = pd.Timestamp(incident.onset)
        cadence = patterns.set_index("group").loc[incident.group, "commit_every_s"]
        # Nothing was committed between the onset and the label start, and the label starts no
        # later than one cadence (and its jitter) after the onset.
        assert (rows.loc[(rows["ts"] >= onset) & (rows["ts"] <= incident.end), "committed_offset"]
                == frozen).all()  # fmt: skip
        assert incident.start - onset <= pd.Timedelta(seconds=1.1 * cadence + 2 * INTERVAL_S + 480)


# -- command line and speed --------------------------------------------------------------------


def test_cli_profile_fleet_prints_its_counts(tmp_path: Path) -> None:
    out = tmp_path / "h"
    made = CliRunner().invoke(
        main,
        f"history synth --profile fleet --out {out} --groups 40 --partitions 1 --hours 1.2 "
        "--seed 2 --clusters 2".split(),
    )
    assert made.exit_code == 0, made.output
    assert "labelled incidents" in made.output and "groups by pattern" in made.output
    assert "stalled" in made.output and "streaming" in made.output
    assert (out / "incidents.csv").exists() and (out / "patterns.csv").exists()
    rows = int(made.output.split("wrote ")[1].split(" samples")[0].replace(",", ""))
    assert rows == read_history(out).num_rows


def test_a_production_sized_fleet_is_fast(tmp_path: Path) -> None:
    began = time.perf_counter()
    result = synthesize_fleet(tmp_path / "h", seed=1)
    elapsed = time.perf_counter() - began
    assert result.groups == 150 and result.partitions == 4 and result.scans == 2160
    assert result.rows > 1_100_000
    assert all(n >= 3 for n in result.incidents_by_kind.values())
    assert elapsed < 30, f"{result.rows} samples took {elapsed:.1f} s"
