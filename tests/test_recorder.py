"""The corpora recorded from real brokers (issue 28): each committed corpus loads and its labels
name groups its history holds; the recorder, end to end on Apache Kafka, writes a history and
labels that the backtest scores."""

from __future__ import annotations

import uuid
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from notifier.backtest import GridConfig, ReplayOptions, SampleArrays, match_incidents, replay
from notifier.backtest.scoring import labels_frame
from notifier.embedded.apache_kafka import ApacheKafkaBroker
from notifier.recorder import BY_NAME, CLUSTER, Timeline, load_corpus, record
from notifier.recorder.scenarios import SETS
from notifier.rules import load_rules

ROOT = Path(__file__).resolve().parents[1]
CORPORA = ROOT / "benchmarks" / "corpora"
FAULT_KINDS = {"stalled", "stopped", "consumers_gone", "lagging", "rewound", "retention_loss"}
REBALANCE_KINDS = {"rebalance_storm", "stuck_rebalance"}


def _per_scan(table: pd.DataFrame, group: str) -> pd.DataFrame:
    """One row per scan of ``group``: committed offsets and log ends summed over partitions."""
    rows = table[table["group"] == group]
    return rows.groupby("ts")[["committed_offset", "log_end_offset"]].sum()


@pytest.mark.parametrize(
    ("name", "broker", "kinds", "labels_per_kind"),
    [
        ("kafka-4.4-recorded", "Apache Kafka 4.4.0", FAULT_KINDS, 3),
        # 5-8 of every kind: the faults that heal twice, the missed batch runs stopped too.
        ("kafka-3.9-recorded", "Apache Kafka 3.9.2", FAULT_KINDS, 5),
        ("kafka-4.4-rebalance-recorded", "Apache Kafka 4.4.0", REBALANCE_KINDS, 1),
    ],
)
def test_a_committed_corpus_loads_and_its_labels_name_groups_of_its_history(
    name: str, broker: str, kinds: set[str], labels_per_kind: int
) -> None:
    path = CORPORA / name
    corpus = load_corpus(path)
    table = corpus.table.to_pandas()
    scanned = set(table["group"])

    assert corpus.meta["broker"] == broker
    assert corpus.scan_interval_s == 10.0
    assert set(corpus.groups["group"]) == scanned, "every scripted group is in the history"
    assert set(table["cluster"]) == {CLUSTER}
    assert set(corpus.labels["group"]) <= scanned
    assert set(corpus.labels["kind"]) == kinds
    # A label is on a group whose scenario is that kind of fault, within the recording.
    kind_of = corpus.groups.set_index("group")["kind"]
    assert (corpus.labels["kind"] == corpus.labels["group"].map(kind_of)).all()
    first, last = table["ts"].min(), table["ts"].max()
    assert ((corpus.labels["start"] >= first) & (corpus.labels["start"] <= last)).all()
    assert (corpus.labels["onset"].map(pd.Timestamp) <= corpus.labels["start"]).all()
    assert corpus.labels["kind"].value_counts().min() >= labels_per_kind
    # A group's faults (two rounds of those that heal, in the longer corpus) do not overlap.
    for _, faults in corpus.labels.sort_values("start").groupby("group"):
        assert (faults["start"].iloc[1:].to_numpy() > faults["end"].iloc[:-1].to_numpy()).all()
    # Small enough to live in the repository.
    size = sum(f.stat().st_size for f in path.rglob("*") if f.is_file())
    assert size < 5_000_000


def test_the_classic_corpus_has_a_broker_restart_and_the_load_it_was_recorded_under() -> None:
    """Kafka 3.9's corpus: its scenario set (classic groups only), the broker restarted once
    mid-recording (the service's scans failed meanwhile: a gap in the history), no consumer
    that failed by itself, and the load average the scans were made under."""
    corpus = load_corpus(CORPORA / "kafka-3.9-recorded")
    assert set(corpus.groups["scenario"]) == {s.name for s in SETS["kafka-3.9"].scenarios}
    assert {s.protocol for s in SETS["kafka-3.9"].scenarios} == {"classic"}
    assert corpus.meta["client_failures"] == []
    (restart,) = corpus.meta["broker_restarts"]
    # Within the 600 s record_corpus.py waits (422 s here: load average 60-80 during it).
    assert 0 < restart["down_s"] < 600
    scans = np.unique(corpus.table.column("ts").cast("int64").to_numpy())
    down = pd.Timestamp(restart["down"]).value // 1_000_000
    gap_at = scans[np.argmax(np.diff(scans)) + 1]
    assert np.diff(scans).max() > 2 * corpus.scan_interval_s * 1000
    assert down < gap_at < down + 700_000, "the longest gap between scans follows the restart"
    assert corpus.meta["load_average"]["cores"] >= 1
    assert corpus.meta["load_average"]["during_1min_median"] > 0


