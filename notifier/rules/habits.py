"""Per-scan evidence that outlives the sample window: progress, membership, rates.

Burrow judges a partition by a ring of its last ``intervals`` commits, so a group that commits
every five minutes is only judged after fifty minutes, and a group that commits every scan is
called stopped by a single slow minute. What an on-call engineer asks instead is *has it moved
as often as it usually does?* That needs a little state per group-partition that a window of
ten samples cannot hold. This module keeps it, one value per row, updated at each scan from what
the scan saw and nothing else, so the live service, ``notifier test-rules`` and the backtest
build exactly the same evidence from the same samples:

* **waiting**: since when the committed offset has not moved while records arrived after it
  last moved (the log end beyond where it was then), and the log end it moved at. Any move of
  the committed offset, and any change of the member set (a rebalance pauses consumption and
  restarts the clock), resets it. Records that were already there do not start it: a
  ``read_committed`` consumer of a transactional topic sits one offset (the commit marker)
  below the log end for good, and is not waiting for anything until new records come.
* **standalone**: a group with no members whose offsets move anyway (``assign()`` with
  commits: Spark, Flink, Connect-like tools) is a consumer, not an absence of one: its waits
  are learned and its speed measured like any other's.
* **usual wait**: the longest wait this row has needed before its offset moved — its commit
  cadence as seen from outside, learned from its own history. Not learned: waits that a
  rebalance or an empty group interrupted, waits that ended in missed scans (the move happened
  some time in the gap), and waits over :data:`LEARN_AT_MOST_MS` (an outage, not a habit).
  A wait over :data:`LEARN_OUTRIGHT_MS` and far beyond the habit so far is learned only once
  a second one like it confirms it: the first is as likely a stall that healed.
  The learned value halves every :data:`FORGET_HALF_LIFE_MS`, so a group that changes its
  habits is not judged by an old one for ever.
* **memberless**: since when the group has had no members, the log end then, and the longest
  such spell that ended with members back: its usual restart, or a batch job's pause between
  runs. A long spell far beyond the usual one is, like a long wait, learned only when the group
  confirms it (:func:`learn_spells`).
* **rates**: records produced per second (a slow average that bursts hardly move: the
  partition's normal), and records
  consumed and produced per second between the offset's moves, averaged over about a minute
  (what the consumer does now, measured over whole commit intervals to be fair to rare
  committers).

These habits serve several kinds (``progress``, ``falling_behind``, ``lag_seconds``). Evidence
only one kind reads lives in that kind's module (``rewind``'s rewinds, ``rebalance_storm``'s
runs of churn: ``RuleKind.evidence``), and :mod:`notifier.rules.evidence` puts both together
for the store.

Everything is a pure function of numpy arrays; :class:`~notifier.rules.store.WindowStore` owns
the arrays and calls :func:`notifier.rules.evidence.update` from its ingest.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import cast

import numpy as np
from numpy.typing import NDArray

from notifier.rules.narrow import WholeFloat
from notifier.types import GROUP_STATE_CODE

NULL = -1
"""Stored for a missing offset (no commit, no log-start) and for an unset slot."""

UNSET_TS = -(2**62)
"""The time of a slot or event not yet seen: so far in the past that the step to the first real
sample is always a gap."""

WAITS_TO_LEARN = 5
"""A habit counts as learned after this many waits; until then the configured
``assumed_commit_interval`` is the least it is assumed to be."""

LEARN_AT_MOST_MS = 15 * 60_000
"""Waits longer than this are outages, not habits: never learned. Memberless spells longer
than this are learned only as a batch job's pause between runs (up to
:data:`LONG_SPELL_AT_MOST_MS`, see :func:`learn_spells`)."""

LONG_SPELL_AT_MOST_MS = 6 * 3_600_000
"""The longest memberless spell learned as a batch job's pause between runs."""

