"""``falling_behind``: consuming slower than the partition normally gets records, or than a
lasting surge brings them; the run of commits at which the consumer was behind is this kind's
own evidence (``e_behind_since``, ``e_behind_committed``, ``e_behind_leo``,
``e_behind_moves``, and whether it is catching up ``e_receding``), and so is since when
records have arrived faster than it read them (``e_losing_since``), whether, at its
latest move, the offset fell short of where the log ended at its move before
(``e_reach_leo``, ``e_short``); and the spells behind it recovered from by itself, the slow
patches of its own rhythm (``e_spell_since``, ``e_spell_slow``, ``e_healed_ms``,
``e_healed_ts``)."""

from __future__ import annotations

from typing import Annotated, ClassVar, Literal

import numpy as np
from pydantic import Field

from notifier.config.base import Duration
from notifier.config.rules import KindRule, RuleBase
from notifier.rules.habits import NULL, UNSET_TS, ScanTimes, ScanView, decayed
from notifier.rules.kernels import SEVERITY_NONE
from notifier.rules.kinds.base import (
    Description,
    KindEvidence,
    PartitionView,
    Rows,
    RuleKind,
    RuleRun,
    Verdict,
    position_evidence,
)
from notifier.rules.narrow import WholeFloat
from notifier.types import Severity


class FallingBehindRule(KindRule):
    """Consuming slower than ``ratio`` × the partition's normal production rate while the lag
    grows and is more than ``min_lag_seconds`` behind."""

    kind: Literal["falling_behind"]
    name: str
    severity: Severity = Severity.WARN
    ratio: Annotated[float, Field(gt=0.0, le=1.0)] = 0.85
    min_lag_seconds: Duration = 30.0
    grace: Duration = 0.0
    """With more than 0: also behind at every commit across this long, or more than
    ``min_lag_seconds`` + ``grace`` behind, and over that run it read less than ``ratio`` of
    what arrived (a pause falls behind and catches up within a few commits; a consumer of
    transactions read in bursts keeps up overall; a slow consumer does neither)."""
    surge_for: Duration = 300.0
    """With a grace: how long a run of commits behind must last when the consumer reads
    faster than the partition normally gets records but less than ``ratio`` of what arrives
    now (the producers outrun it): a producer burst of a few minutes drains by itself, a
    surge that lasts does not."""
    TUNABLE: ClassVar[tuple[str, ...]] = (
        *RuleBase.TUNABLE, "ratio", "min_lag_seconds", "grace", "surge_for"
    )  # fmt: skip


