"""A synthetic production fleet: the benign patterns operators live with, and labelled incidents.

:func:`synthesize_fleet` writes a sample history (the layout of :mod:`notifier.history`, in
:data:`~notifier.types.SAMPLE_SCHEMA`) and beside it ``incidents.csv`` (what an alert should
catch, and from when) and ``patterns.csv`` (which benign patterns each group shows). It is the
benchmark for alert quality: a good rule set pages for every labelled incident soon after its
``start`` and stays quiet through everything else, so every benign pattern below is one that a
naive rule mistakes for a fault. The same seed always gives the same files.

Time is simulated per group in continuous time (seconds since the first scan) and observed at the
scans; everything between two scans is invisible, as in production.

Scans
-----
Each cluster is scanned every ``interval_s`` with a jitter under half a second, the clusters
staggered against each other. A cluster misses single scans now and then (1–3 in a row, about
three times an hour) and is unreachable once or twice in six hours for 2–8 minutes. A missed scan
writes no rows at all (values are never invented).

Producers (per topic)
---------------------
A group reads one topic of ``partitions`` partitions; about one benign group in five shares its
topic with one or two others (never an incident's topic). Rates are log-normal across topics
(median 10 records/s per partition, clipped to 0.2–2000), split unevenly over the partitions.

- ``steady``: a daily sinusoid (amplitude 20–70 %) times multiplicative per-scan noise
  (log-normal, sigma 0.05–0.3), Poisson arrivals.
- ``bursty``: the same plus spikes of ten times the rate for 45–75 s, 1–4 an hour.
- ``idle``: nothing but a small batch (1–50 records over the partitions) every 10–60 minutes.
- ``slow``: a record every 1–5 minutes per partition on average (Poisson).

Log-start offsets follow time retention (6 h–7 d, most longer than the run) and move only at the
broker's retention checks, every 5 minutes: the log start is the log end of ``retention`` before
the latest check. Idle and slow topics never roll their one active segment in a few hours, and
Kafka never deletes an active segment, so their log start stays put.

Consumers (per group)
---------------------
A consumer has a capacity in records/s per partition of ``headroom`` (1.5–5) times the topic's
mean rate at its daily peak, so a healthy consumer keeps up all day (idle and slow topics: at
least 5 records/s, a consumer reads a small batch at once). It reads ``min(backlog, capacity ×
elapsed)``, so a producer spike builds a backlog that drains over minutes once the spike is over:
lag grows for about the spike, then falls.

- ``streaming`` (60 %): reads continuously, its position a second or so behind the log end.
- ``batch`` (20 %): a job every 2–10 minutes that runs 5–30 s, reads everything there is (up to
  capacity × the period: a generous run time) and commits at its end; between runs nothing moves.
- ``steady_lag`` (20 %): streaming, but keeps a constant backlog of 1–20 s of records.

The committed offset is the position at the group's latest commit. Streaming and steady-lag
groups commit every 5 s (so every scan sees a new commit while data flows), 60 s or 300 s (shares
50/30/20), each commit time jittered by ±10 %; batch groups commit at the end of each run. The
first rows of the run already carry a committed offset: the simulation starts half an hour
earlier.

Membership (per group)
----------------------
``member_hash`` changes exactly when the member set changes (it mixes a per-group salt with the
count of member-set changes; 0 when there are no members).

- ``Stable`` most of the time, with 1 to min(partitions, 6) members.
- Quick restarts (about half the groups, 1–3 per six hours): every member leaves (committing its
  position on the way out), the group is ``Empty`` with 0 members for 10–50 s (1–5 scans),
  nothing is consumed, then a new member set joins, often caught once in
  ``CompletingRebalance``; it resumes from the committed offset and catches up within capacity.
- Rebalances (scale steps; 40 % of the groups, 1–2 per six hours): 1–2 scans in
  ``PreparingRebalance``/``CompletingRebalance``, the member count one up or down, consumption
  paused meanwhile.
- Rolling deploys (a third of the groups, about one per six hours): each member is replaced one
  by one, a member-set change every 15–30 s and at most 3 minutes in all; each change may be
  caught in a rebalancing state for one scan; consumption goes on at 60 % in between.
- New groups (3 %) appear partway through the run: no rows before, and no committed offset (null)
  until their first commit; they start at the log end.
- Deleted groups (2 %) go ``Empty`` for a scan or two and then have no rows any more.

None of these are incidents.

Incidents (``incidents.csv``)
-----------------------------
About 20 % of the groups get one incident each, the kinds dealt out evenly (with at least 40
groups every kind appears), on a group that is neither new nor deleted, whose topic is its own
and carries visible traffic (at least 1 record/s per partition, even at the daily low), starting
after the first 40 minutes. A fault group's benign membership events all happen at least 5
minutes before the fault, so none falls in its window. Each fault has an ``onset`` (when the
fault begins) and a label ``start`` = onset + the grace during which it cannot be told from the
benign pattern it resembles (the moment an on-call engineer would want to know). Durations are
10–60 min unless said.

- ``stopped``: all members leave (Empty, 0 members), committed frozen, production continues; then
  the group comes back and drains. start = onset + 60 s (a restart is over within a minute).
- ``consumers_gone``: the group goes Empty with 0 members and never comes back (until the end of
  the run; committed offsets remain, state may show ``Dead`` in the last scans).
  start = onset + 60 s.
- ``stalled``: members present and Stable, the position and committed offset frozen while data
  arrives; then it recovers and drains. start = the first commit the group misses: the group's
  last commit before onset + its commit cadence (batch consumers: last run end + its period).
- ``lagging``: consumption capacity drops to 20–70 % of the topic's current production rate
  (members Stable, commits continue at the cadence, lag and lag in seconds grow); then capacity
  is restored and it drains. start = onset + max(60 s, the group's commit cadence) (a spike lasts
  a minute; a group only shows its progress at commits).
- ``rewound``: the committed offset jumps back (to between log-start and half of the way to the
  current position; it comes with a restart: new member set), then re-reads within capacity until
  caught up. start = onset (a backwards commit is visible at once). end = when it has caught up
  (or ≥ 10 min).
- ``stuck_rebalance``: ``PreparingRebalance``/``CompletingRebalance`` every scan with churning
  members, nothing consumed, for 10–40 min; then Stable and drains. start = onset + 60 s.
- ``rebalance_storm``: the member set changes every 10–40 s for 15–60 min (states mostly Stable,
  sometimes caught rebalancing), consumption continues at 30–80 % of production in between.
  start = onset + 3 min (a rolling deploy is over within 3 minutes).
- ``retention_loss``: consumption slows to 0–25 % on a topic with short retention (set the
  topic's retention so that log-start overtakes the committed offset 10–40 min after onset); the
  fault lasts until a few scans after committed < log-start, then the consumer resets to the
  earliest offset and recovers. start = onset + max(60 s, the cadence) (labelled from the slowdown
  that leads to it: a warning before records are deleted is an early catch).

``end`` = the last scan in which the fault acts (the drain afterwards is unlabelled). The label
``start`` and ``end`` are real scan times of the group's cluster (scans that wrote rows): start is
the first such scan at or after the computed instant, end the last one before the fault stops
acting. Details the definitions leave open: a rewound group's topic keeps 6–8 h and its headroom
is 3–5, so that re-reading a few hours of records ends within the run more often than not (when
it does not, the label lasts to the last scan); a retention-loss topic is steady (a spike on so
short a retention would lose records without a fault) and its retention stays above twice the
group's commit cadence, so nothing is lost before the onset; once the log start has passed its
committed offset, its fetches are out of range and it reads and commits nothing until it resets;
a consumer reset to the earliest
offset just before a retention check may lose records once more before it pulls ahead, and the
label then lasts until that has shown too.

Columns: ``cluster, group, start, end, kind, onset`` (ISO 8601 UTC with milliseconds and ``Z``),
readable by :func:`notifier.history.load_incidents` and ``notifier backtest --incidents``.

Patterns (``patterns.csv``)
---------------------------
One row per group: ``cluster, group, topic, producer, consumer, commit_every_s`` (a batch
group's period), ``headroom, restarts, rebalances, deploys`` (how many of each), ``appears_at``
and ``deleted_at`` (empty for groups that live through the run) and ``incident`` (its kind, or
empty).
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import cast

import numpy as np
import pandas as pd
from numpy.typing import NDArray

from notifier.history import to_ms
from notifier.synth.base import (
    DEFAULT_START,
    INCIDENTS_FILE,
    SynthModel,
    group_names,
    iso_ms,
    scan_count,
    scan_times,
    topic_names,
    write_history,
)
from notifier.synth.basic import SynthResult
from notifier.types import GROUP_STATE_CODE

FLEET_INCIDENT_KINDS = (
    "stopped",
    "consumers_gone",
    "stalled",
    "lagging",
    "rewound",
    "stuck_rebalance",
    "rebalance_storm",
    "retention_loss",
)
PRODUCER_KINDS = ("steady", "bursty", "idle", "slow")
CONSUMER_MODES = ("streaming", "batch", "steady_lag")
PATTERNS_FILE = "patterns.csv"
INCIDENT_COLUMNS = ("cluster", "group", "start", "end", "kind", "onset")
PATTERN_COLUMNS = (
    "cluster",
    "group",
    "topic",
    "producer",
    "consumer",
    "commit_every_s",
    "headroom",
    "restarts",
    "rebalances",
    "deploys",
    "appears_at",
    "deleted_at",
    "incident",
)

INCIDENT_SHARE = 0.2
FIRST_ONSET_S = 40 * 60.0
"""No fault starts in the first 40 minutes: rules need a baseline."""
MIN_RUN_FOR_INCIDENTS_S = 60 * 60.0
"""Shorter runs get no incidents: a fault needs 40 minutes before it and room for itself."""
PRE_RUN_S = 1800.0
"""Consumers are simulated from half an hour before the first scan, so that the first rows
already show commits made earlier."""
RETENTION_CHECK_S = 300.0
CAPACITY_FLOOR = 5.0
BENIGN_CLEARANCE_S = 300.0
"""A fault group's benign membership events end at least this long before the onset."""