def test_the_classic_corpus_holds_the_patterns_of_its_third_recording() -> None:
    """What the seven groups added to Kafka 3.9's set did on the real broker: the missed
    batch runs' labels and the standstill behind them, a batch job's lag waiting for its next
    run, compacted topics bootstrapped by new groups that got through more offsets than they
    could have read (compaction), and slow spells a group caught up from by itself."""
    corpus = load_corpus(CORPORA / "kafka-3.9-recorded")
    table = corpus.table.to_pandas()
    first_scan = table["ts"].min()
    labels = corpus.labels.set_index("scenario")

    # A batch job that misses its run: labelled stopped from the due time + 20 s jitter + a
    # minute, and from then on nothing is committed while records arrive.
    for scenario in ("batch-job-missed", "batch-job-missed-8min"):
        label = labels.loc[scenario]
        assert label["kind"] == "stopped"
        overdue = (label["start"] - pd.Timestamp(label["onset"])).total_seconds()
        assert overdue == pytest.approx(80, abs=0.01)
        after = _per_scan(table, f"rec-{scenario}").loc[pd.Timestamp(label["onset"]) :]
        assert after["committed_offset"].nunique() == 1
        assert after["log_end_offset"].iloc[-1] > after["log_end_offset"].iloc[0]

    # The 11.5-minute batch job: its group Empty, its lag growing, for over 10 minutes at once.
    batch = _per_scan(table, "rec-batch-job-11min")
    still = (batch["committed_offset"].diff() != 0).cumsum()
    spans = batch.groupby(still).apply(lambda s: s.index[-1] - s.index[0])
    assert spans.max() > pd.Timedelta(minutes=10)

    # Compacted topics read from their start by groups that appear after the warm-up: their
    # first commit covers more offsets than they could read in the time (keys compacted away).
    for scenario in ("compacted-bootstrap", "compacted-bootstrap-late"):
        (plan,) = corpus.groups[corpus.groups["scenario"] == scenario].itertuples()
        scans = _per_scan(table, plan.group)
        seen = scans.index[0]
        assert seen - first_scan > pd.Timedelta(seconds=corpus.meta["warmup_s"])
        committed = scans[scans["committed_offset"] > 0]
        took_s = (committed.index[0] - seen).total_seconds() + corpus.scan_interval_s
        readable = 1.6 * plan.rate * took_s  # its capacity, --capacity 1.6 x the traffic
        assert committed["committed_offset"].iloc[0] > readable
        behind = scans["log_end_offset"] - scans["committed_offset"]
        assert behind.iloc[-6:].min() < plan.rate * 30, "caught up by the end"

    # Slow spells: the slow-downstream groups fall behind (over their commit interval + 15 s of
    # traffic) and catch up (under 5 s of it) again and again, with no label.
    for scenario in ("slow-downstream", "slow-downstream-every30"):
        (plan,) = corpus.groups[corpus.groups["scenario"] == scenario].itertuples()
        scans = _per_scan(table, plan.group)
        lag = (scans["log_end_offset"] - scans["committed_offset"]) / plan.rate
        behind = lag > float(plan.commit.partition(":")[2]) + 15
        assert (behind & ~behind.shift(fill_value=False)).sum() >= 4
        assert (lag.loc[lag.index[0] + pd.Timedelta(minutes=5) :] < 5).any()
        assert scenario not in labels.index


