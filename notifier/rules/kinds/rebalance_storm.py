"""``rebalance_storm``: the member set keeps changing, in the window or in a run that lasts,
replaces more members than the group has or holds it in rebalances; the current run of
changes is this kind's own evidence, held once per group (``e_churn_since``, ``e_churn_changes``,
``e_last_change_ts``, ``e_churn_settled``, ``e_churn_replaced``, ``e_churn_unsettled``,
``e_members_seen``, ``e_rebalance_spell_since``, ``e_churn_longest_ms``,
``e_churn_second_ms``, ``e_churn_third_ms``, ``e_churn_growing``)."""

from __future__ import annotations

from typing import ClassVar, Literal

import numpy as np

from notifier.config.base import Duration, NonNegativeInt
from notifier.config.rules import KindRule, RuleBase
from notifier.rules.habits import UNSET_TS, ScanTimes, ScanView
from notifier.rules.kernels import SEVERITY_NONE
from notifier.rules.kinds.base import (
    Description,
    GroupView,
    KindEvidence,
    Rows,
    RuleKind,
    RuleRun,
    Verdict,
    every_group,
    human_seconds,
)
from notifier.rules.kinds.stuck_rebalance import REBALANCING_STATES
from notifier.types import GROUP_STATE_CODE, Severity


class RebalanceStormRule(KindRule):
    """More than ``max_changes`` member-set changes: within the window, or, with ``lasting``,
    in a run of changes (each at most ``window.churn_gap`` apart) that has lasted that long —
    which tells a storm from a rolling deploy, which ends."""

    kind: Literal["rebalance_storm"]
    name: str
    severity: Severity = Severity.WARN
    max_changes: NonNegativeInt = 3
    lasting: Duration = 0.0
    min_lag_seconds: Duration = 0.0
    """With ``lasting``: only while some partition is more than this far behind beyond its
    usual wait between commits, and the group kept members through the window: a long
    rolling deploy keeps up, a batch job's members come and go, a storm falls behind."""
    beyond_a_deploy: bool = False
    """Also fire, however long the run and however far behind, on a run of more than
    ``max_changes`` changes in which the group has settled again (``Stable`` after a change)
    with the number of members it had before the run more times than it has members, with
    members in every sample of the window: a rolling deploy replaces each member once; a
    member that crashes or is thrown out over and over is replaced again and again."""
    rebalances_held_for: Duration = 0.0
    """Also fire (0: never), however far behind, on a run of more than ``max_changes``
    changes in which three rebalances have each held the group this long or longer (from
    the first scan that saw it rebalancing to the last), with members in every sample of the
    window: a deploy's rebalances take seconds; a dead member kept until its session times
    out holds one (two members killed a minute apart, or a broker restart and a kill, hold
    two); a member that keeps crashing and is replaced before its session times out holds
    one every time."""
    TUNABLE: ClassVar[tuple[str, ...]] = (
        *RuleBase.TUNABLE, "max_changes", "lasting", "min_lag_seconds", "beyond_a_deploy",
        "rebalances_held_for",
    )  # fmt: skip