LEARN_OUTRIGHT_MS = 5 * 60_000
"""Waits and spells up to this long are learned as soon as they end (a commit cadence, a
restart). A longer one that is also more than :data:`OUTAGE_FACTOR` times the habit learned so
far looks like a fault that healed (a stall, a stopped consumer brought back): it is learned
only when another one no more than twice as long follows (:func:`learn_spells`), so a fault is
never the habit its repeat is judged by, while a group whose rhythm is slow (a rare committer,
a batch job) learns it at its second long wait or spell."""

FORGET_HALF_LIFE_MS = 6 * 3_600_000
"""A learned usual wait halves over this much time without a longer one."""

PRODUCTION_HORIZON_MS = 30 * 60_000
"""The time constant of the partition's normal production rate."""

MIN_RATE_SAMPLES = 30
"""Scans of a partition's production before bursts are clipped out of its normal rate."""

OUTAGE_FACTOR = 2.0
"""A commit interval longer than this many usual waits is a stall or outage that ended, and
says nothing about the consumer's speed."""

RATE_HORIZON_SCANS = 6
"""The consumer's current speed is averaged over about this many scan intervals (a minute at
10 s scans), or over :data:`RATE_HORIZON_WAITS` usual waits when that is longer."""

RATE_HORIZON_WAITS = 1.0
"""A consumer whose commits trail its position by a varying amount reads slow over one commit
interval and fast over the next: its speed is averaged over about this many usual waits."""

_MEMBERLESS_STATES = np.array([GROUP_STATE_CODE["Empty"], GROUP_STATE_CODE["Dead"]], dtype=np.int8)

COLUMNS: tuple[tuple[str, type, float], ...] = (
    # name, dtype, value of a new row
    ("e_wait_since", np.int64, UNSET_TS),
    ("e_wait_leo", np.int64, NULL),
    ("e_wait_disturbed", np.bool_, False),
    ("e_wait_base", np.int64, NULL),
    ("e_standalone", np.bool_, False),
    ("e_usual_wait_ms", np.float32, 0.0),
    ("e_usual_wait_ts", np.int64, 0),
    ("e_waits_learned", np.int16, 0),
    ("e_memberless_since", np.int64, UNSET_TS),
    ("e_memberless_leo", np.int64, NULL),
    ("e_usual_memberless_ms", WholeFloat, 0.0),
    ("e_unconfirmed_wait_ms", WholeFloat, 0.0),
    ("e_unconfirmed_spell_ms", WholeFloat, 0.0),
    ("e_long_spell_ms", WholeFloat, 0.0),
    ("e_long_spell_end", np.int64, UNSET_TS),
    ("e_normal_rate", np.float32, np.nan),
    ("e_rate_samples", np.int32, 0),
    ("e_consume_rate", np.float32, np.nan),
    ("e_produce_rate", np.float32, np.nan),
    ("e_move_ts", np.int64, UNSET_TS),
    ("e_move_leo", np.int64, NULL),
    ("e_move_disturbed", np.bool_, False),
    ("e_move_measured", np.bool_, False),
)
"""The shared evidence columns of :class:`~notifier.rules.store.WindowStore`, one value per row.
Rates and the usual wait are held as float32 (seven digits: a wait to well under a ms, a rate
to a millionth of itself) and computed in float64."""


@dataclass(slots=True)
class ScanView:
    """What one scan saw for some rows, and what the rows held before it."""

    ts: int
    committed: np.ndarray
    log_end: np.ndarray
    state: np.ndarray
    members: np.ndarray
    member_changed: np.ndarray
    had_sample: np.ndarray
    previous_ts: np.ndarray
    previous_committed: np.ndarray
    previous_log_end: np.ndarray
    log_start: np.ndarray | None = None
    """The log-start offsets the scan saw (NULL where unknown); None when not given."""

    def part(self, positions: slice | np.ndarray) -> ScanView:
        """The same for the rows at ``positions`` of these."""
        return ScanView(
            ts=self.ts,
            committed=self.committed[positions],
            log_end=self.log_end[positions],
            state=self.state[positions],
            members=self.members[positions],
            member_changed=self.member_changed[positions],
            had_sample=self.had_sample[positions],
            previous_ts=self.previous_ts[positions],
            previous_committed=self.previous_committed[positions],
            previous_log_end=self.previous_log_end[positions],
            log_start=None if self.log_start is None else self.log_start[positions],
        )


