"""Benign patterns and faults as sweeps: every pattern over a grid of its parameters.

A rule set tuned on one generator's fleet learns that generator's habits. A sweep asks instead:
*for every value of a benign pattern's parameters, is the rule quiet?* and *for every value of
a fault's parameters, how soon does it page?* Each pattern (../shared/DOMAIN.md §9) and each
incident kind has a two-dimensional grid (the heat map's axes); the other parameters it has
(partitions, traffic, commit on the way out, eager or cooperative, ...) rotate over the
replicas of each cell. The groups are scripted on :mod:`notifier.backtest.kafkasim` (what the
broker and the client library do), scanned every 10 s and replayed through the backtest's
engine, the service's own step (:func:`notifier.backtest.replay.replay`).

A benign cell's score is pages (would-be incidents) per group-day; a fault cell's is whether
each labelled fault was caught and its detection delay, from the label's start (the moment a
person would want to know: the fault can no longer be one of the benign patterns).
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from notifier.backtest.grid import GridConfig
from notifier.backtest.kafkasim import (
    COMPLETING,
    DEAD,
    PREPARING,
    GroupSpec,
    Population,
)
from notifier.backtest.replay import ReplayOptions, replay
from notifier.backtest.scoring import match_incidents
from notifier.rules import RulesConfig

INTERVAL_S = 10.0
WARMUP_S = 1800
"""Habits are learned in the first half hour; pages opened in it do not count."""
T0_MS = 1_767_571_200_000  # 2026-01-05T00:00:00Z
EVENT_EVERY_S = 720
"""A benign group goes through its pattern about every 12 minutes after the warm-up."""

COMMIT_EVERY = (1, 5, 10, 30, 60, 120, 300)
RARE_COMMIT_EVERY = (120, 300, 600)
"""The rare committers' grid: the longest commit interval of any benign grid is its 10 min."""
BATCH_EVERY_MIN = (2, 5, 10, 30, 60)
PARTITIONS = (1, 4, 16, 64)
TRAFFIC = (0.1, 1.0, 10.0, 100.0, 10_000.0)
MEMBERS = (1, 2, 3, 4)
PROTOCOL = "assignment"
EXIT_COMMIT = "commit on the way out"
SESSION = "session timeout (s)"
EAGER_OR_COOPERATIVE = ("eager", "cooperative")


@dataclass
class Cell:
    """One replica of one grid cell: its parameters, with the rotated ones filled in."""

    x: Any
    y: Any
    rep: int
    rng: np.random.Generator
    params: dict[str, Any] = field(default_factory=dict)
    """The values of the pattern's other axes (:attr:`Pattern.axes`) for this replica."""

    def pick(self, values: Sequence[Any], salt: int = 0) -> Any:
        """A rotated parameter: every replica of a cell gets a different value."""
        return values[(self.rep + salt + hash((self.x, self.y)) % 7) % len(values)]

    def value(self, axis: str, values: Sequence[Any], salt: int = 0) -> Any:
        """The pattern's axis ``axis`` when it declares one (its covering design's value),
        else a rotated pick of ``values``."""
        return self.params[axis] if axis in self.params else self.pick(values, salt)


Script = Callable[[Population, Cell, str], None]


@dataclass
class Pattern:
    """A benign pattern (``kind`` empty) or a fault, over the grid ``x`` × ``y``."""

    name: str
    description: str
    x_name: str
    x_values: Sequence[Any]
    y_name: str
    y_values: Sequence[Any]
    script: Script
    kind: str = ""
    replicas: int = 4
    duration_s: int = 9000
    warmup_s: int = WARMUP_S
    scan_gaps: Callable[[Population, Any], np.ndarray] | None = None
    """Per x value, which scans fail (the x axis is then one population per value)."""
    axes: dict[str, Sequence[Any]] = field(default_factory=dict)
    """The pattern's other parameters (partitions, traffic, commit on the way out, ...) and
    their ranges, spread over the replicas of the grid's cells by :func:`design`."""

    @property
    def benign(self) -> bool:
        return not self.kind


def _spec(name: str, cell: Cell, **kwargs: Any) -> GroupSpec:
    partitions = kwargs.pop("partitions", cell.value("partitions", PARTITIONS, 1))
    members = kwargs.pop("members", min(partitions, cell.value("members", (1, 2, 3, 4), 2)))
    kwargs.setdefault("rate", cell.value("records/s", TRAFFIC, 3))
    kwargs.setdefault("commit_every_s", cell.value("commit interval (s)", COMMIT_EVERY, 4))
    return GroupSpec(name=name, partitions=partitions, members=members, **kwargs)


def _event_times(pop: Population, cell: Cell, spacing: float = EVENT_EVERY_S) -> list[float]:
    first = WARMUP_S + 300 + cell.rng.uniform(0, spacing)
    return list(np.arange(first, pop.T - 400, spacing) + cell.rng.uniform(-60, 60))


# -- benign patterns --------------------------------------------------------------------------


def _crash_restart(pop: Population, cell: Cell, name: str) -> None:
    spec = _spec(name, cell, commit_every_s=cell.y)
    group = pop.add(spec, (cell.x, cell.y))
    for at in _event_times(pop, cell):
        group.crash(
            at,
            member=int(cell.rng.integers(0, max(group.members, 1))),
            restart_s=cell.x,
            session_timeout_s=cell.value(SESSION, (10, 45, 30), 5),
            static=False,
            exit_commit=cell.value(EXIT_COMMIT, (False, False, True), 6),
            cooperative=cell.value(PROTOCOL, ("eager", "cooperative"), 7) == "cooperative",
            rebalance_s=cell.rng.uniform(1, 5),
        )


