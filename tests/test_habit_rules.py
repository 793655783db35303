"""The rules that judge a group by its own habits, on per-scan evidence: `progress` (STALL and
STOP), `rewind`, `falling_behind`, a `rebalance_storm` that must last, and hysteresis on lag.

Scans are 10 s apart, as in production; series are built in Python where they are long.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from notifier.rules import RuleTest, TransitionTracker, parse_rules, replay_table, series_samples
from notifier.types import GroupStatus, Transition, samples_to_table
from tests.rule_helpers import evaluate, only, series


def joined(values: list[int] | list[str]) -> str:
    return " ".join(str(v) for v in values)


def transitions(rules: dict[str, Any], inputs: list[dict[str, Any]]) -> list[Transition]:
    """Every transition a 10 s scan replay of one group gives."""
    test = RuleTest.model_validate(
        {
            "name": "t",
            "interval": "10s",
            "input": inputs,
            "expect": [{"at": 0, "group": inputs[0]["group"]}],
        }
    )
    seen: list[Transition] = []
    tracker = TransitionTracker()
    replay_table(
        samples_to_table(series_samples(test, "t")),
        parse_rules(rules),
        10,
        on_evaluation=lambda e: seen.extend(tracker.update(e)),
    )
    return seen


PROGRESS = only({"kind": "progress", "stall_after": "30s", "stop_after": "60s", "tolerance": 1.5})


# --------------------------------------------------------------------------------------------
# STALL: the offset stops moving while records arrive


def test_a_consumer_that_commits_every_scan_is_stalled_30s_after_it_stops():
    moving = list(range(0, 300, 10))  # 30 scans, a commit each
    committed = moving + [290] * 12
    log_end = [c + 5 for c in range(0, 420, 10)]
    inputs = [series(committed=joined(committed), log_end=joined(log_end))]
    assert evaluate(PROGRESS, inputs, 310, "10s").status is GroupStatus.OK
    result = evaluate(PROGRESS, inputs, 330, "10s")
    assert result.status is GroupStatus.ERR
    (finding,) = result.findings
    assert finding.status == "STALL"
    assert "has not moved for 40s (usually within 10s)" in finding.message
    assert finding.evidence["usual_wait_s"] == pytest.approx(10, rel=0.05)


def test_a_consumer_that_commits_every_five_minutes_is_not_stalled_between_commits():
    # Seven five-minute commits teach the habit; then it keeps to it for an hour.
    committed = [300 * (i // 30) for i in range(30 * 19)]
    log_end = [i * 10 + 5 for i in range(30 * 19)]
    inputs = [series(committed=joined(committed), log_end=joined(log_end))]
    assert transitions(PROGRESS, inputs) == []


def test_a_five_minute_committer_that_misses_its_commit_is_caught_within_half_a_cadence():
    cadence = 30  # scans: five minutes
    committed = [300 * (i // cadence) for i in range(cadence * 8)]
    last = committed[-1]
    committed += [last] * (cadence * 2)
    log_end = [i * 10 + 5 for i in range(len(committed))]
    seen = transitions(PROGRESS, [series(committed=joined(committed), log_end=joined(log_end))])
    assert [(t.previous.value, t.current.value) for t in seen] == [("OK", "ERR")]
    stalled_since_s = (cadence * 7) * 10  # the last move
    fired_after_s = seen[0].at / 1000 - stalled_since_s
    # 1.5 x the longest of its 7 waits, which falls short of the longest there will be by 1/7.
    assert 1.5 * 300 <= fired_after_s <= 1.5 * 300 * 8 / 7 + 10


def test_a_new_group_is_assumed_to_commit_every_ten_minutes_until_it_shows_its_habit():
    inputs = [series(committed="100x19", log_end=joined(list(range(105, 305, 10))))]
    assert evaluate(PROGRESS, inputs, 190, "10s").status is GroupStatus.OK
    long_wait = [series(committed="100x94", log_end=joined(list(range(105, 1055, 10))))]
    assert evaluate(PROGRESS, long_wait, 590, "10s").status is GroupStatus.OK
    # The assumed interval is a bound, not a wait seen: no tolerance on it (no grace here).
    (finding,) = evaluate(PROGRESS, long_wait, 600, "10s").findings
    assert "habit not learned yet, 10 min assumed" in finding.message


def test_an_idle_topic_with_a_record_left_unread_is_not_stalled():
    # read_committed consumers never "read" the transaction marker at the log end.
    inputs = [series(committed="100x60", log_end="101x60")]
    assert evaluate(PROGRESS, inputs, 590, "10s").status is GroupStatus.OK


# --------------------------------------------------------------------------------------------
# STOP: the members are gone while records arrive


def members_gone_for(scans: int) -> list[dict[str, Any]]:
    n = 40 + scans + 30
    committed = list(range(0, 400, 10)) + [390] * scans + list(range(400, 700, 10))
    log_end = [i * 10 + 5 for i in range(n)]
    states = ["Stable"] * 40 + ["Empty"] * scans + ["Stable"] * 30
    members = [2] * 40 + [0] * scans + [2] * 30
    hashes = [1] * 40 + [0] * scans + [2] * 30
    return [
        series(committed=joined(committed), log_end=joined(log_end), group_state=joined(states),
               members=joined(members), member_hash=joined(hashes))
    ]  # fmt: skip


def test_a_quick_restart_is_not_a_stop():
    assert transitions(PROGRESS, members_gone_for(4)) == []


def test_members_gone_for_a_minute_while_records_arrive_is_stop():
    seen = transitions(PROGRESS, members_gone_for(12))
    assert [(t.previous.value, t.current.value) for t in seen] == [("OK", "ERR"), ("ERR", "OK")]
    (finding,) = seen[0].result.findings
    assert finding.status == "STOP"
    assert finding.message.startswith("no members for 60s")
    assert seen[0].at / 1000 == 400 + 60


def test_a_stop_lasts_until_the_consumer_reads_again_not_until_its_members_return():
    # Members are back after two minutes but the offset only moves a minute later: one
    # incident, resolved when the consumer reads, never "recovered" then paged again.
    gone, idle, n = 12, 6, 40 + 12 + 6 + 20
    committed = list(range(0, 400, 10)) + [390] * (gone + idle) + list(range(400, 600, 10))
    log_end = [i * 10 + 5 for i in range(n)]
    states = ["Stable"] * 40 + ["Empty"] * gone + ["Stable"] * (idle + 20)
    members = [2] * 40 + [0] * gone + [2] * (idle + 20)
    hashes = [1] * 40 + [0] * gone + [2] * (idle + 20)
    inputs = [
        series(committed=joined(committed), log_end=joined(log_end), group_state=joined(states),
               members=joined(members), member_hash=joined(hashes))
    ]  # fmt: skip
    seen = transitions(PROGRESS, inputs)
    assert [(t.previous.value, t.current.value) for t in seen] == [("OK", "ERR"), ("ERR", "OK")]
    assert seen[1].at / 1000 == (40 + gone + idle) * 10  # the first scan the offset moved
    k = 40 + gone + 3  # members back for three scans, offset still where it stopped
    upto = [{key: (joined(v.split()[: k + 1]) if key in ("committed", "log_end", "group_state",
             "members", "member_hash") else v) for key, v in inputs[0].items()}]  # fmt: skip
    (finding,) = evaluate(PROGRESS, upto, k * 10, "10s").findings
    assert finding.status == "STALL"
    assert "members present but offset 390 has not moved for" in finding.message


def test_a_commit_cadence_is_the_groups_so_a_partition_with_rare_records_keeps_it():
    # Both partitions are committed every five minutes. Records reach partition 1 only just
    # before its commits, so on its own it would have learned 20 s waits and be called stalled
    # the first time a record lands right after a commit.
    cadence, rounds = 30, 10
    n = cadence * rounds
    committed0 = [300 * (i // cadence) for i in range(n)]
    log_end0 = [i * 10 + 5 for i in range(n)]
    log_end1, committed1, produced = [], [], 0
    for i in range(n):
        arrives = i % cadence in (cadence - 2, cadence - 1) or i == cadence * (rounds - 3) + 1
        produced += 1 if arrives else 0
        log_end1.append(produced)
        committed1.append(log_end1[cadence * (i // cadence) - 1] if i >= cadence else 0)
    inputs = [
        series(committed=joined(committed0), log_end=joined(log_end0)),
        series(partition=1, committed=joined(committed1), log_end=joined(log_end1)),
    ]
    assert transitions(PROGRESS, inputs) == []


# --------------------------------------------------------------------------------------------
# REWIND: at once, until the consumer is past where it was


def test_a_rewind_fires_at_once_and_holds_until_the_consumer_is_past_where_it_was():
    committed = [*range(0, 200, 10), 50, 80, 110, 140, 170, 200, 230]
    log_end = [c + 300 for c in range(0, 270, 10)]
    inputs = [series(committed=joined(committed), log_end=joined(log_end))]
    rule = only({"kind": "rewind"})
    at_rewind = [series(committed=joined(committed[:21]), log_end=joined(log_end[:21]))]
    (finding,) = evaluate(rule, at_rewind, 200, "10s").findings
    assert finding.status == "REWIND"
    assert finding.message == "committed offset went back from 190 to 50: 140 records to read again"
    assert evaluate(rule, inputs, 240, "10s").status is GroupStatus.ERR
    assert evaluate(rule, inputs, 250, "10s").status is GroupStatus.OK


# --------------------------------------------------------------------------------------------
# Falling behind: slower than the partition normally produces, not a burst


def positions(rates: list[float], capacity: float) -> tuple[list[int], list[int]]:
    """Log end and committed offset per 10 s scan for produced ``rates`` (records/s) and a
    consumer that reads at most ``capacity`` records/s."""
    produced = consumed = 0.0
    log_end, committed = [], []
    for rate in rates:
        produced += rate * 10
        consumed = min(produced, consumed + capacity * 10)
        log_end.append(int(produced))
        committed.append(int(consumed))
    return log_end, committed


FALLING = only({"kind": "falling_behind", "ratio": 0.85, "min_lag_seconds": "30s"})


def test_a_consumer_at_half_the_production_rate_is_falling_behind():
    rates = [100.0] * 220
    log_end, committed = positions(rates, 300.0)
    _, slow_committed = positions(rates, 50.0)
    # Healthy for half an hour, then it reads at 50/s while 100/s arrive.
    committed = committed[:180] + [committed[179] + (c - slow_committed[179])
                                   for c in slow_committed[180:]]  # fmt: skip
    seen = transitions(FALLING, [series(committed=joined(committed), log_end=joined(log_end))])
    assert [(t.previous.value, t.current.value) for t in seen] == [("OK", "WARN")]
    assert seen[0].at / 1000 - 1800 <= 120
    assert (
        "below 85% of the 100/s this partition normally gets" in seen[0].result.findings[0].message
    )


def test_a_burst_of_ten_times_the_rate_for_a_minute_is_not_falling_behind():
    rates = [100.0] * 180 + [1000.0] * 6 + [100.0] * 120
    log_end, committed = positions(rates, 300.0)
    assert max(e - c for e, c in zip(log_end, committed, strict=True)) > 3000  # it did lag
    assert (
        transitions(FALLING, [series(committed=joined(committed), log_end=joined(log_end))]) == []
    )


def test_a_consumer_whose_commits_trail_its_position_by_varying_amounts_keeps_up():
    # It reads everything at once but commits every one or two minutes the position it had
    # 10 or 50 s before: one interval looks slow and the next fast; over both it keeps up. (Judged
    # once its habit is learned: the first ten minutes are its first five waits.)
    rates = [100.0] * 360
    log_end, _ = positions(rates, 300.0)
    committed, last, due = [], 0, 6
    for i in range(len(rates)):
        if i == due:
            last = log_end[i - (5 if (due // 6) % 2 else 1)]
            due += 6 if (due // 6) % 2 else 12
        committed.append(last)
    inputs = [series(committed=joined(committed), log_end=joined(log_end))]
    assert [t for t in transitions(FALLING, inputs) if t.at > 600_000] == []


# --------------------------------------------------------------------------------------------
# Rebalance storms last; rolling deploys end


STORM = only({"kind": "rebalance_storm", "max_changes": 3, "lasting": "3m30s"})


def member_sets(changes_at: list[int], scans: int) -> str:
    generation, out = 1, []
    for i in range(scans):
        generation += i in changes_at
        out.append(generation)
    return joined(out)


def steady(scans: int, **fields: Any) -> dict[str, Any]:
    """A consumer keeping up with 1 record/s, committing every scan."""
    return series(
        committed=joined(list(range(0, 10 * scans, 10))),
        log_end=joined(list(range(5, 10 * scans + 5, 10))),
        **fields,
    )


def test_a_rolling_deploy_of_three_minutes_is_not_a_storm():
    changes = list(range(40, 58, 2))  # a change every 20 s for 3 minutes
    inputs = [steady(100, member_hash=member_sets(changes, 100))]
    assert transitions(STORM, inputs) == []


def test_member_changes_every_twenty_seconds_for_ten_minutes_are_a_storm():
    changes = list(range(40, 100, 2))
    inputs = [steady(120, member_hash=member_sets(changes, 120))]
    seen = transitions(STORM, inputs)
    assert [(t.previous.value, t.current.value) for t in seen] == [("OK", "WARN"), ("WARN", "OK")]
    assert seen[0].at / 1000 == 400 + 220  # the first change 3m30s after the run began
    assert "and is still changing" in seen[0].result.findings[0].message


# --------------------------------------------------------------------------------------------
# Hysteresis: a lag hovering around its threshold opens once


def test_clear_below_keeps_a_hovering_lag_to_one_alert():
    log_end = joined(list(range(1000, 1000 + 60 * 100, 100)))
    lag = [150 if (i // 3) % 2 else 90 for i in range(60)]  # 90 and 150 around 100
    committed = joined([1000 + i * 100 - lag[i] for i in range(60)])
    inputs = [series(committed=committed, log_end=log_end)]
    plain = transitions(only({"kind": "lag", "threshold": 100}), inputs)
    held = transitions(only({"kind": "lag", "threshold": 100, "clear_below": 50}), inputs)
    assert len(plain) > 10
    assert [(t.previous.value, t.current.value) for t in held] == [("OK", "WARN")]


# --------------------------------------------------------------------------------------------
# Telling a pause from a stall (issue 28): pauses that heal themselves, standalone consumers,
# transaction markers, holds that stay short


GRACEFUL = only({"kind": "progress", "stall_after": "30s", "stop_after": "60s", "tolerance": 1.2,
                 "grace": "90s"})  # fmt: skip


def test_a_consumer_that_waits_for_a_transaction_marker_is_not_stalled_when_the_next_comes():
    # A read_committed consumer sits one offset (the commit marker) below the log end for ten
    # minutes, then the next transaction arrives and it reads it by the next scan.
    committed = [100] * 60 + [110] * 10
    log_end = [101] * 60 + [111] * 10
    inputs = [series(committed=joined(committed), log_end=joined(log_end))]
    assert transitions(PROGRESS, inputs) == []


def test_a_pause_of_ninety_seconds_is_not_a_stall_but_three_minutes_are():
    def paused_for(scans: int) -> list[dict[str, Any]]:
        moving = list(range(0, 400, 10))
        committed = moving + [390] * scans + list(range(400, 700, 10))
        log_end = [i * 10 + 5 for i in range(len(committed))]
        return [series(committed=joined(committed), log_end=joined(log_end))]

    assert transitions(GRACEFUL, paused_for(9)) == []
    seen = transitions(GRACEFUL, paused_for(18))
    assert (seen[0].previous.value, seen[0].current.value) == ("OK", "ERR")
    # Its usual wait is one scan: a stall once it has waited that plus 90 s.
    assert seen[0].at / 1000 - 390 <= 10 + 90 + 10
    assert transitions(PROGRESS, paused_for(9)) != []  # without grace it pages


def minute_committer(
    stops_reading_at: int | None,
    resumes_at: int | None,
    scans: int,
    burst: tuple[int, int] | None = None,
    commit_every_scans: int = 6,
) -> list[dict[str, Any]]:
    """One partition getting 1 record/s (10 a scan), read as it arrives and committed at every
    sixth scan (a minute; ``commit_every_scans``), with the consumer reading nothing from scan
    ``stops_reading_at``
    until ``resumes_at`` (it keeps committing what it read: ``pause()``), or producers sending
    ten times as much between the scans of ``burst`` (read at three times the normal rate)."""
    log_end, position, committed = [], 0.0, []
    produced, last = 1000, 1000
    for i in range(scans):
        if burst is not None and burst[0] <= i < burst[1]:
            produced += 100
        else:
            produced += 10
        reading = stops_reading_at is None or not (
            stops_reading_at <= i < (resumes_at if resumes_at is not None else scans)
        )
        if reading:
            position = min(float(produced), max(position, last) + 30)
        if i % commit_every_scans == 3 % commit_every_scans:
            last = int(position)
        log_end.append(produced)
        committed.append(last)
    return [series(committed=joined(committed), log_end=joined(log_end))]


def test_a_consumer_that_stops_reading_but_commits_what_it_read_is_stalled_sooner():
    # It stops reading three scans before its next commit, which still moves (what it read in
    # the two scans before) and leaves three scans of records unread: the standstill began
    # then, and counts from then (less a scan, where the commit fell between scans).
    stops = 6 * 31
    seen = transitions(GRACEFUL, minute_committer(stops, None, stops + 40))
    assert [(t.previous.value, t.current.value) for t in seen] == [("OK", "ERR")]
    assert seen[0].at / 1000 > (stops + 3) * 10  # its last commit moved the offset
    # Its usual wait (a minute, and 1/n more for the longest to come) plus the 90 s grace,
    # from when it stopped reading, give or take a scan; counted from its last move it would
    # fire 30 s later.
    assert seen[0].at / 1000 - stops * 10 <= 60 * 31 / 30 + 90 + 10


def test_a_stall_that_commits_what_it_read_is_paged_within_its_usual_wait_and_grace():
    # Issue 28's p90: whatever scan it stops at, a minute committer that stops reading (and
    # commits once more what it read) is paged within its usual wait (a minute and 1/30) plus
    # the 90 s grace of when it stopped, and a 30 s committer within 31 s + 90 s: its last
    # commit shows when it stopped, and a scan interval is not taken off that as well.
    for every, usual_s in ((6, 62), (3, 31)):
        for stops in range(186, 186 + every):
            seen = transitions(
                GRACEFUL, minute_committer(stops, None, stops + 40, commit_every_scans=every)
            )
            assert [(t.previous.value, t.current.value) for t in seen] == [("OK", "ERR")]
            assert seen[0].at / 1000 - stops * 10 <= usual_s + 90, (every, stops)


def test_a_ninety_second_pause_that_commits_what_it_read_is_not_a_stall():
    for every in (6, 3):
        for stops in range(186, 186 + every):
            paused = minute_committer(stops, stops + 9, stops + 60, commit_every_scans=every)
            assert transitions(GRACEFUL, paused) == [], (every, stops)


def test_a_consumer_that_drains_a_burst_on_time_is_not_a_stall():
    # Ten times the records for two minutes: its commits leave more behind each time, but they
    # come on time and move more than the partition normally gets.
    assert transitions(GRACEFUL, minute_committer(None, None, 6 * 40, burst=(186, 198))) == []


def test_a_group_frozen_since_it_was_first_seen_is_stalled_once_past_the_assumed_interval():
    # Nothing moves from the first scan on: a rare committer could stand still that long until
    # the assumed 10 minutes are over, a rare committer's pause 90 s more; then it is a stall.
    frozen = [series(committed="100x89", log_end=joined(list(range(105, 1005, 10))))]
    seen = transitions(GRACEFUL, frozen)
    assert [(t.previous.value, t.current.value) for t in seen] == [("OK", "ERR")]
    assert 600 + 90 <= seen[0].at / 1000 <= 600 + 90 + 10  # not 1.2 x 10 min
    assert "habit not learned yet, 10 min assumed" in seen[0].result.findings[0].message


def test_a_new_ten_minute_committer_paused_for_a_minute_is_not_stalled():
    # First seen a little before a commit, then a commit every 10 min 20 s (a timer 3 % slow),
    # the first of them held up 60 s by back-pressure: its habit is not learned yet, and the
    # assumed 10 min plus grace are what keeps its 11-minute wait quiet.
    moves = np.cumsum([10, 68, 62, 62, 62, 62, 62])
    committed = [100 * int(np.searchsorted(moves, i, side="right")) for i in range(moves[-1] + 5)]
    log_end = [10 * i + 1000 for i in range(len(committed))]
    inputs = [series(committed=joined(committed), log_end=joined(log_end))]
    assert transitions(GRACEFUL, inputs) == []


def standalone(committed: list[int]) -> list[dict[str, Any]]:
    n = len(committed)
    log_end = [i * 10 + 5 for i in range(n)]
    return [
        series(committed=joined(committed), log_end=joined(log_end), group_state=f"Emptyx{n - 1}",
               members=f"0x{n - 1}", member_hash=f"0x{n - 1}")
    ]  # fmt: skip


def test_a_standalone_assign_consumer_moving_its_offsets_is_not_stopped():
    committed = [30 * (i // 3) for i in range(120)]  # a commit every 30 s, never a member
    assert transitions(GRACEFUL, standalone(committed)) == []


def test_a_standalone_consumer_that_stops_moving_is_stalled_not_stopped():
    committed = [30 * (i // 3) for i in range(90)]
    committed += [committed[-1]] * 60
    seen = transitions(GRACEFUL, standalone(committed))
    assert [(t.previous.value, t.current.value) for t in seen] == [("OK", "ERR")]
    assert seen[0].result.findings[0].status == "STALL"


CRASH_GRACEFUL = only({**GRACEFUL["rules"][0], "crash_grace": "40s"})


def test_a_standalone_consumers_partition_that_gets_its_first_record_late_is_not_stopped():
    # One assign() consumer committing every 30 s reads two partitions of a slow topic: the
    # first gets a record a second, the second none for 30 minutes, then one that the
    # consumer reads at its next commit (the held-out independent seeds'
    # standalone-assign-072, 64 partitions at 0.44 rec/s in all, paged STOP for 21 minutes on
    # the partitions that had not moved yet: "no members for 30 min"). The group's offsets
    # move with no members: its consumer reads them all.
    n = 240
    busy = standalone([30 * (i // 3) for i in range(n)])[0]
    quiet_log_end = [7] * 180 + [8] * (n - 180)
    quiet_committed = [7] * 183 + [8] * (n - 183)
    quiet = {**busy, "partition": 1, "committed": joined(quiet_committed),
             "log_end": joined(quiet_log_end)}  # fmt: skip
    assert transitions(CRASH_GRACEFUL, [busy, quiet]) == []
    # Its consumer gone (neither partition moves again), it is still paged.
    frozen = {**busy, "committed": joined([30 * (i // 3) for i in range(150)] + [1470] * 90)}
    stuck = {**quiet, "committed": joined([7] * n)}
    seen = transitions(CRASH_GRACEFUL, [frozen, stuck])
    assert [(t.previous.value, t.current.value) for t in seen][:1] == [("OK", "ERR")]
    assert seen[0].result.findings[0].status == "STALL"


def test_a_standalone_consumer_restarted_after_a_crash_is_not_stalled_but_one_gone_is():
    # A Flink-like job committing every 5 s (each scan sees a move) killed, back 117 s
    # later from its last commit, its first commit at the scan after: standing still
    # 140 s with no member set to show the restart (the independent corpus's
    # standalone-assign-238). A member-based consumer's crash gets crash_grace on a stop;
    # the standalone's invisible one gets it on its stall, and a job that does not come
    # back is still stalled once two usual waits, grace and crash_grace are over.
    moving = [50 * i for i in range(120)]
    restarted = moving + [moving[-1]] * 13 + [moving[-1] + 50 * (i + 14) for i in range(30)]
    assert transitions(CRASH_GRACEFUL, standalone(restarted)) == []
    assert transitions(GRACEFUL, standalone(restarted)) != []  # without crash_grace it pages
    gone = moving + [moving[-1]] * 40
    seen = transitions(CRASH_GRACEFUL, standalone(gone))
    assert [(t.previous.value, t.current.value) for t in seen] == [("OK", "ERR")]
    assert seen[0].result.findings[0].status == "STALL"
    last_move_s = 119 * 10
    assert 2 * 10 + 90 + 40 <= seen[0].at / 1000 - last_move_s <= 2 * 10 + 90 + 40 + 10


def test_a_new_standalone_consumer_is_judged_by_the_assumed_interval_alone():
    # Three moves, then none: its habit is not learned yet, and twice the assumed 10 minutes
    # plus grace already allow for a restart (no crash_grace on top of an assumption; the
    # recorded Kafka 3.9 corpus's batch-job-missed-8min, taken for a standalone consumer, is
    # caught at that).
    committed = [0] * 3 + [50] * 3 + [100] * 3 + [150] * 140
    seen = transitions(CRASH_GRACEFUL, standalone(committed))
    assert [(t.previous.value, t.current.value) for t in seen] == [("OK", "ERR")]
    assert 2 * 600 + 90 <= seen[0].at / 1000 - 9 * 10 <= 2 * 600 + 90 + 10


def test_a_capped_hold_does_not_turn_one_scan_of_alarm_into_minutes():
    inputs = [series(committed="0 0 10 10 10 10", log_end="10 10 10 10 10 10")]
    capped = only({"kind": "lag", "threshold": 5, "keep_firing_for": "2m",
                   "keep_firing_capped": True})  # fmt: skip
    assert evaluate(capped, inputs, 60).status is GroupStatus.WARN  # firing
    assert evaluate(capped, inputs, 120).status is GroupStatus.WARN  # held as long as it fired
    assert evaluate(capped, inputs, 180).status is GroupStatus.OK  # not the full 2 minutes


def test_rebalancing_for_a_minute_while_committing_is_not_stuck():
    states = joined(["Stable"] * 20 + ["PreparingRebalance"] * 8 + ["Stable"] * 10)
    rule = only({"kind": "stuck_rebalance", "samples": 6, "reading_nothing": True})
    moving = [steady(38, group_state=states)]
    assert transitions(rule, moving) == []
    frozen = [series(committed=joined(list(range(0, 200, 10)) + [190] * 18),
                     log_end=joined(list(range(5, 385, 10))), group_state=states)]  # fmt: skip
    seen = transitions(rule, frozen)
    assert (seen[0].previous.value, seen[0].current.value) == ("OK", "ERR")


def _restart_rebalance(waiting: int, members_during: list[int]) -> dict[str, Any]:
    """One member crashed at scan 20 (nothing committed since); its replacement joins at
    scan 24 while the dead one is still listed, and the group waits in PreparingRebalance for
    ``waiting`` scans (``members_during`` listed at each), then settles with one member."""
    scans = 24 + waiting + 10
    states = ["Stable"] * 24 + ["PreparingRebalance"] * waiting + ["Stable"] * 10
    members = [1] * 24 + members_during + [1] * 10
    generation, hashes = 1, []
    for i in range(scans):
        generation += (
            i == 24 or i == 24 + waiting or (24 < i < 24 + waiting and members[i] != members[i - 1])
        )
        hashes.append(generation)
    committed = list(range(0, 200, 10)) + [190] * (scans - 20)
    return series(committed=joined(committed), log_end=joined(list(range(5, 10 * scans, 10))),
                  group_state=joined(states), members=joined(members),
                  member_hash=joined(hashes))  # fmt: skip


STUCK = {"kind": "stuck_rebalance", "samples": 6, "reading_nothing": True}


def test_a_restart_waiting_for_the_dead_members_session_is_not_a_stuck_rebalance():
    # session.timeout.ms 120 s: twelve scans in PreparingRebalance, the new member beside the
    # dead one it replaces.
    restart = [_restart_rebalance(12, [2] * 12)]
    assert transitions(only({**STUCK, "join_wait": "5m"}), restart) == []
    assert transitions(only(STUCK), restart) != []  # without join_wait: stuck after 6 scans


def test_a_joined_rebalance_that_outlasts_the_rebalance_timeout_or_churns_is_stuck():
    rule = only({**STUCK, "join_wait": "5m"})
    never_settles = transitions(rule, [_restart_rebalance(40, [2] * 40)])
    assert [(t.previous.value, t.current.value) for t in never_settles][:1] == [("OK", "ERR")]
    assert never_settles[0].at == (24 + 30) * 10_000  # after 5 min of waiting, not later
    churning = transitions(rule, [_restart_rebalance(20, [2, 2, 2, 3, 2, 3, 2] + [3] * 13)])
    assert [(t.previous.value, t.current.value) for t in churning][:1] == [("OK", "ERR")]
    assert churning[0].at <= (24 + 7) * 10_000  # after its 6 scans, as without join_wait


def test_a_long_rolling_deploy_that_keeps_up_is_not_a_storm():
    # Sixteen member-set changes 20 s apart: five minutes of changes while the consumer keeps
    # up. In a group of four members that is more than a deploy makes (two per member), and
    # only min_lag_seconds keeps it quiet; in a group of eight it is a deploy (each pod
    # replaced in turn, leaving and joining once), quiet either way.
    behind = {**STORM, "rules": [{**STORM["rules"][0], "min_lag_seconds": "30s"}]}
    deploy = list(range(40, 72, 2))
    four = [steady(120, member_hash=member_sets(deploy, 120), members="4x119")]
    assert transitions(STORM, four) != []  # without min_lag_seconds: a storm
    assert transitions(behind, four) == []
    eight = [steady(120, member_hash=member_sets(deploy, 120), members="8x119")]
    assert transitions(STORM, eight) == []


def test_a_deploy_of_many_pods_that_outlasts_lasting_behind_is_not_a_storm():
    # Sixteen pods (static membership: one member-id change each) restarted in turn, a change
    # every 40 s, each restart leaving the consumer minutes behind (it reads 0.3 of what
    # arrives): ten minutes of changes, far beyond `lasting`. A deploy of sixteen members makes
    # up to 32 changes; a group of two churning as often is a storm.
    behind = {**STORM, "rules": [{**STORM["rules"][0], "min_lag_seconds": "30s"}]}
    deploy = list(range(40, 104, 4))
    log_end, committed = positions([1.0] * 120, 0.3)

    def group(members: int) -> list[dict[str, Any]]:
        return [series(committed=joined(committed), log_end=joined(log_end),
                       member_hash=member_sets(deploy, 120), members=f"{members}x119")]  # fmt: skip

    assert transitions(behind, group(16)) == []
    seen = transitions(behind, group(2))
    assert [(t.previous.value, t.current.value) for t in seen][:1] == [("OK", "WARN")]


def test_a_rolling_deploy_behind_only_through_a_producer_burst_is_not_a_storm():
    # Six pods replaced in turn over seven minutes (a change every 20 s) on a topic that
    # normally brings 1 record/s; a burst of 10/s meets a consumer that reads at most 4/s,
    # which falls minutes behind while the deploy goes on. A storm without a burst pages.
    behind = {**STORM, "rules": [{**STORM["rules"][0], "min_lag_seconds": "30s"}]}
    deploy = list(range(60, 102, 2))
    rates = [1.0] * 80 + [10.0] * 26 + [1.0] * 54
    log_end, committed = positions(rates, 4.0)
    burst = [series(committed=joined(committed), log_end=joined(log_end),
                    member_hash=member_sets(deploy, 160), members="6x159")]  # fmt: skip
    assert transitions(behind, burst) == []
    log_end, committed = positions([1.0] * 160, 0.5)
    storm = [series(committed=joined(committed), log_end=joined(log_end),
                    member_hash=member_sets(deploy, 160), members="6x159")]  # fmt: skip
    seen = transitions(behind, storm)
    assert [(t.previous.value, t.current.value) for t in seen][:1] == [("OK", "WARN")]


REPLACING = only({"kind": "rebalance_storm", "max_changes": 3, "lasting": "3m30s",
                  "min_lag_seconds": "30s", "beyond_a_deploy": True})  # fmt: skip


def membership(counts: list[int], changes_at: list[int], scans: int) -> dict[str, str]:
    """``member_hash`` and ``members`` of a group whose member set changes at the scans
    ``changes_at``, the i-th change leaving it with ``counts[i]`` members (2 before)."""
    generation, members, hashes, listed = 1, 2, [], []
    plan = dict(zip(changes_at, counts, strict=True))
    for i in range(scans):
        if i in plan:
            generation, members = generation + 1, plan[i]
        hashes.append(generation)
        listed.append(members)
    return {"member_hash": joined(hashes), "members": joined(listed)}


def test_a_member_that_keeps_crashing_is_a_storm_while_the_group_keeps_up():
    # Two members; one crashes every minute and a new one joins before the dead one's session
    # times out (3 listed, then 2 again): a replacement a minute, the consumer keeps up.
    changes = [40, 42, 46, 48, 52, 54, 58, 60, 64, 66]
    counts = [3, 2] * 5
    inputs = [steady(100, **membership(counts, changes, 100))]
    keeping_up = {**REPLACING, "rules": [{**REPLACING["rules"][0], "beyond_a_deploy": False}]}
    assert transitions(keeping_up, inputs) == []  # never 30 s behind...
    seen = transitions(REPLACING, inputs)  # ...but back to 2 members a third time at scan 54
    assert [(t.previous.value, t.current.value) for t in seen][:1] == [("OK", "WARN")]
    assert seen[0].at / 1000 == 540
    finding = seen[0].result.findings[0]
    assert "back to its 2 members 3 times" in finding.message
    assert finding.evidence["replaced"] == 3 and finding.evidence["members_before"] == 2


def test_a_member_replaced_between_two_scans_counts_as_replaced():
    # Crash and rejoin both between scans (a 10 s session): the set changes, the count does not.
    changes = [40, 45, 50, 55]
    inputs = [steady(80, **membership([2, 2, 2, 2], changes, 80))]
    seen = transitions(REPLACING, inputs)
    assert [t.at / 1000 for t in seen][:1] == [550]


def test_rolling_deploys_and_autoscaling_replace_no_member_twice():
    # Each pod of a deploy replaced once, surge first (2 -> 3 -> 2) or stop first (8 -> 7 -> 8),
    # 20 s apart; pods added one by one and removed again (2 -> 8 -> 2), 20 s apart.
    surge = steady(100, **membership([3, 2, 3, 2], [40, 42, 44, 46], 100))
    stop_first = steady(100, **membership([7, 8] * 8, list(range(40, 72, 2)), 100))
    scaling = steady(100, **membership(list(range(3, 9)) + list(range(7, 1, -1)),
                                       list(range(40, 64, 2)), 100))  # fmt: skip
    for inputs in (surge, stop_first, scaling):
        assert transitions(REPLACING, [inputs]) == []


def test_a_scale_out_that_only_adds_members_is_not_a_storm_though_it_falls_behind():
    # A consumer committing every 3 minutes, a record a second; six members added one by one,
    # 50 s apart (over 4 minutes), its offset standing through the rebalances: 5 minutes
    # behind, 2 beyond its usual wait (the held-out independent seeds' autoscale-218 and -297,
    # warned while scaled out from 1 to 6 and 7 members). No member left: nothing crashed or
    # was thrown out. The same changes with a member leaving and coming back are a storm.
    rule = only({"kind": "rebalance_storm", "max_changes": 3, "lasting": "3m30s",
                 "min_lag_seconds": "30s"})  # fmt: skip
    log_end = [10 * i + 5 for i in range(250)]
    standing = range(126, 167)
    committed = [log_end[126 if i in standing else 18 * (i // 18)] for i in range(250)]
    changes = [132, 137, 142, 147, 152, 157]
    offsets = {"committed": joined(committed), "log_end": joined(log_end)}
    scaling = series(**offsets, **membership([3, 4, 5, 6, 7, 8], changes, 250))
    assert transitions(rule, [scaling]) == []
    crashing = series(**offsets, **membership([1, 2, 1, 2, 1, 2], changes, 250))
    seen = transitions(rule, [crashing])
    assert [(t.previous.value, t.current.value) for t in seen][:1] == [("OK", "WARN")]


def test_a_batch_job_whose_runs_churn_is_not_replacing_members():
    # A job every 40 s: two members join, read, leave (Empty between runs), for ten minutes.
    counts, changes = [], []
    for run in range(15):
        changes += [40 + 4 * run, 42 + 4 * run]
        counts += [2, 0]
    inputs = [steady(110, **membership(counts, changes, 110))]
    assert transitions(REPLACING, inputs) == []


HELD = only({"kind": "rebalance_storm", "max_changes": 3, "lasting": "3m30s",
             "min_lag_seconds": "30s", "rebalances_held_for": "30s"})  # fmt: skip


def test_crashed_members_that_hold_rebalance_after_rebalance_are_a_storm():
    # Six members (eager): every 90 s one crashes and its successor joins at once, and the
    # group waits 40 s in PreparingRebalance for the dead one's session to time out (7
    # listed, then 6): four scans rebalancing a cycle, the group catching up in between.
    changes, counts, states = [], [], ["Stable"] * 120
    for cycle in range(6):
        start = 40 + 9 * cycle
        changes += [start, start + 4]
        counts += [7, 6]
        for i in range(start, start + 4):
            states[i] = "PreparingRebalance"
    inputs = [steady(120, **membership(counts, changes, 120), group_state=joined(states))]
    assert transitions({**HELD, "rules": [{**HELD["rules"][0], "rebalances_held_for": 0}]},
                       inputs) == []  # fmt: skip
    seen = transitions(HELD, inputs)
    assert [(t.previous.value, t.current.value) for t in seen][:1] == [("OK", "WARN")]
    # Rebalances held 30 s at scans 40-43 and 49-52; the third reaches 30 s at scan 61
    assert seen[0].at / 1000 == 610
    assert "three of its rebalances held the group for 30s or more each" in (
        seen[0].result.findings[0].message
    )


def test_a_rolling_deploy_with_quick_rebalances_is_not_held_in_rebalance():
    # Eight pods replaced in turn (eager, stop first), every change caught rebalancing by one
    # scan, or one pod's rebalance held 60 s by a member slow to rejoin, or two members killed
    # a minute apart (two rebalances held 40 s until their sessions time out): no three
    # rebalances of 30 s or more.
    changes = list(range(40, 72, 2))
    states = ["Stable"] * 100
    for i in changes:
        states[i] = "PreparingRebalance"
    inputs = [steady(100, **membership([7, 8] * 8, changes, 100), group_state=joined(states))]
    assert transitions(HELD, inputs) == []
    for i in range(50, 57):
        states[i] = "PreparingRebalance"
    inputs = [steady(100, **membership([7, 8] * 8, changes, 100), group_state=joined(states))]
    assert transitions(HELD, inputs) == []
    states = ["Stable"] * 100
    for i in [*range(40, 45), *range(50, 55)]:
        states[i] = "PreparingRebalance"
    killed = membership([9, 8, 9, 8], [40, 45, 50, 55], 100)
    assert transitions(HELD, [steady(100, **killed, group_state=joined(states))]) == []


def test_a_pause_and_its_catch_up_are_not_falling_behind_a_slow_consumer_is():
    rule = only({"kind": "falling_behind", "ratio": 0.8, "min_lag_seconds": "30s",
                 "grace": "90s"})  # fmt: skip
    rates = [100.0] * 240
    log_end, committed = positions(rates, 300.0)
    # Commits every minute; a 90 s pause at 30 min, then it catches up at three times the rate.
    paused = list(committed)
    for i in range(180, 189):
        paused[i] = paused[179]
    for i in range(189, 240):
        paused[i] = min(log_end[i], paused[i - 1] + 3000)
    every_minute = [paused[6 * (i // 6)] for i in range(240)]
    inputs = [series(committed=joined(every_minute), log_end=joined(log_end))]
    assert transitions(rule, inputs) == []
    _, slow = positions(rates, 50.0)
    slowed = committed[:180] + [committed[179] + (c - slow[179]) for c in slow[180:]]
    slowed = [slowed[6 * (i // 6)] for i in range(240)]
    seen = transitions(rule, [series(committed=joined(slowed), log_end=joined(log_end))])
    assert [(t.previous.value, t.current.value) for t in seen] == [("OK", "WARN")]
    assert seen[0].at / 1000 - 1800 <= 240


def test_a_ninety_second_pause_at_thirty_second_commits_is_one_slow_interval_not_a_trend():
    rule = only({"kind": "falling_behind", "ratio": 0.8, "min_lag_seconds": "30s",
                 "grace": "90s"})  # fmt: skip
    rates = [100.0] * 720
    log_end, committed = positions(rates, 300.0)
    # Commits every 30 s; every 12 minutes a 90 s pause, then it catches up at three times the
    # rate: the commit that ends the pause is one interval, slow and 60-90 s behind.
    paused = list(committed)
    for start in range(180, 700, 72):
        for i in range(start, start + 9):
            paused[i] = paused[start - 1]
        for i in range(start + 9, min(start + 72, 720)):
            paused[i] = min(log_end[i], paused[i - 1] + 3000)
    every_30s = [paused[3 * (i // 3)] for i in range(720)]
    inputs = [series(committed=joined(every_30s), log_end=joined(log_end))]
    assert transitions(rule, inputs) == []


# --------------------------------------------------------------------------------------------
# Retention: warned from the time left before records are deleted


def retained(log_end: list[int], minutes: int, rate: float) -> list[int]:
    """The log start of a topic keeping ``minutes`` of records at ``rate`` records/s."""
    return [max(0, e - int(rate * minutes * 60)) for e in log_end]


RETENTION = only({"kind": "retention", "warn_fraction": 0.1, "warn_within": "1h"})


def test_a_slow_consumer_on_a_twenty_minute_topic_is_warned_long_before_records_are_deleted():
    rates = [100.0] * 240
    log_end, committed = positions(rates, 300.0)
    _, slow = positions(rates, 25.0)
    # Healthy for half an hour, then a quarter of the rate: retention overtakes it in ~27 min.
    slowed = committed[:180] + [committed[179] + (c - slow[179]) for c in slow[180:]]
    start = retained(log_end, 20, 100.0)
    seen = transitions(
        RETENTION,
        [series(committed=joined(slowed), log_end=joined(log_end), log_start=joined(start))],
    )
    assert [(t.previous.value, t.current.value) for t in seen] == [("OK", "WARN")]
    assert seen[0].at / 1000 - 1800 <= 90
    finding = seen[0].result.findings[0]
    assert "retention deletes records it has not read in about" in finding.message
    assert 20 * 60 <= finding.evidence["seconds_to_loss"] < 3600
    # Keeping up on the same topic, or slowed on a topic that keeps a day, is not at risk.
    healthy = series(committed=joined(committed), log_end=joined(log_end),
                     log_start=joined(start))  # fmt: skip
    a_day = series(committed=joined(slowed), log_end=joined(log_end),
                   log_start=joined(retained(log_end, 24 * 60, 100.0)))  # fmt: skip
    assert transitions(RETENTION, [healthy]) == []
    assert transitions(RETENTION, [a_day]) == []


def test_a_consumer_keeping_up_on_a_ninety_second_topic_is_not_warned_when_a_scan_misses_a_commit():
    # Recorded on Apache Kafka 4.4: commits every 10 s, scans every 10 s; the scans first see
    # each commit just made (lag 0), then, its timing drifted, one commit late: the scan in
    # between sees no new commit, and over its last commits the consumer looks to read at half
    # the rate. On a topic keeping 90 s any slowness "reaches" retention within the hour.
    log_end, _ = positions([4.0] * 240, 40.0)
    seen_commits = log_end[:100] + [log_end[i - 1] for i in range(100, 240)]
    start = [max(0, e - 360) for e in log_end]  # 90 s at 4 records/s
    inputs = [series(committed=joined(seen_commits), log_end=joined(log_end),
                     log_start=joined(start))]  # fmt: skip
    assert transitions(RETENTION, inputs) == []


def five_minute_commits(rates: list[float], capacities: list[float]) -> tuple[list[int], list[int]]:
    """Log end and committed offset per 10 s scan for produced ``rates`` and a consumer that
    reads at most ``capacities`` records/s (per scan), committing what it has read every 30
    scans (five minutes)."""
    produced = position = 0.0
    log_end, committed, last = [], [], 0
    for scan, (rate, capacity) in enumerate(zip(rates, capacities, strict=True)):
        produced += rate * 10
        position = min(produced, position + capacity * 10)
        if scan % 30 == 0:
            last = int(position)
        log_end.append(int(produced))
        committed.append(last)
    return log_end, committed


def test_a_five_minute_committer_falling_back_on_a_short_topic_is_warned_at_its_next_commit():
    # An hour at full speed (the five-minute habit learned), then a quarter of the rate:
    # retention overtakes it in about 27 min. Between two commits any consumer's lag grows by
    # five minutes of records, so its window cannot tell; its first commit after it slowed
    # down, further behind than the one before, does.
    rates = [10.0] * 720
    log_end, committed = five_minute_commits(rates, [100.0] * 360 + [2.5] * 360)
    start = retained(log_end, 20, 10.0)
    seen = transitions(
        RETENTION,
        [series(committed=joined(committed), log_end=joined(log_end), log_start=joined(start))],
    )
    assert [(t.previous.value, t.current.value) for t in seen][:1] == [("OK", "WARN")]
    # Its first commit after it slowed down is at 3900 s; records are lost from about 5400 s.
    assert seen[0].at / 1000 <= 3900 + 10
    # At its full speed on the same topic it is never warned.
    _, healthy = five_minute_commits(rates, [100.0] * 720)
    assert transitions(RETENTION, [series(committed=joined(healthy), log_end=joined(log_end),
                                          log_start=joined(start))]) == []  # fmt: skip


# --------------------------------------------------------------------------------------------
# Issue 28, second round: what the recorded corpus and the sweep still paged


def batch_runs(moves_at: list[int], seen_at: int, scans: int) -> list[dict[str, Any]]:
    """A job that reads everything, commits and leaves between two scans (its members seen by
    one scan only, ``seen_at``), a record a second arriving."""
    log_end = [10 * i + 5 for i in range(scans)]
    committed, last = [], log_end[0]
    for i in range(scans):
        if i in moves_at:
            last = log_end[i] - 2
        committed.append(last)
    members = joined([1 if i == seen_at else 0 for i in range(scans)])
    states = joined(["Stable" if i == seen_at else "Empty" for i in range(scans)])
    hashes = joined([7 if i == seen_at else 0 for i in range(scans)])
    return [series(committed=joined(committed), log_end=joined(log_end), members=members,
                   group_state=states, member_hash=hashes)]  # fmt: skip


def test_a_batch_job_whose_runs_fall_between_scans_is_not_stopped_when_a_scan_sees_one():
    # A run every 4 minutes (24 scans), none of them seen by a scan but one at 72 minutes:
    # the spells between runs are its habit, and the one after the run it was seen in is too.
    # (Judged after half an hour: before its first run nothing is known of it.)
    runs = list(range(24, 600, 24))
    assert [t for t in transitions(GRACEFUL, batch_runs(runs, 432, 600)) if t.at > 1_800_000] == []
    # The job that stops running after it is paged once its usual spell and the grace are over.
    stops = transitions(GRACEFUL, batch_runs([r for r in runs if r <= 432], 432, 600))
    seen = [t for t in stops if t.at > 1_800_000]
    assert [(t.previous.value, t.current.value) for t in seen] == [("OK", "ERR")]
    assert seen[0].result.findings[0].status == "STOP"
    assert 432 * 10 + 240 <= seen[0].at / 1000 <= 432 * 10 + 240 * 1.2 + 90 + 20


FALLING_GRACE = only({"kind": "falling_behind", "ratio": 0.8, "min_lag_seconds": "30s",
                      "grace": "90s"})  # fmt: skip


def transactional_reader(scans: int, seed: int) -> tuple[list[int], list[int]]:
    """A read_committed consumer of a topic with a transaction every 2 minutes (a commit
    marker after each), of 0.1-1 records/s varying by the minute; it commits every 2 minutes,
    always what is readable: its backlog at a commit is the transaction in flight."""
    rng = __import__("random").Random(seed)
    produced, readable, log_end, committed, last = 0, 0, [], [], 0
    for i in range(scans):
        if i % 6 == 0:
            rate = rng.uniform(0.1, 1.0)
        produced += round(rate * 10)
        if i % 12 == 11:  # a transaction commits: its marker takes an offset
            produced += 1
            readable = produced - 1
        if i % 12 == 7:  # the consumer commits
            last = readable
        log_end.append(produced)
        committed.append(last)
    return log_end, committed


def test_a_reader_of_transactions_whose_backlog_swings_with_the_transaction_keeps_up():
    for seed in range(12):
        log_end, committed = transactional_reader(360, seed)
        inputs = [series(committed=joined(committed), log_end=joined(log_end))]
        assert [t for t in transitions(FALLING_GRACE, inputs) if t.at > 1_800_000] == [], seed


FALLING_AS_SHIPPED = only({"kind": "falling_behind", "ratio": 0.8, "min_lag_seconds": "30s",
                           "grace": "90s", "for": "30s", "keep_firing_for": "5m",
                           "keep_firing_capped": True})  # fmt: skip


def long_transactions(seed: int, slow_from_s: int | None = None) -> list[dict[str, Any]]:
    """An hour of a group of 8 partitions of about a record a second, each with a transaction
    every 2 minutes (at its own phase, a commit marker after each), read by a read_committed
    consumer that reads at most 5 records/s and commits every 5 s: the last stable offset
    holds it back by the transaction in flight, which the producer's commit releases at once
    and the consumer reads over several of its commits. It is killed every 20 minutes (nothing
    committed on the way out) and back within 45-60 s. From ``slow_from_s`` on it reads half
    of what arrives."""
    rng = __import__("random").Random(seed)
    partitions, seconds = 8, 3600
    rate = [rng.uniform(0.7, 1.4) for _ in range(partitions)]
    next_transaction = [rng.uniform(0, 120) for _ in range(partitions)]
    produced = [1000] * partitions
    readable = list(produced)
    position = [float(p) for p in produced]
    committed = list(produced)
    log_end_at: list[list[int]] = [[] for _ in range(partitions)]
    committed_at: list[list[int]] = [[] for _ in range(partitions)]
    down_until = -1
    for t in range(seconds):
        if t % 1200 == 900:
            down_until = t + rng.randint(45, 60)
            position = [float(c) for c in committed]
        for p in range(partitions):
            produced[p] += int(rate[p]) + (rng.random() < rate[p] % 1)
            if t >= next_transaction[p]:
                next_transaction[p] += 120
                if produced[p] > readable[p]:
                    produced[p] += 1
                    readable[p] = produced[p] - 1
            if t >= down_until:
                slow = slow_from_s is not None and t >= slow_from_s
                position[p] = min(readable[p], position[p] + (rate[p] / 2 if slow else 5.0))
                if t % 5 == 0:
                    committed[p] = int(position[p])
            if t % 10 == 9:
                log_end_at[p].append(produced[p])
                committed_at[p].append(committed[p])
    return [
        series(partition=p, committed=joined(committed_at[p]), log_end=joined(log_end_at[p]))
        for p in range(partitions)
    ]


def test_a_read_committed_consumer_of_two_minute_transactions_restarted_by_crashes_keeps_up():
    # After each transaction it read, its offset stands still while the next one is written:
    # it has read all it can, however far below the log end that is. (Before: warned at 35
    # and 55 minutes, just after the restarts.)
    seen = transitions(FALLING_AS_SHIPPED, long_transactions(7))
    assert [t.at / 1000 for t in seen if t.current.value == "WARN"] == []


def test_a_read_committed_consumer_of_two_minute_transactions_that_slows_down_is_warned():
    # At 40 minutes it reads half of what arrives: records to read at every commit, it never
    # stands still again, and its backlog grows past any transaction.
    seen = transitions(FALLING_AS_SHIPPED, long_transactions(7, slow_from_s=2400))
    opened = [t.at / 1000 for t in seen if t.current.value == "WARN"]
    assert len(opened) == 1
    assert 2400 < opened[0] <= 2400 + 240


FALLING_DEFAULTS = only({"kind": "falling_behind", "ratio": 0.8, "min_lag_seconds": "30s",
                         "grace": "90s", "for": "0s", "keep_firing_for": "5m",
                         "keep_firing_capped": True})  # fmt: skip


def read_with(rates: list[float], capacities: list[float]) -> tuple[list[int], list[int]]:
    """Log end and committed offset per 10 s scan for produced ``rates`` and a consumer that
    reads at most ``capacities[i]`` records/s in scan ``i``, committing every scan."""
    produced = consumed = 0.0
    log_end, committed = [], []
    for rate, capacity in zip(rates, capacities, strict=True):
        produced += rate * 10
        consumed = min(produced, consumed + capacity * 10)
        log_end.append(int(produced))
        committed.append(int(consumed))
    return log_end, committed


def test_a_downstream_slow_for_minutes_at_times_is_warned_at_most_once_a_lasting_slowdown_is():
    # 100 records/s, read at up to 200/s; every 20 minutes the downstream slows for 120-140 s
    # and the consumer reads 30/s (about 95 s behind at worst), then it catches up by itself.
    # At 130 minutes it slows to 50/s for good.
    capacities = [200.0] * 1080
    for start, length in ((60, 14), (180, 12), (300, 13), (420, 14), (540, 12), (660, 14)):
        capacities[start : start + length] = [30.0] * length
    capacities[780:] = [50.0] * 300
    log_end, committed = read_with([100.0] * 1080, capacities)
    seen = transitions(FALLING_DEFAULTS, [series(committed=joined(committed),
                                                  log_end=joined(log_end))])  # fmt: skip
    opened = [t.at / 1000 for t in seen if t.current.value == "WARN"]
    # The first slow patch is the start of a slowdown as far as anyone can tell; the ones after
    # it, no longer than the first and its catch-up, are this consumer's rhythm.
    assert [at for at in opened if 1800 <= at < 7800] == []
    # Warned once, when the slowdown has lasted half as long again as its longest patch and
    # catch-up (about 4 minutes).
    lasting = [at for at in opened if at >= 7800]
    assert len(lasting) == 1
    assert 7800 < lasting[0] <= 7800 + 600


def test_a_slowdown_of_minutes_that_was_fixed_is_no_rhythm_the_next_one_is_warned_too():
    # 100 records/s, read at up to 200/s; at 30 and at 70 minutes it reads 25/s for 6 minutes
    # (until its owner fixes it), then catches up: each is an incident, the second as much as
    # the first, however well the first healed.
    capacities = [200.0] * 600
    for start in (180, 420):
        capacities[start : start + 36] = [25.0] * 36
    log_end, committed = read_with([100.0] * 600, capacities)
    seen = transitions(FALLING_DEFAULTS, [series(committed=joined(committed),
                                                  log_end=joined(log_end))])  # fmt: skip
    opened = [t.at / 1000 for t in seen if t.current.value == "WARN"]
    assert len([at for at in opened if 1800 <= at < 2160]) == 1
    assert len([at for at in opened if 4200 <= at < 4560]) == 1


def test_a_slow_consumer_whose_commits_trail_its_position_is_caught_hours_in():
    # It reads everything but commits, every one or two minutes, the position it had 20 s
    # before for 20 minutes, then 30-60 s before, for three hours, at 80-120 records/s; then it
    # reads at half the rate. Its backlog at a commit never gets as low again as at the one its
    # run of commits behind began with, hours ago: the slowdown must not be diluted in them.
    rng = __import__("random").Random(3)
    rates = [rng.uniform(80.0, 120.0) for _ in range(1440)]
    log_end, _ = positions(rates, 300.0)
    _, slow = positions(rates, 50.0)
    position = list(log_end[:1080]) + [log_end[1079] + (s - slow[1079]) for s in slow[1080:]]
    committed, last, due = [], 0, 6
    for i in range(len(rates)):
        if i == due:
            last = position[i - (2 if i < 120 else rng.randint(3, 6))]
            due += rng.choice((6, 12))
        committed.append(last)
    seen = transitions(FALLING_GRACE, [series(committed=joined(committed),
                                               log_end=joined(log_end))])  # fmt: skip
    assert [(t.previous.value, t.current.value) for t in seen][:1] == [("OK", "WARN")]
    assert 10_800 < seen[0].at / 1000 <= 10_800 + 600


def test_a_consumer_left_on_the_deleted_topics_offset_is_stalled_on_the_new_log():
    # It commits every scan; at 5 minutes the topic is deleted and created again, and its
    # committed offset stays the old log's 300 while the new log fills, still below it.
    committed = list(range(0, 300, 10)) + [300] * 30
    log_end = [c + 5 for c in range(0, 300, 10)] + list(range(0, 300, 10))
    seen = transitions(GRACEFUL, [series(committed=joined(committed), log_end=joined(log_end))])
    assert [(t.previous.value, t.current.value) for t in seen] == [("OK", "ERR")]
    assert seen[0].result.findings[0].status == "STALL"
    assert seen[0].at / 1000 <= 300 + 10 + 90 + 20  # the usual wait and the grace


# --------------------------------------------------------------------------------------------
# What is learned as a habit: a fault that healed is not, a slow rhythm that recurs is


def paused_twice(first: int, gap: int, second: int, *, members_leave: bool) -> list[dict[str, Any]]:
    """A group committing every scan (10 s) for half an hour, then standing still for ``first``
    scans (its members gone when ``members_leave``, having committed on the way out), back for
    ``gap`` scans, standing still again for ``second``, and back for ten minutes."""
    phases = [(180, True), (first, False), (gap, True), (second, False), (60, True)]
    committed, states, members, hashes, offset, generation = [], [], [], [], 0, 1
    for length, reading in phases:
        if reading:
            generation += 1
        for _ in range(length):
            offset += 10 if reading else 0
            committed.append(offset)
            present = reading or not members_leave
            states.append("Stable" if present else "Empty")
            members.append(2 if present else 0)
            hashes.append(generation if present else 0)
    log_end = [10 * (i + 1) + 5 for i in range(len(committed))]
    return [series(committed=joined(committed), log_end=joined(log_end), group_state=joined(states),
                   members=joined(members), member_hash=joined(hashes))]  # fmt: skip


def fired_after(seen: list[Transition], still_since_s: list[int]) -> list[float]:
    """Seconds from each standstill's start to the page that followed it."""
    pages = [t.at / 1000 for t in seen if t.current.value == "ERR"]
    return [min(p for p in pages if p >= start) - start for start in still_since_s]