def test_the_rebalance_corpus_holds_real_storms_a_held_rebalance_and_autoscaling() -> None:
    """What Apache Kafka 4.4's classic groups did in the rebalance set: the crash loops and the
    member kicked out by its poll timeout changed the member set again and again within their
    labels, the frozen member held the group rebalancing with nothing committed while records
    arrived, and the autoscaled groups went from one member to four and back with no label."""
    corpus = load_corpus(CORPORA / "kafka-4.4-rebalance-recorded")
    table = corpus.table.to_pandas()
    assert set(corpus.groups["scenario"]) == {s.name for s in SETS["kafka-4.4-rebalance"].scenarios}
    assert corpus.meta["client_failures"] == []
    labels = corpus.labels.set_index("scenario")

    def scans(scenario: str) -> pd.DataFrame:
        rows = table[table["group"] == f"rec-{scenario}"]
        return rows.groupby("ts").agg(
            state=("group_state", "first"),
            members=("members", "first"),
            member_hash=("member_hash", "first"),
            committed=("committed_offset", "sum"),
            log_end=("log_end_offset", "sum"),
        )

    for scenario in ("storm-crash-loop", "storm-crash-loop-every30", "storm-poll-timeout"):
        label = labels.loc[scenario]
        during = scans(scenario).loc[pd.Timestamp(label["onset"]) : label["end"]]
        changes = int((during["member_hash"] != during["member_hash"].shift()).iloc[1:].sum())
        assert changes >= 6, f"{scenario}: {changes} member-set changes"

    label = labels.loc["stuck-rebalance-frozen"]
    held = scans("stuck-rebalance-frozen").loc[label["start"] : label["end"]]
    rebalancing = held["state"].isin(["PreparingRebalance", "CompletingRebalance"])
    assert rebalancing.mean() > 0.9
    assert held["committed"].nunique() == 1
    assert held["log_end"].iloc[-1] > held["log_end"].iloc[0]

    for scenario in ("autoscale-auto5", "autoscale-every120"):
        members = scans(scenario)["members"]
        assert members.max() == 4 and members.iloc[-1] in (1, 4)
        assert scenario not in labels.index


@pytest.mark.kafka
async def test_the_recorder_writes_a_scorable_corpus_from_apache_kafka(
    apache_kafka: ApacheKafkaBroker, tmp_path: Path
) -> None:
    """A healthy group and a stalled one, 80 s at 5 s scans: the history holds both, the
    stall's label says when it stood still, and the backtest replays and matches it."""
    prefix = f"rec-{uuid.uuid4().hex[:6]}-"
    timeline = Timeline(
        duration_s=80,
        warmup_s=10,
        first_event_s=30,
        event_every_s=40,
        onset_s=(30, 30),
        fault_length_s=(35, 35),
        start_spread_s=2,
    )
    out = tmp_path / "corpus"
    done = await record(
        apache_kafka.bootstrap_servers,
        apache_kafka.tools,
        out,
        [BY_NAME["healthy-auto5"], BY_NAME["stalled-auto5"]],
        kafka_version=apache_kafka.version,
        timeline=timeline,
        scan_interval_s=5.0,
        prefix=prefix,
        workdir=tmp_path / "work",
    )
    assert done.groups == 2 and done.labels == 1

    corpus = load_corpus(out)
    healthy, stalled = f"{prefix}healthy-auto5", f"{prefix}stalled-auto5"
    table = corpus.table.to_pandas()
    assert set(table["group"]) == {healthy, stalled}
    assert corpus.meta["client_failures"] == []
    (label,) = corpus.labels.itertuples()
    assert (label.group, label.kind, label.scenario) == (stalled, "stalled", "stalled-auto5")

    # The stalled group stood still through its label while records kept arriving...
    during = _per_scan(table, stalled).loc[label.start : label.end]
    assert len(during) >= 4
    assert during["committed_offset"].nunique() == 1
    assert during["log_end_offset"].is_monotonic_increasing
    assert during["log_end_offset"].iloc[-1] > during["log_end_offset"].iloc[0]
    # ...and the healthy one read on: its last commit is close to the log end.
    kept_up = _per_scan(table, healthy).iloc[-1]
    assert kept_up["log_end_offset"] - kept_up["committed_offset"] < 100

    # Scorable: the backtest's engine replays it and matches its alerts to the label.
    rules = load_rules(ROOT / "rules.yaml")
    output = replay(
        SampleArrays.from_arrow(corpus.table),
        [GridConfig(0, {}, rules)],
        ReplayOptions(scan_interval_s=5.0),
    )
    labels = labels_frame(corpus.labels)
    matches = match_incidents(output.incidents.reset_index(drop=True), labels, 5000)
    assert len(matches.alert_matched) == len(output.incidents)
    assert np.isin(matches.first["label_id"], labels["label_id"]).all()