def _dead_member(pop: Population, cell: Cell, name: str) -> None:
    members = cell.value("members", (2, 3, 4), 2)
    partitions = max(members, cell.value("partitions", (4, 16, 64), 1))
    spec = _spec(name, cell, commit_every_s=cell.y, partitions=partitions, members=members)
    group = pop.add(spec, (cell.x, cell.y))
    for at in _event_times(pop, cell):
        group.crash(
            at,
            member=0,
            restart_s=cell.rng.uniform(60, 180),
            session_timeout_s=cell.x,
            static=False,
            exit_commit=False,
            cooperative=cell.value(PROTOCOL, ("eager", "cooperative"), 7) == "cooperative",
            rebalance_s=cell.rng.uniform(1, 5),
        )


def _static_membership(pop: Population, cell: Cell, name: str) -> None:
    spec = _spec(name, cell, commit_every_s=cell.y)
    group = pop.add(spec, (cell.x, cell.y))
    for at in _event_times(pop, cell):
        group.crash(
            at,
            member=int(cell.rng.integers(0, group.members)),
            restart_s=cell.x,
            session_timeout_s=cell.value(SESSION, (45,)),
            static=True,
            exit_commit=cell.value(EXIT_COMMIT, (False, True), 6),
            cooperative=False,
            rebalance_s=2.0,
        )


def _rolling_deploy(pop: Population, cell: Cell, name: str) -> None:
    pods = cell.x
    partitions = max(pods, cell.value("partitions", PARTITIONS, 1))
    spec = _spec(name, cell, partitions=partitions, members=pods)
    group = pop.add(spec, (cell.x, cell.y))
    protocol = cell.value(PROTOCOL, ("eager", "cooperative"), 7)
    cooperative = protocol == "cooperative"
    surge = cell.value("surge", (True, False), 8)
    spacing = max(900.0, pods * (cell.y + 60) + 300)
    for at in _event_times(pop, cell, spacing=spacing):
        t = at
        for pod in range(pods):
            if t > pop.T - 120:  # the history ends in the middle of this deploy
                break
            length = cell.rng.uniform(1, 5)
            if protocol == "static":  # the same instance id back within its session: no rebalance
                restart = cell.rng.uniform(5, 40)
                group.crash(
                    t,
                    member=pod,
                    restart_s=restart,
                    session_timeout_s=45,
                    static=True,
                    exit_commit=True,
                    cooperative=False,
                    rebalance_s=length,
                )
                t += restart
            elif surge:  # the new pod joins, then the old one leaves
                t = group.rebalance(t, pods + 1, length, cooperative) + 2
                t = group.rebalance(t, pods, length, cooperative)
            else:  # the old pod leaves, the new one joins once started
                if pods > 1:
                    group.rebalance(t, pods - 1, length, cooperative)
                else:
                    group.end_tenure(t)
                    group.set_members(t, 0)
                t = group.rebalance(t + cell.rng.uniform(5, 45), pods, length, cooperative)
            t += cell.y * cell.rng.uniform(0.8, 1.2)


def _pause(pop: Population, cell: Cell, name: str) -> None:
    spec = _spec(name, cell, commit_every_s=cell.y)
    group = pop.add(spec, (cell.x, cell.y))
    rows = group.rows[:1] if cell.value("paused", ("all",)) == "one partition" else None
    for at in _event_times(pop, cell):
        group.pause(at, cell.x, rows)


def _producer_burst(pop: Population, cell: Cell, name: str) -> None:
    """Producers send ``y`` × their rate for ``x`` s; the consumers, reading at ``headroom`` ×
    the usual rate, fall behind and catch up by themselves."""
    headroom = cell.value("headroom", (3.0,))
    spec = _spec(name, cell, headroom=headroom)
    group = pop.add(spec, (cell.x, cell.y))
    # Caught up again before the next burst: the backlog drains at (headroom - 1) × the rate.
    drain = max(0.0, cell.y - headroom) * cell.x / (headroom - 1)
    for at in _event_times(pop, cell, spacing=max(EVENT_EVERY_S, 2 * (cell.x + drain))):
        group.produce_burst(at, at + cell.x, cell.y)


def _rare_committer(pop: Population, cell: Cell, name: str) -> None:
    spec = _spec(name, cell, commit_every_s=cell.x, rate=cell.y)
    pop.add(spec, (cell.x, cell.y))


def _batch_job(pop: Population, cell: Cell, name: str) -> None:
    """A job every ``x`` minutes: members join, read everything, commit, leave (Empty)."""
    spec = _spec(name, cell, rate=cell.y, commit_every_s=600, headroom=50.0)
    group = pop.add(spec, (cell.x, cell.y))
    period = cell.x * 60.0
    at = cell.rng.uniform(0, period)
    group.end_tenure(0.0)
    group.set_members(0.0, 0)
    while at < pop.T:
        group.set_members(at, group.spec.members)
        group.set_state(at, at + 2, COMPLETING)
        group.start_tenure(at + 2)
        # long enough to read what arrived since the last run (at 50 × the production rate)
        run = cell.rng.uniform(10, 40) + period / 49 * 1.2
        group.end_tenure(at + 2 + run, commit=True)
        group.set_members(at + 2 + run, 0)
        at += period * cell.rng.uniform(0.95, 1.05)


def _standalone(pop: Population, cell: Cell, name: str) -> None:
    """``assign()`` with commits (Spark, Flink, Connect-like): Empty for ever, offsets moving;
    restarts (no commit on the way out) of ``y`` s."""
    spec = _spec(name, cell, commit_every_s=cell.x, standalone=True, members=0)
    group = pop.add(spec, (cell.x, cell.y))
    if cell.y:
        for at in _event_times(pop, cell):
            group.end_tenure(at, commit=False)
            group.start_tenure(at + cell.y)