@dataclass(frozen=True, slots=True)
class ScanTimes:
    """The store's settings evidence is judged with, in ms."""

    churn_gap_ms: int
    scan_interval_ms: int
    max_gap_ms: int


def offset_moved(scan: ScanView) -> NDArray[np.bool_]:
    """Rows whose committed offset is not the one the previous scan saw (both known)."""
    known = scan.committed != NULL
    prev_known = scan.had_sample & (scan.previous_committed != NULL)
    # numpy types == and != as Any; these are boolean masks.
    return cast(
        "NDArray[np.bool_]", known & prev_known & (scan.committed != scan.previous_committed)
    )


def log_started_over(scan: ScanView) -> NDArray[np.bool_]:
    """Rows whose log started over since the previous scan (a topic deleted and created again,
    a cluster rebuilt): the log end went back, or the committed offset stepped back from
    beyond the log end. The group's offset of the deleted topic can outlive it by a scan (seen
    on Apache Kafka 4.4: the new log at 0, the old offset still 237), and in one log a
    committed offset is at most the log end of its time, which only grows.

    An old offset that stays beyond the new log end without moving is not counted at every
    scan: the clock of a consumer that reads nothing of the new log would otherwise be held
    until the new log grows past the old offset (millions of records, on a busy topic)."""
    leo, previous_leo = scan.log_end, scan.previous_log_end
    c, previous_c = scan.committed, scan.previous_committed
    went_back = (leo != NULL) & (previous_leo != NULL) & (leo < previous_leo)
    from_old_log = (previous_c != NULL) & (leo != NULL) & (previous_c > leo) & (c != previous_c)
    return cast("NDArray[np.bool_]", scan.had_sample & (went_back | from_old_log))


def left_abruptly(scan: ScanView, began: np.ndarray) -> NDArray[np.bool_]:
    """Of the rows whose memberless spell ``began`` at this scan, those whose members left
    without a commit on the way out (a crash whose session timed out): members that leave on
    purpose commit as they go (``close()``, a revoke), so the offset moved, or nothing was
    left to read, or the scan before saw it at the log end (its last commit came before that
    scan, and it left before records came: a batch job done with its run). A crashed member
    is kept until its session times out, reading nothing while records arrive: the scan
    before its group went empty sees it behind, unless no record came meanwhile."""
    known = scan.committed != NULL
    caught_up_before = (
        scan.had_sample
        & (scan.previous_committed != NULL)
        & (scan.previous_log_end != NULL)
        & (scan.previous_committed >= scan.previous_log_end)
    )
    return cast(
        "NDArray[np.bool_]",
        began & ~offset_moved(scan) & known & (scan.log_end > scan.committed) & ~caught_up_before,
    )


def memberless(state: np.ndarray, members: np.ndarray) -> NDArray[np.bool_]:
    """No live members: an Empty or Dead group, or no member listed."""
    return cast("NDArray[np.bool_]", (members == 0) | np.isin(state, _MEMBERLESS_STATES))