@pytest.mark.parametrize("members_leave", [False, True])
def test_a_fault_that_healed_is_not_the_habit_its_repeat_is_judged_by(members_leave: bool):
    # An 8-minute stall (or stop) heals; twenty minutes later the same fault comes back: it is
    # paged as fast as the first, not judged against a usual wait (or restart) of 8 minutes.
    seen = transitions(GRACEFUL, paused_twice(48, 120, 48, members_leave=members_leave))
    assert [(t.previous.value, t.current.value) for t in seen] == [
        ("OK", "ERR"), ("ERR", "OK"), ("OK", "ERR"), ("ERR", "OK")
    ]  # fmt: skip
    status = "STOP" if members_leave else "STALL"
    assert {t.result.findings[0].status for t in seen[::2]} == {status}
    first, second = fired_after(seen, [1800, 1800 + 480 + 1200])
    assert first <= 120
    assert second <= first + 10


def test_a_slow_rhythm_that_recurs_is_learned_at_its_second_long_wait():
    # Waits of 8 minutes, again and again (a rare committer): at most paged while new.
    rhythm = [series(committed=joined([10 * (i // 48) for i in range(48 * 12)]),
                     log_end=joined([10 * i + 5 for i in range(48 * 12)]))]  # fmt: skip
    pages = [t for t in transitions(GRACEFUL, rhythm) if t.current.value == "ERR"]
    assert len(pages) <= 2
    assert all(t.at <= 3 * 480_000 for t in pages)


def batch_job(every: int, runs: int, scans: int) -> list[dict[str, Any]]:
    """A job that joins every ``every`` scans (the first ``runs`` times), reads everything in
    three scans, commits and leaves: Empty in between, a record a second arriving."""
    log_end = [10 * i + 5 for i in range(scans)]
    committed, states, members, hashes, last = [], [], [], [], 0
    for i in range(scans):
        run = i // every < runs and i % every < 3
        if run:
            last = log_end[i] - 1
        committed.append(last)
        states.append("Stable" if run else "Empty")
        members.append(1 if run else 0)
        hashes.append(i // every + 1 if run else 0)
    return [series(committed=joined(committed), log_end=joined(log_end), group_state=joined(states),
                   members=joined(members), member_hash=joined(hashes))]  # fmt: skip


def test_a_batch_job_every_ten_minutes_is_paged_only_while_new_and_when_it_stops_running():
    every = 60  # scans: 10 minutes between runs, longer than any restart
    seen = transitions(GRACEFUL, batch_job(every, 12, every * 12))
    pages = [t for t in seen if t.current.value == "ERR"]
    # Its first two spells page (nothing tells them from a stopped consumer yet); the second
    # confirms the first, and from the third on its rhythm is its habit.
    assert len(pages) == 2
    assert all(t.at < 2 * every * 10_000 for t in pages)
    # A job that stops running is paged once its usual spell x tolerance is over.
    stopped = transitions(GRACEFUL, batch_job(every, 6, every * 9))
    late = [t for t in stopped if t.current.value == "ERR" and t.at > 6 * every * 10_000]
    assert len(late) == 1
    assert late[0].result.findings[0].status == "STOP"
    last_run_ended_s = (5 * every + 3) * 10
    assert late[0].at / 1000 - last_run_ended_s <= 1.2 * (every - 3) * 10 + 20


def job_and_gaps(phases: list[tuple[int, bool]]) -> list[dict[str, Any]]:
    """A group through ``(scans, running)`` phases: running, it reads everything and commits
    each scan, its member listed, and commits on the way out; between runs, no member, a
    record a second arriving."""
    committed, log_end, members, generation, last = [], [], [], 1, 0
    for scans, running in phases:
        generation += 1
        for scan in range(scans):
            end = 10 * len(log_end) + 5
            leaving = not running and scan == 0 and len(log_end) > 0
            last = end if running else end - 3 if leaving else last
            committed.append(last)
            log_end.append(end)
            members.append(generation if running else 0)
    states = ["Stable" if m else "Empty" for m in members]
    return [series(committed=joined(committed), log_end=joined(log_end),
                   members=joined([1 if m else 0 for m in members]), group_state=joined(states),
                   member_hash=joined(members))]  # fmt: skip


def test_a_half_hourly_batch_job_is_stopped_between_runs_only_until_it_has_left_once():
    # 25 minutes without members, a 2-minute run that commits and leaves: its next pause is
    # not a stop (the second run leaves within twice the pause it followed).
    gap, run = 150, 12
    job = job_and_gaps([(gap, False), (run, True), (gap, False), (run, True), (gap, False)])
    assert transitions(GRACEFUL, job) == [
        t for t in transitions(GRACEFUL, job) if t.at <= (gap + run) * 10_000
    ]
    # A service down for 25 minutes that then ran for three hours is stopped a minute and a
    # half after it stops again: its long spell was an outage, not a job's pause.
    service = job_and_gaps([(gap, False), (1080, True), (gap, False)])
    late = [t for t in transitions(GRACEFUL, service) if t.at > (gap + 1080) * 10_000]
    assert [(t.previous.value, t.current.value) for t in late][:1] == [("OK", "ERR")]
    assert late[0].result.findings[0].status == "STOP"
    assert late[0].at / 1000 - (gap + 1080) * 10 <= 100


# --------------------------------------------------------------------------------------------
# lag_seconds judged by the group's rhythm: an hourly batch job


HOURLY = only({"kind": "lag_seconds", "threshold": "30m", "clear_below": "20m", "for": "2m",
               "severity": "err", "rhythm_tolerance": 1.2})  # fmt: skip


def hourly_job(runs: int, then_idle: int = 0) -> list[dict[str, Any]]:
    """A job that runs every hour for a minute (reads everything, commits each scan and on the
    way out, leaves), ``runs`` times, then stays away ``then_idle`` scans: its records wait
    about an hour before each run."""
    gap, run = 354, 6
    return job_and_gaps([(gap, False), (run, True)] * runs + [(then_idle or gap, False)])


def pages(rules: dict[str, Any], inputs: list[dict[str, Any]]) -> list[int]:
    """When (seconds) the replay opened a page."""
    return [t.at // 1000 for t in transitions(rules, inputs) if t.current.value == "ERR"]


def test_an_hourly_batch_job_is_not_critically_behind_before_its_runs_once_its_rhythm_is_known():
    job = hourly_job(4)
    # Before any run, nothing tells an hour's pause from a consumer gone: the first one pages.
    assert len(pages(HOURLY, job)) == 1
    assert all(at < 3600 for at in pages(HOURLY, job))
    # Without the rhythm, every pause pages as its records pass 30 minutes of waiting.
    assert len(pages(only({**HOURLY["rules"][0], "rhythm_tolerance": 0}), job)) == 5


def test_an_hourly_batch_job_that_misses_its_runs_is_critically_behind_soon_after():
    # Three runs, then none for three hours: its records wait past 1.2 x its hour.
    missed = pages(HOURLY, hourly_job(3, then_idle=1080))
    last_left_s = (354 + 6) * 3 * 10
    late = [at - last_left_s for at in missed if at > last_left_s]
    assert len(late) == 1
    # 1.2 x (the 59-minute pause + a scan's wait) and the rule's 2 minutes.
    assert 1.2 * 3540 <= late[0] <= 1.2 * 3560 + 120 + 20


# --------------------------------------------------------------------------------------------
# Batch jobs on their first pauses (the independent corpus's batch jobs)


def job_runs(starts: list[int], length: int, scans: int) -> dict[str, Any]:
    """A job that runs at ``starts`` for ``length`` scans (one member, reading up to two
    records short of the log end, the last scan of a run at it) and leaves; a record a
    second."""
    log_end = [10 * i + 5 for i in range(scans)]
    committed, members, last = [], [], 5
    for i in range(scans):
        running = any(s <= i < s + length for s in starts)
        if running:
            last = log_end[i] - (0 if any(i == s + length - 1 for s in starts) else 2)
        committed.append(last)
        members.append(1 if running else 0)
    states = ["Stable" if m else "Empty" for m in members]
    return series(
        committed=joined(committed),
        log_end=joined(log_end),
        members=joined(members),
        group_state=joined(states),
        member_hash=joined([3 * m for m in members]),
    )


def test_a_batch_job_whose_run_fell_in_missed_scans_is_not_taken_for_a_standalone_consumer():
    # A job every 30 minutes (180 scans) that runs for a minute; the service misses 20 scans
    # around one run. The offset that moved in the gap, with no members before or after, is
    # that run, not a standalone consumer: a consumer that moves while Empty moves again at
    # the next unbroken scan. Taken for one, the next half hour without a move is a stall.
    job = job_runs([30, 210, 390, 570, 750, 930], 6, 1000)
    log_end = job["log_end"].split()
    for i in range(560, 580):
        log_end[i] = "_"
    job["log_end"] = " ".join(log_end)
    seen = transitions(GRACEFUL, [job])
    assert [t for t in seen if t.at > 400 * 10_000] == []


def run_after_first_sight(
    spell: int, run: int, pause: int, caught_up: bool, unseen: int = 0
) -> list[dict[str, Any]]:
    """A job first seen between runs (Empty for ``spell`` scans, its pause having begun
    ``unseen`` scans before the service's first scan: the records of those scans already
    waiting then), then its run (one member, ``run`` scans, reading up to the log end, then
    leaving with no commit left to make: the scan after sees the offset where it was), then a
    pause of ``pause`` scans and the next run; a record a second. ``caught_up`` False: it left
    two records short of the log end it last saw (a consumer killed before its next commit)."""
    n = spell + run + pause + run + 30
    log_end = [10 * (unseen + i) + 5 for i in range(n)]
    committed, last = [], 5
    members = []
    for i in range(n):
        in_run = spell <= i < spell + run or spell + run + pause <= i < spell + 2 * run + pause
        if in_run:
            last = log_end[i] - 2 if i < spell + run - 1 or not caught_up else log_end[i]
        committed.append(last)
        members.append(1 if in_run else 0)
    states = joined(["Stable" if m else "Empty" for m in members])
    return [series(committed=joined(committed), log_end=joined(log_end), members=joined(members),
                   group_state=states, member_hash=states.replace("Stable", "3")
                   .replace("Empty", "0"))]  # fmt: skip


@pytest.mark.parametrize("caught_up", [True, False])
def test_a_job_that_read_to_the_log_end_before_it_left_is_judged_by_its_pause(caught_up: bool):
    # First seen Empty for 20 minutes, then a 100 s run that reads everything and leaves,
    # its last commit seen by the scan before it left. Leaving at the log end is leaving on
    # purpose (a crashed member is kept until its session times out, while records arrive):
    # the 20 minutes before the run were its pause, and the next one as long is no stop.
    # Left short of it, it may have crashed: stopped after a minute.
    seen = transitions(GRACEFUL, run_after_first_sight(120, 10, 120, caught_up))
    later = [t for t in seen if t.at > 130 * 10_000 and t.current.value == "ERR"]
    if caught_up:
        assert later == []
    else:
        assert later and {t.result.findings[0].status for t in later} == {"STOP"}
        assert later[0].at / 1000 <= 130 * 10 + 60 + 10


# Issue 28, the independent corpus: surges that outrun a consumer, slow patches that do not last

FALLING_AS_SHIPPED = only({"kind": "falling_behind", "ratio": 0.8, "min_lag_seconds": "30s",
                           "grace": "90s", "surge_for": "5m", "for": "30s",
                           "keep_firing_for": "5m", "keep_firing_capped": True})  # fmt: skip


def committed_every(committed: list[int], scans: int) -> list[int]:
    """The same consumer committing its position every ``scans`` scans."""
    return [committed[scans * (i // scans)] for i in range(len(committed))]


def opened_at(rule: dict[str, Any], log_end: list[int], committed: list[int]) -> list[float]:
    seen = transitions(rule, [series(committed=joined(committed), log_end=joined(log_end))])
    return [t.at / 1000 for t in seen if t.current.value == "WARN"]


def test_a_producer_surge_the_consumer_cannot_keep_up_with_is_falling_behind():
    # 100 records/s for half an hour, read at up to 300/s; then 400/s for 20 minutes: it reads
    # at its full 300/s, three times what the partition normally gets, and falls a quarter of
    # a second further behind every second.
    rates = [100.0] * 180 + [400.0] * 120 + [100.0] * 60
    log_end, committed = read_with(rates, [300.0] * 360)
    opened = opened_at(FALLING_AS_SHIPPED, log_end, committed)
    assert len(opened) == 1
    # Once the surge has outlasted a burst (5 min from the commit before) and `for: 30s`.
    assert 1800 + 300 < opened[0] <= 1800 + 300 + 90


def test_a_producer_burst_of_minutes_that_drains_by_itself_is_not_falling_behind():
    # 100 records/s read at up to 200/s, committed every 45 s; every 15 minutes a burst of
    # 300/s for four and a half minutes: it reads two thirds of it for the whole burst, then
    # drains it in as long again.
    rates = [100.0] * 1080
    for start in range(180, 1000, 90):
        rates[start : start + 27] = [300.0] * 27
    log_end, committed = read_with(rates, [200.0] * 1080)
    assert opened_at(FALLING_AS_SHIPPED, log_end, committed_every(committed, 4)) == []
    assert opened_at(FALLING_AS_SHIPPED, log_end, committed) == []


def test_a_surge_is_judged_from_its_last_commit_that_gained_ground():
    # 100 records/s read at up to 220/s, committed every minute; two surges of 400/s for four
    # minutes each, a minute of 160/s between them in which the consumer gains ground. The
    # speeds averaged over the minute before still hold the first surge at that commit
    # (records arriving faster than it read them), but the backlog says it is gaining: each
    # surge is shorter than surge_for and costs it less than a pause does. (The synthetic
    # fleet's shipping-sync-0013, seed 9: four producer spikes in a quarter of an hour, drained
    # between them, warned twice as one surge of ten minutes.)
    surge, lull = [400.0] * 25, [160.0] * 6  # the lull is the interval of the commit at 2100 s
    rates = [100.0] * 180 + surge + lull + surge[:23] + [100.0] * 360
    log_end, committed = read_with(rates, [220.0] * len(rates))
    assert committed[-1] == log_end[-1]  # drained by itself
    assert opened_at(FALLING_AS_SHIPPED, log_end, committed_every(committed, 6)) == []
    # Without the lull, a surge of nine minutes the consumer loses ground to at every commit.
    rates = [100.0] * 180 + [400.0] * 54 + [100.0] * 360
    log_end, committed = read_with(rates, [220.0] * len(rates))
    opened = opened_at(FALLING_AS_SHIPPED, log_end, committed_every(committed, 6))
    assert len(opened) == 1
    # surge_for from the commit before the surge's first, at a commit, then `for`.
    assert 1800 + 300 < opened[0] <= 1800 + 300 + 3 * 60 + 30


def test_a_surge_on_a_backlog_it_is_catching_up_is_judged_by_what_the_surge_cost():
    # A consumer four minutes behind (its offsets reset to a topic's start), catching up at
    # 150/s; a burst of 170/s for four minutes halts the catch-up and sets it a minute further
    # back: the surge is not the backlog's cause, and drains by itself.
    rates = [100.0] * 600
    rates[300:324] = [170.0] * 24
    capacities = [150.0] * 600
    capacities[180:204] = [0.0] * 24
    log_end, committed = read_with(rates, capacities)
    assert opened_at(FALLING_AS_SHIPPED, log_end, committed) == []


def test_a_slow_patch_no_longer_than_one_recovered_from_is_not_falling_behind_a_lasting_one_is():
    # 100 records/s read at up to 200/s; at 30 minutes the downstream slows it to 30/s for
    # 80 s (a minute behind at worst, caught up in as long again), at 45 minutes for 150 s
    # (100 s behind at worst), at 60 minutes for a quarter of an hour.
    capacities = [200.0] * 600
    capacities[180:188] = [30.0] * 8
    capacities[270:285] = [30.0] * 15
    capacities[360:450] = [30.0] * 90
    log_end, committed = read_with([100.0] * 600, capacities)
    opened = opened_at(FALLING_AS_SHIPPED, log_end, committed)
    # The first patch is over, and caught up from, before it has lasted the grace; the second
    # is shorter than 1.5 x the first and its catch-up (about 3.5 minutes) before it catches up.
    assert [at for at in opened if at < 3600] == []
    # The slowdown is judged once it has lasted 1.5 x the longest patch and catch-up it
    # recovered from (the second's, about 4 minutes), then `for`.
    assert len(opened) == 1
    assert 3600 + 1.5 * 240 < opened[0] <= 3600 + 1.5 * 270 + 60
    # Never seen slow before, the same slowdown is judged at the grace: behind at every commit
    # for 90 s, then `for` (a first slow patch of three minutes is warned too: nothing tells
    # it from the start of a slowdown that lasts, and a slowdown is worth knowing within
    # about two and a half minutes).
    capacities[180:188] = [200.0] * 8
    capacities[270:285] = [200.0] * 15
    log_end, committed = read_with([100.0] * 600, capacities)
    opened = opened_at(FALLING_AS_SHIPPED, log_end, committed)
    assert len(opened) == 1
    assert 3600 + 90 < opened[0] <= 3600 + 90 + 60


def test_a_slow_topic_read_at_seven_tenths_is_falling_behind_judged_over_all_its_partitions():
    # Eight partitions of a record every 8 s each (Poisson), read at up to 1/s each, every
    # record committed as read; at 30 minutes the consumer keeps up with 70% of them. No
    # partition alone gets records enough to tell a rate from chance; the eight together do.
    rng = np.random.default_rng(4)
    inputs, lossless = [], []
    for partition in range(8):
        arrivals = rng.poisson(1.25, 540)
        log_end = np.cumsum(arrivals).tolist()
        read, committed = 0.0, []
        for i, end in enumerate(log_end):
            read = min(float(end), read + (10.0 if i < 180 else 0.7 * 1.25))
            committed.append(int(read))
        inputs.append(series(partition=partition, committed=joined(committed),
                             log_end=joined(log_end)))  # fmt: skip
        lossless.append(series(partition=partition, committed=joined(log_end),
                               log_end=joined(log_end)))  # fmt: skip
    seen = [t for t in transitions(FALLING_AS_SHIPPED, inputs) if t.current.value == "WARN"]
    assert len(seen) == 1
    # More than 30 s behind (about 100 s in, at 7/10), behind at every commit for the grace,
    # then `for`; by lag in seconds alone (the 30 minutes of `lag-seconds-critical`) it would
    # take an hour and a half.
    assert 1800 + 180 < seen[0].at / 1000 <= 1800 + 420
    assert transitions(FALLING_AS_SHIPPED, lossless) == []


# --------------------------------------------------------------------------------------------
# A new group bootstrapping a compacted topic from the earliest offset


LAG_SECONDS = only({"kind": "lag_seconds", "severity": "err", "threshold": "30m",
                    "clear_below": "20m", "catching_up_within": "10m", "for": "2m"})  # fmt: skip


def new_group(read_per_s: float, commit_every: int, scans: int = 120) -> list[dict[str, Any]]:
    """A group that appears (no commit for three scans) on a topic holding three hours of
    records (a record a second), reading ``read_per_s`` from offset 0 and committing every
    ``commit_every`` scans (0: once, then never again)."""
    log_end = [10_800 + 10 * i for i in range(scans)]
    committed: list[int | str] = []
    last: int | str = "_"
    for i in range(scans):
        due = i == 3 or (commit_every and i > 3 and (i - 3) % commit_every == 0)
        if due:
            last = min(int(read_per_s * 10 * (i - 3)), log_end[i])
        committed.append(last)
    n = scans - 1
    return [series(committed=joined(committed), log_end=joined(log_end), members=f"1x{n}",
                   group_state=f"Stablex{n}", member_hash=f"1x{n}")]  # fmt: skip


def test_a_new_group_committing_every_three_minutes_while_it_drains_history_is_not_behind():
    # 30 records a second against one arriving: caught up about six minutes after it began,
    # but the window (100 s) holds no commit but the first for minutes: its pace since its
    # first commit says it is catching up; before its second, nothing says it is not.
    assert transitions(LAG_SECONDS, new_group(30, 18)) == []
    # Reading half a record a second it never catches up: paged once its second commit
    # shows the pace (two minutes after), and one that never commits again after the
    # 10 minutes its pace may take to show.
    slow = transitions(LAG_SECONDS, new_group(0.5, 18))
    assert [(t.previous.value, t.current.value) for t in slow] == [("OK", "ERR")]
    assert 21 * 10 + 120 <= slow[0].at / 1000 <= 21 * 10 + 120 + 20
    frozen = transitions(LAG_SECONDS, new_group(30, 0))
    assert [(t.previous.value, t.current.value) for t in frozen] == [("OK", "ERR")]
    assert 3 * 10 + 600 + 120 <= frozen[0].at / 1000 <= 3 * 10 + 600 + 120 + 20


def test_a_pause_the_service_started_in_counts_twice_the_part_it_saw_until_a_whole_one_ends():
    # First seen Empty for 20 minutes (the job's pause began before the service started),
    # then a run that reads everything and leaves, then a 33-minute pause: within 1.2 x the
    # 40 minutes the first pause is taken for (seen from a moment anywhere in it, half of it
    # is seen on the median), no stop (the independent corpus's batch-job-005, paged 21 min
    # into its first whole pause for 1.2 x the 18 min seen of the one before).
    seen = transitions(GRACEFUL, run_after_first_sight(120, 10, 200, True))
    assert [t for t in seen if t.at > 130 * 10_000 and t.current.value == "ERR"] == []
    # A job that misses its next run is still paged, once those 48 minutes are over.
    missed = run_after_first_sight(120, 10, 400, True)
    seen = transitions(GRACEFUL, missed)
    late = [t for t in seen if t.at > 130 * 10_000 and t.current.value == "ERR"]
    assert [t.result.findings[0].status for t in late] == ["STOP"]
    assert 130 * 10 + 1.2 * 2400 <= late[0].at / 1000 <= 130 * 10 + 1.2 * 2400 + 20
    assert "twice the 20 min seen of one before the service" in late[0].result.findings[0].message


def test_a_whole_pause_seen_ends_the_doubling_of_the_part_seen():
    # Once a whole pause (33 minutes) has ended, the job is judged by it: its next pause is
    # stopped past 1.2 x 33 minutes, not 1.2 x twice the 20 minutes seen of the first.
    job = job_and_gaps([(120, False), (10, True), (200, False), (10, True), (400, False)])
    late = [t for t in transitions(GRACEFUL, job) if t.at > 340 * 10_000]
    assert [(t.previous.value, t.current.value) for t in late][:1] == [("OK", "ERR")]
    left_s = 340 * 10
    assert 1.2 * 2000 <= late[0].at / 1000 - left_s <= 1.2 * 2010 + 20


def test_a_pause_the_service_started_in_counts_twice_the_part_seen_for_lag_in_seconds_too():
    # First seen Empty for 25 minutes (its pause began before the service started), then a
    # 6-minute run that reads everything and leaves, then a 44-minute pause: its records wait
    # 44 minutes, within 1.2 x the 50 minutes the first pause is taken for, so no page (the
    # held-out independent seeds' batch-job-118, -260 and -285, paged 30 minutes into their
    # first whole pause, judged by 1.2 x the 23-27 minutes seen of the one before).
    rule = only({**HOURLY["rules"][0], "catching_up_within": "10m"})
    left_s = (150 + 36) * 10
    waited = pages(rule, run_after_first_sight(150, 36, 264, True))
    assert [at for at in waited if at > left_s] == []
    # A job that misses its next run is paged once its records have waited 1.2 x those 50
    # minutes (and the rule's 2 minutes).
    seen = transitions(rule, run_after_first_sight(150, 36, 500, True))
    missed = [t for t in seen if t.at / 1000 > left_s and t.current.value == "ERR"]
    assert len(missed) == 1
    assert 1.2 * 3000 <= missed[0].at / 1000 - left_s <= 1.2 * 3000 + 120 + 30
    message = missed[0].result.findings[0].message
    assert "its pause twice the 25 min seen of one before the service" in message


def job_leaving_records(cycles: int, pause: int, run: int, left_s: int) -> list[dict[str, Any]]:
    """A job that comes every ``pause + run`` scans (first seen at the start of its pause),
    reads for ``run`` scans up to ``left_s`` seconds short of the log end (a run that stops on
    a timer, its last commit on the way out), and leaves; a record a second."""
    committed, log_end, members, last = [], [], [], 0
    for cycle in range(cycles):
        for scan in range(pause + run):
            end = 10 * len(log_end) + 5
            running = scan >= pause
            leaving = scan == 0 and cycle > 0  # its commit on the way out, seen as it left
            last = end - left_s if running or leaving else last
            committed.append(last)
            log_end.append(end)
            members.append(cycle + 1 if running else 0)
    states = ["Stable" if m else "Empty" for m in members]
    return [series(committed=joined(committed), log_end=joined(log_end),
                   members=joined([1 if m else 0 for m in members]), group_state=joined(states),
                   member_hash=joined(members))]  # fmt: skip


def test_a_batch_job_whose_runs_leave_records_unread_is_judged_by_its_pause_and_that():
    # Every 30 minutes a 2-minute run that stops 9 minutes short of the log end: its oldest
    # records wait the 28-minute pause and those 9 minutes, 37 minutes, more than 1.2 x its
    # 28-minute rhythm (the independent corpus's batch-job-005, its runs falling 5-7 minutes
    # short as its topic grew busier, paged at 35 minutes > 34). What a run left unread, up to
    # catching_up_within, is part of its records' wait; a job that misses its run is paged.
    rule = only({**HOURLY["rules"][0], "catching_up_within": "10m"})
    job = job_leaving_records(8, 168, 12, 540)
    assert [at for at in pages(rule, job) if at > 3 * 1800] == []
    assert [at for at in pages(HOURLY, job) if at > 3 * 1800] != []  # without it, every pause
    missed = job_leaving_records(6, 168, 12, 540)
    missed[0] = {**missed[0]}
    idle = job_leaving_records(1, 400, 0, 540)[0]
    for key in ("committed", "members", "group_state", "member_hash"):
        tail = idle[key].split()
        if key == "committed":
            tail = [missed[0][key].split()[-1]] * len(tail)
        missed[0][key] = missed[0][key] + " " + " ".join(tail)
    n = len(missed[0]["committed"].split())
    missed[0]["log_end"] = joined([10 * i + 5 for i in range(n)])
    late = [at for at in pages(rule, missed) if at > 6 * 1800]
    assert len(late) == 1
    left_at_s = 6 * 1800 - 10
    # 1.2 x (its 28-minute pause, its 10 s wait and the 9 minutes left) after the oldest
    # record was written, 9 minutes before it left, and the rule's 2 minutes.
    assert late[0] - (left_at_s - 540) <= 1.2 * (1690 + 540) + 120 + 30


def test_a_pause_the_service_saw_a_fifth_of_is_taken_for_what_its_backlog_says():
    # A 20-minute pause of which the service saw the last 4 (the 16 minutes of records before
    # it already waiting), a run, then a whole 20-minute pause: the part seen is a fifth of the
    # pause, as the backlog says, so the next pause is judged by 20 minutes, not twice 4 (the
    # independent seed 4's batch-job-267 and -208, stopped 10 and 38 min into their first
    # whole pause, having seen 13% and 38% of the one before).
    seen = transitions(GRACEFUL, run_after_first_sight(24, 10, 120, True, unseen=96))
    assert [t for t in seen if t.at > 34 * 10_000 and t.current.value == "ERR"] == []
    # A job that misses its next run is still stopped, past 1.2 x those 20 minutes (measured
    # at the pause's last scan, the estimate is a scan's records long, the ones the service
    # saw a scan short: 5.25 x the part seen).
    seen = transitions(GRACEFUL, run_after_first_sight(24, 10, 200, True, unseen=96))
    late = [t for t in seen if t.at > 34 * 10_000 and t.current.value == "ERR"]
    assert [t.result.findings[0].status for t in late] == ["STOP"]
    assert 1.2 * 1200 <= late[0].at / 1000 - 34 * 10 <= 1.2 * 1260 + 20
    assert "5.25 x the 4 min seen of one before the service" in late[0].result.findings[0].message


def test_a_first_whole_pause_within_twice_what_it_was_judged_by_is_the_jobs_pause():
    # First seen Empty for 4 min 40 s (learned as its spell; stopped in it, as nothing is
    # learned yet), a run, then a 10 min 40 s
    # pause: within 1.2 x twice the part seen, no stop, and within twice that, its pause from
    # then on. The next one, as long, is no stop either (the independent seed 4's
    # batch-job-046, stopped 6 min into its second whole pause, judged by the part seen).
    job = job_and_gaps([(28, False), (43, True), (64, False), (43, True), (64, False),
                        (43, True), (30, False)])  # fmt: skip
    assert [
        t for t in transitions(GRACEFUL, job) if t.at > 280_000 and t.current.value == "ERR"
    ] == []
    # A job that misses its third run is stopped past 1.2 x its 10 min 40 s pause.
    job = job_and_gaps([(28, False), (43, True), (64, False), (43, True), (200, False)])
    late = [t for t in transitions(GRACEFUL, job) if t.at > 280_000 and t.current.value == "ERR"]
    assert [t.result.findings[0].status for t in late] == ["STOP"]
    assert 1.2 * 640 <= late[0].at / 1000 - 178 * 10 <= 1.2 * 640 + 20