def follow_runs(
    columns: dict[str, np.ndarray], index: slice | np.ndarray, scan: ScanView, times: ScanTimes
) -> None:
    """Since when the consumer has been behind at every measured move (records it had not
    read when it committed, beyond what one scan interval brings), and where its offset and
    the log end were then. A run starts again at a commit no further behind than when it
    began, or one that gained ground on the commit before (by more than a scan interval of
    records): a consumer that keeps a steady backlog is not losing ground, and one whose
    commits trail its position by varying amounts is judged from its latest gain, not from the
    lowest backlog it ever had (over hours, a slowdown of half an hour hardly shows).

    And whether, at its latest move, the offset fell short of the log end seen at its move
    before (by more than one scan interval of records): a consumer that keeps up has read, a
    whole commit interval later, at least what was there when it last committed. So has a
    ``read_committed`` consumer of a transactional topic, whose offset moves only when a
    transaction commits: its backlog at a commit (the open transaction) swings by up to a
    transaction's records as the producer's and the consumer's commits drift against each
    other, which over a few commits looks like reading slower than records arrive.

    And whether it is catching up: its backlog, at a measured move, below that of its move
    before by more than a scan interval of records; and since when, at every measured move,
    records have arrived faster than it read them (the speeds as :mod:`~notifier.rules.habits`
    averages them, or its backlog grown since its move before)."""
    moved_now = columns["e_move_ts"][index] == scan.ts
    measured = moved_now & columns["e_move_measured"][index]
    noise = np.nan_to_num(columns["e_normal_rate"][index]) * times.scan_interval_ms / 1000.0
    known = scan.committed != NULL
    reach = columns["e_reach_leo"][index]
    short = known & (reach != NULL) & (scan.committed < reach - noise)
    previous_backlog = np.where(
        scan.had_sample & (scan.previous_committed != NULL) & (reach != NULL),
        reach - scan.previous_committed,
        NULL,
    )
    columns["e_short"][index] = np.where(moved_now, short, columns["e_short"][index])
    columns["e_reach_leo"][index] = np.where(moved_now, np.where(known, scan.log_end, NULL), reach)
    backlog = scan.log_end - scan.committed
    behind_now = known & (backlog > noise)
    since = columns["e_behind_since"][index]
    run_backlog = columns["e_behind_leo"][index] - columns["e_behind_committed"][index]
    holding = (since != UNSET_TS) & (backlog <= run_backlog)
    gained = (previous_backlog != NULL) & (backlog < previous_backlog - noise)
    begins = measured & behind_now & ((since == UNSET_TS) | holding | gained)
    ends = measured & ~behind_now
    # Catching up: its backlog below that of its commit before by more than a scan interval
    # of records. The speeds it is judged on are averaged over a minute or so; the backlog
    # says at once that a slow patch is over.
    columns["e_receding"][index] = np.where(measured, known & gained, columns["e_receding"][index])
    # Since when records have arrived faster than it read them, at every measured move (the
    # speeds averaged over a minute or so, or its backlog grown since its move before: the
    # average still holds the catch-up of a slow committer's last pause), and it has not
    # gained ground since its move before: between the bursts of a storm of them, a consumer
    # that keeps pace drains what the last one left, while the averages still hold the burst.
    grew = (previous_backlog != NULL) & (backlog > previous_backlog)
    with np.errstate(invalid="ignore"):
        losing_now = (
            measured
            & behind_now
            & ~gained
            & (grew | (columns["e_produce_rate"][index] > columns["e_consume_rate"][index]))
        )
    losing = columns["e_losing_since"][index]
    starts = losing_now & (losing == UNSET_TS)
    stops = measured & ~losing_now
    columns["e_losing_since"][index] = np.where(starts, scan.ts, np.where(stops, UNSET_TS, losing))
    # Commits behind since the run began: a pause is one long interval and a catch-up, a slow
    # consumer is behind commit after commit. (Both from the run as it was before this scan:
    # a plain column read by a slice is a view, which the write below changes.)
    continues = measured & behind_now & ~begins & (since != UNSET_TS)
    first = begins & (since == UNSET_TS)
    columns["e_behind_since"][index] = np.where(begins, scan.ts, np.where(ends, UNSET_TS, since))
    count = columns["e_behind_moves"][index]
    columns["e_behind_moves"][index] = np.where(
        begins | ends, 0, np.where(continues, np.minimum(count + 1, 1 << 14), count)
    )
    for name, value in (("e_behind_committed", scan.committed), ("e_behind_leo", scan.log_end)):
        columns[name][index] = np.where(begins, value, np.where(ends, NULL, columns[name][index]))
    _follow_spells(columns, index, scan, measured, first, ends)


def _follow_spells(
    columns: dict[str, np.ndarray],
    index: slice | np.ndarray,
    scan: ScanView,
    measured: np.ndarray,
    first: np.ndarray,
    ends: np.ndarray,
) -> None:
    """Since when the consumer has been behind without a commit that caught up (a spell: the
    runs of commits behind above, each restarted where it gained ground, taken together);
    whether, at one of the spell's measured moves, it read slower than the partition normally
    gets records while more than :data:`SPELL_BEHIND_S` behind; and the longest such slow
    spell that ended caught up by itself, up to :data:`HEALED_AT_MOST_MS`: the slow patches
    this consumer recovers from within its own rhythm (a downstream slow at times, and the
    catch-up after it)."""
    spell = columns["e_spell_since"][index]
    normal = columns["e_normal_rate"][index]
    # Slow, and far enough behind to have mattered: the noise of a topic of a few records a
    # second, read a little late now and then, is no rhythm to wait for.
    deep = scan.log_end - scan.committed > normal * SPELL_BEHIND_S
    slow_now = measured & deep & (columns["e_consume_rate"][index] < normal)
    slow = np.where(
        first, slow_now, columns["e_spell_slow"][index] | (slow_now & (spell != UNSET_TS))
    )
    length = (scan.ts - spell).astype(np.float64)
    healed = ends & (spell != UNSET_TS) & slow & (length <= HEALED_AT_MOST_MS)
    if healed.any():
        known = columns["e_healed_ms"][index]
        known_now = decayed(known, scan.ts - columns["e_healed_ts"][index])
        longer = healed & (length >= known_now)
        columns["e_healed_ms"][index] = np.where(longer, length, known)
        columns["e_healed_ts"][index] = np.where(longer, scan.ts, columns["e_healed_ts"][index])
    columns["e_spell_since"][index] = np.where(first, scan.ts, np.where(ends, UNSET_TS, spell))
    columns["e_spell_slow"][index] = np.where(ends, False, slow)