def update(
    columns: dict[str, np.ndarray], index: slice | np.ndarray, scan: ScanView, times: ScanTimes
) -> None:
    """Advance the shared evidence of the rows at ``index`` by one scan, in place."""
    ts = scan.ts
    c, leo = scan.committed, scan.log_end
    prev_c = scan.previous_committed
    had = scan.had_sample
    known = c != NULL
    prev_known = had & (prev_c != NULL)
    moved = offset_moved(scan)
    fresh_commit = known & ~prev_known
    changed = scan.member_changed
    gone = memberless(scan.state, scan.members)
    # After missed scans, a move says the offset moved some time in the gap, not when: the
    # wait and the speed it ends are not learned.
    blind = had & (ts - scan.previous_ts > times.max_gap_ms)
    # A group with no members whose offset moves after it went memberless is a standalone
    # consumer (assign() with commits): it stays one until members appear. A move seen only
    # across missed scans is not enough: members may have come, read and left in the gap (a
    # batch job's run), and a standalone consumer moves again at the next unbroken scan.
    was_gone = columns["e_memberless_since"][index] != UNSET_TS
    standalone = gone & (columns["e_standalone"][index] | (moved & was_gone & had & ~blind))
    columns["e_standalone"][index] = standalone
    absent = gone & ~standalone

    # The clock runs from the scan before records were first seen beyond the log end of its
    # last restart (they arrived in between), until the next restart.
    wait_since = columns["e_wait_since"][index]
    base = columns["e_wait_base"][index]
    arrived = known & (base != NULL) & (leo > base)
    start = arrived & (wait_since == UNSET_TS) & had
    wait_since = np.where(start, scan.previous_ts, wait_since)
    # A stall needs more records after that (an idle topic's single batch, read at the next
    # commit, is not one).
    columns["e_wait_leo"][index] = np.where(start, leo, columns["e_wait_leo"][index])

    # Learn from a wait the consumer just ended by moving its offset.
    usual = columns["e_usual_wait_ms"][index]
    usual_ts = columns["e_usual_wait_ts"][index]
    disturbed = columns["e_wait_disturbed"][index]
    waited = ts - wait_since
    ended = moved & (wait_since != UNSET_TS) & ~disturbed & ~blind & (waited <= LEARN_AT_MOST_MS)
    decayed_usual = decayed(usual, ts - usual_ts)
    learn, learned_wait = learn_spells(columns, index, "wait", ts, ended, waited, decayed_usual)
    if learn.any():
        usual = np.where(learn, np.maximum(decayed_usual, learned_wait), usual)
        usual_ts = np.where(learn, ts, usual_ts)
        columns["e_usual_wait_ms"][index] = usual
        columns["e_usual_wait_ts"][index] = usual_ts
        learned = columns["e_waits_learned"][index]
        columns["e_waits_learned"][index] = np.where(
            learn, np.minimum(learned + 1, np.iinfo(np.int16).max), learned
        )

    # The clock restarts on a move, a first commit, a new member set or a log that starts
    # over, at the log end of that moment.
    restart = moved | fresh_commit | changed | ~known | log_started_over(scan)
    columns["e_wait_base"][index] = np.where(
        known, np.where(restart | (base == NULL), leo, base), NULL
    )
    columns["e_wait_since"][index] = np.where(restart, UNSET_TS, wait_since)
    columns["e_wait_leo"][index] = np.where(restart, NULL, columns["e_wait_leo"][index])
    # Whether the wait since the last restart was disturbed (it began at a new member set, or
    # the group had no consumer meantime): a restart's pause is not a commit habit.
    columns["e_wait_disturbed"][index] = np.where(restart, changed | absent, disturbed | absent)

    # Memberless spells, and the usual one (a restart) once members are back. An offset that
    # moved while no members were listed was committed by a consumer that came and went
    # between two scans (a batch job whose run is shorter than a scan interval): that spell
    # ended, and a new one begins at this scan.
    since = columns["e_memberless_since"][index]
    spell = ts - since
    visited = gone & was_gone & moved & had
    back = (~gone | visited) & (since != UNSET_TS) & had
    usual_ml = columns["e_usual_memberless_ms"][index]
    since = np.where(visited, UNSET_TS, since)
    begins = gone & (since == UNSET_TS)
    departures = (begins, left_abruptly(scan, begins))
    learn_spell, learned_spell = learn_spells(
        columns, index, "spell", ts, back, spell, usual_ml, departures
    )
    if learn_spell.any():
        columns["e_usual_memberless_ms"][index] = np.where(
            learn_spell, np.maximum(usual_ml, learned_spell), usual_ml
        )
    columns["e_memberless_since"][index] = np.where(gone, np.where(begins, ts, since), UNSET_TS)
    columns["e_memberless_leo"][index] = np.where(
        begins, leo, np.where(gone, columns["e_memberless_leo"][index], NULL)
    )

    _update_rates(columns, index, scan, moved, absent | blind, times.scan_interval_ms)