def _transactional(pop: Population, cell: Cell, name: str) -> None:
    spec = _spec(name, cell, transaction_every_s=cell.x, rate=cell.y)
    group = pop.add(spec, (cell.x, cell.y))
    if cell.value("crash-restarts", (False, True)):
        for at in _event_times(pop, cell):
            group.crash(
                at,
                member=0,
                restart_s=cell.rng.uniform(5, 30),
                session_timeout_s=45,
                static=False,
                exit_commit=False,
                cooperative=False,
                rebalance_s=2.0,
            )


def _compacted_bootstrap(pop: Population, cell: Cell, name: str) -> None:
    """A new group reads a compacted topic from offset 0: a lag of millions of offsets that
    hold few records, read within ``x`` seconds."""
    rate = cell.y
    age_records = rate * 10 * 86400
    live = max(1.0, 3.0 * max(rate, 5.0) * cell.x)
    spec = _spec(
        name,
        cell,
        rate=rate,
        log_start_at_zero=True,
        starts_uncommitted=True,
        density=min(1.0, live / age_records),
        headroom=3.0,
        initial_lag_s=10 * 86400,
    )
    group = pop.add(spec, (cell.x, cell.y))
    appears = WARMUP_S + 120 + cell.rng.uniform(0, 600)
    group.absent(0, appears)
    group.end_tenure(0.0, commit=False)
    group.set_members(0.0, 0)
    group.set_members(appears, spec.members)
    group.set_state(appears, appears + 2, COMPLETING)
    group.start_tenure(appears + 2)


def _broker_restart(pop: Population, cell: Cell, name: str) -> None:
    """A broker restarts: ListOffsets fails for the partitions it led for ``x`` scans, and
    their consumers wait ``y`` s for the new leader."""
    spec = _spec(name, cell, partitions=cell.value("partitions", (3, 6, 12, 48), 1))
    group = pop.add(spec, (cell.x, cell.y))
    led = group.rows[::3]
    for at in _event_times(pop, cell):
        group.absent(at, at + cell.x * INTERVAL_S, led)
        group.pause(at, cell.y, led)


def _partitions_added(pop: Population, cell: Cell, name: str) -> None:
    """``y`` partitions are added; the consumers notice at their next metadata refresh
    (``x`` s later) and rebalance; until then they have no committed offset."""
    old = cell.value("partitions before", (1, 4, 16), 1)
    spec = _spec(name, cell, partitions=old + cell.y, members=min(old, 2))
    group = pop.add(spec, (cell.x, cell.y))
    new = group.rows[old:]
    added = WARMUP_S + 300 + cell.rng.uniform(0, 1800)
    group.absent(0, added, new)
    group.end_tenure(0.0, new, commit=False)
    group.recreate_topic(added, new)
    group.rebalance(
        added + cell.x,
        group.members,
        cell.rng.uniform(1, 5),
        cooperative=cell.value(PROTOCOL, ("eager", "cooperative"), 7) == "cooperative",
        moved=new,
    )


def _topic_recreated(pop: Population, cell: Cell, name: str) -> None:
    """The topic is deleted and created again ``x`` s later; the consumers resume from 0."""
    spec = _spec(name, cell, commit_every_s=cell.y)
    group = pop.add(spec, (cell.x, cell.y))
    at = WARMUP_S + 300 + cell.rng.uniform(0, 1800)
    group.end_tenure(at, commit=False)
    if cell.x:
        group.absent(at, at + cell.x)
    group.recreate_topic(at + cell.x)
    group.rebalance(at + cell.x + cell.rng.uniform(1, 30), group.members, 2.0, False)


def _scan_gap_steady(pop: Population, cell: Cell, name: str) -> None:
    spec = _spec(name, cell, commit_every_s=cell.y)
    pop.add(spec, (cell.x, cell.y))


def _outages(pop: Population, length_s: Any) -> np.ndarray:
    seconds = pop.scan_seconds()
    missed = np.zeros(seconds.size, dtype=bool)
    for begin in np.arange(WARMUP_S + 300, pop.T - 900, 1500):
        missed |= (seconds >= begin) & (seconds < begin + float(length_s))
    return missed


def _service_start(pop: Population, cell: Cell, name: str) -> None:
    """The service starts with no history: each group at a random point of its cadence."""
    spec = _spec(name, cell, commit_every_s=cell.x, rate=cell.y)
    pop.add(spec, (cell.x, cell.y))


# -- faults -----------------------------------------------------------------------------------


def _onset(pop: Population, cell: Cell) -> float:
    return float(WARMUP_S + 600 + cell.rng.uniform(0, 1200))


def _stalled(pop: Population, cell: Cell, name: str) -> None:
    spec = _spec(name, cell, commit_every_s=cell.x, rate=max(cell.y, 1.0))
    group = pop.add(spec, (cell.x, cell.y))
    onset = _onset(pop, cell)
    length = cell.rng.uniform(15, 30) * 60
    group.pause(onset, length)
    pop.label(group, "stalled", onset, onset + spec.commit_every_s, onset + length)