_STEADY, _BURSTY, _IDLE, _SLOW = range(4)
_STREAMING, _BATCH, _STEADY_LAG = range(3)
_STABLE = GROUP_STATE_CODE["Stable"]
_PREPARING = GROUP_STATE_CODE["PreparingRebalance"]
_COMPLETING = GROUP_STATE_CODE["CompletingRebalance"]
_EMPTY = GROUP_STATE_CODE["Empty"]
_DEAD = GROUP_STATE_CODE["Dead"]
_FOREVER = math.inf


@dataclass(frozen=True, slots=True, kw_only=True)
class FleetResult(SynthResult):
    """What :func:`synthesize_fleet` wrote: the counts of a basic run, and the patterns."""

    patterns_path: Path
    patterns_by_kind: dict[str, int] = field(default_factory=dict)
    """Groups showing each pattern: producer kinds, consumer modes, commit cadences
    (``commit_5s`` …, streaming and steady-lag groups), ``restarts``, ``rebalances``,
    ``deploys``, ``new``, ``deleted``, ``shared_topic``."""


def synthesize_fleet(
    out: Path,
    groups: int = 150,
    partitions: int = 4,
    hours: float = 6.0,
    seed: int = 0,
    interval_s: float = 10.0,
    clusters: int = 3,
    start: datetime | None = None,
) -> FleetResult:
    """Write a fleet history into ``out`` plus ``incidents.csv`` and ``patterns.csv``.

    ``groups`` is the total over all clusters (dealt out evenly), each reading one topic of
    ``partitions`` partitions; scans are ``interval_s`` apart for ``hours`` from ``start``
    (default :data:`~notifier.synth.base.DEFAULT_START`). The same arguments always give
    the same files. ``out`` must not exist or be empty.
    """
    began = time.perf_counter()
    out = Path(out)
    n_scans = scan_count(out, groups, partitions, hours, interval_s, clusters)
    fleet = _Fleet(
        rng=np.random.default_rng(seed),
        n_groups=groups,
        n_partitions=partitions,
        n_scans=n_scans,
        n_clusters=clusters,
        interval_s=float(interval_s),
        t0_ms=to_ms(start or DEFAULT_START),
    )
    fleet.build()
    out.mkdir(parents=True, exist_ok=True)
    rows, files = write_history(out, f"fleet{seed}", fleet.arrays())
    incidents_path = out / INCIDENTS_FILE
    fleet.incidents_frame().to_csv(incidents_path, index=False)
    patterns_path = out / PATTERNS_FILE
    patterns = fleet.patterns_frame()
    patterns.to_csv(patterns_path, index=False)

    by_kind = {kind: 0 for kind in FLEET_INCIDENT_KINDS}
    for plan in fleet.plans.values():
        by_kind[plan.kind] += 1
    return FleetResult(
        out=out,
        incidents_path=incidents_path,
        patterns_path=patterns_path,
        incidents=len(fleet.plans),
        incidents_by_kind=by_kind,
        patterns_by_kind=_pattern_counts(patterns),
        **fleet.result_counts(rows, files, began),
    )