def learn_spells(
    columns: dict[str, np.ndarray],
    index: slice | np.ndarray,
    spells: str,
    ts: int,
    ended: np.ndarray,
    length: np.ndarray,
    usual: np.ndarray,
    departures: tuple[np.ndarray, np.ndarray] | None = None,
) -> tuple[NDArray[np.bool_], np.ndarray]:
    """How a wait or a memberless spell becomes a habit: which of the rows' ``spells``
    ("wait" or "spell") are learned at this scan, and the length each one learns.

    A short one (up to :data:`LEARN_OUTRIGHT_MS`), or one within :data:`OUTAGE_FACTOR` of the
    ``usual`` so far, is learned as it ``ended``. A longer one is a fault that healed until
    the group shows it is its rhythm, and is kept per row until then
    (``e_unconfirmed_<spells>_ms``, 0 when none):

    * up to :data:`LEARN_AT_MOST_MS`, by another one no more than :data:`OUTAGE_FACTOR` times
      as long (a rare committer's second long wait, a slow restart's repeat);
    * a memberless spell up to :data:`LONG_SPELL_AT_MOST_MS` (only when ``departures`` gives
      the rows whose next spell begins at this scan, and which of them began without a commit
      on the way out: :func:`left_abruptly`), by
      the members that came back after it leaving again on purpose within
      :data:`OUTAGE_FACTOR` times its length: come, read, commit, leave is a batch job's run,
      and the spell before it was the job's pause. It is kept in ``e_long_spell_ms`` and
      ``e_long_spell_end`` until the next spell begins, confirmed or not.

    Anything longer is an outage, never a habit."""
    held_column = columns[f"e_unconfirmed_{spells}_ms"]
    held = held_column[index]
    ordinary = ended & (length <= LEARN_AT_MOST_MS)
    long = ordinary & (length > LEARN_OUTRIGHT_MS) & (length > OUTAGE_FACTOR * usual)
    confirmed = long & (held > 0) & (held * OUTAGE_FACTOR >= length)
    held_column[index] = np.where(confirmed, 0.0, np.where(long & ~confirmed, length, held))
    learned: NDArray[np.bool_] = ordinary & (~long | confirmed)
    if departures is None:
        return learned, length
    begins, abrupt = departures
    pause = ended & (length > LEARN_AT_MOST_MS) & (length <= LONG_SPELL_AT_MOST_MS)
    pending = np.where(pause, length, columns["e_long_spell_ms"][index])
    pending_end = np.where(pause, ts, columns["e_long_spell_end"][index])
    due = begins & (pending > 0)
    run_ended = due & ~abrupt & (ts - pending_end <= OUTAGE_FACTOR * pending)
    columns["e_long_spell_ms"][index] = np.where(due, 0.0, pending)
    columns["e_long_spell_end"][index] = np.where(due, UNSET_TS, pending_end)
    value = np.maximum(np.where(learned, length, 0.0), np.where(run_ended, pending, 0.0))
    return learned | run_ended, value


def decayed(value: np.ndarray, elapsed_ms: np.ndarray | int) -> np.ndarray:
    """A learned length as it counts ``elapsed_ms`` after it was learned: halved every
    ``FORGET_HALF_LIFE_MS``, so a group is not judged by an old habit for ever."""
    result: np.ndarray = value * np.exp2(-np.maximum(elapsed_ms, 0) / FORGET_HALF_LIFE_MS)
    return result