def _stopped(pop: Population, cell: Cell, name: str) -> None:
    spec = _spec(name, cell, commit_every_s=cell.x, rate=max(cell.y, 1.0))
    group = pop.add(spec, (cell.x, cell.y))
    onset = _onset(pop, cell)
    length = cell.rng.uniform(15, 30) * 60
    members = group.members
    group.end_tenure(onset, commit=True)  # stopped on purpose: close() commits, then leaves
    group.set_members(onset, 0)
    group.set_members(onset + length, members)
    group.set_state(onset + length, onset + length + 2, COMPLETING)
    group.start_tenure(onset + length + 2)
    # A graceful restart is over within a minute (a pod starting takes up to 45 s here).
    pop.label(group, "stopped", onset, onset + 60, onset + length)


def _consumers_gone(pop: Population, cell: Cell, name: str) -> None:
    spec = _spec(name, cell, commit_every_s=cell.x, rate=max(cell.y, 1.0))
    group = pop.add(spec, (cell.x, cell.y))
    onset = _onset(pop, cell)
    group.end_tenure(onset, commit=True)
    group.set_members(onset, 0)
    if cell.rep % 2:
        group.set_state(onset + 600, pop.T, DEAD)
    pop.label(group, "consumers_gone", onset, onset + 60, pop.T)


def _lagging(pop: Population, cell: Cell, name: str) -> None:
    spec = _spec(name, cell, commit_every_s=cell.y, rate=max(cell.pick(TRAFFIC, 3), 1.0))
    group = pop.add(spec, (cell.x, cell.y))
    onset = _onset(pop, cell)
    length = cell.rng.uniform(15, 30) * 60
    group.slow_down(onset, onset + length, cell.x)
    start = onset + max(60.0, spec.commit_every_s)
    pop.label(group, "lagging", onset, start, onset + length)


def _rewound(pop: Population, cell: Cell, name: str) -> None:
    spec = _spec(name, cell, commit_every_s=cell.y, rate=max(cell.pick(TRAFFIC, 3), 1.0))
    group = pop.add(spec, (cell.x, cell.y))
    onset = _onset(pop, cell)
    group.seek_back(onset, cell.x)
    group.set_members(onset, group.members)
    pop.label(group, "rewound", onset, onset, onset + 600)


def _stuck_rebalance(pop: Population, cell: Cell, name: str) -> None:
    spec = _spec(name, cell, commit_every_s=cell.y, rate=max(cell.pick(TRAFFIC, 3), 1.0))
    group = pop.add(spec, (cell.x, cell.y))
    onset = _onset(pop, cell)
    length = cell.x * 60.0
    group.end_tenure(onset, commit=True)
    t = onset
    while t < onset + length:  # a member that never finishes joining, over and over
        group.set_members(t, group.spec.members + int(cell.rng.integers(0, 2)))
        t += cell.rng.uniform(20, 60)
    group.set_state(onset, onset + length, PREPARING)
    group.set_members(onset + length, group.spec.members)
    group.start_tenure(onset + length + 2)
    pop.label(group, "stuck_rebalance", onset, onset + 60, onset + length)


def _rebalance_storm(pop: Population, cell: Cell, name: str) -> None:
    spec = _spec(
        name,
        cell,
        commit_every_s=cell.pick((1, 5, 10, 30), 4),
        rate=max(cell.pick(TRAFFIC, 3), 1.0),
        members=2,
        partitions=4,
    )
    group = pop.add(spec, (cell.x, cell.y))
    onset = _onset(pop, cell)
    length = cell.rng.uniform(15, 30) * 60
    t = onset
    while t < onset + length:
        members = int(np.clip(2 + cell.rng.integers(-1, 2), 1, 3))
        group.rebalance(t, members, cell.rng.uniform(1, 4), cooperative=False)
        t += cell.x * cell.rng.uniform(0.7, 1.3)
    group.slow_down(onset, onset + length, cell.y)
    pop.label(group, "rebalance_storm", onset, onset + 180, onset + length)


def _retention_loss(pop: Population, cell: Cell, name: str) -> None:
    spec = _spec(
        name,
        cell,
        commit_every_s=cell.pick((1, 5, 30, 60), 4),
        rate=max(cell.pick(TRAFFIC, 3), 1.0),
        retention_s=cell.y * 60.0,
    )
    group = pop.add(spec, (cell.x, cell.y))
    onset = _onset(pop, cell)
    group.slow_down(onset, pop.T, cell.x)
    start = onset + max(60.0, spec.commit_every_s)
    pop.label(group, "retention_loss", onset, start, pop.T)


def _frozen_at_start(pop: Population, cell: Cell, name: str) -> None:
    """Stalled before the service started: nothing moves from the first scan on."""
    spec = _spec(name, cell, commit_every_s=cell.x, rate=max(cell.y, 1.0), frozen_from_start=True)
    group = pop.add(spec, (cell.x, cell.y))
    group.end_tenure(0.0, commit=False)
    # A person wants to know once it has stood still longer than any benign grid's commit
    # interval: until then it may be a rare committer (up to 10 min, RARE_COMMIT_EVERY).
    pop.label(group, "frozen_at_start", 0.0, float(max(*COMMIT_EVERY, *RARE_COMMIT_EVERY)), pop.T)


# The other axes of a pattern (:attr:`Pattern.axes`), spread over its grid by :func:`design`.
SIZE: dict[str, Sequence[Any]] = {
    "partitions": PARTITIONS,
    "members": MEMBERS,
    "records/s": TRAFFIC,
}
PACE: dict[str, Sequence[Any]] = SIZE | {"commit interval (s)": COMMIT_EVERY}