def follow_churn(
    columns: dict[str, np.ndarray], index: slice | np.ndarray, scan: ScanView, times: ScanTimes
) -> None:
    """Runs of a group's member-set changes: when the current run began (changes at most
    ``churn_gap`` apart belong to one run), how many changes it has had, and when the last one
    was; how many members the group had before the run began (``e_churn_settled``) and how many
    times it settled again since (``Stable`` after a change) with that many members
    (``e_churn_replaced``: a member replaced, whether seen leaving and coming back or both
    between two scans; ``e_churn_unsettled``: a change since the last); when the rebalance
    going on began (``e_rebalance_spell_since``: the first scan that saw it), and the three
    longest rebalances over since the run began (``e_churn_longest_ms``,
    ``e_churn_second_ms``, ``e_churn_third_ms``: from the first scan that saw each to the
    last); and whether every change of the run added members (``e_churn_growing``: a
    scale-out, which no member left)."""
    ts, changed = scan.ts, scan.member_changed
    last_change = columns["e_last_change_ts"][index]
    churn_since = columns["e_churn_since"][index]
    changes = columns["e_churn_changes"][index]
    settled = columns["e_churn_settled"][index]
    replaced = columns["e_churn_replaced"][index]
    seen = columns["e_members_seen"][index]
    continues = (churn_since != UNSET_TS) & (ts - last_change <= times.churn_gap_ms)
    columns["e_churn_since"][index] = np.where(
        changed, np.where(continues, churn_since, ts), np.where(continues, churn_since, UNSET_TS)
    )
    columns["e_churn_changes"][index] = np.where(
        changed, np.where(continues, changes + 1, 1), np.where(continues, changes, 0)
    )
    columns["e_last_change_ts"][index] = np.where(changed, ts, last_change)
    added = changed & (seen >= 0) & (scan.members > seen)
    growing = columns["e_churn_growing"][index]
    columns["e_churn_growing"][index] = np.where(
        changed, added & (growing | ~continues), growing & continues
    )
    settled = np.where(changed & ~continues, seen, np.where(continues, settled, NO_MEMBERS_SEEN))
    unsettled = changed | (continues & columns["e_churn_unsettled"][index])
    back = unsettled & (scan.state == STABLE) & (settled >= 0) & (scan.members == settled)
    columns["e_churn_settled"][index] = settled
    columns["e_churn_replaced"][index] = np.where(continues, replaced, 0) + back
    columns["e_churn_unsettled"][index] = unsettled & ~back
    columns["e_members_seen"][index] = scan.members
    rebalancing = np.isin(scan.state, REBALANCING_STATES)
    spell_since = columns["e_rebalance_spell_since"][index]
    over = ~rebalancing & (spell_since != UNSET_TS)
    length = np.where(over, scan.previous_ts - spell_since, 0)
    columns["e_rebalance_spell_since"][index] = np.where(
        rebalancing, np.where(spell_since != UNSET_TS, spell_since, ts), UNSET_TS
    )
    in_run = changed | continues
    longest = np.where(in_run & ~(changed & ~continues), columns["e_churn_longest_ms"][index], 0)
    second = np.where(in_run & ~(changed & ~continues), columns["e_churn_second_ms"][index], 0)
    third = np.where(in_run & ~(changed & ~continues), columns["e_churn_third_ms"][index], 0)
    length = np.where(in_run, length, 0)
    columns["e_churn_longest_ms"][index] = np.maximum(longest, length)
    columns["e_churn_second_ms"][index] = np.maximum(second, np.minimum(longest, length))
    columns["e_churn_third_ms"][index] = np.maximum(third, np.minimum(second, length))


STABLE = GROUP_STATE_CODE["Stable"]
NO_MEMBERS_SEEN = -1
"""``e_members_seen`` and ``e_churn_settled`` before a group's first sample and outside a run."""


def rebalance_storm(
    member_changed: np.ndarray,
    count: np.ndarray,
    max_changes: np.ndarray | int,
    severity: np.ndarray | int,
) -> np.ndarray:
    """The member set changed more than ``max_changes`` times within the window (slots
    before the first sample never hold a change)."""
    changes = np.count_nonzero(member_changed, axis=1)
    return np.where(changes > max_changes, severity, SEVERITY_NONE).astype(np.int8)


def churning(
    now_ms: int,
    churn_since: np.ndarray,
    churn_changes: np.ndarray,
    last_change: np.ndarray,
    churn_gap_ms: int,
    lasting_ms: np.ndarray | float,
    max_changes: np.ndarray | int,
    severity: np.ndarray | int,
    behind_s: np.ndarray | None = None,
    min_lag_seconds: np.ndarray | float = 0.0,
    members_throughout: np.ndarray | None = None,
    settled: np.ndarray | None = None,
    growing: np.ndarray | None = None,
) -> np.ndarray:
    """A run of member-set changes (each at most ``churn_gap`` after the previous) whose
    changes span ``lasting`` or more, with more than ``max_changes`` of them, and that is still
    going on (the last change at most ``churn_gap`` ago); with ``min_lag_seconds``, only rows
    that many seconds behind (``behind_s``: lag in seconds beyond the usual wait) and with
    members in every sample of the window (``members_throughout``: a storm keeps members; a
    batch job's members come and go between runs); with ``settled`` (the members the group
    had before the run), only runs of more changes than a rolling deploy of that many members
    makes (each leaves and joins once: two per member): a deploy of many pods with long steps
    lasts longer than any fixed ``lasting``, and its partitions fall behind while each pod
    restarts. With ``growing`` (every change of the run added members), not a run that only
    added members: a scale-out (autoscaling, pods added one by one) rebalances at each new
    member, and a consumer that commits every few minutes is behind its usual wait after
    each; no member left, none was thrown out or crashed."""
    hit = (
        (churn_since != UNSET_TS)
        & ((now_ms - last_change) <= churn_gap_ms)
        & ((last_change - churn_since) >= lasting_ms)
        & (churn_changes > max_changes)
    )
    if settled is not None:
        hit &= (settled <= 0) | (churn_changes > 2 * settled)
    if growing is not None:
        hit &= ~growing
    if behind_s is not None and np.any(np.asarray(min_lag_seconds) > 0):
        with np.errstate(invalid="ignore"):
            behind = behind_s > min_lag_seconds
        if members_throughout is not None:
            behind &= members_throughout
        hit &= (np.asarray(min_lag_seconds) <= 0) | behind
    return np.where(hit, severity, SEVERITY_NONE).astype(np.int8)


