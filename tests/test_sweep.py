"""The sweep: a model of brokers and clients (kafkasim), benign patterns and faults over grids,
replayed through the backtest engine, and their heat maps."""

from __future__ import annotations

import dataclasses
import itertools
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

from notifier.backtest import sweep
from notifier.backtest.kafkasim import EMPTY, PREPARING, STABLE, GroupSpec, Population
from notifier.backtest.sweepreport import write_sweep_report
from notifier.rules import load_rules, parse_rules

ROOT = Path(__file__).resolve().parents[1]


def one_group(crash: dict, commit_every_s: float = 30.0, members: int = 1) -> tuple:
    pop = Population(900, seed=3)
    group = pop.add(
        GroupSpec("g", partitions=2, rate=50.0, commit_every_s=commit_every_s, members=members)
    )
    group.crash(300.0, member=0, **crash)
    samples = pop.samples(0)
    seconds = samples.ts // 1000
    first = samples.partition == 0
    return (
        seconds[first],
        samples.committed[first],
        samples.state[first],
        samples.members[first],
        samples.member_hash[first],
    )


def test_a_crash_with_no_commit_on_the_way_out_stands_still_then_reads_again_from_the_commit():
    t, committed, state, members, hashes = one_group(
        {
            "restart_s": 20.0,
            "session_timeout_s": 45.0,
            "static": False,
            "exit_commit": False,
            "cooperative": False,
            "rebalance_s": 2.0,
        }
    )
    assert np.all(np.diff(committed) >= 0)  # re-reading is not a rewind
    still = committed[(t > 300) & (t <= 345)]
    assert np.all(still == still[0])  # the dead member is kept until its session times out
    # Its pod is back after 20 s and waits in a rebalance for the dead member to expire.
    assert np.all(state[(t > 320) & (t < 345)] == PREPARING)
    assert members[(t > 320) & (t < 345)].max() == 2
    assert np.all(state[t > 360] == STABLE) and committed[-1] > still[0]
    assert len(set(hashes[t > 360].tolist())) == 1 and hashes[-1] != hashes[0]


def test_a_static_member_back_within_its_session_timeout_causes_no_rebalance():
    t, _, state, members, hashes = one_group(
        {
            "restart_s": 20.0,
            "session_timeout_s": 45.0,
            "static": True,
            "exit_commit": False,
            "cooperative": False,
            "rebalance_s": 2.0,
        }
    )
    assert np.all(state == STABLE) and np.all(members == 1)
    assert hashes[t > 330][0] != hashes[0]  # a new member id for the same instance


def test_a_single_member_whose_session_expired_leaves_the_group_empty_until_it_is_back():
    t, _, state, members, _ = one_group(
        {
            "restart_s": 60.0,
            "session_timeout_s": 10.0,
            "static": False,
            "exit_commit": False,
            "cooperative": False,
            "rebalance_s": 2.0,
        }
    )
    assert np.all(state[(t > 310) & (t < 360)] == EMPTY)
    assert np.all(members[(t > 310) & (t < 360)] == 0)


def test_a_transactional_topic_keeps_the_log_end_one_past_a_caught_up_consumer():
    pop = Population(1800, seed=4)
    pop.add(GroupSpec("g", partitions=1, rate=0.02, commit_every_s=5.0, transaction_every_s=30.0))
    samples = pop.samples(0)
    lag = samples.log_end - samples.committed
    assert lag.min() == 1  # never reaches the marker
    assert (lag == 1).mean() > 0.5  # caught up most of the time, one offset below the end


def short(pattern: sweep.Pattern, x: object, y: object) -> sweep.Pattern:
    return dataclasses.replace(pattern, x_values=(x,), y_values=(y,), duration_s=3600)


def pattern(name: str) -> sweep.Pattern:
    return next(p for p in (*sweep.BENIGN, *sweep.FAULTS) if p.name == name)


DEFAULTS = load_rules(ROOT / "rules.yaml")