BENIGN: tuple[Pattern, ...] = (
    Pattern(
        "crash-restart",
        "a member killed (OOM, node loss), back after a restart; by "
        "default nothing committed on the way out",
        "restart (s)",
        (5, 10, 20, 30, 45, 60, 90),
        "commit interval (s)",
        COMMIT_EVERY,
        _crash_restart,
        axes=SIZE
        | {
            EXIT_COMMIT: (False, True),
            PROTOCOL: EAGER_OR_COOPERATIVE,
            SESSION: (10, 30, 45),
        },
    ),
    Pattern(
        "dead-member",
        "a member's node lost: it stays listed until its session times "
        "out, then the others take its partitions",
        "session timeout (s)",
        (10, 20, 30, 45),
        "commit interval (s)",
        COMMIT_EVERY,
        _dead_member,
        axes={
            "partitions": (4, 16, 64),
            "members": (2, 3, 4),
            "records/s": TRAFFIC,
            PROTOCOL: EAGER_OR_COOPERATIVE,
        },
    ),
    Pattern(
        "static-membership",
        "group.instance.id: a restart within the session timeout, no rebalance "
        "(past it: the member expires and the group rebalances)",
        "restart (s)",
        (5, 10, 20, 30, 45, 60, 90),
        "commit interval (s)",
        COMMIT_EVERY,
        _static_membership,
        axes=SIZE | {EXIT_COMMIT: (False, True), SESSION: (45, 120, 300)},
    ),
    Pattern(
        "rolling-deploy",
        "each of N pods replaced in turn: eager, cooperative or static membership, surge or not",
        "pods",
        (1, 2, 4, 8, 16),
        "step (s)",
        (10, 20, 30, 45, 90),
        _rolling_deploy,
        axes={
            "partitions": PARTITIONS,
            "records/s": TRAFFIC,
            "commit interval (s)": COMMIT_EVERY,
            PROTOCOL: ("eager", "cooperative", "static"),
            "surge": (True, False),
        },
    ),
    Pattern(
        "pause",
        "back-pressure, a slow downstream call: members Stable, nothing read",
        "pause (s)",
        (5, 10, 20, 30, 45, 60, 90),
        "commit interval (s)",
        COMMIT_EVERY,
        _pause,
        axes=SIZE | {"paused": ("all", "one partition")},
    ),
    Pattern(
        "producer-burst",
        "producers send y times their rate for x s; the consumers fall behind and catch up",
        "burst (s)",
        (10, 30, 60, 120),
        "times the rate",
        (2, 5, 10),
        _producer_burst,
        axes=PACE | {"headroom": (3.0, 10.0)},
    ),
    Pattern(
        "rare-committer",
        "commits every few minutes",
        "commit interval (s)",
        RARE_COMMIT_EVERY,
        "records/s",
        TRAFFIC,
        _rare_committer,
        axes={"partitions": PARTITIONS, "members": MEMBERS},
    ),
    Pattern(
        "batch-job",
        "a job every few minutes to an hour: joins, reads, commits, leaves (Empty between runs)",
        "period (min)",
        BATCH_EVERY_MIN,
        "records/s",
        TRAFFIC,
        _batch_job,
        axes={"partitions": PARTITIONS, "members": MEMBERS},
        # The service has seen the job run: two whole periods and the one it started in.
        # Before that an hourly job's first gap is a stop of an hour nobody has seen it make
        # (the ``stopped`` fault: every member gone for 15-30 min), and pages.
        warmup_s=max(WARMUP_S, 3 * 60 * max(BATCH_EVERY_MIN)),
        duration_s=max(WARMUP_S, 3 * 60 * max(BATCH_EVERY_MIN)) + 9000 - WARMUP_S,
    ),
    Pattern(
        "standalone-assign",
        "assign() with commits: Empty with no members for good, offsets moving; restarts of y s",
        "commit interval (s)",
        COMMIT_EVERY,
        "restart (s)",
        (0, 10, 30, 60, 90),
        _standalone,
        axes={"partitions": PARTITIONS, "records/s": TRAFFIC},
    ),
    Pattern(
        "transactional",
        "read_committed on a transactional topic: the marker keeps "
        "the log end one past the last commit",
        "transaction every (s)",
        (1, 5, 30, 120),
        "records/s",
        (0.01, 0.1, 1.0, 100.0, 10_000.0),
        _transactional,
        axes={
            "partitions": PARTITIONS,
            "members": MEMBERS,
            "commit interval (s)": COMMIT_EVERY,
            "crash-restarts": (False, True),
        },
    ),
    Pattern(
        "compacted-bootstrap",
        "a new group reads a compacted topic from 0: millions of offsets, few records",
        "read in (s)",
        (5, 15, 30, 60),
        "records/s",
        (1.0, 10.0, 100.0),
        _compacted_bootstrap,
        axes={"partitions": PARTITIONS, "members": MEMBERS, "commit interval (s)": COMMIT_EVERY},
    ),
    Pattern(
        "broker-restart",
        "ListOffsets fails for a broker's partitions, their consumers wait for the new leader",
        "scans without the partitions",
        (1, 2, 3, 6),
        "consumers wait (s)",
        (5, 15, 30, 60),
        _broker_restart,
        axes=PACE | {"partitions": (3, 6, 12, 48)},
    ),
    Pattern(
        "partitions-added",
        "new partitions, no committed offset until the consumers notice them",
        "noticed after (s)",
        (0, 60, 300),
        "partitions added",
        (1, 4, 16),
        _partitions_added,
        axes={
            "partitions before": (1, 4, 16),
            "records/s": TRAFFIC,
            "commit interval (s)": COMMIT_EVERY,
            PROTOCOL: EAGER_OR_COOPERATIVE,
        },
    ),
    Pattern(
        "topic-recreated",
        "a topic deleted and created again: offsets from 0",
        "recreated after (s)",
        (0, 30, 120),
        "commit interval (s)",
        COMMIT_EVERY,
        _topic_recreated,
        axes=SIZE,
    ),
    Pattern(
        "scan-gaps",
        "the service's own scans missed",
        "outage (s)",
        (10, 30, 120, 300, 480),
        "commit interval (s)",
        COMMIT_EVERY,
        _scan_gap_steady,
        scan_gaps=_outages,
        axes=SIZE,
    ),
    Pattern(
        "service-start",
        "the service starts with no history (the first half hour counts)",
        "commit interval (s)",
        COMMIT_EVERY,
        "records/s",
        TRAFFIC,
        _service_start,
        warmup_s=0,
        duration_s=3600,
        axes={"partitions": PARTITIONS, "members": MEMBERS},
    ),
)