def replacing_beyond_a_deploy(
    now_ms: int,
    churn_since: np.ndarray,
    churn_changes: np.ndarray,
    last_change: np.ndarray,
    settled: np.ndarray,
    replaced: np.ndarray,
    churn_gap_ms: int,
    max_changes: np.ndarray | int,
    members_throughout: np.ndarray,
) -> np.ndarray:
    """Rows in a run of member-set changes still going on (the last at most ``churn_gap``
    ago) with more than ``max_changes`` changes, that has brought the group back to the
    ``settled`` number of members (a group that had members before the run) more times than
    that number, with members in every sample of the window (``members_throughout``: a
    batch job's come and go)."""
    going_on: np.ndarray = (
        (churn_since != UNSET_TS)
        & ((now_ms - last_change) <= churn_gap_ms)
        & (churn_changes > max_changes)
        & (settled > 0)
        & (replaced > settled)
        & members_throughout
    )
    return going_on


def third_longest_rebalance(
    now_ms: int, evidence: dict[str, np.ndarray], index: slice | np.ndarray
) -> np.ndarray:
    """The third longest rebalance of each row's run of changes (ms), the one going on
    counted for as long as it has lasted so far."""
    since = evidence["e_rebalance_spell_since"][index]
    current = np.where(since != UNSET_TS, now_ms - since, 0)
    third: np.ndarray = np.maximum(
        evidence["e_churn_third_ms"][index],
        np.minimum(evidence["e_churn_second_ms"][index], current),
    )
    return third


def holding_rebalances(
    now_ms: int,
    churn_since: np.ndarray,
    churn_changes: np.ndarray,
    last_change: np.ndarray,
    third_longest_ms: np.ndarray,
    churn_gap_ms: int,
    max_changes: np.ndarray | int,
    held_ms: np.ndarray | float,
    members_throughout: np.ndarray,
) -> np.ndarray:
    """Rows in a run of member-set changes still going on (the last at most ``churn_gap``
    ago) with more than ``max_changes`` changes, in which three rebalances have each lasted
    ``held_ms`` (> 0) or more (``third_longest_ms``), with members in every sample of the
    window."""
    held: np.ndarray = (
        (churn_since != UNSET_TS)
        & ((now_ms - last_change) <= churn_gap_ms)
        & (churn_changes > max_changes)
        & (np.asarray(held_ms) > 0)
        & (third_longest_ms >= held_ms)
        & members_throughout
    )
    return held


BURST_FACTOR = 2.0
"""Records arriving over the window at more than this many times the partition's normal rate
are a producer burst (the normal rate itself counts a scan for at most twice normal)."""


def in_a_burst(rows: Rows, at: np.ndarray) -> np.ndarray:
    """Of the rows at positions ``at``, those whose log end grew over the window (first to last
    sample) faster than :data:`BURST_FACTOR` times the partition's normal production rate."""
    start = rows.window_start(at)
    normal_rate = rows.store.evidence["e_normal_rate"][rows.rows[at]]
    with np.errstate(invalid="ignore", divide="ignore"):
        rate = (rows.latest_leo[at] - start.log_end) / start.span_s
        burst: np.ndarray = (
            (start.log_end >= 0) & (start.span_s > 0) & (rate > BURST_FACTOR * normal_rate)
        )
    return burst


def behind_for_churn(
    rows: Rows, firing: np.ndarray, min_lag_seconds: np.ndarray | float
) -> np.ndarray:
    """Seconds behind beyond the usual wait, where the churn can be what holds the consumer
    back: NaN (never behind) while a producer burst is arriving, which puts any consumer
    behind for a while (a rolling deploy during a burst reads at full speed between its
    changes; a storm lasts longer than a burst and is judged once it has passed). Only for
    groups not yet ``firing``: a burst in the middle of a storm does not close its page. Only
    rows more than ``min_lag_seconds`` behind are looked at for a burst: below it, being
    behind counts for nothing anyway."""
    behind: np.ndarray = rows.lag_seconds - rows.usual_wait_ms / 1000.0
    with np.errstate(invalid="ignore"):
        at = np.flatnonzero(~firing & (behind > min_lag_seconds))
    if at.size:
        behind[at[in_a_burst(rows, at)]] = np.nan
    return behind


