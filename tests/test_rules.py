"""Each rule firing and not firing, `for` and `keep_firing_for`, the gate, and transitions.

Scenarios are written in the same series notation as `notifier test-rules` files.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest

from notifier.rules import RuleTest, TransitionTracker, parse_rules, replay_table, series_samples
from notifier.types import GroupStatus, samples_to_table
from tests.rule_helpers import BURROW_ONLY, evaluate, only, series

OK, ERR = GroupStatus.OK, GroupStatus.ERR

# --------------------------------------------------------------------------------------------
# Burrow's rules on scans: STALL vs STOP, rare committers, rewinds


def test_offset_frozen_with_members_present_is_stall():
    result = evaluate(BURROW_ONLY, [series(committed="10x9", log_end="11+1x9")], 540)
    assert result.status is GroupStatus.ERR
    assert result.partitions[0].status.value == "STALL"
    (finding,) = result.findings
    assert finding.rule == "burrow" and finding.status == "STALL"
    assert finding.evidence["offsets"] == [10]
    assert "not moving" in finding.message


def test_offset_frozen_with_no_members_is_stop():
    result = evaluate(
        BURROW_ONLY,
        [series(committed="10x9", log_end="11+1x9", group_state="Emptyx9", members="0x9")],
        540,
    )
    assert result.partitions[0].status.value == "STOP"
    assert result.status is GroupStatus.ERR


def test_a_consumer_that_commits_once_a_minute_is_not_stalled_between_commits():
    # Scans every 10 s; the consumer commits every 60 s and keeps up between commits.
    committed = " ".join(str(100 * (i // 6)) for i in range(60))
    log_end = " ".join(str(100 * (i // 6) + 15 * (i % 6)) for i in range(60))
    result = evaluate(BURROW_ONLY, [series(committed=committed, log_end=log_end)], 590, "10s")
    assert result.complete == 1.0
    assert result.status is GroupStatus.OK


def test_rewind_that_does_not_catch_up_is_err():
    result = evaluate(
        BURROW_ONLY,
        [
            series(
                committed="100 200 300 400 500 600 700 300 350 400",
                log_end="700 800 900 1000 1100 1200 1300 1400 1500 1600",
            )
        ],
        540,
    )
    assert result.partitions[0].status.value == "REWIND"
    assert result.status is GroupStatus.ERR


def test_an_offset_of_a_deleted_topic_seen_once_after_it_is_created_again_is_no_rewind():
    # Seen on Apache Kafka 4.4: the scan after the topic is created again reads the new log
    # (log end 0) with the group's offset of the old one (237); the next, the new offset (26).
    recreated = series(committed="200+10x3 237 237 26 36 46", log_end="210+10x3 240 0 28 40 50")
    result = evaluate(only({"kind": "rewind"}), [recreated], 450)
    assert result.status is GroupStatus.OK, result.findings
    # In one log, a step back is a rewind however far the log end has gone.
    rewound = series(committed="200+10x3 237 237 26 36 46", log_end="210+10x3 240 250 260 270 280")
    assert evaluate(only({"kind": "rewind"}), [rewound], 450).status is GroupStatus.ERR


def test_healthy_consumer_is_ok():
    lag_jitters = "5 15 22 38 41 55 62 78 81 95"  # a constant lag would be Burrow's WARN
    result = evaluate(BURROW_ONLY, [series(committed="0+10x9", log_end=lag_jitters)], 540)
    assert result.status is GroupStatus.OK
    assert result.findings == []
    assert result.total_lag == 5


def test_allowed_lag_override_per_group():
    rules = {"burrow": {"overrides": [{"match": {"group": "batch-.*"}, "allowed_lag": 1000}]}}
    frozen = {"committed": "10x9", "log_end": "100x9"}
    assert evaluate(rules, [series(**frozen)], 540).status is GroupStatus.ERR
    assert evaluate(rules, [series(**frozen, group="batch-nightly")], 540).status is GroupStatus.OK


# --------------------------------------------------------------------------------------------
# The complete-flag gate


def test_a_new_group_is_partial_until_its_window_is_covered():
    result = evaluate(BURROW_ONLY, [series(committed="10x4", log_end="11+1x4")], 240)
    assert result.partial is True
    assert result.complete == 0.0
    assert result.partitions[0].complete == 0.5
    assert result.partitions[0].status.value == "OK"  # Burrow's minimum_complete: no rules ran


def test_a_scan_gap_makes_the_window_partial_then_complete_again():
    inputs = [series(committed="10x3 _ 10x9", log_end="11x3 _ 12x9")]
    assert evaluate(BURROW_ONLY, inputs, 480).partial is True
    later = evaluate(BURROW_ONLY, inputs, 840)
    assert later.partial is False and later.complete == 1.0


def test_partial_results_never_become_transitions():
    config = parse_rules(BURROW_ONLY)
    test = RuleTest.model_validate(
        {
            "name": "t",
            "input": [series(committed="10x14", log_end="11+1x14")],
            "expect": [{"at": 0, "group": "g", "status": "OK"}],
        }
    )
    seen = []
    replay_table(
        samples_to_table(series_samples(test, "t")), config, 60, on_transitions=seen.extend
    )
    assert [(t.previous, t.current, t.at) for t in seen] == [
        (GroupStatus.OK, GroupStatus.ERR, 540_000)  # the first complete window, not before
    ]


def _transitions(rules: dict, **fields: str) -> list:
    test = RuleTest.model_validate(
        {
            "name": "t",
            "input": [series(**fields)],
            "expect": [{"at": 0, "group": "g", "status": "OK"}],
        }
    )
    seen: list = []
    replay_table(
        samples_to_table(series_samples(test, "t")),
        parse_rules(rules),
        60,
        on_transitions=seen.extend,
    )
    return seen


REWIND_AND_STALL = {
    "burrow": {"enabled": False},
    "rules": [
        {"name": "rewound", "kind": "rewind"},
        {"name": "stalled-or-stopped", "kind": "progress"},
    ],
}


def test_a_rewind_while_the_group_is_stopped_is_news_for_its_open_incident():
    # The usual way to reset offsets: stop the consumers (the group must be empty), reset,
    # start them again. The stop pages first; the rewind, at the same status, is news.
    seen = _transitions(
        REWIND_AND_STALL,
        committed="0+10x12 120x6 50x3",
        log_end="5+10x12 125+10x10",
        group_state="Stablex12 Emptyx10",
        members="1x12 0x10",
    )
    stopped, rewound = seen
    assert (stopped.previous, stopped.current, stopped.news) == (OK, ERR, ())
    assert [f.rule for f in stopped.result.findings] == ["stalled-or-stopped"]
    assert (rewound.previous, rewound.current, rewound.news) == (ERR, ERR, ("rewound",))
    assert rewound.at == 20 * 60_000  # the scan that saw the offset go back


LAG_RULES = {
    "burrow": {"enabled": False},
    "rules": [
        {"name": "deep", "kind": "lag", "threshold": 50, "severity": "err"},
        {"name": "deeper", "kind": "lag", "threshold": 100, "severity": "err"},
        {"name": "some", "kind": "lag", "threshold": 5, "severity": "warn"},
    ],
}


def _lag_transitions(
    lags: list[int], tracker: TransitionTracker, before: dict[int, Callable[[], None]] | None = None
) -> list:
    """A partition's lag, a scan a minute, through LAG_RULES and ``tracker`` (``before``: what
    to do to the tracker before the scan of that minute)."""
    from notifier.rules import Evaluator, ScanColumns, WindowStore
    from notifier.types import Sample

    config = parse_rules(LAG_RULES)
    store = WindowStore(config.window, 60)
    evaluator = Evaluator(config, store)
    seen = []
    for minute, lag in enumerate(lags):
        if before and minute in before:
            before[minute]()
        sample = Sample(ts=minute * 60_000, cluster="c", group="g", topic="t", partition=0,
                        committed_offset=1000, log_end_offset=1000 + lag)  # fmt: skip
        store.ingest_scan(ScanColumns.from_samples([sample]))
        seen += tracker.update(evaluator.evaluate(minute * 60_000))
    return seen


def test_a_rule_already_firing_at_the_status_is_no_news_and_a_warn_under_an_err_neither():
    seen = _lag_transitions([0] * 10 + [60, 60, 200, 200, 60, 200], TransitionTracker())
    assert [(t.at // 60_000, t.previous, t.current, t.news) for t in seen] == [
        (10, OK, ERR, ()),  # "deep" (its WARN "some" is no news under it)
        (12, ERR, ERR, ("deeper",)),
    ]  # "deeper" clearing and firing again in the same incident is told once


def test_a_group_handed_back_takes_the_rules_firing_then_without_news():
    # Another instance watched the group meanwhile (and told its receivers, by the log it
    # handed back): what this instance saw firing before it left is forgotten.
    tracker = TransitionTracker()

    def handed_over_and_back() -> None:
        tracker.forget([("c", "g")])
        tracker.hold(("c", "g"), ERR)

    seen = _lag_transitions([0] * 10 + [60, 60, 200, 200], tracker, {12: handed_over_and_back})
    assert [(t.at // 60_000, t.previous, t.current, t.news) for t in seen] == [(10, OK, ERR, ())]
    assert tracker.told == {("c", "g"): frozenset({"deep", "deeper"})}
    tracker.restore({})
    assert tracker.told == {} and tracker.statuses == {}


def test_a_rewind_made_during_a_scan_gap_pages_at_the_first_scan_after_it():
    # An operator resets the offset while the broker is down; the consumer re-reads the
    # records faster than the window after the gap fills again.
    seen = _transitions(
        REWIND_AND_STALL,
        committed="100+10x11 _x5 40+60x3 240+10x10",
        log_end="105+10x11 _x5 265+10x14",
    )
    first = seen[0]
    assert (first.previous, first.current) == (GroupStatus.OK, GroupStatus.ERR)
    assert first.at == 17 * 60_000  # the first scan after the gap, its window still partial
    assert first.result.partial is True
    assert [f.rule for f in first.result.findings] == ["rewound"]
    # Nothing resolves from a partial window: the consumer is past its old offset two scans
    # later, and the incident ends when the window after the gap is whole again.
    (resolved,) = seen[1:]
    assert resolved.current is GroupStatus.OK and resolved.result.partial is False
    assert resolved.at == (17 + 9) * 60_000


def test_a_gap_without_a_rewind_still_keeps_a_partial_window_quiet():
    # The same gap; the offset does not move while the log grows: a stall, reported only
    # once the window after the gap is whole, not from the half-filled one.
    seen = _transitions(
        REWIND_AND_STALL,
        committed="100+10x11 _x5 210x14",
        log_end="105+10x11 _x5 265+10x14",
    )
    first = seen[0]
    assert (first.current, first.at) == (GroupStatus.ERR, (17 + 9) * 60_000)
    assert [f.rule for f in first.result.findings] == ["stalled-or-stopped"]
    assert all(not t.result.partial for t in seen)


def test_minimum_complete_zero_behaves_like_burrow():
    result = evaluate(
        {"burrow": {"minimum_complete": 0.0}}, [series(committed="10x3", log_end="11+1x3")], 180
    )
    assert result.partial is False
    assert result.status is GroupStatus.ERR


# --------------------------------------------------------------------------------------------
# The other rules


@pytest.mark.parametrize(
    "scope,threshold,fires",
    [("partition", 40, True), ("partition", 60, False), ("group", 90, True)],
)
def test_lag_threshold(scope, threshold, fires):
    inputs = [
        series(committed="0+10x9", log_end="50+10x9"),
        series(partition=1, committed="0+10x9", log_end="50+10x9"),
    ]
    result = evaluate(only({"kind": "lag", "scope": scope, "threshold": threshold}), inputs, 540)
    assert (result.status is GroupStatus.WARN) == fires
    if fires and scope == "group":
        (finding,) = result.findings
        assert finding.evidence["total_lag"] == 100 and finding.partition is None


def test_lag_in_seconds_fires_on_time_behind_not_offsets():
    # 60 offsets a minute; 300 behind = 5 minutes.
    inputs = [series(committed="0+60x9", log_end="300+60x9")]
    assert (
        evaluate(only({"kind": "lag_seconds", "threshold": "4m"}), inputs, 540).status
        is GroupStatus.WARN
    )
    assert (
        evaluate(only({"kind": "lag_seconds", "threshold": "6m"}), inputs, 540).status
        is GroupStatus.OK
    )
    result = evaluate(BURROW_ONLY, inputs, 540)
    assert result.max_lag_seconds == pytest.approx(300.0)


def test_lag_in_seconds_starts_over_when_the_log_end_offset_goes_backwards():
    # The topic was recreated (or the cluster rebuilt empty) during a five-scan gap: the LEO
    # starts again from 10, and the group, reading the new topic, is caught up all along.
    offsets = "1000+10x19 _x5 10+1x199"
    inputs = [series(committed=offsets, log_end=offsets)]
    for at in (1800, 3000):
        result = evaluate(only({"kind": "lag_seconds", "threshold": "5m"}), inputs, at)
        assert result.status is GroupStatus.OK, result.findings
        assert result.max_lag_seconds == 0.0


def test_a_consumer_behind_on_a_recreated_topic_is_timed_against_the_new_log():
    # After the reset the LEO grows 60 a minute and the group stays 120 offsets (2 min) behind.
    inputs = [series(committed="5000+60x9 0+60x9", log_end="5000+60x9 120+60x9")]
    result = evaluate(BURROW_ONLY, inputs, 19 * 60)
    assert result.max_lag_seconds == pytest.approx(120.0)


def test_a_read_committed_consumer_on_the_commit_marker_of_an_idle_topic_is_not_behind():
    # 60 records a minute, then the producer stops; the consumer has read everything and sits
    # on the last transaction's commit marker, one below the log end, for 20 minutes.
    rule = only({"kind": "lag_seconds", "threshold": "5m"})
    idle = [series(committed="0+60x30 1739x120", log_end="1+60x30 1740x120")]
    assert evaluate(rule, idle, 149 * 60).status is GroupStatus.OK
    # One stuck on a record that arrived after its last commit is behind (also one below).
    stuck = [series(committed="0+60x30 1740x120", log_end="0+60x30 1740x4 1741x115")]
    assert evaluate(rule, stuck, 149 * 60).status is GroupStatus.WARN


def test_lag_in_seconds_does_not_open_while_the_consumer_is_about_to_catch_up():
    # A new group reads an hour of history from the earliest offset, 400 offsets a minute
    # while 60 arrive: 9 minutes behind at the last scan, caught up within two at that pace.
    rule = {"kind": "lag_seconds", "threshold": "5m", "catching_up_within": "10m"}
    catching_up = [series(committed="0+400x10", log_end="3600+60x10")]
    assert evaluate(only(rule), catching_up, 540).status is GroupStatus.OK
    assert evaluate(only({**rule, "catching_up_within": "0s"}), catching_up, 540).status is (
        GroupStatus.WARN
    )
    # One that reads slower than records arrive never catches up: it opens.
    falling = [series(committed="0+50x10", log_end="3600+60x10")]
    assert evaluate(only(rule), falling, 540).status is GroupStatus.WARN


def test_lag_in_seconds_unknown_is_not_zero_and_never_fires():
    result = evaluate(
        only({"kind": "lag_seconds", "threshold": "0s"}), [series(committed="_", log_end="500")], 0
    )
    assert result.max_lag_seconds is None
    assert result.partitions[0].lag_seconds is None
    assert result.status is GroupStatus.OK


def test_stuck_rebalance_needs_n_consecutive_samples():
    rule = only({"kind": "stuck_rebalance", "samples": 4})
    stuck = series(
        committed="10x9",
        log_end="10+5x9",
        group_state="Stablex5 PreparingRebalance CompletingRebalance Unknownx1",
    )
    assert evaluate(rule, [stuck], 540).status is GroupStatus.ERR
    flapping = series(
        committed="10x9",
        log_end="10+5x9",
        group_state="Stablex5 PreparingRebalancex1 Stable Unknown",
    )
    assert evaluate(rule, [flapping], 540).status is GroupStatus.OK


def test_rebalance_storm_counts_member_set_changes_in_the_window():
    rule = only({"kind": "rebalance_storm", "max_changes": 2})
    storm = series(committed="0+10x9", log_end="0+10x9", member_hash="1 1 2 3 3 4 4 4 4 4")
    calm = series(committed="0+10x9", log_end="0+10x9", member_hash="1 1 2 2 2 2 2 2 2 2")
    result = evaluate(rule, [storm], 540)
    assert result.status is GroupStatus.WARN
    assert result.findings[0].evidence["member_changes"] == 3
    assert evaluate(rule, [calm], 540).status is GroupStatus.OK


def test_retention_lost_is_err_and_near_the_edge_is_warn():
    rule = only({"kind": "retention", "warn_fraction": 0.1})
    lost = series(committed="100x9", log_end="1000x9", log_start="200x9")
    near = series(committed="250x9", log_end="1000x9", log_start="200x9")
    safe = series(committed="900x9", log_end="1000x9", log_start="200x9")
    assert evaluate(rule, [lost], 540).status is GroupStatus.ERR
    assert "deleted by retention" in evaluate(rule, [lost], 540).findings[0].message
    assert evaluate(rule, [near], 540).status is GroupStatus.WARN
    assert evaluate(rule, [safe], 540).status is GroupStatus.OK


def test_retention_does_not_warn_on_a_log_nothing_was_ever_deleted_from():
    """A re-created topic or a fresh partition: a few records from offset 0, one not yet read
    is "within 10%" of the range, but retention has deleted nothing; losing them still pages."""
    rule = only({"kind": "retention", "warn_fraction": 0.1})
    fresh = series(committed="0x9", log_end="1x9", log_start="0x9")
    assert evaluate(rule, [fresh], 540).status is GroupStatus.OK
    trimmed = series(committed="3x9", log_end="6x9", log_start="3x9")
    assert evaluate(rule, [trimmed], 540).status is GroupStatus.WARN


def test_consumers_gone_when_no_members_and_lag_grows():
    rule = only({"kind": "consumers_gone"})
    gone = series(committed="10x9", log_end="10+5x9", members="0x9", group_state="Emptyx9")
    idle = series(committed="10x9", log_end="10x9", members="0x9", group_state="Emptyx9")
    assert evaluate(rule, [gone], 540).status is GroupStatus.ERR
    assert evaluate(rule, [idle], 540).status is GroupStatus.OK


def test_selectors_limit_a_rule_to_matching_groups():
    rules = only(
        {
            "kind": "lag",
            "threshold": 1,
            "match": {"group": ["orders-.*"]},
            "exclude": {"topic": "audit"},
        }
    )
    behind = {"committed": "0x9", "log_end": "10x9"}
    assert evaluate(rules, [series(group="orders-eu", **behind)], 540).status is GroupStatus.WARN
    assert evaluate(rules, [series(group="billing", **behind)], 540).status is GroupStatus.OK
    assert (
        evaluate(rules, [series(group="orders-eu", topic="audit", **behind)], 540).status
        is GroupStatus.OK
    )


# --------------------------------------------------------------------------------------------
# for and keep_firing_for


def test_for_holds_a_condition_before_it_fires():
    rule = only({"kind": "lag", "threshold": 5, "for": "3m"})
    inputs = [series(committed="0x9", log_end="10x9")]
    assert evaluate(rule, inputs, 120).status is GroupStatus.OK
    fired = evaluate(rule, inputs, 180)
    assert fired.status is GroupStatus.WARN
    assert fired.findings[0].since == 0


def test_for_restarts_when_the_condition_breaks():
    rule = only({"kind": "lag", "threshold": 5, "for": "3m"})
    inputs = [series(committed="0 0 0 10 10 10 10 10", log_end="10 10 10 10 20 20 20 20")]
    assert evaluate(rule, inputs, 360).status is GroupStatus.OK
    assert evaluate(rule, inputs, 420).status is GroupStatus.WARN


def test_keep_firing_for_holds_an_alert_after_it_clears():
    rule = only({"kind": "lag", "threshold": 5, "keep_firing_for": "2m"})
    inputs = [series(committed="0 0 10 10 10 10", log_end="10 10 10 10 10 10")]
    kept = evaluate(rule, inputs, 180)
    assert kept.status is GroupStatus.WARN
    assert "keep_firing_for" in kept.findings[0].message
    assert evaluate(rule, inputs, 240).status is GroupStatus.OK


# --------------------------------------------------------------------------------------------
# Transitions


def test_transitions_follow_status_changes_and_gone_groups_resolve():
    config = parse_rules(only({"kind": "lag", "threshold": 5, "severity": "warn"}))
    test = RuleTest.model_validate(
        {
            "name": "t",
            "input": [series(committed="0x11 20x5", log_end="10x11 20x5")],
            "expect": [{"at": 0, "group": "g", "status": "OK"}],
        }
    )
    seen = []
    tracker = TransitionTracker()
    replay_table(
        samples_to_table(series_samples(test, "t")),
        config,
        60,
        on_evaluation=lambda e: seen.extend(tracker.update(e)),
    )
    assert [(t.previous.value, t.current.value) for t in seen] == [("OK", "WARN"), ("WARN", "OK")]
    assert seen[0].result.findings[0].rule == "r"
    assert tracker.gone([("local", "g")], 0) == []  # already OK: nothing to resolve


def test_a_group_id_reused_after_a_group_is_forgotten_starts_with_clean_for_state():
    from notifier.rules import Evaluator, ScanColumns, WindowStore
    from notifier.types import Sample

    config = parse_rules(only({"kind": "lag", "threshold": 5, "for": "3m"}))
    store = WindowStore(config.window, 60)
    evaluator = Evaluator(config, store)

    def scan(group: str, minute: int) -> None:
        sample = Sample(ts=minute * 60_000, cluster="c", group=group, topic="t", partition=0,
                        committed_offset=0, log_end_offset=100)  # fmt: skip
        store.ingest_scan(ScanColumns.from_samples([sample]))

    for minute in range(3):  # "old" has been behind for 2 minutes: pending, not firing
        scan("old", minute)
        evaluator.evaluate(minute * 60_000)
    old_gid = store.group_id("c", "old")
    store.remove_groups([("c", "old")])
    scan("new", 3)  # takes the freed id
    assert store.group_id("c", "new") == old_gid
    result = evaluator.evaluate(3 * 60_000).result("c", "new")
    assert result.status is GroupStatus.OK  # "old"'s pending time is not inherited
    assert evaluator.evaluate(6 * 60_000).result("c", "new").status is GroupStatus.WARN
