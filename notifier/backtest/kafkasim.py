"""A second-by-second model of Kafka consumers as a broker and a client library see them.

The benign-pattern and fault sweeps (:mod:`notifier.backtest.sweep`) are built on it. It was
written from what Kafka and its clients do (docs/architecture.md, "Groups and rebalances", and
../shared/DOMAIN.md §2 and §9), not from what the rules look at, so that a rule tuned on it is
tuned on consumers rather than on a generator's habits:

* **Ownership.** A partition is read by the member that owns it, one *tenure* at a time. A new
  owner starts from the group's last committed offset (a crashed owner's progress since its last
  commit is read again); a graceful owner commits its position on the way out (``close()`` and
  an eager revoke commit, a ``kill -9`` or an OOM kill does not).
* **Commits.** An owner commits its position every ``commit_every_s`` from the start of its
  tenure (auto-commit's deadline, or a manual commit per interval). A commit of a position that
  did not move is invisible from outside.
* **Reading.** An owner that is not paused reads up to what is readable (the log end; on a
  transactional topic the last committed transaction, never its marker) at ``capacity`` records
  a second.
* **Membership.** The group's state, member count and member set (a generation counter that
  changes whenever a member id does) are kept per second; what a scan sees is their value at
  the scan.

:class:`Population` holds many groups (each with its own topic) and simulates them together,
one vectorized step per second; :meth:`Population.samples` returns what scans every
``interval_s`` would have recorded, as :class:`~notifier.backtest.samples.SampleArrays`.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from notifier.backtest.samples import SampleArrays
from notifier.types import GROUP_STATE_CODE

STABLE = GROUP_STATE_CODE["Stable"]
PREPARING = GROUP_STATE_CODE["PreparingRebalance"]
COMPLETING = GROUP_STATE_CODE["CompletingRebalance"]
EMPTY = GROUP_STATE_CODE["Empty"]
DEAD = GROUP_STATE_CODE["Dead"]

_END, _START, _PAUSE, _RESUME, _ABSENT, _BACK, _RESET_LOG, _CAPACITY, _SEEK, _PRODUCE = range(10)
RETENTION_CHECK_S = 300


@dataclass
class GroupSpec:
    """One consumer group reading its own topic."""

    name: str
    partitions: int
    rate: float
    """Records a second per partition the producers send."""
    commit_every_s: float
    members: int = 1
    headroom: float = 3.0
    """The consumers read this many times the production rate (at least :data:`MIN_CAPACITY`)."""
    standalone: bool = False
    """``assign()`` with commits: the group is Empty with no members for good."""
    transaction_every_s: float = 0.0
    """A transactional producer committing this often (0: not transactional)."""
    density: float = 1.0
    """Share of offsets still holding a record (a compacted topic's gaps: below 1)."""
    starts_uncommitted: bool = False
    log_start_at_zero: bool = False
    """Log start stays at offset 0 (a compacted topic)."""
    initial_lag_s: float = 0.0
    """Behind by this many seconds of records at the start."""
    frozen_from_start: bool = False
    """Nobody reads from the start (a stall the service finds already in place)."""
    retention_s: float = 0.0
    """Time retention short enough to matter (0: longer than the run); the broker deletes
    whole segments at its checks every :data:`RETENTION_CHECK_S`."""


MIN_CAPACITY = 5.0


@dataclass
class Group:
    """A group being scripted: its rows and membership, and the helpers that script what a
    broker and a client library do (crash, rebalance, pause, deploy...)."""

    spec: GroupSpec
    index: int
    rows: np.ndarray
    duration_s: int
    population: Population
    members: int = 0
    state: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int8))
    member_count: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int32))
    generation: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int32))

    def __post_init__(self) -> None:
        T = self.duration_s
        standalone = self.spec.standalone
        self.members = 0 if standalone else self.spec.members
        self.state = np.full(T, EMPTY if standalone else STABLE, np.int8)
        self.member_count = np.full(T, self.members, np.int32)
        self.generation = np.zeros(T, np.int32)

    # -- what a scan sees of the group -------------------------------------------------------

    def set_state(self, begin: float, end: float, code: int) -> None:
        a, b = self._second(begin), self._second(end)
        self.state[a:b] = code

    def set_members(self, at: float, count: int) -> None:
        """A new member set from ``at`` on (a member id changed, joined or left)."""
        a = self._second(at)
        self.member_count[a:] = count
        self.generation[a:] += 1
        self.members = count
        if count == 0:
            self.state[a:] = EMPTY
        elif a < self.duration_s and self.state[a] == EMPTY:  # (a change at the end: none)
            self.state[a:] = STABLE

    def _second(self, t: float) -> int:
        return int(np.clip(round(t), 0, self.duration_s))

    # -- partitions --------------------------------------------------------------------------

    def owned_by(self, member: int, members: int | None = None) -> np.ndarray:
        """Rows of the partitions ``member`` owns under a round-robin assignment."""
        m = max(1, self.members if members is None else members)
        p = np.arange(self.spec.partitions)
        owned: np.ndarray = self.rows[p % m == member % m]
        return owned

    def end_tenure(self, at: float, rows: np.ndarray | None = None, commit: bool = True) -> None:
        """The owner of ``rows`` stops reading; ``commit``: it commits its position first."""
        self.population.event(at, _END, self._rows(rows), commit)

    def start_tenure(self, at: float, rows: np.ndarray | None = None) -> None:
        """A new owner of ``rows`` starts from the last committed offset."""
        self.population.event(at, _START, self._rows(rows))

    def pause(self, at: float, length: float, rows: np.ndarray | None = None) -> None:
        """Members stay, nothing is read (back-pressure, a slow downstream call, a GC)."""
        self.population.event(at, _PAUSE, self._rows(rows))
        self.population.event(at + length, _RESUME, self._rows(rows))

    def slow_down(self, at: float, until: float, factor: float) -> None:
        """Read at ``factor`` × the production rate from ``at`` until ``until``."""
        self.population.event(at, _CAPACITY, self.rows, factor)
        self.population.event(until, _CAPACITY, self.rows, -1.0)

    def produce_burst(self, at: float, until: float, factor: float) -> None:
        """The producers send ``factor`` × their usual rate from ``at`` until ``until`` (a
        spike of traffic; the consumers read at their usual capacity)."""
        self.population.event(at, _PRODUCE, self.rows, factor)
        self.population.event(until, _PRODUCE, self.rows, 1.0)

    def seek_back(self, at: float, seconds_of_records: float) -> None:
        """The offset is reset that many seconds of records back and committed at once."""
        self.population.event(at, _SEEK, self.rows, seconds_of_records)

    def absent(self, begin: float, end: float, rows: np.ndarray | None = None) -> None:
        """Scans do not list ``rows`` (a failed ListOffsets, a deleted topic)."""
        self.population.event(begin, _ABSENT, self._rows(rows))
        self.population.event(end, _BACK, self._rows(rows))

    def recreate_topic(self, at: float, rows: np.ndarray | None = None) -> None:
        """The topic starts again from offset 0 and the group's offsets for it are gone."""
        self.population.event(at, _RESET_LOG, self._rows(rows))

    def _rows(self, rows: np.ndarray | None) -> np.ndarray:
        return self.rows if rows is None else np.asarray(rows, dtype=np.int64)

    # -- what clients and the coordinator do -------------------------------------------------

    def rebalance(
        self,
        at: float,
        members: int,
        length: float,
        cooperative: bool,
        moved: np.ndarray | None = None,
    ) -> float:
        """A graceful rebalance to ``members``: eager revokes every partition (committing on
        revoke) for ``length`` s; cooperative only ``moved`` (default: a fair share), twice as
        long (revoke, then assign). Returns when reading resumes."""
        self.set_members(at, members)
        if members == 0:
            self.end_tenure(at)
            return at
        if cooperative:
            if moved is None:
                share = max(1, self.spec.partitions // max(members, 1))
                moved = self.rows[:share]
            end = at + 2 * length
            self.set_state(at, at + length, PREPARING)
            self.set_state(at + length, end, COMPLETING)
            if len(moved):
                self.end_tenure(at, moved)
                self.start_tenure(end, moved)
        else:
            end = at + length
            self.set_state(at, at + length / 2, PREPARING)
            self.set_state(at + length / 2, end, COMPLETING)
            self.end_tenure(at)
            self.start_tenure(end)
        return end

    def crash(
        self,
        at: float,
        member: int,
        restart_s: float,
        session_timeout_s: float,
        static: bool,
        exit_commit: bool,
        cooperative: bool,
        rebalance_s: float,
    ) -> None:
        """Member ``member`` dies at ``at`` (committing first only with ``exit_commit``) and
        its pod is back ``restart_s`` later.

        Classic protocol: the coordinator keeps the dead member until its session times out;
        a pod back before that rejoins (static membership: with the same instance id, no
        rebalance, a new member id) or triggers a rebalance that waits for the dead member's
        session to expire. After it expires, the others (if any) take its partitions, from
        the last commit.
        """
        m = self.members
        lost = self.owned_by(member)
        self.end_tenure(at, lost, commit=exit_commit)
        back, expiry = at + restart_s, at + session_timeout_s
        if static and restart_s < session_timeout_s:
            self.set_members(back, m)  # same instance id, new member id: no rebalance
            self.start_tenure(back, lost)
            return
        if back < expiry:
            # The new pod's join starts a rebalance that waits for the dead member: eager
            # members stop reading meanwhile, cooperative ones keep their partitions.
            self.set_members(back, m + 1)
            self.set_state(back, expiry, PREPARING)
            if not cooperative:
                others = np.setdiff1d(self.rows, lost)
                self.end_tenure(back, others)
            self.set_members(expiry, m)
            self.set_state(expiry, expiry + rebalance_s, COMPLETING)
            if cooperative:
                self.start_tenure(expiry + rebalance_s, lost)
            else:
                self.start_tenure(expiry + rebalance_s)
            return
        if m == 1:
            self.set_members(expiry, 0)
            self.set_members(back, 1)
            self.set_state(back, back + rebalance_s, COMPLETING)
            self.start_tenure(back + rebalance_s)
            return
        resumed = self.rebalance(expiry, m - 1, rebalance_s, cooperative, moved=lost)
        self.rebalance(max(back, resumed + 1), m, rebalance_s, cooperative)


@dataclass
class Label:
    """A labelled fault: when it began, when a person wants to know, when it stopped acting."""

    group: str
    kind: str
    onset_s: float
    start_s: float
    end_s: float
    cell: tuple[Any, ...] = ()


class Population:
    """Many groups simulated together, one second at a time."""

    def __init__(
        self, duration_s: int, seed: int, interval_s: float = 10.0, cluster: str = "sweep"
    ) -> None:
        self.T = int(duration_s)
        self.rng = np.random.default_rng(seed)
        self.interval_s = interval_s
        self.cluster = cluster
        self.groups: list[Group] = []
        self.specs: list[GroupSpec] = []
        self._events: dict[int, list[tuple[Any, ...]]] = defaultdict(list)
        self.labels: list[Label] = []
        self.scan_ok = np.ones(0, dtype=bool)
        self.cells: dict[str, tuple[Any, ...]] = {}

    @property
    def rows(self) -> int:
        return sum(s.partitions for s in self.specs)

    def add(self, spec: GroupSpec, cell: tuple[Any, ...] = ()) -> Group:
        start = self.rows
        rows = np.arange(start, start + spec.partitions, dtype=np.int64)
        group = Group(spec, len(self.groups), rows, self.T, self)
        self.groups.append(group)
        self.specs.append(spec)
        self.cells[spec.name] = cell
        return group

    def event(self, at: float, kind: int, rows: np.ndarray, value: float | bool = 0.0) -> None:
        t = round(at)
        if 0 <= t < self.T:
            self._events[t].append((kind, rows, value))

    def label(self, group: Group, kind: str, onset_s: float, start_s: float, end_s: float) -> None:
        self.labels.append(
            Label(group.spec.name, kind, onset_s, start_s, end_s, self.cells[group.spec.name])
        )

    def scan_seconds(self) -> np.ndarray:
        step = round(self.interval_s)
        return np.arange(step, self.T, step)

    def miss_scans(self, mask: np.ndarray) -> None:
        """Scans that failed (``mask`` over :meth:`scan_seconds`): no rows at all."""
        self.scan_ok = ~mask

    # -- the simulation ----------------------------------------------------------------------

    def samples(self, t0_ms: int) -> SampleArrays:
        """Simulate every group; what each successful scan recorded."""
        rng, T = self.rng, self.T
        specs = self.specs
        n = self.rows
        per_row = lambda values: np.repeat(np.asarray(values), [s.partitions for s in specs])  # noqa: E731
        group_of_row = per_row(np.arange(len(specs)))
        partition = np.concatenate([np.arange(s.partitions) for s in specs]).astype(np.int32)
        weights = np.exp(rng.normal(0.0, 0.3, n))
        rate = per_row([s.rate for s in specs]) * weights
        density = per_row([s.density for s in specs])
        headroom = per_row([s.headroom for s in specs])
        base_capacity = np.maximum(headroom * rate, MIN_CAPACITY) / density
        capacity = base_capacity.copy()
        every = per_row([s.commit_every_s for s in specs]) * rng.uniform(0.97, 1.03, n)
        txn = per_row([s.transaction_every_s for s in specs])
        transactional = txn > 0
        uncommitted = per_row([s.starts_uncommitted for s in specs]).astype(bool)
        frozen = per_row([s.frozen_from_start for s in specs]).astype(bool)

        age = rng.uniform(2, 30, n) * 86400
        leo = np.floor(rate * age / density).astype(np.int64) + rng.integers(0, 1000, n)
        zero_start = per_row([s.log_start_at_zero for s in specs]).astype(bool)
        log_start = np.where(zero_start, 0, np.maximum(leo - (rate * 86400).astype(np.int64), 0))
        readable = leo.copy()
        # A transactional topic's log ends with a commit marker nobody reads.
        leo[transactional] += 1
        retention = per_row([s.retention_s for s in specs])
        retained = retention > 0
        log_start[retained] = np.maximum(leo - (rate * retention).astype(np.int64), 0)[retained]
        history = np.zeros((T // 60 + 2, n), dtype=np.int64)
        check_phase = int(rng.integers(0, RETENTION_CHECK_S))
        behind = per_row([s.initial_lag_s for s in specs]) * rate / density
        position = np.maximum(leo - behind, 0).astype(np.float64)
        committed = np.where(uncommitted, -1, np.floor(position)).astype(np.int64)
        owned = ~frozen
        paused = np.zeros(n, dtype=np.int32)
        present = np.ones(n, dtype=bool)
        next_commit = rng.uniform(0, every)
        next_txn = rng.uniform(0, np.where(transactional, txn, 1.0))
        scaled = np.full(n, -1.0)
        produced = np.ones(n)

        seconds = self.scan_seconds()
        if self.scan_ok.size != seconds.size:
            self.scan_ok = np.ones(seconds.size, dtype=bool)
        scan_index = {int(t): i for i, t in enumerate(seconds)}
        out_committed = np.empty((seconds.size, n), dtype=np.int64)
        out_leo = np.empty((seconds.size, n), dtype=np.int64)
        out_start = np.empty((seconds.size, n), dtype=np.int64)
        out_present = np.empty((seconds.size, n), dtype=bool)

        for t in range(T):
            for kind, rows, value in self._events.get(t, ()):
                if kind == _END:
                    if value:
                        live = rows[owned[rows]]
                        committed[live] = np.floor(position[live]).astype(np.int64)
                    owned[rows] = False
                elif kind == _START:
                    owned[rows] = True
                    position[rows] = np.where(committed[rows] >= 0, committed[rows], readable[rows])
                    next_commit[rows] = t + every[rows]
                elif kind == _PAUSE:
                    paused[rows] += 1
                elif kind == _RESUME:
                    paused[rows] -= 1
                elif kind == _ABSENT:
                    present[rows] = False
                elif kind == _BACK:
                    present[rows] = True
                elif kind == _RESET_LOG:
                    leo[rows] = 0
                    readable[rows] = 0
                    log_start[rows] = 0
                    committed[rows] = -1
                    position[rows] = 0.0
                elif kind == _CAPACITY:
                    scaled[rows] = value
                elif kind == _PRODUCE:
                    produced[rows] = value
                elif kind == _SEEK:
                    back = position[rows] - value * rate[rows] / density[rows]
                    position[rows] = np.maximum(back, log_start[rows])
                    committed[rows] = np.floor(position[rows]).astype(np.int64)
            arrivals = rng.poisson(rate * produced / density)
            leo += arrivals
            if transactional.any():
                due = transactional & (t >= next_txn)
                # A transaction that wrote to the partition ends with a commit marker, which
                # takes an offset: its records become readable, the marker never is (a
                # producer with nothing to send writes no marker).
                wrote = due & (leo > readable + 1)
                leo[wrote] += 1
                readable[wrote] = leo[wrote] - 1
                next_txn[due] += txn[due]
                readable[~transactional] = leo[~transactional]
            else:
                readable = leo.copy()
            if t % 60 == 0:
                history[t // 60] = leo
            if retained.any() and t % RETENTION_CHECK_S == check_phase:
                minute = (t - retention[retained]) // 60
                old = np.where(
                    minute >= 0,
                    history[np.maximum(minute, 0).astype(np.int64), np.flatnonzero(retained)],
                    0,
                )
                log_start[retained] = np.maximum(log_start[retained], old)
                # Fetching below the log start is out of range: auto.offset.reset=earliest.
                lost = retained & (position < log_start)
                position[lost] = log_start[lost]
            reading = owned & (paused == 0)
            capacity = np.where(scaled >= 0, scaled * rate / density, base_capacity)
            position = np.where(reading, np.minimum(readable, position + capacity), position)
            due = owned & (t >= next_commit)
            if due.any():
                committed[due] = np.floor(position[due]).astype(np.int64)
                next_commit[due] += every[due]
            i = scan_index.get(t)
            if i is not None:
                out_committed[i] = committed
                out_leo[i] = leo
                out_start[i] = log_start
                out_present[i] = present

        return self._arrays(
            seconds, t0_ms, group_of_row, partition, out_committed, out_leo, out_start, out_present
        )

    def _arrays(
        self,
        seconds: np.ndarray,
        t0_ms: int,
        group_of_row: np.ndarray,
        partition: np.ndarray,
        committed: np.ndarray,
        leo: np.ndarray,
        log_start: np.ndarray,
        present: np.ndarray,
    ) -> SampleArrays:
        ok = self.scan_ok
        keep = present & ok[:, None]
        jitter = self.rng.integers(0, 400, seconds.size)
        ts = t0_ms + seconds * 1000 + jitter
        state = np.stack([g.state for g in self.groups])[:, seconds].T  # (S, G)
        members = np.stack([g.member_count for g in self.groups])[:, seconds].T
        generation = np.stack([g.generation for g in self.groups])[:, seconds].T
        salt = np.arange(1, len(self.groups) + 1, dtype=np.int64) * 7_919
        hashes = np.where(members > 0, salt[None, :] * 1_000_003 + generation + 1, 0)
        rows_ts = np.broadcast_to(ts[:, None], keep.shape)[keep]
        by_group = lambda values: values[:, group_of_row][keep]  # noqa: E731
        names = np.asarray([s.name for s in self.specs], dtype=object)
        topics = np.asarray([f"{s.name}.topic" for s in self.specs], dtype=object)
        group_codes = np.broadcast_to(group_of_row[None, :], keep.shape)[keep].astype(np.int32)
        return SampleArrays(
            ts=np.ascontiguousarray(rows_ts, dtype=np.int64),
            cluster=np.zeros(group_codes.size, np.int32),
            group=group_codes,
            topic=group_codes.copy(),
            partition=np.broadcast_to(partition[None, :], keep.shape)[keep].astype(np.int32),
            committed=committed[keep],
            log_end=leo[keep],
            log_start=log_start[keep],
            state=by_group(state).astype(np.int8),
            members=by_group(members).astype(np.int32),
            member_hash=by_group(hashes).astype(np.int64),
            cluster_names=np.asarray([self.cluster], dtype=object),
            group_names=names,
            topic_names=topics,
        )
