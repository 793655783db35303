"""The corpus generator written apart from the rules (issue 28): deterministic for a seed, read
back by the recorded corpus's loader, and labelled with the faults its history shows."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from notifier.recorder import load_corpus
from notifier.synth.independent import (
    BENIGN,
    CLUSTER,
    FAULT_KINDS,
    Group,
    GroupSpec,
    Script,
    generate,
)
from notifier.types import GROUP_STATES

GROUPS, HOURS = 30, 1.5
REBALANCING = {"PreparingRebalance", "CompletingRebalance"}


@pytest.fixture(scope="module")
def corpus_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("independent") / "corpus"
    generate(out, groups=GROUPS, hours=HOURS, seed=5)
    return out


def _files(path: Path) -> dict[str, bytes]:
    return {f.name: f.read_bytes() for f in path.glob("*.csv")}


def test_the_same_seed_writes_the_same_corpus_and_another_seed_another(
    corpus_dir: Path, tmp_path: Path
) -> None:
    again = generate(tmp_path / "again", groups=GROUPS, hours=HOURS, seed=5)
    other = generate(tmp_path / "other", groups=GROUPS, hours=HOURS, seed=6)

    assert _files(again.path) == _files(corpus_dir)
    assert load_corpus(again.path).table.equals(load_corpus(corpus_dir).table)
    assert _files(other.path)["incidents.csv"] != _files(corpus_dir)["incidents.csv"]


def test_the_loader_reads_it_and_every_fault_kind_is_labelled_on_its_group(
    corpus_dir: Path,
) -> None:
    corpus = load_corpus(corpus_dir)
    table = corpus.table.to_pandas()

    assert corpus.scan_interval_s == 10.0 and corpus.warmup_s == 1800.0
    assert set(table["cluster"]) == {CLUSTER}
    assert set(corpus.groups["group"]) >= set(table["group"])
    assert set(corpus.groups["scenario"]) == set(BENIGN) | set(FAULT_KINDS)
    assert set(corpus.labels["kind"]) >= set(FAULT_KINDS) - {"retention_loss"}
    # Each fault's group carries its label (a slow consumer whose records the retention did
    # not reach within the corpus is labelled as falling behind); benign groups carry none.
    kind_of = corpus.groups.set_index("group")["kind"]
    for label in corpus.labels.itertuples():
        expected = kind_of[label.group]
        assert label.kind == expected or (expected, label.kind) == ("retention_loss", "lagging")
    assert set(corpus.labels["group"]) == set(kind_of[kind_of != ""].index)
    onset = pd.to_datetime(corpus.labels["onset"], utc=True)
    assert (onset <= corpus.labels["start"]).all()
    assert (corpus.labels["start"] <= corpus.labels["end"]).all()
    assert (onset >= table["ts"].min() + pd.Timedelta(seconds=corpus.warmup_s)).all()
    scans = table.groupby("ts").size()
    assert 0.75 * HOURS * 360 < len(scans) < HOURS * 360, "some scans missed, most there"


def _per_scan(table: pd.DataFrame, group: str) -> pd.DataFrame:
    rows = table[(table["group"] == group) & table["available"]]
    return rows.groupby("ts").agg(
        committed=("committed_offset", "sum"),
        log_end=("log_end_offset", "sum"),
        state=("group_state", "first"),
        members=("members", "first"),
    )


def test_the_history_shows_what_each_label_says(corpus_dir: Path) -> None:
    corpus = load_corpus(corpus_dir)
    table = corpus.table.to_pandas()
    for label in corpus.labels.itertuples():
        scans = _per_scan(table, label.group)
        during = scans[(scans.index >= label.start) & (scans.index <= label.end)]
        before = scans[scans.index < pd.Timestamp(label.onset)]
        assert len(during), label
        lag = during["log_end"] - during["committed"]
        if label.kind == "rewound":
            assert during["committed"].min() < before["committed"].iloc[-1], label
        elif label.kind == "stuck_rebalance":
            assert during["state"].isin(REBALANCING).mean() > 0.8, label
        elif label.kind in ("stopped", "consumers_gone"):
            assert (during["members"] == 0).any(), label
        elif label.kind == "rebalance_storm":
            assert during["members"].diff().abs().gt(0).sum() >= 2, label
        elif label.kind == "stalled":
            rows = table[(table["group"] == label.group) & table["available"]]
            rows = rows[(rows["ts"] >= label.start) & (rows["ts"] <= label.end)]
            per_partition = rows.groupby("partition").agg(
                moved=("committed_offset", lambda c: c.max() - c.min()),
                came=("log_end_offset", lambda c: c.max() - c.min()),
            )
            assert ((per_partition["moved"] == 0) & (per_partition["came"] > 0)).any(), label
        else:  # lagging, retention_loss: further behind than before
            assert lag.max() > (before["log_end"] - before["committed"]).max(), label


def test_no_commit_goes_back_except_where_labelled_or_the_topic_was_recreated(
    corpus_dir: Path,
) -> None:
    corpus = load_corpus(corpus_dir)
    table = corpus.table.to_pandas()
    table = table[table["available"]].sort_values(["group", "partition", "ts"])
    back = table.groupby(["group", "partition"])["committed_offset"].diff() < 0
    groups = set(table.loc[back, "group"])
    scenario = corpus.groups.set_index("group")["scenario"]
    assert {g for g in groups if scenario[g] not in ("rewound", "topic-recreated")} == set()
    assert np.all(table["committed_offset"].dropna() >= 0)


@pytest.mark.parametrize("protocol", ["eager", "cooperative", "consumer"])
def test_a_killed_member_is_listed_until_its_session_times_out_then_replaced(
    protocol: str,
) -> None:
    """kill -9 at 600 s, back 20 s later, session 45 s: the dead member stays listed (its
    partitions unread) until 645 s; after that the group holds only the new member, which
    reads from the last commit."""
    spec = GroupSpec("g", "crash-restart", "", 4, 40.0, "java", protocol, 45, 300, "every:30",
                     {"headroom": 3.0, "members": 1, "commit_on_revoke": True})  # fmt: skip
    group = Group(spec, 1200, np.random.default_rng(3))
    script = Script(group)
    group.build_log()
    (first,) = script.members()
    script.replace(first, 600, 20, "crash")
    group.coordinate()
    group.consume()

    assert len(group.sets[group.member_set[630]]) == 2, "the dead one and the new one"
    assert group.state[630] != GROUP_STATES.index("Stable") or protocol == "consumer"
    after = group.sets[group.member_set[700]]
    assert after == (group.procs[1].member_id,)
    assert (group.owner[:, 700] == 1).all()
    # Nothing was committed on the way out: the offset stood still from the last commit
    # before the kill until the new member's first commit.
    stood = group.committed_at(0, np.arange(600, 645))
    assert len(set(stood.tolist())) == 1
    assert group.committed_at(0, np.array([900]))[0] > stood[0]