def _pattern_counts(patterns: pd.DataFrame) -> dict[str, int]:
    counts = {name: int((patterns["producer"] == name).sum()) for name in PRODUCER_KINDS}
    counts |= {name: int((patterns["consumer"] == name).sum()) for name in CONSUMER_MODES}
    cadenced = patterns[patterns["consumer"] != "batch"]["commit_every_s"]
    counts |= {f"commit_{s}s": int((cadenced == s).sum()) for s in (5, 60, 300)}
    for name in ("restarts", "rebalances", "deploys"):
        counts[name] = int((patterns[name] > 0).sum())
    counts["new"] = int((patterns["appears_at"] != "").sum())
    counts["deleted"] = int((patterns["deleted_at"] != "").sum())
    counts["shared_topic"] = int(patterns["topic"].duplicated(keep=False).sum())
    return counts


def _stochastic_round(rng: np.random.Generator, x: float) -> int:
    """``x`` rounded down or up at random, ``x`` on average (counts scaled to the run length)."""
    return int(x + rng.random())


def _ms(x: float) -> float:
    """A time on the millisecond grid the files have."""
    return round(x, 3)


def _inside(t: np.ndarray, windows: list[tuple[float, float]]) -> np.ndarray:
    """Where ``t`` falls into any ``[begin, end)`` window."""
    hit = np.zeros(t.shape, dtype=bool)
    for begin, end in windows:
        hit |= (t >= begin) & (t < end)
    return hit


def _advance(p0: np.ndarray, target: np.ndarray, capacity: np.ndarray) -> NDArray[np.float64]:
    """Positions after each step of ``p[j] = min(target[j], p[j-1] + capacity[j])``.

    The recursion unrolls to ``C[j] + min(p0, min over i <= j of (target[i] - C[i]))`` with
    ``C`` the cumulative capacity, which numpy evaluates without a Python loop.
    """
    cumulative = np.cumsum(capacity, axis=1)
    floor = np.minimum.accumulate(target - cumulative, axis=1)
    # numpy types cumsum over an axis as Any; the positions are float64.
    return cast("NDArray[np.float64]", np.floor(cumulative + np.minimum(p0[:, None], floor)))


@dataclass(slots=True)
class _Plan:
    """One incident: what, when, and its label once simulated (times in s since the first
    scan; ``until`` is when the fault stops acting)."""

    group: int
    kind: str
    onset: float
    until: float
    share: float = 0.0
    depth: float = 0.0
    start: float = 0.0
    first: int = -1
    last: int = -1


@dataclass(slots=True)
class _Timeline:
    """A group's membership and consumption events in continuous time."""

    base_members: int
    changes: list[tuple[float, int]] = field(default_factory=list)
    """(time, members): a new member set from then on."""
    states: list[tuple[float, float, int]] = field(default_factory=list)
    """[begin, end) windows of a non-Stable state; later windows win."""
    pauses: list[tuple[float, float]] = field(default_factory=list)
    """Nothing consumed and nothing committed."""
    no_commits: list[tuple[float, float]] = field(default_factory=list)
    capacity: list[tuple[float, float, float, bool]] = field(default_factory=list)
    """(begin, end, factor, of_production): capacity is ``factor`` × the current production
    rate, or × the normal capacity."""
    leave_commits: list[float] = field(default_factory=list)
    resets: list[tuple[float, str]] = field(default_factory=list)
    """(time, "rewind" | "earliest"): the position is set, and committed at once."""
    busy: list[tuple[float, float]] = field(default_factory=list)
    restarts: int = 0
    rebalances: int = 0
    deploys: int = 0


@dataclass(slots=True)
class _Schedule:
    """A group's planned commit (or batch run) times, drawn once so that a second simulation
    of the same group sees the same randomness."""

    commits: np.ndarray
    behind: np.ndarray
    """Per planned commit, how far behind the log end the target is (s)."""
    run_starts: np.ndarray
    run_ends: np.ndarray


@dataclass(slots=True)
class _Consumption:
    x: np.ndarray
    position: np.ndarray
    target: np.ndarray
    commit_times: np.ndarray
    commit_values: np.ndarray
    planned: np.ndarray
    """The planned commit times, dropped ones included."""