MIN_INTERVALS_BEHIND = 2
"""``falling_behind`` with a grace: commit intervals, each ending further behind, before a run
of commits behind counts as lasting."""

MIN_PARTITIONS_WIDE = 2
"""``falling_behind`` with a grace: partitions of a group in a run of commits behind at once
for the runs to be confirmed on their ratio alone. One partition alone must also have fallen
short of where the log ended at its move before: its backlog at a commit can swing by a whole
transaction in flight, and a partition's runs start where that swing is lowest."""

HEALED_AT_MOST_MS = 5 * 60_000
"""``falling_behind``: a slow spell longer than this is an incident even when it heals by
itself, never a rhythm that later spells are measured against: minutes behind are worth
knowing about (a consumer slow to a quarter for five minutes, caught up when its owner fixed it,
must not make the next such slowdown its habit), a downstream slow for a minute or three and
the catch-up after it fit within."""

SPELL_BEHIND_S = 30.0
"""``falling_behind``: a spell is learned as one the consumer recovered from only when it was
once this far behind (in records at the normal rate), reading slow."""

HEALED_FACTOR = 1.5
"""``falling_behind``: a slow spell is judged once it has lasted this many times the longest
one that healed by itself (slow patches vary in length: the next may well be half as long
again as the longest so far, and heal as well)."""

MIN_RECORDS_TO_JUDGE_RATE = 20
"""``falling_behind`` needs this many records expected in its span to compare rates."""

MIN_RECORDS_TO_JUDGE_RUN = 3 * MIN_RECORDS_TO_JUDGE_RATE
"""...and this many arrived over the run of commits behind to say it read less than its share:
a topic read in whole transactions of a dozen records is read in steps that size."""


