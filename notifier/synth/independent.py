"""A labelled fleet written apart from the rules (issue 28): an independent corpus generator.

The project's other generators were written beside its rules and share their assumptions. This
one was written from the domain notes (``DOMAIN.md`` §1-§4, §9) and what Kafka clients do by
default, without reading the rules: every benign habit of real fleets drawn at a random point of
its whole parameter range, and faults of every kind the project labels, each labelled from when
a person would want to know.

It models, second by second, each group's traffic (per-partition rates with skew, daily drift,
bursts, idle spells, transactional markers, retention by time or bytes in segments deleted at
the broker's 5-minute check), its consumer processes (start, graceful stop with a commit on the
way out, ``kill -9`` with none, pauses, stalls, hung poll loops, slowdowns, seeks back), how the
coordinator turns those into group states, member sets and assignments (classic eager,
cooperative-sticky, static membership, the KIP-848 consumer protocol, standalone ``assign()``),
what is committed when, and what the service's scans saw (jittered scan times, missed scans,
outages, ListOffsets failing for a restarted broker's partitions, a coordinator not answering).

The corpus is written in the recorded corpus's format (:func:`notifier.recorder.write_corpus`,
read by :func:`notifier.recorder.load_corpus`): history Parquet, ``incidents.csv``,
``groups.csv`` (the scenario is the pattern's name, the description its parameters) and
``corpus.json``; and ``events.csv`` beside them, every benign event and fault with its
parameters, so that a false page can be traced to what caused it.

    python -m notifier.synth.independent --out DIR [--groups 200] [--hours 6] [--seed 1]
"""

from __future__ import annotations

import argparse
import csv
import itertools
import json
import math
import zlib
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from notifier.collect.samples import member_hash
from notifier.recorder.corpus import write_corpus
from notifier.recorder.stage import Label, Plan
from notifier.types import GROUP_STATES, SAMPLE_SCHEMA

CLUSTER = "independent"
SCAN_INTERVAL_S = 10.0
WARMUP_S = 1800.0
START = datetime(2026, 3, 2, 6, 0, tzinfo=UTC)
"""Every corpus starts on a Monday morning, so equal seeds give equal files."""

STABLE, PREPARING, COMPLETING, EMPTY = (GROUP_STATES.index(s) for s in
                                        ("Stable", "PreparingRebalance", "CompletingRebalance",
                                         "Empty"))  # fmt: skip
BROKERS = 3
RETENTION_CHECK_S = 300
WEEK_S = 7 * 86400
"""``log.retention.check.interval.ms``: the broker deletes old segments every 5 minutes."""

FAULT_KINDS = ("stalled", "stopped", "consumers_gone", "lagging", "rewound", "retention_loss",
               "stuck_rebalance", "rebalance_storm")  # fmt: skip


# --------------------------------------------------------------------------------------------
# What a group is made of


@dataclass
class Proc:
    """One consumer process (one incarnation: a restart is a new one)."""

    member_id: str
    start: int
    end: int
    """Second it stops processing (exclusive); the group may list it longer (a crash)."""
    ending: str = "stop"
    """``stop`` (graceful: commits, leaves at once), ``crash`` (no commit, listed until the
    session times out), ``hang`` (poll loop blocked: no commit, leaves after
    ``max.poll.interval.ms``), ``keep`` (runs to the end)."""
    commit_every: float = 5.0
    """Seconds between scheduled commits; 0: never on a schedule."""
    commit_on_revoke: bool = True
    instance_id: str | None = None
    """``group.instance.id`` of a static member."""
    phase: float = 0.0

    def commit_times(self, horizon: int) -> np.ndarray:
        if self.commit_every <= 0:
            return np.empty(0, dtype=np.int64)
        first = self.start + self.phase
        times = np.unique(np.ceil(np.arange(first, self.end, self.commit_every)).astype(np.int64))
        return times[times < min(self.end, horizon)]


@dataclass
class GroupSpec:
    """A group's set-up and what its pattern scripts it to do."""

    name: str
    pattern: str
    kind: str
    partitions: int
    rate: float
    client: str
    protocol: str
    """``eager``, ``cooperative``, ``consumer`` (KIP-848) or ``standalone`` (``assign()``)."""
    session_s: int
    max_poll_s: int
    commit: str
    params: dict[str, Any] = field(default_factory=dict)


@dataclass
class Event:
    """A benign event or a fault, as ``events.csv`` lists it."""

    group: str
    pattern: str
    what: str
    at_s: float
    params: dict[str, Any]


