"""``progress``: STALL and STOP from per-scan evidence, judged against each group's habits;
whether a memberless spell began without a commit on the way out (a crash), and whether the
group's usual spell is only the part of one that the service saw (a batch job between runs when
the service started), is this kind's own evidence (``e_memberless_how``), with how much of that
spell the backlog it left says the service saw (``e_cut_spell_scale``)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Annotated, ClassVar, Literal

import numpy as np
from pydantic import Field

from notifier.config.base import Duration
from notifier.config.rules import KindRule, RuleBase
from notifier.rules.habits import (
    NULL,
    OUTAGE_FACTOR,
    UNSET_TS,
    WAITS_TO_LEARN,
    ScanTimes,
    ScanView,
    left_abruptly,
)
from notifier.rules.kernels import SEVERITY_NONE, STALL, STOP
from notifier.rules.kinds.base import (
    Description,
    KindEvidence,
    PartitionView,
    Rows,
    RuleKind,
    RuleRun,
    Verdict,
    human_seconds,
    position_evidence,
)
from notifier.types import Severity


class ProgressRule(KindRule):
    """STALL and STOP from per-scan evidence, judged against each group's own habits.

    STALL: a consumer is there (members present, or a standalone ``assign()`` consumer) and
    the committed offset has not moved for ``tolerance`` × the partition's usual wait between
    moves (learned from its history), for its usual wait plus ``grace``, and at least
    ``stall_after``, while records arrived. Until the habit is learned the window's
    ``assumed_commit_interval`` stands for the usual wait, plus ``grace`` but not times
    ``tolerance``: it is already the longest wait assumed, not a wait seen. STOP: no members
    for ``tolerance`` × the group's usual restart, and at least ``stop_after`` (plus
    ``crash_grace`` when they vanished without a commit on the way out), while records arrived.
    """

    kind: Literal["progress"]
    name: str
    severity: Severity = Severity.ERR
    stall_after: Duration = 30.0
    stop_after: Duration = 60.0
    tolerance: Annotated[float, Field(ge=1.0)] = 1.5
    grace: Duration = 0.0
    """How much longer than its usual wait an offset may stand still before it is a stall:
    a pause that heals itself (back-pressure, a crash restart that committed nothing on the
    way out, a static member back within its session timeout) stays under it."""
    crash_grace: Duration = 0.0
    """Added to ``stop_after`` when the members vanished without a commit on the way out (a
    crash: the coordinator kept the dead member until its session timed out, and its pod is
    usually on its way back), and to a standalone consumer's stall limit (its crash and
    restart show no member set at all)."""
    TUNABLE: ClassVar[tuple[str, ...]] = (
        *RuleBase.TUNABLE, "stall_after", "stop_after", "tolerance", "grace", "crash_grace"
    )  # fmt: skip


SPELL_ABRUPT = 4
"""Bit of ``e_memberless_how``: the current memberless spell began without a commit on the way
out (:func:`~notifier.rules.habits.left_abruptly`)."""

CUT_PHASE = 3
"""Bits of ``e_memberless_how``: where the row stands against a memberless spell that was already
on when the service first saw it (0: no such spell, or a whole one has ended since)."""

CUT_SPELL_ON, CUT_SPELL_OVER, FIRST_WHOLE_SPELL = 1, 2, 3
"""The phases of :data:`CUT_PHASE`: in the spell seen only in part; past it, no spell since;
in the first spell the service saw begin, judged by :data:`CUT_SPELL_FACTOR` × the usual
spell, which only the part seen has taught."""

CUT_SPELL_FACTOR = 2.0
"""A spell seen from a moment that falls anywhere in it is seen over half its length on the
median: until a whole spell has ended, the part seen stands for half the group's usual one,
unless the records it found waiting say how much of it the service missed
(:data:`CUT_SCALE_UNITS`), and never for more."""

CUT_SCALE_UNITS = 4
"""``e_cut_spell_scale`` holds, in quarters (int8: up to 31.75), how many times the part seen
the whole spell the service started in was, as the records waiting at its end show: the
backlog its members came back to over the records that arrived while the service watched
(the offset stood still through all of it, and records arrive at about the same pace before
the service as after). 0: nothing measured (no record arrived, nothing committed)."""


def note_crashes(
    columns: dict[str, np.ndarray], index: slice | np.ndarray, scan: ScanView, times: ScanTimes
) -> None:
    """How the current memberless spell began: abruptly (:func:`~notifier.rules.habits.
    left_abruptly`: a crash whose pod is usually on its way back gets ``crash_grace``), and
    whether the usual spell it is judged by was learned from a spell on before the service
    first saw the row (the part seen is a lower bound: a batch job found between runs)."""
    since = columns["e_memberless_since"][index]
    began = since == scan.ts
    on = since != UNSET_TS
    how = columns["e_memberless_how"][index]
    abrupt = np.where(began, left_abruptly(scan, began), (how & SPELL_ABRUPT) != 0) & on
    phase = how & CUT_PHASE
    # A spell that ends and another that begins at the same scan (a run between two scans)
    # moves on twice.
    ended = ~on | (began & scan.had_sample)
    confirm_first_whole_spell(
        columns, index, (phase == FIRST_WHOLE_SPELL) & ended & scan.had_sample
    )
    phase = np.select(
        [
            ~scan.had_sample,
            (phase == CUT_SPELL_ON) & began & scan.had_sample,
            (phase == CUT_SPELL_ON) & ended,
            (phase == CUT_SPELL_OVER) & began,
            (phase == FIRST_WHOLE_SPELL) & ended,
        ],
        [
            np.where(on, CUT_SPELL_ON, 0),
            FIRST_WHOLE_SPELL,
            CUT_SPELL_OVER,
            FIRST_WHOLE_SPELL,
            0,
        ],
        phase,
    )
    columns["e_memberless_how"][index] = (phase | np.where(abrupt, SPELL_ABRUPT, 0)).astype(np.int8)
    # How much of the spell the service missed: what was already waiting when it first saw the
    # row, against what arrived since, measured up to the spell's last scan (its members back,
    # the log end it began at is gone).
    in_cut = on & (phase == CUT_SPELL_ON) & scan.had_sample
    arrived = scan.log_end - columns["e_memberless_leo"][index]
    waiting = scan.log_end - scan.committed
    measured = (
        in_cut
        & (scan.committed != NULL)
        & (columns["e_memberless_leo"][index] != NULL)
        & (arrived > 0)
        & (waiting >= arrived)
    )
    scale = np.clip(np.round(CUT_SCALE_UNITS * waiting / np.maximum(arrived, 1)), 0, 127)
    scale = np.maximum(scale, CUT_SCALE_UNITS * CUT_SPELL_FACTOR)
    kept = columns["e_cut_spell_scale"][index]
    columns["e_cut_spell_scale"][index] = np.where(
        measured, scale, np.where(phase == 0, 0, kept)
    ).astype(np.int8)


def confirm_first_whole_spell(
    columns: dict[str, np.ndarray], index: slice | np.ndarray, ending: np.ndarray
) -> None:
    """The first whole spell the service saw, ``ending`` at this scan, is learned as the
    group's usual one when it came within :data:`~notifier.rules.habits.OUTAGE_FACTOR` × what
    it was judged by (:func:`judged_memberless_ms`): that stood for the usual spell, so a spell
    within it confirms itself as one within the usual one does. The shared habits held it as
    a fault that healed, being over twice the part seen (a job found between runs, whose
    next pause is then stopped 1.2 x the part seen and 90 s into it)."""
    held = columns["e_unconfirmed_spell_ms"][index]
    usual = columns["e_usual_memberless_ms"][index]
    judged = part_seen_factor(columns["e_cut_spell_scale"][index]) * usual
    confirmed = ending & (held > 0) & (held <= OUTAGE_FACTOR * judged)
    if confirmed.any():
        columns["e_usual_memberless_ms"][index] = np.where(
            confirmed, np.maximum(usual, held), usual
        )
        columns["e_unconfirmed_spell_ms"][index] = np.where(confirmed, 0.0, held)


def from_abrupt_flag(arrays: dict[str, np.ndarray]) -> None:
    """A layout before ``e_memberless_how`` kept only whether the spell began abruptly, as
    ``e_memberless_abrupt``: its bit (and no spell seen in part: the service saw it before)."""
    if "e_memberless_how" not in arrays and "e_memberless_abrupt" in arrays:
        abrupt = np.asarray(arrays["e_memberless_abrupt"], dtype=bool)
        arrays["e_memberless_how"] = np.where(abrupt, SPELL_ABRUPT, 0).astype(np.int8)


def learned_in_part(how: np.ndarray) -> np.ndarray:
    """Rows in the first memberless spell after one the service saw only in part (it started
    in it), whose usual spell is that part."""
    first_whole: np.ndarray = (how & CUT_PHASE) == FIRST_WHOLE_SPELL
    return first_whole


def part_seen_factor(scale: np.ndarray) -> np.ndarray:
    """How many times the part seen a spell the service started in is taken for: what the
    records waiting at its end showed (``e_cut_spell_scale``), or :data:`CUT_SPELL_FACTOR`
    where they showed nothing (never less)."""
    factor: np.ndarray = np.where(
        scale > 0, np.asarray(scale, dtype=np.float64) / CUT_SCALE_UNITS, CUT_SPELL_FACTOR
    )
    return factor


def judged_memberless_ms(
    how: np.ndarray, usual_memberless_ms: np.ndarray, scale: np.ndarray
) -> np.ndarray:
    """The usual memberless spell a row's current spell is judged by: :func:`part_seen_factor`
    × the usual one where it was :func:`learned_in_part`."""
    judged: np.ndarray = np.where(
        learned_in_part(how), part_seen_factor(scale) * usual_memberless_ms, usual_memberless_ms
    )
    return judged


def seen_in_part(evidence: Mapping[str, np.ndarray], row: int) -> str | None:
    """How a finding says ``row``'s usual memberless spell was :func:`learned_in_part`, taken
    :func:`part_seen_factor` times; None where it was not."""
    seen_s = float(evidence["e_usual_memberless_ms"][row]) / 1000.0
    if seen_s <= 0 or not learned_in_part(evidence["e_memberless_how"][[row]])[0]:
        return None
    factor = float(part_seen_factor(evidence["e_cut_spell_scale"][[row]])[0])
    times = "twice" if factor == CUT_SPELL_FACTOR else f"{factor:g} x"
    return f"{times} the {human_seconds(seen_s)} seen of one before the service"


@dataclass(slots=True)
class ProgressOutcome:
    """Per row: the severity code, and whether the row is stalled (members present) or
    stopped (no members) — the partition status a finding reports."""

    severity: np.ndarray
    stalled: np.ndarray
    stopped: np.ndarray


def no_progress(
    now_ms: int,
    wait_since: np.ndarray,
    wait_log_end: np.ndarray,
    usual_wait_ms: np.ndarray,
    memberless_since: np.ndarray,
    memberless_log_end: np.ndarray,
    usual_memberless_ms: np.ndarray,
    committed: np.ndarray,
    log_end: np.ndarray,
    present: np.ndarray,
    stall_after_ms: np.ndarray | float,
    stop_after_ms: np.ndarray | float,
    tolerance: np.ndarray | float,
    severity: np.ndarray | int,
    grace_ms: np.ndarray | float = 0.0,
    standalone: np.ndarray | None = None,
    abrupt: np.ndarray | None = None,
    crash_grace_ms: np.ndarray | float = 0.0,
    learned_wait_ms: np.ndarray | None = None,
    backlog_ms: np.ndarray | float = 0.0,
) -> ProgressOutcome:
    """STALL: a consumer is there (members present, or a standalone ``assign()`` consumer whose
    offsets have moved with no members) and its committed offset has not moved, while records
    arrived, for longer than the longest of ``stall_after``, ``tolerance`` × the row's usual
    wait and the usual wait plus ``grace`` (a pause that heals itself: back-pressure, a
    restart that committed nothing on the way out, a static member coming back). Where the
    usual wait is the configured ``assumed_commit_interval`` standing in for a habit not yet
    learned, ``tolerance`` applies to what ``learned_wait_ms`` the waits seen so far showed
    (the assumption is a bound, not one more wait seen: no margin for how far the habit's
    longest waits may yet go beyond it), and the assumption plus ``grace`` stands. A
    standalone consumer may stand still for two usual waits plus ``grace`` and
    ``crash_grace``: its restart after a crash is invisible.
    STOP: no members (and no standalone consumer) for longer than ``tolerance`` × the group's
    usual restart, and that restart plus ``grace`` when it is longer than ``stop_after`` (at
    least ``stop_after``, plus
    ``crash_grace`` when the members vanished without a commit on the way out: a crash whose
    pod is on its way back) while records arrived that nobody reads.

    ``backlog_ms`` (:func:`commit_backlog_ms`) counts toward the standstill: how long before
    its last move the consumer had already stopped reading, as that commit showed."""
    reader = present if standalone is None else present | standalone
    learned = usual_wait_ms if learned_wait_ms is None else learned_wait_ms
    restart_limit: np.ndarray | float = 0.0
    if standalone is not None:
        # A standalone consumer's restart is invisible (no member set to change), and its
        # commit timer starts again with it: up to two usual waits and the restart. A crash
        # of it (a job killed and restarted from its checkpoint) is a crash like a member's,
        # which a vanished member set shows and ``crash_grace`` allows for: so does the
        # standalone consumer's standstill, past the waits it has shown (an assumed commit
        # interval is a bound that covers a restart already).
        usual_wait_ms = np.where(standalone, 2 * usual_wait_ms, usual_wait_ms)
        learned = np.where(standalone, 2 * learned, learned)
        restart_limit = np.where(standalone, learned + grace_ms + crash_grace_ms, 0.0)
    stall_limit = np.maximum(
        np.maximum(stall_after_ms, tolerance * learned),
        np.maximum(usual_wait_ms + grace_ms, restart_limit),
    )
    stalled = (
        reader
        & (wait_since != UNSET_TS)
        & (log_end > wait_log_end)
        & ((now_ms - wait_since + backlog_ms) >= stall_limit)
    )
    if abrupt is not None:
        stop_after_ms = stop_after_ms + np.where(abrupt, crash_grace_ms, 0.0)
    # A group whose members are usually away for longer than a restart (a batch job between
    # runs) is judged by its own spells, with the same grace as its waits.
    habit = np.where(usual_memberless_ms > stop_after_ms, usual_memberless_ms + grace_ms, 0.0)
    stop_limit = np.maximum(np.maximum(stop_after_ms, tolerance * usual_memberless_ms), habit)
    stopped = (
        ~reader
        & (memberless_since != UNSET_TS)
        & (committed >= 0)
        & (log_end > committed)
        & (log_end > memberless_log_end)
        & ((now_ms - memberless_since) >= stop_limit)
    )
    out = np.where(stalled | stopped, severity, SEVERITY_NONE).astype(np.int8)
    return ProgressOutcome(severity=out, stalled=stalled, stopped=stopped)


BACKLOG_SHARE_OF_GRACE = 0.5
"""At most this share of the rule's ``grace`` is taken off a stall's limit for the backlog its
last commit left (:func:`commit_backlog_ms`): the offset must still stand past the usual wait by
the rest of the grace, so a consumer whose commits come on time is never a stall, however far
behind they leave it (a slow consumer, a burst it drains)."""


def _median_of(values: np.ndarray, valid: np.ndarray) -> np.ndarray:
    """Per row, the median of its ``valid`` values (NaN where none): ``np.nanmedian`` at a
    fraction of its cost on a few columns."""
    ordered = np.sort(np.where(valid, values, np.inf), axis=1)
    count = valid.sum(axis=1)
    take = np.arange(values.shape[0])
    low = ordered[take, np.maximum((count - 1) // 2, 0)]
    high = ordered[take, np.minimum(count // 2, values.shape[1] - 1)]
    return np.where(count > 0, (low + high) / 2.0, np.nan)


def commit_backlog_ms(
    rows: Rows, cap_ms: np.ndarray | float, grace_ms: np.ndarray | float
) -> np.ndarray:
    """Per row: how long before its offset last moved the consumer had already stopped reading,
    as that last commit shows, up to ``cap_ms``. A consumer that stops reading but keeps
    committing (``pause()``, a stuck handler while auto-commit goes on) commits once more what
    it read before it stopped, so its offset last moves up to a commit interval after it
    stopped: that commit left behind more records than the commits before it did (the median
    of the ring's earlier ones), and moved fewer than the partition normally gets over the
    interval (a burst the consumer drains at full speed moves more). The smaller of the two,
    in seconds of the partition's normal rate, is the backlog. Both are read at the scan that
    saw the commit, against the commits before it read at theirs: where a commit lands between
    scans shifts the backlog by less than a scan interval, so a backlog under one is no sign
    of a stop (a member that crashed a few seconds after its last commit, kept until its
    session times out). One over it counts in full: the shift is already allowed for where
    the standstill is judged, at the scans before the next move, the last of them a scan
    before the move is seen, so a ``pause()`` that commits what it read and resumes within
    ``grace_ms`` stays quiet without taking a scan interval off the backlog too (which paged
    every such stall a scan late). Rows whose last interval was disturbed (a rebalance, no
    members, missed scans) have none, nor rows whose standstill the backlog cannot bring to a
    stall's limit (at least the usual wait plus ``grace_ms``): only those few are read."""
    store, now = rows.store, rows.now
    out = np.zeros(rows.rows.size)
    since = store.evidence["e_wait_since"][rows.index]
    candidates = (
        (since != UNSET_TS)
        & ((now - since) >= rows.usual_wait_ms + grace_ms - cap_ms)
        & store.evidence["e_move_measured"][rows.index]
        & (store.r_count[rows.index] >= 3)
    )
    at = np.flatnonzero(candidates)
    if at.size == 0:
        return out
    absolute = rows.rows[at]
    count = store.r_count[absolute].astype(np.int64)
    offsets = store.r_offset[absolute]
    lags = store.r_lag[absolute].astype(np.float64)
    times = store.ring_times(absolute)
    last_ts = np.asarray(times[:, -1])
    interval_s = (last_ts - np.asarray(times[:, -2])) / 1000.0
    width = offsets.shape[1]
    earlier = np.arange(width - 1) >= (width - count[:, None])
    typical = _median_of(lags[:, :-1], earlier & (lags[:, :-1] >= 0))
    rate = store.evidence["e_normal_rate"][absolute].astype(np.float64)
    with np.errstate(invalid="ignore", divide="ignore"):
        shortfall = rate * interval_s - (offsets[:, -1] - offsets[:, -2])
        extra = np.minimum(lags[:, -1] - typical, shortfall)
        seconds = extra / rate
    usable = (
        (last_ts == store.evidence["e_move_ts"][absolute])
        & (interval_s > 0)
        & (rate > 0)
        & np.isfinite(seconds)
        & (seconds >= store.scan_interval_ms / 1000.0)
    )
    cap = cap_ms if np.isscalar(cap_ms) else np.asarray(cap_ms)[at]
    out[at] = np.where(usable, np.clip(seconds * 1000.0, 0.0, cap), 0.0)
    return out


def not_moved_since(
    firing: np.ndarray,
    firing_since: np.ndarray,
    moved_at: np.ndarray,
    log_end_at_move: np.ndarray,
    committed: np.ndarray,
    log_end: np.ndarray,
) -> np.ndarray:
    """Rows of a group already firing STOP or STALL whose offset has not moved since the
    episode began while records arrived that it has not read: members coming back (or a
    rebalance) do not end a STOP or STALL, the consumer reading again does. Without this a
    group that restarts but only commits minutes later would page "recovered", then page
    again for its lag."""
    return (
        firing
        & (firing_since >= 0)
        & (moved_at < firing_since)
        & (committed >= 0)
        & (log_end > committed)
        & (log_end > log_end_at_move)
    )


def standalone_groups(standalone: np.ndarray, gids: np.ndarray) -> np.ndarray:
    """Rows of a group with a standalone consumer: one ``assign()`` consumer reads the group's
    partitions, so a partition whose offset has not moved since the group went memberless
    (a record every few minutes on a slow topic split 64 ways) is read by it as much as the
    partitions that have moved."""
    of_group: np.ndarray = np.bincount(gids, weights=standalone)[gids] > 0
    return of_group


def evaluate(rows: Rows, run: RuleRun) -> Verdict:
    store, index, p = rows.store, rows.index, run.params
    how = store.evidence["e_memberless_how"][index]
    standalone = standalone_groups(store.evidence["e_standalone"][index], rows.gids)
    progress = no_progress(
        rows.now,
        store.evidence["e_wait_since"][index],
        store.evidence["e_wait_leo"][index],
        rows.usual_wait_ms,
        store.evidence["e_memberless_since"][index],
        store.evidence["e_memberless_leo"][index],
        judged_memberless_ms(
            how,
            store.evidence["e_usual_memberless_ms"][index],
            store.evidence["e_cut_spell_scale"][index],
        ),
        rows.latest_committed,
        rows.latest_leo,
        rows.has_members,
        p["stall_after"] * 1000.0,
        p["stop_after"] * 1000.0,
        p["tolerance"],
        run.severity,
        p["grace"] * 1000.0,
        standalone,
        (how & SPELL_ABRUPT) != 0,
        p["crash_grace"] * 1000.0,
        rows.learned_wait_ms,
        commit_backlog_ms(rows, BACKLOG_SHARE_OF_GRACE * p["grace"] * 1000.0, p["grace"] * 1000.0),
    )
    state, gids = run.state, rows.gids
    held = not_moved_since(
        state.firing[gids],
        state.pending_since[gids],
        store.evidence["e_move_ts"][index],
        store.evidence["e_move_leo"][index],
        rows.latest_committed,
        rows.latest_leo,
    ) & (progress.severity == 0)
    severity = np.where(held, state.fired_severity[gids], progress.severity)
    reader = rows.has_members | standalone
    stopped = progress.stopped | (held & ~reader)
    stalled = progress.stalled | (held & reader)
    detail = np.where(stopped, STOP, np.where(stalled, STALL, 0)).astype(np.int8)
    return Verdict(severity, detail)


def describe(view: PartitionView) -> Description:
    """Says what it saw and against which habit of the group, so a reader knows why it fired
    now."""
    store, row, now = view.store, view.row, view.now
    evidence, behind = position_evidence(view)
    committed, lag = evidence["committed_offset"], view.lag
    if view.detail == STOP:
        since = int(store.evidence["e_memberless_since"][row])
        how = store.evidence["e_memberless_how"][np.array([row])]
        scale = store.evidence["e_cut_spell_scale"][np.array([row])]
        seen = float(store.evidence["e_usual_memberless_ms"][row]) / 1000
        usual = float(judged_memberless_ms(how, np.array([seen]), scale)[0])
        evidence.update(members=0, memberless_since=since, usual_restart_s=usual)
        habit = f"its restarts take up to {human_seconds(usual)}" if usual else "no restart"
        if (part := seen_in_part(store.evidence, row)) is not None:
            habit = f"{habit}: {part}"
        message = (
            f"no members for {human_seconds((now - since) / 1000)} ({habit}); "
            f"lag {lag} and growing, {behind} behind"
        )
        return Description("STOP", message, evidence)
    since = int(store.evidence["e_wait_since"][row])
    usual = view.usual_wait_ms / 1000
    trusted = view.waits_learned >= WAITS_TO_LEARN
    arrived = int(store.latest_leo[row]) - int(store.evidence["e_wait_leo"][row])
    evidence.update(waiting_since=since, usual_wait_s=usual, arrived=arrived)
    assumed = store.settings.assumed_commit_interval
    habit = (
        f"usually within {human_seconds(usual)}"
        if trusted
        else f"habit not learned yet, {human_seconds(max(usual, assumed))} assumed"
    )
    # A partition of a standalone consumer's group that has not moved itself yet is judged
    # as the group's: a STALL with no members is the standalone consumer's.
    standalone = store.evidence["e_standalone"][row] or view.window[-1]["members"] == 0
    who = "standalone consumer (no members)" if standalone else "members present"
    moved_at = int(store.evidence["e_move_ts"][row])
    if since == UNSET_TS or moved_at < since - store.scan_interval_ms:
        # Held since a STOP or STALL: members are back (or rebalanced) but it has not read.
        evidence.update(offset_moved_at=moved_at if moved_at != UNSET_TS else None)
        quiet = "ever" if moved_at == UNSET_TS else human_seconds((now - moved_at) / 1000)
        message = (
            f"{who} but offset {committed} has not moved for {quiet} "
            f"({habit}); lag {lag}, {behind} behind"
        )
        return Description("STALL", message, evidence)
    message = (
        f"{who} but offset {committed} has not moved for "
        f"{human_seconds((now - since) / 1000)} ({habit}) while {arrived} "
        f"record{'' if arrived == 1 else 's'} arrived"
    )
    return Description("STALL", message, evidence)


KIND = RuleKind(
    name="progress",
    model=ProgressRule,
    params=("stall_after", "stop_after", "tolerance", "grace", "crash_grace"),
    evaluate=evaluate,
    describe=describe,
    evidence=KindEvidence(
        columns=(("e_memberless_how", np.int8, 0), ("e_cut_spell_scale", np.int8, 0)),
        update=note_crashes,
        upgrade=from_abrupt_flag,
    ),
)