def falling_behind(
    now_ms: int,
    committed: np.ndarray,
    lag_seconds: np.ndarray,
    usual_wait_ms: np.ndarray,
    move_ts: np.ndarray,
    move_log_end: np.ndarray,
    move_measured: np.ndarray,
    consume_rate: np.ndarray,
    produce_rate: np.ndarray,
    normal_rate: np.ndarray,
    ratio: np.ndarray | float,
    min_lag_seconds: np.ndarray | float,
    severity: np.ndarray | int,
    behind_since: np.ndarray | None = None,
    grace_s: np.ndarray | float = 0.0,
    behind_committed: np.ndarray | None = None,
    behind_log_end: np.ndarray | None = None,
    behind_moves: np.ndarray | None = None,
    short: np.ndarray | None = None,
    group_ids: np.ndarray | None = None,
    spell_since: np.ndarray | None = None,
    healed_ms: np.ndarray | None = None,
    healed_ts: np.ndarray | None = None,
    surge_for_s: np.ndarray | float = 300.0,
    receding: np.ndarray | None = None,
    losing_since: np.ndarray | None = None,
) -> np.ndarray:
    """Reading slower than the partition normally gets records, while more arrive than it
    reads, and, when its offset last moved, more than ``min_lag_seconds`` (and as many
    records) behind; with ``grace``, also behind at every commit across that long
    (``behind_since`` to the last move) or more than ``min_lag_seconds`` + ``grace`` + its
    usual wait behind; or, with ``grace``, reading faster than the partition normally gets
    records but less than ``ratio`` of what arrives now (the producers outrun it), losing
    ground at every commit for ``surge_for`` from the commit before (``losing_since``), or
    set back by the surge alone (its backlog's growth over its run of commits behind, at the
    rate records arrive) more than ``min_lag_seconds`` + ``grace`` + its usual wait: a burst
    drains by itself within minutes, a surge does not; and, with ``grace``, not catching up
    at its last commit (``receding``), nor while more of its group's partitions are catching
    up than are confirmed slow, and having read less than ``ratio`` of what arrived over that
    run, and (``short``) not even up to where the log ended at its move before: a pause falls
    behind and catches up within a few commits, a slow consumer never does; a reader of
    transactions has read at each commit what was there at the one before. With
    ``spell_since`` and ``healed_ms``, also behind for longer than :data:`HEALED_FACTOR` ×
    the longest slow spell any partition of its group caught up from by itself: a downstream
    slow at times is this consumer's rhythm, however slow it reads meanwhile, and it slows
    every partition the group reads.

    Speeds are measured between the offset's moves, and the lag as it was at the last move,
    so a consumer that commits every five minutes is judged at its commits, never half way
    between them; a move seen only after missed scans or a rebalance (``move_measured``
    false) says nothing about speed, and the rule waits for the next.

    Comparing with the *normal* production rate (not the current one) is what tells a slow
    consumer from a burst: through a burst a healthy consumer reads at its full speed, above
    the normal rate, while its lag still grows for a while. So it is only when that lasts
    longer than a burst does that a consumer reading at its full speed is falling behind.
    """
    since_move_s = (now_ms - move_ts) / 1000.0
    behind_at_move_s = lag_seconds - since_move_s
    with np.errstate(invalid="ignore"):
        below_normal = consume_rate < ratio * normal_rate
        gaining_on_it = produce_rate > consume_rate
        slow = below_normal & gaining_on_it
        behind_s = behind_at_move_s > min_lag_seconds
        backlog = np.maximum(move_log_end - committed, 0)
        # Enough records in a commit interval to tell a rate from chance: a slow topic is
        # judged by lag in seconds alone.
        expected = np.fmax(normal_rate, produce_rate) * (min_lag_seconds + usual_wait_ms / 1000.0)
        behind_records = backlog > normal_rate * min_lag_seconds
    moved = behind_s & behind_records & move_measured & (committed >= 0) & (move_log_end >= 0)
    behind_enough = moved & (expected >= MIN_RECORDS_TO_JUDGE_RATE)
    hit = without_grace = slow & behind_enough
    if behind_since is not None and np.any(np.asarray(grace_s) > 0):
        if group_ids is not None:
            # With the grace, a slow topic's partitions are judged together: a group reading
            # eight partitions of a record every few seconds each gets enough records to
            # tell a rate from chance, and its runs are weighed over all of them (below).
            pooled = _group_sum(np.nan_to_num(expected), group_ids)
            behind_enough = moved & (pooled >= MIN_RECORDS_TO_JUDGE_RATE)
        with np.errstate(invalid="ignore"):
            # A pause leaves it behind by up to the pause and one commit interval.
            beyond_pause = behind_at_move_s > (min_lag_seconds + grace_s + usual_wait_ms / 1000.0)
            # Reading faster than the partition normally gets records, yet less than ``ratio``
            # of what arrives now: the producers outrun it, and only a lasting surge is a fault.
            outrun = ~below_normal & (consume_rate < ratio * produce_rate) & gaining_on_it
        if losing_since is None:
            outrun = np.zeros_like(outrun)
            losing_since = np.full_like(move_ts, UNSET_TS)
        # Behind at commits spanning ``grace``: one commit behind after a pause is not
        # enough, however long the next commit takes; losing ground at commits spanning
        # ``surge_for`` when the producers outrun it (a burst drains within that).
        since = np.where(outrun, losing_since, behind_since)
        # A surge is judged from the commit before (its usual wait earlier): the interval
        # that saw a burst begin, or end, is stamped whole.
        needed_ms = np.where(
            outrun, np.asarray(surge_for_s) * 1000.0 + usual_wait_ms, np.asarray(grace_s) * 1000.0
        )
        lasting = (since != UNSET_TS) & ((move_ts - since) >= needed_ms)
        surge_beyond_pause = np.zeros_like(outrun)
        if behind_committed is not None and behind_log_end is not None:
            # What a surge cost it in time: its backlog's growth since its run of commits
            # behind began (a run starts again where the backlog held or shrank), at the rate
            # records arrive now (lag from before, a bootstrap's, is not the surge's).
            in_run = (behind_committed != NULL) & (behind_log_end != NULL)
            with np.errstate(invalid="ignore", divide="ignore"):
                lost_s = (backlog - (behind_log_end - behind_committed)) / produce_rate
                surge_beyond_pause = (
                    (losing_since != UNSET_TS)
                    & in_run
                    & (lost_s > min_lag_seconds + grace_s + usual_wait_ms / 1000.0)
                )
        beyond_pause = np.where(outrun, surge_beyond_pause, beyond_pause)
        hit = (slow | outrun) & behind_enough
        if behind_moves is not None:
            # Slow over more than one commit interval, or one interval that left it further
            # behind than a pause does: the one interval a pause spans (or a transaction read
            # whole at its end) is not a trend.
            with np.errstate(invalid="ignore"):
                beyond_grace = behind_at_move_s > min_lag_seconds + grace_s
            lasting &= (behind_moves >= MIN_INTERVALS_BEHIND) | beyond_grace
        overall = np.ones_like(hit)
        if behind_committed is not None and behind_log_end is not None:
            # Over the whole run it read less than ``ratio`` of what arrived: a consumer that
            # reads in bursts (whole transactions, a pause and its catch-up) keeps up overall.
            in_run = (behind_committed != NULL) & (behind_log_end != NULL)
            read = np.where(in_run, committed - behind_committed, 0)
            arrived = np.where(in_run, move_log_end - behind_log_end, 0)
            enough = arrived >= MIN_RECORDS_TO_JUDGE_RUN
            with np.errstate(invalid="ignore"):
                overall = in_run & (read < ratio * arrived) & enough
            if group_ids is not None:
                # A partition whose run saw too few records is weighed with the runs of the
                # group's other partitions.
                group_read = _group_sum(read, group_ids)
                group_arrived = _group_sum(arrived, group_ids)
                pooled_overall = (
                    in_run
                    & (group_arrived >= MIN_RECORDS_TO_JUDGE_RUN)
                    & (group_read < ratio * group_arrived)
                )
                overall = np.where(enough, overall, pooled_overall)
        if short is not None:
            # One partition's run of commits behind is confirmed once it has not even read
            # what was there at its move before; a consumer slow on several of the group's
            # partitions at once is slow, whatever the backlog of each does. Not on a slow
            # topic's partitions judged only together: a few records each, read a whole
            # transaction at a time, look slow on several of them at once by chance.
            own_rate = expected >= MIN_RECORDS_TO_JUDGE_RATE
            wide = _group_wide(hit & lasting & overall & own_rate, group_ids)
            lasting &= short | (own_rate & wide)
        confirmed = (lasting | beyond_pause) & overall
        if spell_since is not None and healed_ms is not None and healed_ts is not None:
            # Behind for longer than this consumer has been before and recovered from by
            # itself: a spell no longer than that is its own rhythm (a downstream slow at
            # times), however slow it reads meanwhile. A downstream slows every partition the
            # group reads, and one partition may learn it where another did not (its spell
            # ran on, or it was not yet far enough behind): the group's longest counts.
            healed = decayed(healed_ms, now_ms - healed_ts)
            slow_before = healed_ms > 0
            if group_ids is not None:
                healed = _group_max(healed, group_ids)
                slow_before = _group_max(slow_before.astype(np.float64), group_ids) > 0
            beyond_healed = (spell_since != UNSET_TS) & (
                move_ts - spell_since > HEALED_FACTOR * healed
            )
            confirmed &= ~slow_before | beyond_healed
        if receding is not None:
            # Catching up at its last commit: the slow patch is over, whatever the speeds
            # averaged over the minute before still say. So it is when more of the group's
            # partitions are catching up than are confirmed slow: those whose last commit
            # came before the slow patch ended have not said so yet (counting those that get
            # records enough to be judged alone: one record fewer is catching up on a
            # partition that gets one every few seconds).
            confirmed &= ~receding
            if group_ids is not None:
                catching_up = _group_sum(
                    receding & (expected >= MIN_RECORDS_TO_JUDGE_RATE), group_ids
                )
                confirmed &= catching_up <= _group_sum(confirmed, group_ids)
        hit = np.where(np.asarray(grace_s) > 0, hit & confirmed, without_grace)
    return np.where(hit, severity, SEVERITY_NONE).astype(np.int8)