class Group:
    """One group's second-by-second world: traffic, processes, coordinator, commits."""

    def __init__(self, spec: GroupSpec, horizon: int, rng: np.random.Generator) -> None:
        self.spec = spec
        self.T = horizon
        self.rng = rng
        P = spec.partitions
        self.P = P
        self.procs: list[Proc] = []
        # Per process, per second: processing halted (pause, stall) and a capacity factor.
        self.halts: list[list[tuple[int, int]]] = []
        self.slow: list[list[tuple[int, int, float]]] = []
        self.seeks: list[tuple[int, int, Callable[[int, int], int]]] = []
        """(partition, second, target(partition, second)): seek there and commit."""
        self.commit_blocked = np.zeros(horizon, dtype=bool)
        self.fetch_blocked = np.zeros((P, horizon), dtype=bool)
        self.rebalance_wait = 0
        """Extra seconds a classic rebalance waits (a member slow to rejoin)."""
        self.stuck_rebalances: list[tuple[int, int]] = []
        """(from, to): a member does not rejoin, the rebalance cannot complete."""
        self.topic_exists = np.ones((P, horizon), dtype=bool)
        self.read_at_most = np.full((P, horizon), np.inf)
        """Records per second the consumers read at most, whatever their capacity (a fault)."""
        self.forget_at: list[int] = []
        """Seconds at which the group's committed offsets are deleted (topic deleted)."""
        self.known = np.ones((P, horizon), dtype=bool)
        """Whether the consumers know of the partition (metadata refreshed since it came)."""
        self.extra_rebalances: list[int] = []
        """Seconds at which the group rebalances for a reason other than members (new
        partitions seen in the metadata)."""
        self.never_committed = np.zeros(P, dtype=bool)
        """Partitions the group has no commit for when the corpus begins (a new group, new
        partitions)."""
        self.reset_to = "latest"
        self.events: list[Event] = []
        self.labels: list[Label] = []
        self._traffic(rng)

    # -- traffic -----------------------------------------------------------------------------

    def _traffic(self, rng: np.random.Generator) -> None:
        P, T = self.P, self.T
        weights = rng.zipf(1.6, P).astype(float) if P > 1 else np.ones(1)
        weights = np.minimum(weights, 20.0)
        if rng.random() < 0.5:  # keyed evenly
            weights = np.ones(P)
        weights /= weights.sum()
        self.partition_share = weights
        t = np.arange(T)
        drift = 1.0 + 0.3 * np.sin(2 * np.pi * (t / 86400.0 * 4) + rng.uniform(0, 2 * np.pi))
        self.rate_curve = np.full(T, self.spec.rate) * drift
        self.bursts: list[tuple[int, int, float]] = []
        self.idle: list[tuple[int, int]] = []

    def add_burst(self, at: int, length: int, factor: float) -> None:
        self.rate_curve[at : at + length] *= factor
        self.bursts.append((at, length, factor))

    def add_idle(self, at: int, length: int) -> None:
        self.rate_curve[at : at + length] = 0.0
        self.idle.append((at, length))

    def build_log(self, transactional: float = 0.0, hangs: Sequence[tuple[int, int]] = (),
                  past_marker: bool = True) -> None:  # fmt: skip
        """Draw the records: ``leo`` (P, T), the read limit of a ``read_committed`` consumer
        (transactions of ``transactional`` seconds, markers taking one offset each). A
        consumer that commits its position (auto-commit, ``commitSync()``) gets past the last
        marker; one that commits the last record's offset + 1 (``past_marker`` false: Spring's
        and most hand-written per-record commits) stays on it, one below the log end."""
        rng, P, T = self.rng, self.P, self.T
        lam = np.outer(self.partition_share, self.rate_curve)
        arrivals = rng.poisson(lam).astype(np.int64)
        # The default retention (7 days) holds a week of records; older ones came before.
        per_partition = self.partition_share * self.spec.rate
        retained = np.floor(per_partition * WEEK_S).astype(np.int64)
        older = (retained * rng.uniform(0, 3, P)).astype(np.int64) * (rng.random() < 0.8)
        self.base_offsets = retained + older
        if transactional > 0:
            length = max(1, round(transactional))
            boundaries = np.zeros(T, dtype=bool)
            boundaries[length - 1 :: length] = True
            written = np.zeros((P, T), dtype=bool)
            # A marker lands on each partition the transaction wrote to.
            csum = np.cumsum(arrivals, axis=1)
            for p in range(P):
                ends = np.flatnonzero(boundaries)
                wrote = np.diff(np.concatenate([[0], csum[p, ends]])) > 0
                written[p, ends[wrote]] = True
            arrivals = arrivals + written
            leo = self.base_offsets[:, None] + np.cumsum(arrivals, axis=1)
            # A read_committed consumer reads up to the last marker (the LSO).
            marker_at = np.where(written, np.arange(T)[None, :], -1)
            last = np.maximum.accumulate(marker_at, axis=1)
            behind = 0 if past_marker else 1
            limit = np.where(last >= 0, np.take_along_axis(leo, np.maximum(last, 0), 1) - behind,
                             self.base_offsets[:, None])  # fmt: skip
            for at, held in hangs:  # a producer died mid-transaction: the LSO is held
                limit[:, at : min(T, at + held)] = limit[:, at : at + 1]
            self.read_limit = limit
        else:
            leo = self.base_offsets[:, None] + np.cumsum(arrivals, axis=1)
            self.read_limit = leo
        self.leo = leo
        # Segments of about a million records (1 GiB), or a week's worth when fewer: the
        # oldest goes at the 5-minute check once its newest record is a week old.
        segment = np.maximum(1, np.minimum(1_000_000, retained))
        check = (np.arange(T) // RETENTION_CHECK_S) * RETENTION_CHECK_S
        expired = older[:, None] + per_partition[:, None] * check[None, :]
        self.log_start = np.minimum(older[:, None] + (expired - older[:, None]) // segment[:, None]
                                    * segment[:, None], leo).astype(np.int64)  # fmt: skip
        most = self.partition_share * self.spec.rate * self.headroom + 2.0
        self.capacity = np.repeat(most[:, None], T, axis=1)
        """Records per second each partition's consumer can read at most."""

    def set_retention(self, retention_s: float, segment_s: float) -> None:
        """Time-based retention: segments roll every ``segment_s``; every 5 minutes the broker
        deletes segments whose newest record is older than ``retention_s``."""
        T = self.T
        rolls = np.arange(0, T, max(1, int(segment_s)))
        per_partition = self.partition_share * self.spec.rate
        current = np.maximum(self.log_start[:, 0], self.leo[:, 0] - per_partition * retention_s)
        start = self.log_start.copy()
        start[:, 0] = current
        checks = np.arange(RETENTION_CHECK_S, T, RETENTION_CHECK_S)
        for c in checks:
            # The newest segment whose successor started by c - retention may go.
            deletable = rolls[(rolls <= c - retention_s) & (rolls < rolls[rolls <= c].max())]
            if len(deletable):
                current = np.maximum(current, self.leo[:, deletable.max()])
            start[:, c:] = current[:, None]
        self.log_start = np.minimum(start, self.leo)

    def set_retention_bytes(self, keep_records: float, segment_records: float) -> None:
        """Retention by size: whole segments go while the log holds more than
        ``keep_records`` (records of equal size), at the 5-minute check."""
        T = self.T
        start = self.log_start.copy()
        start[:, 0] = np.maximum(start[:, 0], self.leo[:, 0] - keep_records)
        seg = max(1.0, segment_records)
        for c in range(RETENTION_CHECK_S, T, RETENTION_CHECK_S):
            size = self.leo[:, c] - start[:, c - 1]
            excess = np.maximum(0, size - keep_records)
            drop = np.floor(excess / seg) * seg
            start[:, c:] = (start[:, c - 1] + drop)[:, None]
        self.log_start = np.minimum(start, self.leo)

    @property
    def headroom(self) -> float:
        return float(self.spec.params.get("headroom", 3.0))

    # -- processes ---------------------------------------------------------------------------

    def proc(self, member_id: str, start: int, end: int | None = None, ending: str = "keep",
             commit_every: float | None = None, instance_id: str | None = None,
             commit_on_revoke: bool | None = None) -> int:  # fmt: skip
        every = self.commit_every if commit_every is None else commit_every
        revoke = self.spec.params.get("commit_on_revoke", True)
        p = Proc(member_id, start, self.T if end is None else end, ending, every,
                 revoke if commit_on_revoke is None else commit_on_revoke, instance_id,
                 float(self.rng.uniform(0, max(every, 1.0))))  # fmt: skip
        self.procs.append(p)
        self.halts.append([])
        self.slow.append([])
        return len(self.procs) - 1

    @property
    def commit_every(self) -> float:
        style, _, value = self.spec.commit.partition(":")
        return float(value) if style in ("auto", "every") else 1.0

    def halt(self, proc: int, at: int, length: int) -> None:
        self.halts[proc].append((at, min(self.T, at + length)))

    def slow_down(self, proc: int, at: int, length: int, factor: float) -> None:
        self.slow[proc].append((at, min(self.T, at + length), factor))

    def event(self, what: str, at: float, **params: Any) -> None:
        self.events.append(Event(self.spec.name, self.spec.pattern, what, at,
                                 {k: _round(v) for k, v in params.items()}))  # fmt: skip

    def label(self, kind: str, onset: int, start: int, end: int) -> None:
        self.labels.append(Label(self.spec.name, kind, self.spec.pattern,
                                 _ms(onset), _ms(max(onset, start)),
                                 _ms(max(start, end))))  # fmt: skip

    # -- the coordinator ---------------------------------------------------------------------

    def coordinate(self) -> None:
        """Turn the processes into group states, member sets and assignments per second."""
        T, P = self.T, self.P
        self.state = np.full(T, EMPTY, dtype=np.int8)
        self.member_set = np.zeros(T, dtype=np.int32)
        self.sets: list[tuple[str, ...]] = [()]
        self.epoch = np.zeros(T, dtype=np.int64)
        self.owner = np.full((P, T), -1, dtype=np.int32)
        if self.spec.protocol == "standalone":
            for i, proc in enumerate(self.procs):
                self.owner[:, proc.start : proc.end] = i
            self._mask_unknown_partitions()
            return
        listed_until = []
        for proc in self.procs:
            if proc.ending == "crash" or proc.ending == "close":
                until = proc.end + self.spec.session_s
            elif proc.ending == "hang":
                until = proc.end + self.spec.max_poll_s
            else:
                until = proc.end
            listed_until.append(min(T, until))
        # A static member back within its session takes the old one's place: no rebalance.
        replaced: dict[int, int] = {}
        for i, proc in enumerate(self.procs):
            if proc.instance_id is None:
                continue
            for j, old in enumerate(self.procs[:i]):
                if old.instance_id == proc.instance_id and old.end <= proc.start < listed_until[j]:
                    listed_until[j] = proc.start
                    replaced[i] = j
        listed = [(self.procs[i].start, listed_until[i]) for i in range(len(self.procs))]
        changes = {p.start for i, p in enumerate(self.procs) if i not in replaced}
        changes |= {u for j, u in enumerate(listed_until) if j not in replaced.values()}
        changes |= set(self.extra_rebalances)
        pending = sorted(c for c in changes if 0 < c < T)

        def members_at(t: int) -> list[int]:
            return [i for i, (a, b) in enumerate(listed) if a <= t < b]

        epoch = 0
        current = members_at(0)
        assignment = self._assign(current, np.full(P, -1, dtype=np.int32), fresh=True)
        self._fill(0, current, STABLE if current else EMPTY, assignment, epoch)
        while pending:
            at = pending.pop(0)
            epoch += 1
            new = members_at(at)
            if self.spec.protocol == "consumer":
                # KIP-848: members revoke and take partitions one by one; no group barrier.
                target = self._assign(new, assignment, fresh=False)
                # A dead member cannot revoke: its partitions wait for its session to end.
                dead = [m for m in new if self.procs[m].end <= at]
                target = np.where(np.isin(assignment, dead), assignment, target)
                interim = np.where(target != assignment, -1, assignment)
                settle = self._stuck_end(at, at + int(self.rng.integers(1, 6)))
                if pending and pending[0] < settle and not self.stuck_rebalances:
                    settle = pending[0]  # the next change starts the next reconciliation
                self._fill(at, new, COMPLETING if new else EMPTY, interim, epoch)
                self._fill(settle, new, STABLE if new else EMPTY, target, epoch)
                assignment = target
                continue
            # Classic: the rebalance waits for every listed member to rejoin, so a dead or
            # hung member still listed holds it until its session or poll interval runs out.
            held = [listed[i][1] for i in new if self.procs[i].end <= at]
            join = at + 1 + int(self.rng.integers(0, 3)) + self.rebalance_wait
            done = min(T, self._stuck_end(at, max([join, *held])))
            survivors = members_at(done) if done < T else new
            target = self._assign(survivors, assignment, fresh=self.spec.protocol == "eager")
            if self.spec.protocol == "eager":
                interim = np.full(P, -1, dtype=np.int32)
            else:  # cooperative: only the partitions that move stop
                interim = np.where(target != assignment, -1, assignment)
            if not new:
                self._fill(at, [], EMPTY, interim, epoch)
                assignment = interim
                continue
            self._fill(at, new, PREPARING, interim, epoch)
            self._fill(done, survivors, COMPLETING, interim, epoch)
            self._fill(done + 1, survivors, STABLE if survivors else EMPTY, target, epoch)
            assignment = target
            pending = [c for c in pending if c > done]  # changes meanwhile joined this one
        for i, j in replaced.items():
            at = self.procs[i].start
            self.owner[:, at:] = np.where(self.owner[:, at:] == j, i, self.owner[:, at:])
            old_id, new_id = self.procs[j].member_id, self.procs[i].member_id
            for index in np.unique(self.member_set[at:]):
                ids = tuple(sorted(new_id if m == old_id else m for m in self.sets[index]))
                if ids not in self.sets:
                    self.sets.append(ids)
                span = self.member_set[at:]
                span[span == index] = self.sets.index(ids)
        self._mask_unknown_partitions()

    def _mask_unknown_partitions(self) -> None:
        """Nobody owns a partition before its consumers know of it (added, re-created)."""
        self.owner[~self.known] = -1

    def _stuck_end(self, at: int, done: int) -> int:
        for a, b in self.stuck_rebalances:
            if a <= at < b or a <= done < b:
                return max(done, b)
        return done

    def _assign(self, members: list[int], previous: np.ndarray, fresh: bool) -> np.ndarray:
        live = list(members)
        out = np.full(self.P, -1, dtype=np.int32)
        if not live:
            return out
        if fresh:
            order = sorted(live, key=lambda m: self.procs[m].member_id)
            for p in range(self.P):
                out[p] = order[p % len(order)]
            return out
        # Sticky: keep what a member still present owns, deal out the rest evenly.
        keep = np.where(np.isin(previous, live), previous, -1)
        quota = math.ceil(self.P / len(live))
        counts = {m: int((keep == m).sum()) for m in live}
        for m in live:
            over = counts[m] - quota
            if over > 0:
                for p in np.flatnonzero(keep == m)[:over]:
                    keep[p] = -1
                counts[m] = quota
        for unowned in np.flatnonzero(keep < 0):
            m = min(live, key=lambda m: (counts[m], self.procs[m].member_id))
            keep[unowned] = m
            counts[m] += 1
        return keep

    def _fill(self, at: int, members: list[int], state: int, owner: np.ndarray,
              epoch: int) -> None:  # fmt: skip
        if at >= self.T:
            return
        ids = tuple(sorted(self.procs[m].member_id for m in members))
        try:
            index = self.sets.index(ids)
        except ValueError:
            self.sets.append(ids)
            index = len(self.sets) - 1
        self.state[at:] = state
        self.member_set[at:] = index
        self.epoch[at:] = epoch
        self.owner[:, at:] = owner[:, None]

    # -- consumption and commits -------------------------------------------------------------

    def consume(self) -> None:
        """Positions and commits per partition, in time order (a new owner resumes from the
        last commit, so each ownership segment depends on the commits before it)."""
        T = self.T
        running = np.zeros((len(self.procs), T), dtype=bool)
        factor = np.ones((len(self.procs), T))
        for i, proc in enumerate(self.procs):
            running[i, proc.start : proc.end] = True
            for a, b in self.halts[i]:
                running[i, a:b] = False
            for a, b, f in self.slow[i]:
                factor[i, a:b] *= f
        schedules = [p.commit_times(T) for p in self.procs]
        schedules = [self._through_coordinator_moves(s) for s in schedules]
        self.commit_t: list[np.ndarray] = []
        self.commit_v: list[np.ndarray] = []
        self.position = np.full((self.P, T), np.nan)
        seeks: dict[int, list[tuple[int, Callable[[int, int], int]]]] = {}
        for p, at, target in self.seeks:
            seeks.setdefault(p, []).append((at, target))
        for p in range(self.P):
            times: list[int] = [0]
            values: list[float] = [math.nan if self.never_committed[p]
                                   else float(self.read_limit[p, 0])]  # fmt: skip
            owner = self.owner[p]
            cuts = set((np.flatnonzero(np.diff(owner) != 0) + 1).tolist())
            cuts |= {at for at, _ in seeks.get(p, [])} | set(self.forget_at)
            bounds = sorted({0, T} | {c for c in cuts if 0 < c < T})
            for a, b in itertools.pairwise(bounds):
                if a in self.forget_at:
                    times.append(a)
                    values.append(math.nan)
                seek = [target(p, a) for at, target in seeks.get(p, []) if at == a]
                if seek:  # an operator's reset or the application's seek, committed at once
                    times.append(a)
                    values.append(float(seek[0]))
                o = int(owner[a])
                if o < 0:
                    continue
                start = values[-1]
                if math.isnan(start):  # auto.offset.reset
                    start = float(self.log_start[p, a] if self.reset_to == "earliest"
                                  else self.read_limit[p, a])  # fmt: skip
                start = max(start, float(self.log_start[p, a]))
                cap = self.capacity[p, a:b] * factor[o, a:b] * running[o, a:b]
                cap = np.minimum(cap, self.read_at_most[p, a:b]) * ~self.fetch_blocked[p, a:b]
                pos = _advance(start, cap, self.read_limit[p, a:b], self.log_start[p, a:b])
                self.position[p, a:b] = pos
                proc = self.procs[o]
                due = schedules[o]
                due = due[(due >= a) & (due < b)]
                times += due.tolist()
                values += pos[due - a].tolist()
                if not proc.commit_on_revoke:
                    continue
                exit_at = proc.end - 1
                if proc.ending in ("stop", "close") and a <= exit_at < b and exit_at < T - 1:
                    times.append(exit_at)  # committed on the way out
                    values.append(float(pos[exit_at - a]))
                elif (
                    b < T and proc.start <= b - 1 < proc.end - 1 and not self.commit_blocked[b - 1]
                ):
                    times.append(b - 1)  # committed on revoke
                    values.append(float(pos[-1]))
            order = np.argsort(np.asarray(times), kind="stable")
            self.commit_t.append(np.asarray(times, dtype=np.int64)[order])
            self.commit_v.append(np.asarray(values, dtype=float)[order])

    def _through_coordinator_moves(self, times: np.ndarray) -> np.ndarray:
        """Scheduled commits while the group's coordinator moves: an auto-commit fails and
        waits for the next interval; ``commitSync`` retries until the new coordinator answers
        (well within ``default.api.timeout.ms``), so it lands just after."""
        if not len(times):
            return times
        blocked = self.commit_blocked[times]
        if not blocked.any():
            return times
        if self.spec.commit.startswith("auto"):
            return np.asarray(times[~blocked])
        free = np.flatnonzero(~self.commit_blocked)
        later = free[np.minimum(np.searchsorted(free, times[blocked]), len(free) - 1)]
        return np.asarray(np.unique(np.concatenate([times[~blocked], later])))

    # -- what the scans saw ------------------------------------------------------------------

    def committed_at(self, p: int, seconds: np.ndarray) -> np.ndarray:
        idx = np.searchsorted(self.commit_t[p], seconds, side="right") - 1
        return np.where(idx >= 0, self.commit_v[p][np.maximum(idx, 0)], np.nan)


def _advance(start: float, cap: np.ndarray, limit: np.ndarray, floor: np.ndarray) -> np.ndarray:
    """Positions over a segment: ``pos[t] = min(limit[t], pos[t-1] + cap[t])``, and never below
    the log start (``auto.offset.reset=earliest`` after records were deleted under it)."""
    total = np.cumsum(cap)
    pos = total + np.minimum(start, np.minimum.accumulate(limit - total))
    pos = np.minimum(pos, limit)
    if (pos < floor).any():
        out = np.empty_like(pos)
        prev = start
        for t in range(len(pos)):
            prev = max(float(floor[t]), min(float(limit[t]), prev + float(cap[t])))
            out[t] = prev
        return np.asarray(np.floor(out))
    return np.asarray(np.floor(pos))


def _ms(second: float) -> int:
    return int(START.timestamp() * 1000 + round(second * 1000))


def _round(value: Any) -> Any:
    if isinstance(value, float | np.floating):
        return round(float(value), 3)
    if isinstance(value, np.integer):
        return int(value)
    return value


# --------------------------------------------------------------------------------------------
# Set-ups drawn from what clients default to and what teams configure

PARTITION_CHOICES = np.array([1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64])
PARTITION_WEIGHTS = np.array([8, 6, 8, 10, 8, 10, 8, 8, 5, 4, 2, 2], dtype=float)
CLIENTS = {
    # client: (weight, protocols with weights, session timeout s, auto-commit interval s)
    "java": (50, {"eager": 3, "cooperative": 3, "consumer": 3}, 45, 5),
    "librdkafka": (20, {"eager": 3, "cooperative": 2}, 45, 5),
    "aiokafka": (15, {"eager": 1}, 10, 5),
    "sarama": (15, {"eager": 1}, 10, 1),
}


def draw_spec(rng: np.random.Generator, name: str, pattern: str, kind: str = "",
              min_rate: float = 0.05, **overrides: Any) -> GroupSpec:  # fmt: skip
    """A group's set-up: partitions, traffic, client, protocol, session, commits."""
    partitions = int(rng.choice(PARTITION_CHOICES, p=PARTITION_WEIGHTS / PARTITION_WEIGHTS.sum()))
    rate = max(min_rate, float(10 ** rng.uniform(-1.3, 3.7)))
    names = list(CLIENTS)
    weights = np.array([CLIENTS[c][0] for c in names], dtype=float)
    client = str(rng.choice(names, p=weights / weights.sum()))
    _, protocols, session, auto = CLIENTS[client]
    protocol = str(rng.choice(list(protocols), p=np.array(list(protocols.values()))
                              / sum(protocols.values())))  # fmt: skip
    if rng.random() < 0.2:  # teams do change it
        session = int(rng.choice([10, 20, 30, 60, 120]))
    max_poll = 300 if rng.random() < 0.8 else int(rng.choice([60, 600, 900, 1800]))
    style = rng.random()
    if style < 0.4:
        commit = f"auto:{auto}"
    elif style < 0.6:
        commit = "batch:1"  # commitSync after every poll's batch
    elif style < 0.9:
        commit = f"every:{int(rng.choice([2, 5, 10, 15, 20, 30, 45, 60, 90]))}"
    else:
        commit = f"every:{int(rng.choice([120, 180, 300]))}"
    params = {
        "headroom": round(float(10 ** rng.uniform(math.log10(1.3), math.log10(20))), 2),
        "commit_on_revoke": commit.startswith("auto") or bool(rng.random() < 0.6),
        "members": int(min(partitions, rng.choice([1, 1, 2, 2, 3, 4, 6, 8]))),
    }
    spec = GroupSpec(name, pattern, kind, partitions, round(rate, 3), client, protocol,
                     session, max_poll, commit, params)  # fmt: skip
    for key, value in overrides.items():
        if hasattr(spec, key):
            setattr(spec, key, value)
        else:
            spec.params[key] = value
    return spec


# --------------------------------------------------------------------------------------------
# Patterns: each scripts one group (traffic, log, consumers) and labels its faults


class Script:
    """Helpers a pattern uses on its group."""

    def __init__(self, g: Group) -> None:
        self.g = g
        self.rng = g.rng
        self.after: list[Callable[[], None]] = []

    def ids(self, n: int) -> str:
        spec = self.g.spec
        if spec.client == "java":
            return f"consumer-{spec.name}-{n}-{self.rng.bytes(8).hex()}"
        return f"{spec.client}-{spec.name}-{n}-{self.rng.bytes(6).hex()}"

    def members(self, count: int | None = None, start: int = 0, **kw: Any) -> list[int]:
        count = count or int(self.g.spec.params["members"])
        return [self.g.proc(self.ids(i), start, **kw) for i in range(count)]

    def times(self, every: tuple[float, float], first: float = 300.0,
              margin: float = 300.0) -> list[int]:  # fmt: skip
        """Moments a recurring event happens, about every ``every`` seconds."""
        out, t = [], first + self.rng.uniform(0, every[1])
        while t < self.g.T - margin:
            out.append(int(t))
            t += self.rng.uniform(*every)
        return out

    def onset(self, length: float = 0.0) -> int:
        """A fault's start: after the warm-up, leaving ``length`` before the end if possible."""
        lo = WARMUP_S + 600
        hi = max(lo + 1, self.g.T - length - 300)
        return int(self.rng.uniform(lo, hi))

    def bursts(self, per_hour: float) -> None:
        """Producer spikes whose lag drains within about five minutes at the group's headroom."""
        g = self.g
        h = g.headroom
        for at in self.times((3600 / per_hour * 0.5, 3600 / per_hour * 1.5), first=60):
            length = int(self.rng.uniform(10, 300))
            most = h + 300 * (h - 1) / length
            factor = float(self.rng.uniform(1.5, max(1.6, min(20.0, most))))
            g.add_burst(at, length, factor)
            g.event("producer burst", at, seconds=length, factor=factor)

    def replace(self, proc: int, at: int, back_after: float, ending: str,
                instance_id: str | None = None) -> int:  # fmt: skip
        """End ``proc`` at ``at`` (``ending``) and start its successor ``back_after`` later."""
        old = self.g.procs[proc]
        old.end, old.ending = at, ending
        again = at + max(1, round(back_after))
        return self.g.proc(self.ids(len(self.g.procs)), again, instance_id=instance_id,
                           commit_every=old.commit_every)  # fmt: skip

    def live(self, at: int) -> list[int]:
        return [i for i, p in enumerate(self.g.procs) if p.start <= at < p.end]


def healthy(s: Script) -> None:
    g = s.g
    s.bursts(float(s.rng.uniform(0.2, 2)))
    g.build_log()
    if s.rng.random() < 0.25:  # a short-retention topic, far from losing anything
        keep = float(s.rng.uniform(3600, 4 * 3600))
        g.set_retention(keep, float(s.rng.uniform(300, 1800)))
        g.spec.params["retention_s"] = round(keep)
    s.members()


def idle_topic(s: Script) -> None:
    g = s.g
    g.spec.rate = round(float(10 ** s.rng.uniform(-3, -1)), 4)
    g.rate_curve[:] = g.spec.rate
    for at in s.times((1800, 7200), first=0, margin=0):
        length = int(s.rng.uniform(900, 3 * 3600))
        g.add_idle(at, length)
        g.event("no records", at, seconds=length)
    g.build_log()
    s.members()


def _crashes(
    s: Script, every: tuple[float, float], back_after: tuple[float, float]
) -> Iterator[tuple[int, float, int]]:
    """Kill one live member (no commit on the way out) at each of ``s.times(every)``, back
    after a time drawn from ``back_after``: each kill's time, how long until back, and how
    many members were live."""
    for at in s.times(every):
        live = s.live(at)
        if not live:
            continue
        victim = int(s.rng.choice(live))
        back = float(s.rng.uniform(*back_after))
        s.replace(victim, at, back, "crash")
        yield at, back, len(live)


def crash_restart(s: Script) -> None:
    """A member killed (OOM, node loss, kill -9): no commit on the way out, back after a while."""
    g = s.g
    s.bursts(0.5)
    g.build_log()
    s.members()
    for at, back, members in _crashes(s, (900, 3600), (5, 120)):
        g.event("member killed", at, restart_s=back, session_s=g.spec.session_s,
                commit=g.spec.commit, members=members)  # fmt: skip


def dead_member(s: Script) -> None:
    """A member's node lost: kept until the session times out, back minutes later."""
    g = s.g
    g.spec.params["members"] = max(2, int(g.spec.params["members"]))
    if g.P < 2:
        g.spec.params["members"] = 1
    s.bursts(0.5)
    g.build_log()
    s.members()
    for at, back, members in _crashes(s, (1800, 4800), (g.spec.session_s + 20, 600)):
        g.event("member's node lost", at, back_s=back, session_s=g.spec.session_s,
                members=members)  # fmt: skip


def rolling_deploy(s: Script) -> None:
    """A rolling deploy of every pod, one at a time, surge first or stop first."""
    g = s.g
    g.spec.params["members"] = max(2, int(g.spec.params["members"]))
    s.bursts(0.5)
    g.build_log()
    s.members()
    for at in s.times((2400, 6000)):
        live = s.live(at)
        step = float(s.rng.uniform(10, 90))
        surge = bool(s.rng.random() < 0.5)
        t = float(at)
        for victim in live:
            ready = float(s.rng.uniform(5, 60))
            if surge:  # the new pod first, the old one stopped once the new one is ready
                g.proc(s.ids(len(g.procs)), int(t))
                g.procs[victim].end, g.procs[victim].ending = int(t + ready), "stop"
            else:
                g.procs[victim].end, g.procs[victim].ending = int(t), "stop"
                g.proc(s.ids(len(g.procs)), int(t + ready))
            t += ready + step
        g.event("rolling deploy", at, pods=len(live), step_s=step, surge=surge,
                protocol=g.spec.protocol, seconds=t - at)  # fmt: skip


def static_restart(s: Script) -> None:
    """Static members (``group.instance.id``) restarted within the session timeout."""
    g = s.g
    g.spec.session_s = int(s.rng.choice([30, 45, 60, 120, 300]))
    g.spec.protocol = "eager" if g.spec.protocol == "consumer" and s.rng.random() < 0.5 \
        else g.spec.protocol  # fmt: skip
    s.bursts(0.5)
    g.build_log()
    procs = s.members()
    for i in procs:
        g.procs[i].instance_id = f"{g.spec.name}-pod-{i}"
    for at in s.times((900, 3600)):
        live = s.live(at)
        if not live:
            continue
        victim = int(s.rng.choice(live))
        back = float(s.rng.uniform(3, min(g.spec.session_s - 5, 90)))
        how = "crash" if s.rng.random() < 0.6 else "close"
        s.replace(victim, at, back, how, g.procs[victim].instance_id)
        g.event(
            "static member restarted",
            at,
            back_s=back,
            session_s=g.spec.session_s,
            how="kill -9" if how == "crash" else "closed (commit, no LeaveGroup)",
        )


def pause(s: Script) -> None:
    """Back-pressure, a slow downstream call or a long GC: no progress for up to about a minute."""
    g = s.g
    s.bursts(0.5)
    g.build_log()
    procs = s.members()
    for at in s.times((480, 2400)):
        length = int(s.rng.uniform(5, 75))
        who = procs if s.rng.random() < 0.5 else [int(s.rng.choice(procs))]
        for i in who:
            live = [j for j in s.live(at)] or [i]
            g.halt(live[min(len(live) - 1, procs.index(i))], at, length)
        g.event("paused", at, seconds=length, members="all" if len(who) > 1 else "one",
                commit=g.spec.commit)  # fmt: skip


def slow_downstream(s: Script) -> None:
    """A downstream slows for a minute or three: lag climbs and drains by itself."""
    g = s.g
    g.build_log()
    procs = s.members()
    for at in s.times((900, 3600)):
        length = int(s.rng.uniform(30, 180))
        factor = float(s.rng.uniform(0.05, 0.6))
        for i in s.live(at) or procs:
            g.slow_down(i, at, length, factor)
        g.event("slow downstream", at, seconds=length, capacity_factor=factor,
                headroom=g.headroom)  # fmt: skip


def producer_bursts(s: Script) -> None:
    s.bursts(float(s.rng.uniform(2, 6)))
    s.g.build_log()
    s.members()


def rare_committer(s: Script) -> None:
    g = s.g
    g.spec.commit = f"every:{int(s.rng.uniform(120, 600))}"
    g.build_log()
    s.members()


def batch_job(s: Script) -> None:
    """A job every so often: joins, reads everything, commits, leaves; Empty in between."""
    g = s.g
    g.spec.params["members"] = 1 if s.rng.random() < 0.6 else 2
    g.spec.commit = f"every:{int(s.rng.choice([5, 30, 60]))}"
    g.spec.params["commit_on_revoke"] = True
    every = float(s.rng.uniform(600, 3600))
    g.spec.params["every_s"] = round(every)
    g.build_log()
    t = float(s.rng.uniform(0, every))
    while t < g.T:
        backlog_s = every
        run = backlog_s / max(0.3, g.headroom - 1) + float(s.rng.uniform(5, 30))
        for _ in range(int(g.spec.params["members"])):
            g.proc(s.ids(len(g.procs)), int(t), end=min(g.T, int(t + run)), ending="stop")
        g.event("batch run", t, seconds=run, every_s=every)
        t += every


def standalone(s: Script) -> None:
    """``assign()`` consumers (Flink, Spark, Connect-style): Empty forever, offsets advance."""
    g = s.g
    g.spec.protocol = "standalone"
    g.spec.params["members"] = 0
    g.spec.commit = f"every:{int(s.rng.choice([1, 5, 10, 30, 60, 120, 300]))}"
    s.bursts(0.5)
    g.build_log()
    proc = g.proc(f"{g.spec.name}-task", 0)
    for at in s.times((1800, 7200)):
        if s.rng.random() < 0.5:
            back = float(s.rng.uniform(10, 120))
            proc = s.replace(proc, at, back, "crash")
            g.event("job restarted", at, back_s=back, commit=g.spec.commit)


def transactional(s: Script) -> None:
    """A read_committed consumer of a transactional topic: markers keep it below the log end."""
    g = s.g
    length = float(s.rng.choice([1, 1, 2, 5, 10, 30, 60]))
    hangs = []
    if s.rng.random() < 0.4:  # a producer killed mid-transaction: the LSO waits the timeout
        for at in s.times((1800, 5400)):
            held = int(s.rng.uniform(10, 60))
            hangs.append((at, held))
            g.event("transaction left open", at, seconds=held)
    if s.rng.random() < 0.3:
        for at in s.times((1800, 7200), first=0):
            length_idle = int(s.rng.uniform(600, 3600))
            g.add_idle(at, length_idle)
            g.event("producer idle", at, seconds=length_idle)
    g.spec.params["transaction_s"] = length
    g.build_log(
        transactional=length,
        hangs=hangs,
        past_marker=g.spec.commit.startswith("auto") or s.rng.random() < 0.3,
    )
    s.members()


def compacted_bootstrap(s: Script) -> None:
    """A new group on a compacted topic, from the earliest offset: a big lag drained in
    minutes (compaction left gaps, so each record read covers several offsets)."""
    g = s.g
    g.spec.rate = max(g.spec.rate, 1.0)
    g.rate_curve[:] = g.spec.rate
    g.build_log()
    g.never_committed[:] = True
    g.reset_to = "earliest"
    g.log_start[:] = 0
    g.base_offsets = np.zeros(g.P, dtype=np.int64)
    at = s.onset(1800)
    backlog = g.leo[:, at]
    drain = float(s.rng.uniform(30, 600))
    g.capacity = g.capacity + (backlog / drain)[:, None]
    s.members(start=at)
    g.event("new group from earliest", at, records=int(backlog.sum()), drain_s=drain)


def partitions_added(s: Script) -> None:
    """Partitions added to the topic: unknown to the consumers until their metadata refresh."""
    g = s.g
    s.bursts(0.5)
    old = g.P
    added = int(s.rng.integers(1, max(2, old) + 1))
    g.P = old + added
    g.spec.partitions = g.P
    g.partition_share = np.concatenate(
        [g.partition_share, np.full(added, g.partition_share.mean())]
    )
    g.partition_share /= g.partition_share.sum()
    g.fetch_blocked = np.zeros((g.P, g.T), dtype=bool)
    g.never_committed = np.arange(g.P) >= old
    g.read_at_most = np.full((g.P, g.T), np.inf)
    g.topic_exists = np.ones((g.P, g.T), dtype=bool)
    g.known = np.ones((g.P, g.T), dtype=bool)
    at = s.onset(1800)
    g.build_log()
    g.leo[old:] = np.where(np.arange(g.T) < at, 0, g.leo[old:] - g.base_offsets[old:, None]
                           - (g.leo[old:, at : at + 1] - g.base_offsets[old:, None]))  # fmt: skip
    g.leo[old:] = np.maximum(g.leo[old:], 0)
    g.read_limit = g.leo
    g.log_start[old:] = 0
    g.topic_exists[old:, :at] = False
    seen = at + int(s.rng.uniform(5, 300))  # metadata.max.age.ms is 5 minutes
    g.known[old:, :seen] = False
    g.extra_rebalances.append(seen)
    s.members()
    g.event("partitions added", at, added=added, had=old, noticed_after_s=seen - at)


def topic_recreated(s: Script) -> None:
    """The topic deleted and created again: offsets start from 0, committed ones are gone."""
    g = s.g
    s.bursts(0.5)
    g.build_log()
    at = s.onset(1800)
    gone = int(s.rng.uniform(5, 120))
    back = at + gone
    seen = back + int(s.rng.uniform(5, 300))
    fresh = g.leo[:, back:] - g.leo[:, back : back + 1]
    g.leo[:, back:] = fresh
    g.read_limit = g.leo
    g.log_start[:, back:] = 0
    g.topic_exists[:, at:back] = False
    g.known[:, at:seen] = False
    g.forget_at.append(at)
    g.extra_rebalances += [at, seen]
    g.reset_to = str(s.rng.choice(["earliest", "latest"]))
    s.members()
    g.event("topic re-created", at, missing_s=gone, noticed_after_s=seen - back,
            reset=g.reset_to)  # fmt: skip


def autoscale(s: Script) -> None:
    """Pods added one by one under load, removed again later."""
    g = s.g
    g.spec.params["members"] = 1
    s.bursts(0.5)
    g.build_log()
    s.members()
    most = min(g.P, int(s.rng.integers(2, 9)))
    for at in s.times((2400, 7200)):
        added = []
        t = float(at)
        for _ in range(most - 1):
            added.append(g.proc(s.ids(len(g.procs)), int(t)))
            t += float(s.rng.uniform(15, 90))
        t += float(s.rng.uniform(300, 1200))
        for i in added:
            g.procs[i].end, g.procs[i].ending = min(g.T, int(t)), "stop"
            t += float(s.rng.uniform(30, 120))
        g.event("scaled out and in", at, pods=most, seconds=t - at)


BENIGN: dict[str, Callable[[Script], None]] = {
    "healthy": healthy,
    "idle-topic": idle_topic,
    "crash-restart": crash_restart,
    "dead-member": dead_member,
    "rolling-deploy": rolling_deploy,
    "static-restart": static_restart,
    "pause": pause,
    "slow-downstream": slow_downstream,
    "producer-bursts": producer_bursts,
    "rare-committer": rare_committer,
    "batch-job": batch_job,
    "standalone-assign": standalone,
    "transactional": transactional,
    "compacted-bootstrap": compacted_bootstrap,
    "partitions-added": partitions_added,
    "topic-recreated": topic_recreated,
    "autoscale": autoscale,
}


# --------------------------------------------------------------------------------------------
# Faults, labelled from when a person would want to know (DOMAIN.md §9)


def _first_commit_missed(s: Script, onset: int) -> int:
    """A stall shows at the first commit that should have moved: one commit interval after
    the onset (at least when the next record arrives)."""
    g = s.g
    arrivals = np.flatnonzero((g.leo[:, onset:] > g.leo[:, onset : onset + 1]).any(axis=0))
    first_record = onset + (int(arrivals[0]) if len(arrivals) else 0)
    return max(first_record, onset + math.ceil(g.commit_every))


def stalled(s: Script) -> None:
    """Members present, nothing read: every partition paused, one partition stuck on a poison
    record, or the poll loop blocked (the member leaves after max.poll.interval.ms)."""
    g = s.g
    g.build_log()
    procs = s.members()
    length = int(s.rng.uniform(180, 1800))
    onset = s.onset(length)
    how = str(s.rng.choice(["paused", "poison-partition", "poll-loop-blocked"]))
    if how == "poll-loop-blocked" and len(procs) > 1 and g.spec.max_poll_s < 180:
        how = "paused"  # dropped within a minute or two, the others would take over: benign
    if how == "paused":
        for i in procs:
            g.halt(i, onset, length)
    elif how == "poison-partition":
        p = int(np.argmax(g.partition_share))
        g.fetch_blocked[p, onset : onset + length] = True
    end = onset + length
    if how == "poll-loop-blocked":
        victim = procs[0] if len(procs) == 1 else int(s.rng.choice(procs))
        s.replace(victim, onset, length, "hang")
        if len(procs) > 1:  # the others take its partitions once it is dropped
            end = min(end, onset + g.spec.max_poll_s)
    g.event("stalled", onset, how=how, seconds=length, commit=g.spec.commit,
            members=len(procs))  # fmt: skip
    g.label("stalled", onset, _first_commit_missed(s, onset), end)


def stopped(s: Script) -> None:
    """Every member stopped (a bad deploy, a crash of all pods), back minutes later."""
    g = s.g
    g.build_log()
    procs = s.members()
    length = int(s.rng.uniform(300, 2400))
    onset = s.onset(length)
    how = "crash" if s.rng.random() < 0.4 else "stop"
    for i in procs:
        s.replace(i, onset, length, how)
    g.event("all members stopped", onset, how=how, back_s=length, commit=g.spec.commit)
    g.label("stopped", onset, onset + 60, onset + length)


def consumers_gone(s: Script) -> None:
    g = s.g
    g.build_log()
    procs = s.members()
    onset = s.onset(1200)
    how = "crash" if s.rng.random() < 0.4 else "stop"
    for i in procs:
        g.procs[i].end, g.procs[i].ending = onset, how
    g.event("all members gone", onset, how=how, commit=g.spec.commit)
    g.label("consumers_gone", onset, onset + 60, g.T)


def _time_lag(g: Group, p: int, at: np.ndarray) -> np.ndarray:
    """Seconds behind, as a person reading the commits sees it: now minus when the log end
    was at the committed offset (0 where nothing is committed)."""
    committed = g.committed_at(p, at)
    when = np.searchsorted(g.leo[p], np.nan_to_num(committed, nan=0.0), side="left")
    return np.where(np.isnan(committed), 0.0, at - np.minimum(when, at))


def _behind_from(g: Group, onset: int, beyond_s: float) -> int | None:
    """The first second after ``onset`` at which some partition is ``beyond_s`` further
    behind (in time) than it was before the onset."""
    span = np.arange(onset, g.T)
    before = np.arange(max(0, onset - 600), onset)
    first = None
    for p in range(g.P):
        usual = float(np.max(_time_lag(g, p, before))) if len(before) else 0.0
        lag = _time_lag(g, p, span)
        over = np.flatnonzero(lag > usual + beyond_s)
        if len(over):
            first = int(span[over[0]]) if first is None else min(first, int(span[over[0]]))
    return first


def _caught_up(g: Group, after: int) -> int:
    """The first second after ``after`` when every partition is within a minute of the end."""
    span = np.arange(after, g.T)
    if not len(span):
        return g.T
    worst = np.max([_time_lag(g, p, span) for p in range(g.P)], axis=0)
    ok = np.flatnonzero(worst <= 60)
    return int(span[ok[0]]) if len(ok) else g.T


def lagging(s: Script) -> None:
    """Reading slower than the records come: a slow downstream, or a producer's surge."""
    g = s.g
    g.spec.rate = max(g.spec.rate, 1.0)
    length = int(s.rng.uniform(600, 3600))
    onset = s.onset(length)
    how = str(s.rng.choice(["consumer-slow", "producer-surge"]))
    share = float(s.rng.uniform(0.2, 0.8))  # the share of the traffic it keeps up with
    if how == "producer-surge":
        g.add_burst(onset, length, g.headroom / share)
    g.build_log()
    s.members()
    span = slice(onset, onset + length)
    g.read_at_most[:, span] = share * np.outer(g.partition_share, g.rate_curve[span])
    g.event("falling behind", onset, how=how, seconds=length, keeps_up_with=share,
            commit=g.spec.commit)  # fmt: skip

    def label() -> None:
        beyond = max(60.0, 2 * g.commit_every)
        start = _behind_from(g, onset, beyond)
        if start is None:
            return
        g.label("lagging", onset, max(onset + 60, start), _caught_up(g, onset + length))

    s.after.append(label)


def rewound(s: Script) -> None:
    """The committed offset set back: an operator's reset while the group is stopped, or the
    application seeking back and committing; then it reads it all again."""
    g = s.g
    g.spec.rate = max(g.spec.rate, 1.0)
    g.spec.params["headroom"] = max(g.headroom, 2.0)
    g.build_log()
    procs = s.members()
    onset = s.onset(1800)
    how = str(s.rng.choice(["reset-to-earliest", "reset-by-duration", "application-seek"]))
    back_s = float(s.rng.uniform(600, 6 * 3600))

    def target(p: int, at: int) -> int:
        if how == "reset-to-earliest":
            return int(g.log_start[p, at])
        when = max(0, at - int(back_s))
        return int(max(g.log_start[p, at], g.leo[p, when] - (g.leo[p, at] - g.leo[p, when])
                       * (how == "application-seek")))  # fmt: skip

    reset_at = onset
    if how.startswith("reset"):
        gap = int(s.rng.uniform(30, 180))
        for i in procs:
            s.replace(i, onset, gap, "stop")
        reset_at = onset + gap // 2
    for p in range(g.P):
        g.seeks.append((p, reset_at, target))
    g.event("rewound", reset_at, how=how, back_s=back_s if how != "reset-to-earliest" else "all")
    s.after.append(
        lambda: g.label(
            "rewound", reset_at, reset_at, max(reset_at + 300, _caught_up(g, reset_at + 60))
        )
    )


def retention_loss(s: Script) -> None:
    """A slow consumer on a topic whose retention deletes records before it reads them."""
    g = s.g
    g.spec.rate = max(g.spec.rate, 1.0)
    keep = float(s.rng.uniform(900, 3600))
    by_bytes = bool(s.rng.random() < 0.3)
    share = float(s.rng.uniform(0.1, 0.7))
    onset = s.onset(keep / (1 - share) + 900)
    g.build_log()
    if by_bytes:
        records = g.spec.rate * g.partition_share * keep
        g.set_retention_bytes(float(records.mean()), float(records.mean() / 8))
    else:
        g.set_retention(keep, float(s.rng.uniform(60, 600)))
    s.members()
    g.read_at_most[:, onset:] = share * np.outer(g.partition_share, g.rate_curve[onset:])
    g.event("slow on a short-retention topic", onset, retention_s=keep, by_bytes=by_bytes,
            keeps_up_with=share, commit=g.spec.commit)  # fmt: skip

    def label() -> None:
        lost = []
        for p in range(g.P):
            behind = np.flatnonzero(g.committed_at(p, np.arange(g.T)) < g.log_start[p])
            if len(behind):
                lost.append(int(behind[0]))
        if lost:
            g.label("retention_loss", onset, max(onset + 60, min(lost) - 600), g.T)
        else:
            start = _behind_from(g, onset, max(60.0, 2 * g.commit_every))
            if start is not None:
                g.label("lagging", onset, max(onset + 60, start), g.T)

    s.after.append(label)


def stuck_rebalance(s: Script) -> None:
    """A rebalance that cannot complete: a member busy in a long batch does not rejoin until
    the rebalance timeout (``max.poll.interval.ms``), or a KIP-848 member never revokes."""
    g = s.g
    if g.spec.protocol == "standalone":
        g.spec.protocol = "eager"
    g.build_log()
    length = int(s.rng.uniform(180, 900))
    onset = s.onset(length)
    g.stuck_rebalances.append((onset, onset + length))
    g.extra_rebalances.append(onset)
    g.spec.max_poll_s = length
    procs = s.members()
    # The member still in its batch reads nothing either.
    g.halt(procs[-1], onset, length)
    g.event("rebalance stuck", onset, seconds=length, protocol=g.spec.protocol)
    g.label("stuck_rebalance", onset, onset + 60, onset + length)


def rebalance_storm(s: Script) -> None:
    """A member that keeps leaving and coming back: a crash loop with back-off, or batches
    slower than ``max.poll.interval.ms`` so it is kicked out after every one."""
    g = s.g
    g.spec.params["members"] = max(2, int(g.spec.params["members"])) if g.P > 1 else 1
    g.build_log()
    procs = s.members()
    length = int(s.rng.uniform(900, 3600))
    onset = s.onset(length)
    how = str(s.rng.choice(["crash-loop", "poll-timeout-loop", "session-flapping"]))
    if how == "poll-timeout-loop":  # kicked out every few minutes, not every half hour
        g.spec.max_poll_s = min(g.spec.max_poll_s, 300)
    victim = procs[-1]
    t = onset
    changes: list[int] = []
    backoff = 10.0
    while t < onset + length:
        if how == "crash-loop":
            up = int(s.rng.uniform(10, 60))
            nxt = s.replace(victim, t + up, backoff, "crash")
            changes += [t + up + g.spec.session_s, t + up + int(backoff)]
            backoff = min(300.0, backoff * 2)
        elif how == "poll-timeout-loop":
            up = int(s.rng.uniform(5, 60))
            nxt = s.replace(victim, t + up, g.spec.max_poll_s + s.rng.uniform(1, 30), "hang")
            changes += [t + up + g.spec.max_poll_s]
        else:
            up = int(s.rng.uniform(20, 120))
            nxt = s.replace(victim, t + up, s.rng.uniform(1, 5), "crash")
            changes += [t + up + g.spec.session_s]
        victim = nxt
        t = g.procs[nxt].start
    changes.sort()
    third = changes[min(2, len(changes) - 1)] if changes else onset + 300
    g.event("rebalance storm", onset, how=how, seconds=length, session_s=g.spec.session_s,
            max_poll_s=g.spec.max_poll_s)  # fmt: skip
    g.label("rebalance_storm", onset, third, min(g.T, t + g.spec.session_s))


FAULTS: dict[str, Callable[[Script], None]] = {
    "stalled": stalled,
    "stopped": stopped,
    "consumers_gone": consumers_gone,
    "lagging": lagging,
    "rewound": rewound,
    "retention_loss": retention_loss,
    "stuck_rebalance": stuck_rebalance,
    "rebalance_storm": rebalance_storm,
}


def _at_least_two(spec: GroupSpec, rng: np.random.Generator) -> None:
    """Patterns about several members need partitions for them."""
    if spec.partitions < 2:
        spec.partitions = int(rng.choice([2, 3, 4, 6]))
    spec.params["members"] = max(2, min(spec.partitions, int(spec.params["members"])))
    if spec.protocol == "standalone":
        spec.protocol = "eager"


SET_UP: dict[str, Callable[[GroupSpec, np.random.Generator], None]] = {
    "dead-member": _at_least_two,
    "rolling-deploy": _at_least_two,
    "autoscale": _at_least_two,
    "stuck_rebalance": _at_least_two,
    "rebalance_storm": _at_least_two,
}


# --------------------------------------------------------------------------------------------
# The cluster and the service's scans


@dataclass
class Cluster:
    """What happens to every group at once: broker restarts and the service's own gaps."""

    scans: np.ndarray
    """Seconds (fractional) at which a scan read the log ends; a missed scan is absent."""
    commits_before: np.ndarray
    """Seconds before it that the scan's OffsetFetch read the commits (the collector reads
    commits first, so a lag is never understated)."""
    restarts: list[tuple[int, int, int, int, int]]
    """(broker, at, ListOffsets fails for s, leaders move for s, coordinator away for s)."""
    events: list[Event]


def draw_cluster(rng: np.random.Generator, horizon: int) -> Cluster:
    n = int(horizon // SCAN_INTERVAL_S)
    scans = np.arange(n) * SCAN_INTERVAL_S + rng.uniform(0.05, 0.6, n)
    late = rng.random(n) < 0.02  # a slow scan (a big cluster, a slow broker)
    scans[late] += rng.uniform(1, 4, int(late.sum()))
    kept = rng.random(n) >= 0.004
    events = []
    for missed in np.flatnonzero(~kept):
        events.append(Event("*", "cluster", "scan missed", float(scans[missed]), {}))
    for _ in range(int(rng.integers(1, 3))):  # the service or the cluster unreachable
        away = float(rng.uniform(WARMUP_S, horizon - 1200))
        length = float(rng.uniform(60, 900))
        kept &= ~((scans >= away) & (scans < away + length))
        events.append(Event("*", "cluster", "scans missed (outage)", away,
                            {"seconds": round(length)}))  # fmt: skip
    restarts = []
    t = float(rng.uniform(WARMUP_S / 2, horizon / 2))
    for _ in range(int(rng.integers(1, 3))):  # a rolling restart of the brokers
        for broker in range(BROKERS):
            if t >= horizon - 300:
                break
            fail = int(rng.uniform(5, 60))
            move = int(rng.uniform(2, 15))
            away = int(rng.uniform(3, 30))
            restarts.append((broker, int(t), fail, move, away))
            events.append(Event("*", "cluster", "broker restarted", t,
                                {"broker": broker, "list_offsets_fail_s": fail,
                                 "leaders_move_s": move, "coordinator_away_s": away}))  # fmt: skip
            t += float(rng.uniform(120, 600))
        t += float(rng.uniform(3600, 3 * 3600))
    for _, at, _, _, away in restarts:
        # The collector retries an OffsetFetch whose coordinator moved; a scan during a long
        # move fails as a whole (its coordinator "keeps moving"), a short one ends late.
        during = (scans >= at) & (scans < at + away)
        if away > 10:
            kept &= ~during
        else:
            scans[during] = at + away + 0.2
    kept[1:] &= np.diff(scans) > 1.0  # the scan after a late one waits for it
    delay = rng.uniform(0.005, 0.3, n)
    usable = kept & (scans < horizon - 1)
    return Cluster(scans[usable], delay[usable], restarts, events)


def _broker_of(name: str, partition: int) -> int:
    return (zlib.crc32(name.encode()) + partition) % BROKERS


def apply_cluster(g: Group, cluster: Cluster) -> None:
    """A restarted broker's partitions stop being fetched while leaders move, and a group it
    coordinates cannot commit (nor be read by the scan) until the coordinator moves."""
    for broker, at, _, move, away in cluster.restarts:
        for p in range(g.P):
            if _broker_of(g.spec.name, p) == broker:
                g.fetch_blocked[p, at : at + move] = True
        if zlib.crc32(g.spec.name.encode()) % BROKERS == broker:
            g.commit_blocked[at : at + away] = True


def scan_rows(g: Group, cluster: Cluster) -> pa.Table | None:
    """What the service's scans saw of the group, in the sample schema."""
    seconds = cluster.scans
    s = np.minimum(g.T - 1, seconds.astype(np.int64))
    sc = np.maximum(0, (seconds - cluster.commits_before).astype(np.int64))
    unavailable = np.zeros((g.P, len(s)), dtype=bool)
    for broker, at, fail, _, _ in cluster.restarts:
        during = (seconds >= at) & (seconds < at + fail)
        for p in range(g.P):
            if _broker_of(g.spec.name, p) == broker:
                unavailable[p] |= during
    hashes: dict[tuple[int, int], int] = {}
    consumer = g.spec.protocol == "consumer"

    def fingerprint(index: int, epoch: int) -> int:
        key = (index, epoch if consumer else 0)
        if key not in hashes:
            hashes[key] = member_hash(g.sets[index], epoch=epoch if consumer else None)
        return hashes[key]

    state = g.state[s]
    sets = g.member_set[s]
    epochs = g.epoch[s]
    fp = np.array([fingerprint(int(i), int(e)) for i, e in zip(sets, epochs)], dtype=np.int64)
    members = np.array([len(g.sets[i]) for i in sets], dtype=np.int32)
    columns: dict[str, list[np.ndarray]] = {k: [] for k in
                                            ("scan", "partition", "committed", "leo", "start",
                                             "available")}  # fmt: skip
    for p in range(g.P):
        committed = g.committed_at(p, sc)
        owned = g.owner[p, s] >= 0 if g.spec.protocol != "standalone" else False
        listed = g.topic_exists[p, s] & (~np.isnan(committed) | owned)
        last_seen = np.concatenate([[np.nan], committed[:-1]])
        committed = np.where(unavailable[p], last_seen, committed)
        rows = np.flatnonzero(listed)
        columns["scan"].append(rows)
        columns["partition"].append(np.full(len(rows), p, dtype=np.int32))
        columns["committed"].append(committed[rows])
        columns["leo"].append(g.leo[p, s[rows]].astype(float))
        columns["start"].append(g.log_start[p, s[rows]].astype(float))
        columns["available"].append(~unavailable[p, rows])
    scan = np.concatenate(columns["scan"])
    if not len(scan):
        return None
    order = np.lexsort((np.concatenate(columns["partition"]), scan))
    scan = scan[order]
    available = np.concatenate(columns["available"])[order]
    leo = np.concatenate(columns["leo"])[order]
    start = np.concatenate(columns["start"])[order]
    committed = np.concatenate(columns["committed"])[order]
    ts = np.round(START.timestamp() * 1000 + seconds[scan] * 1000).astype(np.int64)
    n = len(scan)
    state_names = np.array(GROUP_STATES)[state[scan]]
    arrays = {
        "ts": pa.array(ts, type=pa.timestamp("ms", tz="UTC")),
        "cluster": pa.array(np.full(n, CLUSTER)),
        "group": pa.array(np.full(n, g.spec.name)),
        "topic": pa.array(np.full(n, g.spec.name)),
        "partition": pa.array(np.concatenate(columns["partition"])[order], type=pa.int32()),
        "committed_offset": pa.array(committed, mask=np.isnan(committed), from_pandas=False).cast(
            pa.int64()
        )
        if n
        else pa.array([], pa.int64()),
        "log_end_offset": pa.array(leo, mask=~available).cast(pa.int64()),
        "log_start_offset": pa.array(start, mask=~available).cast(pa.int64()),
        "group_state": pa.array(state_names),
        "members": pa.array(members[scan], type=pa.int32()),
        "member_hash": pa.array(fp[scan], type=pa.int64()),
        "available": pa.array(available, type=pa.bool_()),
    }
    return pa.Table.from_arrays([arrays[f.name] for f in SAMPLE_SCHEMA], schema=SAMPLE_SCHEMA)


# --------------------------------------------------------------------------------------------
# The fleet


@dataclass
class GeneratedCorpus:
    path: Path
    groups: int
    rows: int
    labels: list[Label]
    events: list[Event]


def fleet_mix(groups: int, rng: np.random.Generator) -> list[tuple[str, str]]:
    """(pattern, kind) per group: a fifth faults (every kind), two thirds benign patterns
    (every one), the rest healthy."""
    benign = [p for p in BENIGN if p != "healthy"]
    faults = list(FAULTS)
    n_faults = max(len(faults), round(groups * 0.2))
    n_benign = max(len(benign), round(groups * 0.65))
    n_healthy = max(0, groups - n_faults - n_benign)
    mix = [("healthy", "")] * n_healthy
    mix += [(benign[i % len(benign)], "") for i in range(n_benign)]
    mix += [(faults[i % len(faults)], faults[i % len(faults)]) for i in range(n_faults)]
    order = rng.permutation(len(mix))
    return [mix[i] for i in order]


def generate(out: Path, groups: int = 200, hours: float = 6.0, seed: int = 1) -> GeneratedCorpus:
    """Write a labelled corpus of ``groups`` groups over ``hours`` at 10 s scans into ``out``
    (replacing one there), deterministic for ``seed``."""
    out = Path(out)
    rng = np.random.default_rng(seed)
    horizon = int(hours * 3600)
    cluster = draw_cluster(rng, horizon)
    tables: list[pa.Table] = []
    plans: list[Plan] = []
    labels: list[Label] = []
    events: list[Event] = list(cluster.events)
    for n, (pattern, kind) in enumerate(fleet_mix(groups, rng)):
        group_rng = np.random.default_rng([seed, n])
        name = f"{pattern}-{n:03d}"
        spec = draw_spec(group_rng, name, pattern, kind, min_rate=1.0 if kind else 0.05)
        if pattern in SET_UP:
            SET_UP[pattern](spec, group_rng)
        g = Group(spec, horizon, group_rng)
        script = Script(g)
        (FAULTS.get(pattern) or BENIGN[pattern])(script)
        apply_cluster(g, cluster)
        g.coordinate()
        g.consume()
        for step in script.after:
            step()
        table = scan_rows(g, cluster)
        if table is not None:
            tables.append(table)
        plans.append(Plan(pattern, kind, spec.client, name, name, g.P, spec.rate,
                          spec.commit, describe(g)))  # fmt: skip
        labels += g.labels
        events += g.events
    history = pa.concat_tables(tables)
    meta = {
        "broker": "generated: notifier.synth.independent (a model of Kafka clients and brokers "
        "written apart from the rules)",
        "scan_interval_s": SCAN_INTERVAL_S,
        "warmup_s": WARMUP_S,
        "duration_s": float(horizon),
        "started_ms": _ms(0),
        "ended_ms": _ms(horizon),
        "seed": seed,
        "command": f"python -m notifier.synth.independent --out {out} --groups {groups} "
        f"--hours {hours:g} --seed {seed}",
    }
    write_corpus(out, history, plans, labels, meta, cluster=CLUSTER)
    with open(out / "events.csv", "w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["group", "pattern", "what", "at", "params"])
        for e in sorted(events, key=lambda e: (e.at_s, e.group)):
            writer.writerow([e.group, e.pattern, e.what, _iso(e.at_s),
                             json.dumps(e.params, sort_keys=True)])  # fmt: skip
    return GeneratedCorpus(out, groups, history.num_rows, labels, events)


def describe(g: Group) -> str:
    """The group's set-up in words: what a reader of a false page needs."""
    spec = g.spec
    extra = {k: v for k, v in spec.params.items() if k not in ("members",)}
    return (
        f"{spec.client} {spec.protocol}, {spec.params['members']} member(s), "
        f"{g.P} partitions at {spec.rate:g} rec/s, commit {spec.commit}, session "
        f"{spec.session_s} s, max.poll {spec.max_poll_s} s; "
        + ", ".join(f"{k} {v}" for k, v in sorted(extra.items()))
    )


def _iso(second: float) -> str:
    return datetime.fromtimestamp(_ms(second) / 1000, UTC).isoformat(
        timespec="milliseconds").replace("+00:00", "Z")  # fmt: skip


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--groups", type=int, default=200)
    parser.add_argument("--hours", type=float, default=6.0)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args(argv)
    corpus = generate(args.out, args.groups, args.hours, args.seed)
    kinds: dict[str, int] = {}
    for lb in corpus.labels:
        kinds[lb.kind] = kinds.get(lb.kind, 0) + 1
    print(f"{corpus.path}: {corpus.groups} groups, {corpus.rows} rows, {len(corpus.labels)} "
          f"labels {kinds}, {len(corpus.events)} events")  # fmt: skip


if __name__ == "__main__":
    main()