FAULTS: tuple[Pattern, ...] = (
    Pattern(
        "stalled",
        "members Stable, nothing read for 15-30 min",
        "commit interval (s)",
        COMMIT_EVERY,
        "records/s",
        (1.0, 10.0, 100.0, 10_000.0),
        _stalled,
        kind="stalled",
    ),
    Pattern(
        "stopped",
        "every member gone for 15-30 min, then back",
        "commit interval (s)",
        COMMIT_EVERY,
        "records/s",
        (1.0, 10.0, 100.0, 10_000.0),
        _stopped,
        kind="stopped",
    ),
    Pattern(
        "consumers-gone",
        "every member gone for good",
        "commit interval (s)",
        COMMIT_EVERY,
        "records/s",
        (1.0, 100.0),
        _consumers_gone,
        kind="consumers_gone",
    ),
    Pattern(
        "lagging",
        "reads at a share of the production rate",
        "share of production",
        (0.2, 0.4, 0.6, 0.7),
        "commit interval (s)",
        COMMIT_EVERY,
        _lagging,
        kind="lagging",
    ),
    Pattern(
        "rewound",
        "the offset reset back by x seconds of records",
        "records back (s)",
        (60, 600, 3600),
        "commit interval (s)",
        COMMIT_EVERY,
        _rewound,
        kind="rewound",
    ),
    Pattern(
        "stuck-rebalance",
        "PreparingRebalance for x minutes, members churning",
        "stuck for (min)",
        (10, 20, 30),
        "commit interval (s)",
        COMMIT_EVERY,
        _stuck_rebalance,
        kind="stuck_rebalance",
    ),
    Pattern(
        "rebalance-storm",
        "members kicked and rejoining every x s, reading at y of production in between",
        "change every (s)",
        (10, 20, 40),
        "share of production",
        (0.3, 0.6, 0.8),
        _rebalance_storm,
        kind="rebalance_storm",
    ),
    Pattern(
        "retention-loss",
        "reads at x of production on a topic keeping y minutes",
        "share of production",
        (0.0, 0.1, 0.25),
        "retention (min)",
        (20, 40),
        _retention_loss,
        kind="retention_loss",
        duration_s=10800,
    ),
    Pattern(
        "frozen-at-start",
        "stalled before the service started",
        "commit interval (s)",
        COMMIT_EVERY,
        "records/s",
        (1.0, 100.0),
        _frozen_at_start,
        kind="frozen_at_start",
        warmup_s=0,
        duration_s=3600,
    ),
)


# -- running and scoring ----------------------------------------------------------------------


@dataclass
class PatternResult:
    """One pattern's replay under every configuration."""

    pattern: Pattern
    cells: pd.DataFrame
    """Per configuration and cell: ``config, x, y, groups, pages, pages_per_group_day``
    (benign) or ``labels, caught, delay_p50_s, delay_p90_s`` (faults)."""
    alerts: pd.DataFrame
    labels: pd.DataFrame = field(default_factory=pd.DataFrame)
    """Faults: one row per label and configuration (``caught``, ``delay_s``)."""

    @property
    def groups(self) -> int:
        """Groups replayed (every configuration replays the same ones)."""
        first = self.cells[self.cells["config"] == self.cells["config"].iloc[0]]
        return int(first["groups"].sum())

    @property
    def group_days(self) -> float:
        """Group-days counted (after the warm-up)."""
        return self.groups * (self.pattern.duration_s - self.pattern.warmup_s) / 86400


Design = list[tuple[Any, Any, dict[str, Any]]]