def _group_sum(values: np.ndarray, group_ids: np.ndarray) -> np.ndarray:
    """Each row's group's sum of ``values``."""
    # Group ids are small non-negative integers (the store's), so a sum per id is direct.
    summed: np.ndarray = np.bincount(group_ids, weights=values)[group_ids]
    return summed


def _group_max(values: np.ndarray, group_ids: np.ndarray) -> np.ndarray:
    """Each row's group's largest of ``values``."""
    largest = np.zeros(int(group_ids.max()) + 1 if group_ids.size else 0)
    np.maximum.at(largest, group_ids, values)
    result: np.ndarray = largest[group_ids]
    return result


def _group_wide(candidate: np.ndarray, group_ids: np.ndarray | None) -> np.ndarray:
    """Rows of groups where at least :data:`MIN_PARTITIONS_WIDE` partitions are candidates."""
    if group_ids is None or not candidate.any():
        return np.zeros_like(candidate)
    # Group ids are small non-negative integers (the store's), so a count per id is direct.
    wide: np.ndarray = np.bincount(group_ids, weights=candidate)[group_ids] >= MIN_PARTITIONS_WIDE
    return wide


def evaluate(rows: Rows, run: RuleRun) -> Verdict:
    store, index = rows.store, rows.index
    return Verdict(
        falling_behind(
            rows.now,
            rows.latest_committed,
            rows.lag_seconds,
            rows.usual_wait_ms,
            store.evidence["e_move_ts"][index],
            store.evidence["e_move_leo"][index],
            store.evidence["e_move_measured"][index],
            store.evidence["e_consume_rate"][index],
            store.evidence["e_produce_rate"][index],
            store.evidence["e_normal_rate"][index],
            run.params["ratio"],
            run.params["min_lag_seconds"],
            run.severity,
            store.evidence["e_behind_since"][index],
            run.params["grace"],
            store.evidence["e_behind_committed"][index],
            store.evidence["e_behind_leo"][index],
            store.evidence["e_behind_moves"][index],
            store.evidence["e_short"][index],
            rows.gids,
            store.evidence["e_spell_since"][index],
            store.evidence["e_healed_ms"][index],
            store.evidence["e_healed_ts"][index],
            run.params["surge_for"],
            store.evidence["e_receding"][index],
            store.evidence["e_losing_since"][index],
        )
    )