class _Fleet(SynthModel):
    """All state of one fleet run; ``build`` fills it, ``arrays`` hands it to the writer.

    Rows: per group ``(G, S)``, per group-partition ``(G·P, S)`` (row ``g·P + p``), per
    topic-partition ``(T·P, S)``; column ``s`` is scan ``s`` of the row's cluster.
    """

    plans: dict[int, _Plan]
    retention_loss_s: dict[int, float]
    """Retention of each retention-loss group's topic, chosen with its fault."""
    timelines: list[_Timeline]

    # -- build -------------------------------------------------------------------------------

    def build(self) -> None:
        self.plans, self.retention_loss_s, self.timelines = {}, {}, []
        self._scans()
        self._groups()
        self._choose_incidents()
        self._topics()
        self._production()
        self._log_starts()
        self._simulate()

    def _scans(self) -> None:
        """Scan times, single missed scans and outages."""
        rng, C, S = self.rng, self.C, self.S
        self.scan_ts = scan_times(rng, C, S, self.interval_s, self.t0_ms)
        self.t = (self.scan_ts - self.t0_ms) / 1000.0
        run_s = S * self.interval_s
        ok = np.ones((C, S), dtype=bool)
        for c in range(C):
            for first in rng.integers(0, S, rng.poisson(3.0 * run_s / 3600)):
                ok[c, first : first + int(rng.integers(1, 4))] = False
            outages = int(rng.integers(1, 3)) if run_s >= 2 * 3600 else int(rng.integers(0, 2))
            for _ in range(outages):
                begin = rng.uniform(0.1, 0.9) * run_s
                ok[c] &= ~_inside(self.t[c], [(begin, begin + rng.uniform(120.0, 480.0))])
        self.scan_ok = ok

    def _groups(self) -> None:
        """Clusters, names, consumer modes and cadences, new and deleted groups."""
        rng, G, C, P = self.rng, self.G, self.C, self.P
        per_cluster = np.full(C, G // C) + (np.arange(C) < G % C)
        self.cluster_of_group = np.repeat(np.arange(C, dtype=np.int32), per_cluster)
        self.cluster_names = [f"prod-{c + 1}" for c in range(C)]
        self.group_names = group_names(rng, G)
        self.mode = rng.choice(3, G, p=[0.6, 0.2, 0.2])
        self.cadence = rng.choice(np.array([5.0, 60.0, 300.0]), G, p=[0.5, 0.3, 0.2])
        self.headroom = rng.uniform(1.5, 5.0, G)
        self.backlog_s = rng.uniform(1.0, 20.0, G)
        self.period = rng.uniform(120.0, 600.0, G)
        self.run_s = rng.uniform(5.0, 30.0, G)
        self.max_members = max(1, min(P, 6))
        self.base_members = rng.integers(1, self.max_members + 1, G)
        self.group_salt = rng.integers(0, 1 << 62, G, dtype=np.int64)
        self.appears = np.full(G, np.nan)
        self.deleted = np.full(G, np.nan)
        if G >= 20:
            n_new, n_deleted = max(1, round(0.03 * G)), max(1, round(0.02 * G))
            chosen = rng.permutation(G)[: n_new + n_deleted]
            run_s = self.S * self.interval_s
            self.appears[chosen[:n_new]] = np.round(rng.uniform(0.1, 0.7, n_new) * run_s, 3)
            self.deleted[chosen[n_new:]] = np.round(rng.uniform(0.3, 0.9, n_deleted) * run_s, 3)

    def _cadence_of(self, g: int) -> float:
        """How often the group shows its progress: its commit cadence or its batch period."""
        return float(self.period[g] if self.mode[g] == _BATCH else self.cadence[g])

    def _choose_incidents(self) -> None:
        rng, G = self.rng, self.G
        if self.S * self.interval_s < MIN_RUN_FOR_INCIDENTS_S:
            return
        run_end = float(self.t[:, -1].min())
        eligible = np.flatnonzero(np.isnan(self.appears) & np.isnan(self.deleted))
        count = min(eligible.size, round(INCIDENT_SHARE * G))
        chosen = rng.choice(eligible, count, replace=False)
        order = rng.permutation(len(FLEET_INCIDENT_KINDS))
        for i, g in enumerate(chosen):
            kind = FLEET_INCIDENT_KINDS[order[i % len(order)]]
            self.plans[int(g)] = self._plan(int(g), kind, run_end)

    @staticmethod
    def _grace(kind: str, cadence: float) -> float:
        """How long after the onset a fault looks like the benign pattern it resembles (for a
        stall, at most: its label starts at the first missed commit)."""
        return {
            "stopped": 60.0,
            "consumers_gone": 60.0,
            "stalled": 1.1 * cadence,
            "lagging": max(60.0, cadence),
            "rewound": 0.0,
            "stuck_rebalance": 60.0,
            "rebalance_storm": 180.0,
            "retention_loss": max(60.0, cadence),
        }[kind]

    def _plan(self, g: int, kind: str, run_end: float) -> _Plan:
        """Onset and planned length of one fault, and its kind's parameters."""
        rng = self.rng
        minute = 60.0
        cadence = self._cadence_of(g)
        grace = self._grace(kind, cadence)
        low, high = {"stuck_rebalance": (10, 40), "rebalance_storm": (15, 60)}.get(kind, (10, 60))
        # A label covers at least ten minutes after its start, longer than any outage.
        length = max(rng.uniform(low, high) * minute, grace + 10 * minute)
        room = run_end - 5 * minute - FIRST_ONSET_S
        plan = _Plan(g, kind, onset=0.0, until=_FOREVER)
        if kind == "consumers_gone":
            length = min(length, run_end - FIRST_ONSET_S)
            plan.onset = _ms(run_end - length)
            return plan
        if kind == "rewound":
            plan.depth = rng.uniform(0.25, 0.5)
            self.headroom[g] = rng.uniform(3.0, 5.0)
            length = 20 * minute  # at least this much room to re-read
        elif kind == "retention_loss":
            plan.share = rng.uniform(0.0, 0.25)
            # Overtaken 10–35 min after the onset (sooner in a short run, so that it shows).
            crossing = rng.uniform(10, max(10, min(35, (room - 5 * minute) / minute))) * minute
            # Retention well above the group's normal lag, or records are lost before the onset.
            needed = 2 * (cadence + (self.run_s[g] if self.mode[g] == _BATCH else 0.0)) + 180
            self.retention_loss_s[g] = max((1 - plan.share) * crossing, needed)
            length = self.retention_loss_s[g] / (1 - plan.share) + 2 * RETENTION_CHECK_S
        elif kind in ("lagging", "rebalance_storm"):
            plan.share = rng.uniform(0.2, 0.7) if kind == "lagging" else rng.uniform(0.3, 0.8)
        length = min(length, room)  # a short run gets shorter faults, over before it ends
        plan.onset = _ms(FIRST_ONSET_S + rng.random() * (room - length))
        if kind not in ("rewound", "retention_loss"):
            plan.until = _ms(plan.onset + length)
        return plan

    def _topics(self) -> None:
        """Which topic each group reads (benign groups sometimes share), producers, rates."""
        rng, P = self.rng, self.P
        topic_of_group = np.empty(self.G, dtype=np.int64)
        topic_cluster: list[int] = []
        readers: list[int] = []
        for c in range(self.C):
            shareable: list[int] = []
            for g in np.flatnonzero(self.cluster_of_group == c):
                if g not in self.plans and shareable and rng.random() < 0.2:
                    k = shareable[int(rng.integers(0, len(shareable)))]
                else:
                    k = len(topic_cluster)
                    topic_cluster.append(c)
                    readers.append(0)
                    if g not in self.plans:
                        shareable.append(k)
                topic_of_group[g] = k
                readers[k] += 1
                if readers[k] >= 3 and k in shareable:
                    shareable.remove(k)
        T = self.n_topics = len(topic_cluster)
        self.topic_of_group = topic_of_group
        self.topic_cluster = np.array(topic_cluster, dtype=np.int64)
        self.topic_names = topic_names(rng, T)
        self.tp_of_gp = (topic_of_group[:, None] * P + np.arange(P)[None, :]).ravel()

        producer = rng.choice(4, T, p=[0.55, 0.25, 0.1, 0.1])
        rate = np.exp(rng.normal(np.log(10.0), 1.2, T)).clip(0.2, 2000.0)
        weights = np.exp(rng.normal(0.0, 0.35, (T, P)))
        weights /= weights.mean(axis=1, keepdims=True)
        retention_s = rng.choice(
            np.array([6.0, 12.0, 24.0, 72.0, 168.0]) * 3600, T, p=[0.1, 0.15, 0.3, 0.2, 0.25]
        )
        self.amplitude = rng.uniform(0.2, 0.7, T)
        self.peak_h = rng.normal(14.0, 3.0, T)
        self.noise_sigma = rng.uniform(0.05, 0.3, T)
        self.spikes_per_hour = rng.uniform(1.0, 4.0, T)
        self.idle_every_s = rng.uniform(600.0, 3600.0, T)
        self.slow_every_s = rng.uniform(60.0, 300.0, T)
        for faulty, plan in self.plans.items():
            own = int(topic_of_group[faulty])
            if producer[own] in (_IDLE, _SLOW) or plan.kind == "retention_loss":
                producer[own] = _STEADY
            # At least 1 record/s on every partition even at the daily low, or the fault would
            # not show.
            low = 1.0 - self.amplitude[own]
            rate[own] = max(rate[own], 1.0 / (weights[own].min() * low))
            if plan.kind == "rewound":
                retention_s[own] = rng.uniform(6.0, 8.0) * 3600
            elif plan.kind == "retention_loss":
                retention_s[own] = self.retention_loss_s[faulty]
        self.producer = producer
        self.retention_s = retention_s
        self.rate = rate[:, None] * weights  # (T, P) records/s at the daily mean
        mean = self.rate.copy()
        mean[producer == _IDLE] = (25.5 / self.idle_every_s[producer == _IDLE] / P)[:, None]
        mean[producer == _SLOW] = (1.0 / self.slow_every_s[producer == _SLOW])[:, None]
        self.mean_rate = mean
        peak = np.where((producer == _IDLE) | (producer == _SLOW), 0.0, self.amplitude)
        self.peak_rate = mean * (1.0 + peak)[:, None]
        self.capacity_floor = np.where((producer == _IDLE) | (producer == _SLOW), CAPACITY_FLOOR, 0)

    def _diurnal(self, k: int, x: np.ndarray) -> NDArray[np.float64]:
        hour = ((self.t0_ms / 1000.0 + x) / 3600.0) % 24.0
        diurnal = 1.0 + self.amplitude[k] * np.cos(2 * np.pi * (hour - self.peak_h[k]) / 24.0)
        return cast("NDArray[np.float64]", diurnal)  # numpy types a scalar index as Any

    def _production_rate(self, k: int, x: np.ndarray) -> NDArray[np.float64]:
        """(P, n) records/s the topic's producers send at ``x`` (spikes and noise aside)."""
        if self.producer[k] in (_IDLE, _SLOW):
            return np.broadcast_to(self.mean_rate[k][:, None], (self.P, x.size))
        return cast("NDArray[np.float64]", self.rate[k][:, None] * self._diurnal(k, x)[None, :])

    def _production(self) -> None:
        """Log-end offsets per topic-partition at its cluster's scans."""
        rng, P, S = self.rng, self.P, self.S
        self.leo = np.empty((self.n_topics * P, S), dtype=np.int64)
        run_s = S * self.interval_s
        for k in range(self.n_topics):
            tt = self.t[self.topic_cluster[k]]
            dt = np.diff(tt)
            kind = self.producer[k]
            if kind in (_STEADY, _BURSTY):
                mid = (tt[:-1] + tt[1:]) / 2
                noise = np.exp(rng.normal(0.0, 1.0, S - 1) * self.noise_sigma[k])
                expected = self._production_rate(k, mid) * (noise * dt)[None, :]
                if kind == _BURSTY:
                    for _ in range(rng.poisson(self.spikes_per_hour[k] * run_s / 3600)):
                        begin = rng.uniform(0.0, run_s)
                        end = begin + rng.uniform(45.0, 75.0)
                        overlap = np.clip(
                            np.minimum(tt[1:], end) - np.maximum(tt[:-1], begin), 0, None
                        )
                        expected += 9.0 * self._production_rate(k, mid) * overlap[None, :]
                arrivals = rng.poisson(expected)
            elif kind == _IDLE:
                arrivals = np.zeros((P, S - 1), dtype=np.int64)
                every = self.idle_every_s[k]
                at = rng.uniform(0.0, every)
                while at < tt[-1]:
                    scan = int(np.searchsorted(tt, at))
                    split = rng.multinomial(int(rng.integers(1, 51)), np.full(P, 1.0 / P))
                    if 1 <= scan < S:
                        arrivals[:, scan - 1] += split
                    at += every * rng.uniform(0.5, 1.5)
            else:
                arrivals = rng.poisson(self.mean_rate[k][:, None] * dt[None, :])
            age_s = self.retention_s[k] + rng.uniform(0.0, 30 * 86400)
            leo0 = (self.mean_rate[k] * age_s).astype(np.int64) + rng.integers(0, 1000, P)
            rows = slice(k * P, (k + 1) * P)
            self.leo[rows, 0] = leo0
            self.leo[rows, 1:] = leo0[:, None] + np.cumsum(arrivals, axis=1)

    def _leo_at(self, k: int, x: np.ndarray) -> np.ndarray:
        """(P, n) log-end offsets of topic ``k`` at times ``x``: interpolated between scans,
        extrapolated at the mean rate before the first one."""
        tt = self.t[self.topic_cluster[k]]
        rows = self.leo[k * self.P : (k + 1) * self.P]
        clipped = np.clip(x, tt[0], tt[-1])
        inside = np.stack([np.interp(clipped, tt, row) for row in rows])
        before = rows[:, :1] - self.mean_rate[k][:, None] * (tt[0] - x)[None, :]
        values = np.where(x[None, :] < tt[0], before, inside)
        return np.maximum(np.floor(values), 0).astype(np.int64)

    def _log_starts(self) -> None:
        """Time retention applied at the retention checks (every 5 minutes)."""
        rng, P = self.rng, self.P
        self.log_start = np.empty_like(self.leo)
        for k in range(self.n_topics):
            tt = self.t[self.topic_cluster[k]]
            rows = slice(k * P, (k + 1) * P)
            if self.producer[k] in (_IDLE, _SLOW):
                # The active segment started before anything the consumers did in the run.
                rolled = self._leo_at(k, np.array([-PRE_RUN_S]))[:, 0]
                self.log_start[rows] = np.maximum(rolled - rng.integers(0, 5000, P), 0)[:, None]
                continue
            phase = rng.uniform(0.0, RETENTION_CHECK_S)
            checks = phase + RETENTION_CHECK_S * np.floor((tt - phase) / RETENTION_CHECK_S)
            self.log_start[rows] = self._leo_at(k, checks - self.retention_s[k])

    # -- groups ------------------------------------------------------------------------------

    def _simulate(self) -> None:
        G, P, S = self.G, self.P, self.S
        self.committed = np.zeros((G * P, S), dtype=np.int64)
        self.uncommitted = np.zeros((G * P, S), dtype=bool)
        self.state = np.full((G, S), _STABLE, dtype=np.int8)
        self.members = np.zeros((G, S), dtype=np.int32)
        self.generation = np.zeros((G, S), dtype=np.int32)
        self.alive = np.ones((G, S), dtype=bool)
        for g in range(G):
            timeline = self._timeline(g)
            self.timelines.append(timeline)
            schedule = self._schedule(g)
            plan = self.plans.get(g)
            if plan is not None and plan.kind == "retention_loss":
                self._retention_loss(plan, timeline, schedule)
            consumption = self._consume(g, timeline, schedule)
            self._observe(g, timeline, consumption)
            if plan is not None:
                self._label(plan, consumption)
        self.committed_null = self.uncommitted if self.uncommitted.any() else None
        self.present = self.alive

    def _timeline(self, g: int) -> _Timeline:
        """The group's benign membership events, then its fault's, then its deletion."""
        rng, iv = self.rng, self.interval_s
        c = int(self.cluster_of_group[g])
        run_end = float(self.t[c, -1])
        timeline = _Timeline(base_members=int(self.base_members[g]))
        lo, hi = 120.0, run_end - 120.0
        if not np.isnan(self.appears[g]):
            appears = float(self.appears[g])
            timeline.changes.append((appears, timeline.base_members))
            if rng.random() < 0.5:
                self._joining(timeline, appears)
            lo = appears + 180.0
        if not np.isnan(self.deleted[g]):
            hi = float(self.deleted[g]) - 180.0
        plan = self.plans.get(g)
        if plan is not None:
            hi = min(hi, plan.onset - BENIGN_CLEARANCE_S)

        hours = run_end / 3600.0
        events: list[tuple[float, str, float]] = []
        wanted: list[tuple[str, float]] = []
        if rng.random() < 0.5:
            wanted += [("restart", 0.0)] * _stochastic_round(rng, rng.uniform(1, 3) * hours / 6)
        if rng.random() < 0.4:
            wanted += [("rebalance", 0.0)] * _stochastic_round(rng, rng.uniform(1, 2) * hours / 6)
        if rng.random() < 1 / 3:
            wanted += [("deploy", 0.0)] * _stochastic_round(rng, hours / 6)
        for kind, _ in wanted:
            length = {"restart": 50.0 + iv, "rebalance": 2 * iv, "deploy": 180.0}[kind]
            at = self._place(timeline, lo, hi, length)
            if at is not None:
                events.append((at, kind, length))
        members = timeline.base_members
        for at, kind, _ in sorted(events):
            if kind == "restart":
                self._restart(timeline, at, members)
                timeline.restarts += 1
            elif kind == "rebalance":
                members = self._rebalance(timeline, at, members)
                timeline.rebalances += 1
            else:
                self._deploy(timeline, at, members)
                timeline.deploys += 1

        if plan is not None:
            self._fault(plan, timeline, members, c)
        if not np.isnan(self.deleted[g]):
            leave = _ms(float(self.deleted[g]) - rng.uniform(1.1, 2.5) * iv)
            timeline.changes.append((leave, 0))
            timeline.states.append((leave, _FOREVER, _EMPTY))
            timeline.pauses.append((leave, _FOREVER))
            timeline.leave_commits.append(leave)
        return timeline

    def _place(self, timeline: _Timeline, lo: float, hi: float, length: float) -> float | None:
        """A start for an event of ``length`` in [lo, hi] clear of the others by a minute."""
        if hi - lo < length:
            return None
        for _ in range(20):
            at = _ms(self.rng.uniform(lo, hi - length))
            if all(at + length + 60 < b or at > e + 60 for b, e in timeline.busy):
                timeline.busy.append((at, at + length))
                return at
        return None

    def _joining(self, timeline: _Timeline, at: float) -> None:
        """A new member set caught once (or not at all) in ``CompletingRebalance``."""
        end = _ms(at + self.rng.uniform(0.5, 0.99) * self.interval_s)
        timeline.states.append((at, end, _COMPLETING))
        timeline.pauses.append((at, end))

    def _restart(self, timeline: _Timeline, at: float, members: int) -> None:
        back = _ms(at + self.rng.uniform(10.0, 50.0))
        timeline.changes += [(at, 0), (back, members)]
        timeline.states.append((at, back, _EMPTY))
        timeline.pauses.append((at, back))
        timeline.leave_commits.append(at)
        if self.rng.random() < 0.7:
            self._joining(timeline, back)

    def _rebalance(self, timeline: _Timeline, at: float, members: int) -> int:
        rng = self.rng
        members = int(np.clip(members + rng.choice([-1, 1]), 1, self.max_members))
        length = rng.uniform(1.05, 1.95) * self.interval_s
        middle, end = _ms(at + length / 2), _ms(at + length)
        timeline.changes.append((at, members))
        timeline.states += [(at, middle, _PREPARING), (middle, end, _COMPLETING)]
        timeline.pauses.append((at, end))
        return members

    def _deploy(self, timeline: _Timeline, at: float, members: int) -> None:
        rng = self.rng
        steps = max(2, members)
        times = at + np.concatenate([[0.0], np.cumsum(rng.uniform(15.0, 30.0, steps - 1))])
        for change in np.round(times, 3):
            timeline.changes.append((float(change), members))
            self._maybe_caught(timeline, float(change))
        timeline.capacity.append((at, _ms(float(times[-1]) + 8.0), 0.6, False))

    def _maybe_caught(self, timeline: _Timeline, at: float) -> None:
        """A short rebalance (1–8 s) after a member-set change, caught by a scan or not."""
        rng = self.rng
        if rng.random() < 0.5:
            return
        end = _ms(at + rng.uniform(1.0, 8.0))
        timeline.states.append((at, end, _PREPARING if rng.random() < 0.6 else _COMPLETING))
        timeline.pauses.append((at, end))

    def _fault(self, plan: _Plan, timeline: _Timeline, members: int, c: int) -> None:
        rng, tt = self.rng, self.t[c]
        a, b = plan.onset, plan.until
        kind = plan.kind
        if kind in ("stopped", "consumers_gone"):
            timeline.changes.append((a, 0))
            timeline.states.append((a, b, _EMPTY))
            timeline.pauses.append((a, b))
            timeline.leave_commits.append(a)
            if kind == "stopped":
                timeline.changes.append((b, members))
                if rng.random() < 0.7:
                    self._joining(timeline, b)
            elif rng.random() < 0.5:
                last_scans = int(rng.integers(1, 3))
                timeline.states.append((float(tt[-last_scans]) - 0.001, _FOREVER, _DEAD))
        elif kind == "stalled":
            timeline.capacity.append((a, b, 0.0, False))
            timeline.no_commits.append((a, b))
        elif kind == "lagging":
            timeline.capacity.append((a, b, plan.share, True))
        elif kind == "rewound":
            timeline.changes.append((a, members))
            timeline.resets.append((a, "rewind"))
            if rng.random() < 0.5:
                self._joining(timeline, a)
        elif kind == "stuck_rebalance":
            timeline.states.append((a, b, _PREPARING))
            timeline.pauses.append((a, b))
            timeline.changes.append((a, int(np.clip(members - 1, 1, self.max_members))))
            current = timeline.changes[-1][1]
            for scan_t in tt[(tt > a + 0.01) & (tt < b)]:
                if rng.random() < 0.3:
                    timeline.states.append(
                        (float(scan_t) - 0.01, float(scan_t) + 0.01, _COMPLETING)
                    )
                count = int(np.clip(members + rng.integers(-1, 2), 1, max(members, self.P)))
                if count != current or rng.random() < 0.4:
                    timeline.changes.append((float(scan_t) - 0.01, count))
                    current = count
            timeline.changes.append((b, members))
        elif kind == "rebalance_storm":
            timeline.capacity.append((a, b, plan.share, True))
            at = a
            while at < b:
                count = int(np.clip(members + rng.integers(-1, 2), 1, self.max_members))
                timeline.changes.append((at, count))
                self._maybe_caught(timeline, at)
                at = _ms(at + rng.uniform(10.0, 40.0))
            timeline.changes.append((b, members))
        elif kind == "retention_loss":
            pass  # its slowdown needs the simulation: see _retention_loss

    def _schedule(self, g: int) -> _Schedule:
        """Planned commit times (batch: run starts and ends) from before the run to its end."""
        rng = self.rng
        begin = self._begin(g)
        run_end = float(self.t[int(self.cluster_of_group[g]), -1])
        every = self._cadence_of(g)
        count = int((run_end - begin) / (0.9 * every)) + 2
        jitter = 0.05 if self.mode[g] == _BATCH else 0.1
        gaps = every * rng.uniform(1 - jitter, 1 + jitter, count)
        times = begin + rng.uniform(0.0, every) + np.concatenate([[0.0], np.cumsum(gaps[:-1])])
        times = np.round(times[times <= run_end], 3)
        if self.mode[g] == _BATCH:
            ends = np.round(times + self.run_s[g] * rng.uniform(0.8, 1.2, times.size), 3)
            keep = ends <= run_end
            return _Schedule(ends[keep], np.zeros(int(keep.sum())), times[keep], ends[keep])
        if self.mode[g] == _STEADY_LAG:
            behind = self.backlog_s[g] * rng.uniform(0.9, 1.1, times.size)
        else:
            behind = rng.uniform(0.0, 1.5, times.size)
        return _Schedule(times, behind, np.zeros(0), np.zeros(0))

    def _begin(self, g: int) -> float:
        return -PRE_RUN_S if np.isnan(self.appears[g]) else float(self.appears[g])

    def _consume(self, g: int, timeline: _Timeline, schedule: _Schedule) -> _Consumption:
        """Positions on a grid of scans, planned commits and event edges, then the commits."""
        P, k = self.P, int(self.topic_of_group[g])
        tt = self.t[int(self.cluster_of_group[g])]
        begin = self._begin(g)
        finish = float(tt[-1])
        mode = self.mode[g]
        edges = [
            edge
            for window in (*timeline.pauses, *timeline.no_commits, *timeline.capacity)
            for edge in window[:2]
        ]
        edges += [at for at, _ in timeline.resets] + timeline.leave_commits
        edges += [begin, *schedule.run_starts.tolist()]
        extra = np.array(edges, dtype=np.float64)
        pre = np.arange(begin, tt[0], self.interval_s) if begin < tt[0] else np.zeros(0)
        mean_behind = {_STREAMING: 0.75, _BATCH: 0.0, _STEADY_LAG: float(self.backlog_s[g])}
        times = np.concatenate([schedule.commits, tt, pre, extra])
        behind = np.concatenate(
            [schedule.behind, np.full(times.size - schedule.commits.size, mean_behind[mode])]
        )
        keep = (times >= begin) & (times <= finish)
        x, first = np.unique(times[keep], return_index=True)
        behind = behind[keep][first]

        mid = (x[:-1] + x[1:]) / 2
        active = ~_inside(mid, timeline.pauses)
        capacity = np.maximum(self.headroom[g] * self.peak_rate[k], self.capacity_floor[k])
        rate = np.repeat(capacity[:, None], mid.size, axis=1)
        for lo, hi, factor, of_production in timeline.capacity:
            within = (mid >= lo) & (mid < hi)
            if within.any():
                basis = (
                    self._production_rate(k, mid[within]) if of_production else capacity[:, None]
                )
                rate[:, within] = factor * basis
        if mode == _BATCH:
            run = np.searchsorted(schedule.run_starts, mid, side="right") - 1
            running = (run >= 0) & (mid < schedule.run_ends[np.maximum(run, 0)])
            active &= running
            # A run may read up to capacity × the whole period in its few seconds.
            rate *= self.period[g] / self.run_s[g]
        steps = rate * (np.diff(x) * active)[None, :]

        target = np.maximum.accumulate(self._leo_at(k, x - behind), axis=1)
        position = np.empty((P, x.size), dtype=np.int64)
        position[:, 0] = target[:, 0]
        done = 0
        for at, how in sorted(timeline.resets):
            r = int(np.searchsorted(x, at))
            self._segment(position, target, steps, done, r)
            log_start = self._log_start_at(k, tt, at)
            reached = position[:, r]
            if how == "rewind":
                plan = self.plans[g]
                position[:, r] = log_start + (plan.depth * (reached - log_start)).astype(np.int64)
            else:
                position[:, r] = np.maximum(reached, log_start)
            done = r
        self._segment(position, target, steps, done, x.size - 1)

        planned = schedule.commits[(schedule.commits >= begin) & (schedule.commits <= finish)]
        allowed = planned[~_inside(planned, timeline.pauses + timeline.no_commits)]
        forced = [at for at in timeline.leave_commits if begin <= at <= finish]
        forced += [at for at, _ in timeline.resets if begin <= at <= finish]
        commit_times = np.sort(np.concatenate([allowed, np.array(forced, dtype=np.float64)]))
        values = position[:, np.searchsorted(x, commit_times)]
        return _Consumption(x, position, target, commit_times, values, planned)

    @staticmethod
    def _segment(
        position: np.ndarray, target: np.ndarray, steps: np.ndarray, done: int, last: int
    ) -> None:
        """Fill ``position[:, done+1 .. last]`` from ``position[:, done]``, never backwards."""
        if last <= done:
            return
        span = slice(done + 1, last + 1)
        ahead = _advance(position[:, done].astype(np.float64), target[:, span], steps[:, done:last])
        position[:, span] = ahead.astype(np.int64)
        np.maximum.accumulate(
            position[:, done : last + 1], axis=1, out=position[:, done : last + 1]
        )

    def _log_start_at(self, k: int, tt: np.ndarray, at: float) -> np.ndarray:
        scan = max(0, int(np.searchsorted(tt, at, side="right")) - 1)
        return self.log_start[k * self.P : (k + 1) * self.P, scan]

    def _retention_loss(self, plan: _Plan, timeline: _Timeline, schedule: _Schedule) -> None:
        """Slow down from the onset, find the scan where the log start has overtaken the
        committed offset, and reset to the earliest offset a few scans later."""
        g, c = plan.group, int(self.cluster_of_group[plan.group])
        tt, ok = self.t[c], self.scan_ok[c]
        timeline.capacity.append((plan.onset, _FOREVER, plan.share, True))
        trial = self._consume(g, timeline, schedule)
        committed = self._committed_at(trial, tt)
        k = int(self.topic_of_group[g])
        log_start = self.log_start[k * self.P : (k + 1) * self.P]
        lost = ok & (tt >= plan.onset) & (committed < log_start).any(axis=0)
        timeline.capacity.pop()
        if not lost.any():
            timeline.capacity.append((plan.onset, _FOREVER, plan.share, True))
            return
        later = np.flatnonzero(ok & (np.arange(self.S) >= int(np.argmax(lost))))
        last = int(later[min(later.size - 1, int(self.rng.integers(2, 6)))])
        if last + 1 >= self.S:
            timeline.capacity.append((plan.onset, _FOREVER, plan.share, True))
            return
        reset = _ms(tt[last] + self.rng.uniform(0.1, 0.9) * (tt[last + 1] - tt[last]))
        plan.until = reset
        timeline.capacity.append((plan.onset, reset, plan.share, True))
        # Its next fetch is out of range: it reads and commits nothing until it resets.
        failing = float(tt[int(np.argmax(lost))])
        timeline.capacity.append((failing, reset, 0.0, False))
        timeline.no_commits.append((failing, reset))
        timeline.resets.append((reset, "earliest"))

    @staticmethod
    def _committed_at(consumption: _Consumption, tt: np.ndarray) -> np.ndarray:
        """(P, S) committed offsets at the scans (0 before the first commit)."""
        latest = np.searchsorted(consumption.commit_times, tt, side="right") - 1
        values = consumption.commit_values[:, np.maximum(latest, 0)]
        return np.where(latest[None, :] >= 0, values, 0)

    def _observe(self, g: int, timeline: _Timeline, consumption: _Consumption) -> None:
        """What the scans see of the group."""
        P = self.P
        tt = self.t[int(self.cluster_of_group[g])]
        rows = slice(g * P, (g + 1) * P)
        latest = np.searchsorted(consumption.commit_times, tt, side="right") - 1
        self.committed[rows] = self._committed_at(consumption, tt)
        self.uncommitted[rows] = (latest < 0)[None, :]
        present = np.ones(self.S, dtype=bool)
        if not np.isnan(self.appears[g]):
            present &= tt >= self.appears[g]
        if not np.isnan(self.deleted[g]):
            present &= tt < self.deleted[g]
        self.alive[g] = present

        order = sorted(range(len(timeline.changes)), key=lambda i: timeline.changes[i][0])
        change_t = np.array([timeline.changes[i][0] for i in order], dtype=np.float64)
        change_m = np.array([timeline.changes[i][1] for i in order], dtype=np.int32)
        # Before the first change the group has its initial member set (generation 0).
        change_m = np.concatenate([[timeline.base_members], change_m]).astype(np.int32)
        generation = np.searchsorted(change_t, tt, side="right")
        self.members[g] = change_m[generation]
        self.generation[g] = generation
        for begin, end, code in timeline.states:
            self.state[g, (tt >= begin) & (tt < end)] = code

    def _label(self, plan: _Plan, consumption: _Consumption) -> None:
        """The label's start and end scans (scans that wrote rows)."""
        g, kind = plan.group, plan.kind
        c = int(self.cluster_of_group[g])
        tt, ok = self.t[c], self.scan_ok[c] & self.alive[g]
        cadence = self._cadence_of(g)
        if kind == "stalled":
            # The first planned commit that does not happen.
            missed = consumption.planned[consumption.planned >= plan.onset]
            plan.start = float(missed[0]) if missed.size else plan.onset + cadence
        else:
            plan.start = plan.onset + self._grace(kind, cadence)
        if kind == "rewound":
            plan.until = max(self._caught_up(plan, consumption), plan.onset + 600.0)
        acting = ok & (tt < plan.until)
        if kind == "retention_loss":
            # A consumer reset to the earliest offset just before a retention check can lose
            # records once more before it pulls ahead: that is still this fault.
            k, rows = int(self.topic_of_group[g]), slice(g * self.P, (g + 1) * self.P)
            log_start = self.log_start[k * self.P : (k + 1) * self.P]
            acting |= ok & (tt >= plan.onset) & (self.committed[rows] < log_start).any(axis=0)
        first = np.flatnonzero(ok & (tt >= plan.start - 1e-6))
        last = np.flatnonzero(acting)
        plan.first = int(first[0]) if first.size else int(np.flatnonzero(ok)[-1])
        plan.last = max(plan.first, int(last[-1])) if last.size else plan.first

    @staticmethod
    def _caught_up(plan: _Plan, consumption: _Consumption) -> float:
        """The first commit after a rewind at which every partition has caught up again."""
        x, commits = consumption.x, consumption.commit_times
        after = commits[commits > plan.onset]
        at = np.searchsorted(x, after)
        caught = (consumption.position[:, at] >= consumption.target[:, at]).all(axis=0)
        return float(after[int(np.argmax(caught))]) if caught.any() else _FOREVER

    # -- output ------------------------------------------------------------------------------

    def _iso(self, seconds: float) -> str:
        return iso_ms(self.t0_ms + round(seconds * 1000))

    def incidents_frame(self) -> pd.DataFrame:
        rows = [
            self.label(plan.group, plan.first, plan.last, plan.kind)
            | {"onset": self._iso(plan.onset)}
            for plan in self.plans.values()
        ]
        frame = pd.DataFrame(rows, columns=list(INCIDENT_COLUMNS))
        return frame.sort_values(["start", "group"], kind="stable").reset_index(drop=True)

    def patterns_frame(self) -> pd.DataFrame:
        rows = []
        for g in range(self.G):
            k = int(self.topic_of_group[g])
            timeline = self.timelines[g]
            plan = self.plans.get(g)
            commit_every = self.period[g] if self.mode[g] == _BATCH else self.cadence[g]
            rows.append(
                {
                    "cluster": self.cluster_names[int(self.cluster_of_group[g])],
                    "group": self.group_names[g],
                    "topic": self.topic_names[k],
                    "producer": PRODUCER_KINDS[int(self.producer[k])],
                    "consumer": CONSUMER_MODES[int(self.mode[g])],
                    "commit_every_s": round(float(commit_every)),
                    "headroom": round(float(self.headroom[g]), 2),
                    "restarts": timeline.restarts,
                    "rebalances": timeline.rebalances,
                    "deploys": timeline.deploys,
                    "appears_at": "" if np.isnan(self.appears[g]) else self._iso(self.appears[g]),
                    "deleted_at": "" if np.isnan(self.deleted[g]) else self._iso(self.deleted[g]),
                    "incident": "" if plan is None else plan.kind,
                }
            )
        return pd.DataFrame(rows, columns=list(PATTERN_COLUMNS))