def design(pattern: Pattern, replicas: int, seed: int = 1, full: bool = False) -> Design:
    """The groups of the pattern's grid as ``(x, y, values of its other axes)``.

    Without :attr:`Pattern.axes`: ``replicas`` per cell of ``x`` × ``y``, in grid order. With
    them, the axes' values are chosen greedily over ``replicas`` per cell so that every value
    of every axis, the ends of its range included, meets every value of every other axis, x
    and y included, in at least one group (pairwise coverage); cells get more replicas until it
    holds. ``full``: also every cell meets every value of every other axis.
    """
    xs, ys = list(pattern.x_values), list(pattern.y_values)
    cells = list(itertools.product(range(len(xs)), range(len(ys))))
    if not pattern.axes:
        return [(xs[i], ys[j], {}) for i, j in cells for _ in range(replicas)]
    names = list(pattern.axes)
    sizes = [len(xs), len(ys), *(len(pattern.axes[n]) for n in names)]
    combos = list(itertools.product(*(range(size) for size in sizes[2:])))
    wanted: set[tuple[int, ...]] = {
        (i, a, j, b)
        for i, j in itertools.combinations(range(len(sizes)), 2)
        for a in range(sizes[i])
        for b in range(sizes[j])
    }
    if full:
        wanted |= {(0, i, 1, j, k, v) for i, j in cells for k in range(2, len(sizes))
                   for v in range(sizes[k])}  # fmt: skip
    rng = np.random.default_rng([seed, len(pattern.name)])
    groups: list[tuple[int, ...]] = []

    def met(chosen: tuple[int, ...]) -> set[tuple[int, ...]]:
        pairs: set[tuple[int, ...]] = {
            (i, chosen[i], j, chosen[j]) for i, j in itertools.combinations(range(len(chosen)), 2)
        }
        if full:
            pairs |= {(0, chosen[0], 1, chosen[1], k, chosen[k]) for k in range(2, len(chosen))}
        return pairs & wanted

    def add(cell: tuple[int, int], fixed: dict[int, int]) -> None:
        best: list[tuple[int, ...]] = []
        most = -1
        for combo in combos:
            chosen = (*cell, *combo)
            if any(chosen[k] != v for k, v in fixed.items()):
                continue
            gain = len(met(chosen))
            if gain > most:
                best, most = [chosen], gain
            elif gain == most:
                best.append(chosen)
        chosen = best[int(rng.integers(len(best)))]
        wanted.difference_update(met(chosen))
        groups.append(chosen)

    for cell in cells:
        for _ in range(replicas):
            add(cell, {})
    while wanted:  # what the replicas left uncovered, each in the cell with fewest groups
        need = min(wanted)
        fixed = dict(zip(need[::2], need[1::2], strict=True))
        fits = [c for c in cells if fixed.get(0, c[0]) == c[0] and fixed.get(1, c[1]) == c[1]]
        count = {c: 0 for c in fits}
        for g in groups:
            if (g[0], g[1]) in count:
                count[(g[0], g[1])] += 1
        add(min(fits, key=lambda c: count[c]), fixed)
    groups.sort(key=lambda g: (g[0], g[1]))
    return [
        (xs[g[0]], ys[g[1]], {n: pattern.axes[n][v] for n, v in zip(names, g[2:], strict=True)})
        for g in groups
    ]


def build(
    pattern: Pattern,
    seed: int,
    replicas: int | None = None,
    x_value: Any = None,
    full: bool = False,
) -> Population:
    """The pattern's population (only column ``x_value`` when given): :func:`design`'s groups."""
    pop = Population(pattern.duration_s, seed, INTERVAL_S, cluster=pattern.name)
    rng = np.random.default_rng(seed + 1)
    reps: dict[tuple[Any, Any], int] = {}
    for x, y, params in design(pattern, replicas or pattern.replicas, seed, full):
        if x_value is not None and x != x_value:
            continue
        rep = reps[(x, y)] = reps.get((x, y), -1) + 1
        cell = Cell(x, y, rep, np.random.default_rng(rng.integers(1 << 62)), params)
        pattern.script(pop, cell, f"{pattern.name}-{x}-{y}-{rep}")
    if pattern.scan_gaps is not None and x_value is not None:
        pop.miss_scans(pattern.scan_gaps(pop, x_value))
    return pop


def run_pattern(
    pattern: Pattern,
    configs: dict[str, RulesConfig],
    seed: int = 1,
    replicas: int | None = None,
    full: bool = False,
) -> PatternResult:
    """Build, simulate, replay under every configuration, score per cell (``full``: the
    design where every cell meets every value of the other axes, :func:`design`)."""
    columns = [None] if pattern.scan_gaps is None else list(pattern.x_values)
    alerts, labels, groups = [], [], []
    for column in columns:
        pop = build(pattern, seed, replicas, column, full)
        samples = pop.samples(T0_MS)
        names = list(configs)
        grid = [GridConfig(i, {}, configs[n]) for i, n in enumerate(names)]
        count_from = T0_MS + pattern.warmup_s * 1000
        output = replay(
            samples, grid, ReplayOptions(scan_interval_s=INTERVAL_S, count_from_ms=count_from)
        )
        found = output.incidents.copy()
        found["config"] = [names[i] for i in found["config_id"]]
        found["cell"] = [pop.cells[g] for g in found["group"]]
        found["matched"] = False
        if pop.labels:
            scored, matched = _score_labels(pop, found, names)
            labels.append(scored)
            found["matched"] = matched
        alerts.append(found)
        groups += [(spec.name, pop.cells[spec.name]) for spec in pop.specs]
    counted_days = (pattern.duration_s - pattern.warmup_s) / 86400
    all_alerts = pd.concat(alerts, ignore_index=True)
    label_frame = pd.concat(labels, ignore_index=True) if labels else pd.DataFrame()
    cells = _cells(pattern, configs, all_alerts, groups, label_frame, counted_days)
    return PatternResult(pattern, cells, all_alerts, label_frame)


def _score_labels(
    pop: Population, alerts: pd.DataFrame, names: list[str]
) -> tuple[pd.DataFrame, np.ndarray]:
    truth = pd.DataFrame(
        {
            "label_id": np.arange(len(pop.labels)),
            "cluster": pop.cluster,
            "group": [lb.group for lb in pop.labels],
            "kind": [lb.kind for lb in pop.labels],
            "onset_ms": [T0_MS + round(lb.onset_s * 1000) for lb in pop.labels],
            "start_ms": [T0_MS + round(lb.start_s * 1000) for lb in pop.labels],
            "end_ms": [T0_MS + round(lb.end_s * 1000) for lb in pop.labels],
            "cell": [lb.cell for lb in pop.labels],
        }
    )
    alerts = alerts.reset_index(drop=True)
    matches = match_incidents(alerts, truth, round(INTERVAL_S * 1000))
    first = matches.first.set_index(["config_id", "label_id"])["first_ms"]
    rows = []
    for config_id, name in enumerate(names):
        for label in truth.itertuples():
            at = first.get((config_id, label.label_id))
            rows.append(
                {
                    "config": name,
                    "kind": label.kind,
                    "cell": label.cell,
                    "group": label.group,
                    "caught": at is not None,
                    "delay_s": np.nan if at is None else max(0, at - label.start_ms) / 1000,
                }
            )
    return pd.DataFrame(rows), matches.alert_matched