def describe(view: PartitionView) -> Description:
    store, row, ratio = view.store, view.row, view.rule.ratio
    evidence, behind = position_evidence(view)
    consume = float(store.evidence["e_consume_rate"][row])
    normal = float(store.evidence["e_normal_rate"][row])
    evidence.update(
        consume_rate=consume,
        produce_rate=float(store.evidence["e_produce_rate"][row]),
        normal_rate=normal,
        ratio=ratio,
    )
    message = (
        f"consuming {consume:.3g} records/s, below {ratio:.0%} of the "
        f"{normal:.3g}/s this partition normally gets; lag {view.lag}, {behind} behind"
    )
    return Description("WARN", message, evidence)


KIND = RuleKind(
    name="falling_behind",
    model=FallingBehindRule,
    params=("ratio", "min_lag_seconds", "grace", "surge_for"),
    evaluate=evaluate,
    describe=describe,
    evidence=KindEvidence(
        columns=(
            ("e_behind_since", np.int64, UNSET_TS),
            ("e_behind_committed", np.int64, NULL),
            ("e_behind_leo", np.int64, NULL),
            ("e_behind_moves", np.int16, 0),
            ("e_reach_leo", np.int64, NULL),
            ("e_short", np.bool_, False),
            ("e_spell_since", np.int64, UNSET_TS),
            ("e_spell_slow", np.bool_, False),
            ("e_healed_ms", WholeFloat, 0.0),
            ("e_healed_ts", np.int64, 0),
            ("e_receding", np.bool_, False),
            ("e_losing_since", np.int64, UNSET_TS),
        ),
        update=follow_runs,
    ),
)