def _update_rates(
    columns: dict[str, np.ndarray],
    index: slice | np.ndarray,
    scan: ScanView,
    moved: np.ndarray,
    unmeasurable: np.ndarray,
    scan_interval_ms: int,
) -> None:
    """The partition's normal production rate (a slow average over every scan), and what the
    consumer read and what arrived per second between its offset's last two moves (averaged
    over about a minute of moves): a consumer shows its speed only when it commits, so a rare
    committer is judged over its whole commit interval, never half way through one."""
    had = scan.had_sample
    elapsed = np.where(had, scan.ts - scan.previous_ts, 0).astype(np.float64)
    usable = had & (elapsed > 0) & (scan.log_end >= scan.previous_log_end)
    if usable.any():
        produced = (scan.log_end - scan.previous_log_end) / (np.maximum(elapsed, 1.0) / 1000.0)
        seen = columns["e_rate_samples"][index]
        # Until the horizon is covered the normal rate is the plain mean of what was seen, so a
        # first scan that caught the topic quiet (or in a burst) does not set it for half an hour.
        weight = np.maximum(1.0 - np.exp(-elapsed / PRODUCTION_HORIZON_MS), 1.0 / (seen + 1.0))
        old = columns["e_normal_rate"][index]
        # Once settled, a burst hardly moves what is normal: each scan counts for at most twice
        # the normal rate, while a lasting change (the time of day) comes through.
        settled = ~np.isnan(old) & (old > 0) & (seen >= MIN_RATE_SAMPLES)
        produced = np.where(settled, np.minimum(produced, 2 * old), produced)
        blended = np.where(np.isnan(old), produced, old + weight * (produced - old))
        columns["e_normal_rate"][index] = np.where(usable, blended, old)
        columns["e_rate_samples"][index] = np.where(
            usable, np.minimum(seen + 1, np.iinfo(np.int32).max), seen
        )

    last_move = columns["e_move_ts"][index]
    last_leo = columns["e_move_leo"][index]
    # An interval with a rebalance, no members or missed scans in it says how long a restart
    # or an outage took, not how fast the consumer reads: it is not measured.
    disturbed = columns["e_move_disturbed"][index] | scan.member_changed | unmeasurable
    span = (scan.ts - last_move).astype(np.float64)
    # An interval far longer than the usual wait was a stall or an outage, not a speed sample.
    usual = columns["e_usual_wait_ms"][index]
    ordinary = (usual <= 0) | (span <= OUTAGE_FACTOR * usual)
    measured = (
        moved
        & ~disturbed
        & ordinary
        & (last_move != UNSET_TS)
        & (scan.ts > last_move)
        & (last_leo != NULL)
    )
    if measured.any():
        seconds = np.maximum(span, 1.0) / 1000.0
        consumed = np.maximum(scan.committed - scan.previous_committed, 0) / seconds
        produced = np.maximum(scan.log_end - last_leo, 0) / seconds
        horizon = np.maximum(RATE_HORIZON_SCANS * scan_interval_ms, RATE_HORIZON_WAITS * usual)
        weight = 1.0 - np.exp(-span / horizon)
        for name, value in (("e_consume_rate", consumed), ("e_produce_rate", produced)):
            old = columns[name][index]
            blended = np.where(np.isnan(old), value, old + weight * (value - old))
            columns[name][index] = np.where(measured, blended, old)
    starts = moved | (scan.committed != NULL) & (last_move == UNSET_TS)
    columns["e_move_ts"][index] = np.where(starts, scan.ts, last_move)
    columns["e_move_leo"][index] = np.where(starts, scan.log_end, last_leo)
    columns["e_move_disturbed"][index] = np.where(starts, False, disturbed)
    columns["e_move_measured"][index] = np.where(
        starts, measured, columns["e_move_measured"][index]
    )