def _cells(
    pattern: Pattern,
    configs: dict[str, RulesConfig],
    alerts: pd.DataFrame,
    groups: list[tuple[str, tuple[Any, ...]]],
    labels: pd.DataFrame,
    counted_days: float,
) -> pd.DataFrame:
    per_cell: dict[tuple[Any, ...], int] = {}
    for _, cell in groups:
        per_cell[cell] = per_cell.get(cell, 0) + 1
    rows = []
    for name in configs:
        mine = alerts[alerts["config"] == name]
        for (x, y), n in per_cell.items():
            hit = mine[[c == (x, y) for c in mine["cell"]]] if len(mine) else mine
            row: dict[str, Any] = {
                "config": name,
                "x": x,
                "y": y,
                "groups": int(n),
                "pages": len(hit),
                "pages_per_group_day": len(hit) / (n * counted_days),
            }
            if pattern.kind and len(labels):
                in_cell = np.array([c == (x, y) for c in labels["cell"]])
                mine_l = labels[(labels["config"] == name) & in_cell]
                caught = mine_l[mine_l["caught"]]
                row |= {
                    "labels": len(mine_l),
                    "caught": len(caught),
                    "delay_p50_s": float(caught["delay_s"].median()) if len(caught) else np.nan,
                    "delay_p90_s": float(caught["delay_s"].quantile(0.9))
                    if len(caught)
                    else np.nan,
                }
            rows.append(row)
    return pd.DataFrame(rows)


def summarize_sweep(results: Sequence[PatternResult]) -> dict[str, dict[str, Any]]:
    """Per configuration: benign pages (total, cells with any, per pattern) and, over the
    faults, recall, delays, and false pages (benign pages plus unmatched fault-run pages)."""
    out: dict[str, dict[str, Any]] = {}
    configs = sorted({c for r in results for c in r.cells["config"].unique()})
    for name in configs:
        benign_pages, benign_cells, dirty_cells = 0, 0, 0
        per_pattern: dict[str, Any] = {}
        labels = []
        for result in results:
            cells = result.cells[result.cells["config"] == name]
            if result.pattern.benign:
                pages = int(cells["pages"].sum())
                benign_pages += pages
                benign_cells += len(cells)
                dirty = int((cells["pages"] > 0).sum())
                dirty_cells += dirty
                per_pattern[result.pattern.name] = {
                    "pages": pages,
                    "cells": len(cells),
                    "cells_with_pages": dirty,
                    "worst_pages_per_group_day": round(float(cells["pages_per_group_day"].max()), 2)
                    if len(cells)
                    else 0.0,
                }
            elif len(result.labels):
                labels.append(result.labels[result.labels["config"] == name])
        faults = pd.concat(labels, ignore_index=True) if labels else pd.DataFrame()
        caught = faults[faults["caught"]] if len(faults) else faults
        kinds = {}
        for kind, rows in faults.groupby("kind") if len(faults) else ():
            hit = rows[rows["caught"]]
            kinds[kind] = {
                "labels": len(rows),
                "recall": round(float(rows["caught"].mean()), 3),
                "delay_p50_s": _q(hit["delay_s"], 0.5),
                "delay_p90_s": _q(hit["delay_s"], 0.9),
                "worst_cell_p90_s": _worst_cell(hit),
            }
        out[name] = {
            "benign_pages": benign_pages,
            "benign_cells": benign_cells,
            "benign_cells_with_pages": dirty_cells,
            "patterns": per_pattern,
            "fault_labels": len(faults),
            "recall": round(float(faults["caught"].mean()), 4) if len(faults) else 1.0,
            "delay_p50_s": _q(caught["delay_s"], 0.5) if len(caught) else float("nan"),
            "delay_p90_s": _q(caught["delay_s"], 0.9) if len(caught) else float("nan"),
            "kinds": kinds,
        }
    return out


def _q(values: pd.Series, q: float) -> float:
    return round(float(values.quantile(q)), 1) if len(values) else float("nan")


def _worst_cell(caught: pd.DataFrame) -> float:
    if caught.empty:
        return float("nan")
    return round(
        float(caught.groupby(caught["cell"].astype(str))["delay_s"].quantile(0.9).max()), 1
    )


def false_pages(results: Sequence[PatternResult], config: str) -> pd.DataFrame:
    """The pages of ``config`` on benign cells, and on fault runs those that matched no
    label: what precision counts against it."""
    frames = []
    for result in results:
        mine = result.alerts[result.alerts["config"] == config]
        if result.pattern.benign:
            frames.append(mine.assign(pattern=result.pattern.name))
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()


def run_sweep(
    configs: dict[str, RulesConfig],
    patterns: Sequence[Pattern] = (*BENIGN, *FAULTS),
    seed: int = 1,
    replicas: int | None = None,
    progress: Callable[[str], None] | None = None,
    full: bool = False,
) -> list[PatternResult]:
    """Every pattern through :func:`run_pattern`; ``progress`` hears of each when done (its
    name, groups and seconds)."""
    results = []
    for pattern in patterns:
        began = time.perf_counter()
        results.append(run_pattern(pattern, configs, seed, replicas, full))
        if progress is not None:
            progress(
                f"{pattern.name}: {results[-1].groups} groups, {time.perf_counter() - began:.0f} s"
            )
    return results