def test_crash_restarts_that_commit_nothing_on_the_way_out_page_nobody():
    cell = dataclasses.replace(short(pattern("crash-restart"), 45, 10), duration_s=5400)
    result = sweep.run_pattern(cell, {"defaults": DEFAULTS}, replicas=4)
    assert int(result.cells["pages"].sum()) == 0
    # The same cell under the habit rule without its grace pages, as issue 28 reported.
    data = DEFAULTS.model_dump(by_alias=True, exclude_none=True)
    progress = next(r for r in data["rules"] if r["kind"] == "progress")
    progress.update({"grace": 0.0, "stop_after": 60.0, "keep_firing_capped": False})
    eager = parse_rules(data, "no grace")
    assert int(sweep.run_pattern(cell, {"eager": eager}, replicas=4).cells["pages"].sum()) > 0


@pytest.mark.parametrize(
    ("name", "x", "y"), [("standalone-assign", 30, 30), ("transactional", 30, 1.0)]
)
def test_standalone_and_transactional_consumers_page_nobody(name: str, x: object, y: object):
    result = sweep.run_pattern(short(pattern(name), x, y), {"defaults": DEFAULTS}, replicas=2)
    assert int(result.cells["pages"].sum()) == 0


def test_a_stall_of_a_thirty_second_committer_is_caught_within_its_grace(tmp_path: Path):
    cell = dataclasses.replace(short(pattern("stalled"), 30, 10.0), duration_s=5400)
    result = sweep.run_pattern(cell, {"defaults": DEFAULTS}, replicas=2)
    labels = result.labels
    assert labels["caught"].all()
    # From its first missed commit: its usual wait, 90 s of grace, a scan or two.
    assert labels["delay_s"].max() <= 150
    summary = sweep.summarize_sweep([result])["defaults"]
    assert summary["kinds"]["stalled"]["recall"] == 1.0
    written = write_sweep_report(tmp_path / "sweep.html", [result], ["defaults"], tmp_path)
    assert [p.name for p in written] == ["stalled.png"]
    assert written[0].read_bytes().startswith(b"\x89PNG")
    assert "stalled: members Stable" in (tmp_path / "sweep.html").read_text()


@pytest.mark.parametrize("benign", sweep.BENIGN, ids=lambda p: p.name)
def test_every_benign_grid_meets_every_end_of_every_range_with_every_other_value(
    benign: sweep.Pattern,
):
    groups = sweep.design(benign, replicas=2)
    axes = {benign.x_name: benign.x_values, benign.y_name: benign.y_values, **benign.axes}
    values = [{benign.x_name: x, benign.y_name: y, **params} for x, y, params in groups]
    for a, b in itertools.combinations(axes, 2):
        met = {(v[a], v[b]) for v in values}
        assert met == set(itertools.product(axes[a], axes[b])), (a, b)
    per_cell = Counter((x, y) for x, y, _ in groups)
    assert set(per_cell) == set(itertools.product(benign.x_values, benign.y_values))
    assert min(per_cell.values()) >= 2


def test_the_full_design_gives_every_cell_every_value_of_the_other_axes():
    crash = pattern("crash-restart")
    groups = sweep.design(crash, replicas=4, full=True)
    for axis, options in crash.axes.items():
        seen: dict[tuple[object, object], set[object]] = {}
        for x, y, params in groups:
            seen.setdefault((x, y), set()).add(params[axis])
        assert all(found == set(options) for found in seen.values()), axis
    assert len(seen) == len(crash.x_values) * len(crash.y_values)


def test_a_producer_burst_raises_the_lag_and_the_consumers_drain_it():
    pop = Population(900, seed=5)
    group = pop.add(GroupSpec("g", partitions=1, rate=100.0, commit_every_s=5.0, headroom=3.0))
    group.produce_burst(300.0, 360.0, 10.0)
    samples = pop.samples(0)
    t = samples.ts // 1000
    lag = samples.log_end - samples.committed
    before = lag[t < 300].max()
    # 10 x the rate for 60 s against 3 x: 7 x 100 x 60 records behind, drained at 200 a second
    assert lag[(t > 350) & (t <= 370)].max() > 30 * before
    assert lag[t > 600].max() <= before


def test_batch_jobs_are_judged_once_the_service_has_seen_two_whole_runs_of_the_slowest():
    batch = pattern("batch-job")
    slowest_s = max(batch.x_values) * 60
    assert batch.warmup_s >= 3 * slowest_s  # the run it started in, then two whole periods
    assert batch.duration_s - batch.warmup_s >= 2 * slowest_s