def evaluate(rows: Rows, run: RuleRun) -> Verdict:
    store, index, p, sev = rows.store, rows.index, run.params, run.severity
    lasting_s = np.asarray(p["lasting"])
    evidence = store.evidence
    members_throughout = np.all(rows.members > 0, axis=1)
    if not np.all(lasting_s > 0):  # some rows count changes in the window
        out = rebalance_storm(store.s_member_changed[index], rows.count, p["max_changes"], sev)
    if np.any(lasting_s > 0):
        lasting = churning(
            rows.now,
            evidence["e_churn_since"][index],
            evidence["e_churn_changes"][index],
            evidence["e_last_change_ts"][index],
            store.churn_gap_ms,
            p["lasting"] * 1000.0,
            p["max_changes"],
            sev,
            behind_for_churn(rows, run.state.firing[rows.gids], p["min_lag_seconds"]),
            p["min_lag_seconds"],
            members_throughout,
            evidence["e_churn_settled"][index],
            evidence["e_churn_growing"][index],
        )
        out = lasting if np.all(lasting_s > 0) else np.where(lasting_s > 0, lasting, out)
    beyond = np.asarray(p["beyond_a_deploy"], dtype=bool)
    if np.any(beyond):
        replacing = beyond & replacing_beyond_a_deploy(
            rows.now,
            evidence["e_churn_since"][index],
            evidence["e_churn_changes"][index],
            evidence["e_last_change_ts"][index],
            evidence["e_churn_settled"][index],
            evidence["e_churn_replaced"][index],
            store.churn_gap_ms,
            p["max_changes"],
            members_throughout,
        )
        out = np.where(replacing, sev, out).astype(np.int8)
    held_ms = np.asarray(p["rebalances_held_for"]) * 1000.0
    if np.any(held_ms > 0):
        held = holding_rebalances(
            rows.now,
            evidence["e_churn_since"][index],
            evidence["e_churn_changes"][index],
            evidence["e_last_change_ts"][index],
            third_longest_rebalance(rows.now, evidence, index),
            store.churn_gap_ms,
            p["max_changes"],
            held_ms,
            members_throughout,
        )
        out = np.where(held, sev, out).astype(np.int8)
    return Verdict(out)


def describe_group(view: GroupView) -> Description:
    store, row, rule = view.store, view.row, view.rule
    evidence = view.group_evidence()
    if rule.lasting or rule.beyond_a_deploy or rule.rebalances_held_for:
        changes = int(store.evidence["e_churn_changes"][row])
        began = int(store.evidence["e_churn_since"][row])
        settled = int(store.evidence["e_churn_settled"][row])
        replaced = int(store.evidence["e_churn_replaced"][row])
        held_s = float(third_longest_rebalance(view.now, store.evidence, np.array([row]))[0])
        held_s /= 1000
        message = (
            f"member set changed {changes} times in "
            f"{human_seconds((view.now - began) / 1000)} and is still changing"
        )
        if rule.beyond_a_deploy and 0 < settled < replaced:
            message += (
                f": back to its {settled} member{'s' if settled > 1 else ''} {replaced} times "
                f"(a rolling deploy replaces each member once)"
            )
        elif rule.rebalances_held_for and held_s >= rule.rebalances_held_for:
            message += (
                f": three of its rebalances held the group for {human_seconds(held_s)} or more "
                f"each (a rolling deploy's take seconds)"
            )
        elif rule.lasting:
            message += f" (a rolling deploy is over within {human_seconds(rule.lasting)})"
        evidence.update(
            member_changes=changes,
            churn_since=began,
            members_before=settled,
            replaced=replaced,
            third_longest_rebalance_s=held_s,
        )
        return Description(view.status, message, evidence)
    changes = sum(1 for s in view.window if s["member_set_changed"])
    message = f"member set changed {changes} times in the window (> {rule.max_changes})"
    evidence.update(member_changes=changes, members=[s["members"] for s in view.window])
    return Description(view.status, message, evidence)


KIND = RuleKind(
    name="rebalance_storm",
    model=RebalanceStormRule,
    params=("max_changes", "lasting", "min_lag_seconds", "beyond_a_deploy", "rebalances_held_for"),
    evaluate=evaluate,
    describe_group=describe_group,
    group_level=every_group,
    evidence=KindEvidence(
        columns=(
            ("e_churn_since", np.int64, UNSET_TS),
            ("e_churn_changes", np.int32, 0),
            ("e_last_change_ts", np.int64, UNSET_TS),
            ("e_churn_settled", np.int32, NO_MEMBERS_SEEN),
            ("e_churn_replaced", np.int32, 0),
            ("e_churn_unsettled", np.bool_, False),
            ("e_members_seen", np.int32, NO_MEMBERS_SEEN),
            ("e_rebalance_spell_since", np.int64, UNSET_TS),
            ("e_churn_longest_ms", np.int64, 0),
            ("e_churn_second_ms", np.int64, 0),
            ("e_churn_third_ms", np.int64, 0),
            ("e_churn_growing", np.bool_, False),
        ),
        update=follow_churn,
        per_group=True,
    ),
)
