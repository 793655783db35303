"""What a group of the independent corpus is made of, second by second: its traffic, log,
consumer processes, coordinator and commits (one :class:`Group` per group)."""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import numpy as np

from notifier.recorder.stage import Label
from notifier.types import GROUP_STATES

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
