"""Synthetic sample histories with labelled incidents, for demos, benchmarks and backtests.

The generator writes the same Hive-partitioned Parquet layout as :class:`~notifier.history.
HistoryWriter` (see :mod:`notifier.history`) and an ``incidents.csv`` with the injected faults.
Everything is generated as whole time series per topic-partition and group-partition with numpy
(no Python loop per sample), which keeps ten million samples well under a minute.

What the data looks like, and why:

- Production per topic follows a daily sinusoid with multiplicative noise, split unevenly over the
  partitions; some topics are idle (flat log-end offset) and some are slow (a record now and
  then), the cases where naive stop detection raises false alarms.
- Log-start offsets follow time retention and only move at the broker's retention checks
  (every 5 minutes), so they step forward like the real thing.
- Consumers read a little behind the log end; some groups are bursty (they catch up in batches
  every 30 s to 5 min). Groups commit every scan, every minute or every five minutes, and the
  committed offset only changes when they commit.
- Groups are mostly ``Stable``; now and then a rebalance (a deploy, a scale step) changes the
  member set and with it ``member_hash``; a scan may catch the group mid-rebalance.
- Whole scans are missing for a cluster now and then (a failed scan writes nothing).
- A few groups are healthy but new: no committed offset before their first commit (null lag).

Injected incidents (one per chosen group, each kind on distinct groups, on a topic of its own so
no other group is affected), labelled with the first and last scan in which the fault acts; the
group recovers afterwards (its backlog drains over a while, unlabelled):

- ``lagging``: consumption at 20–60 % of production; lag grows while offsets still move.
- ``stalled``: members present, committed offset frozen while data arrives.
- ``stopped``: the group goes ``Empty`` (no members); the committed offset stays where it was.
- ``rewound``: the committed offset jumps back, then re-reads fast until it has caught up.
- ``stuck_rebalance``: ``PreparingRebalance``/``CompletingRebalance`` with churning members;
  nothing is consumed.
- ``retention_loss``: consumption (nearly) stops until retention deletes past the committed
  offset (committed < log-start); the label ends when the consumer resets to the earliest offset.
"""

from __future__ import annotations

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
    last_true_index,
    scan_count,
    scan_times,
    topic_names,
    write_history,
)
from notifier.types import GROUP_STATE_CODE

INCIDENT_KINDS = (
    "lagging",
    "stalled",
    "stopped",
    "rewound",
    "stuck_rebalance",
    "retention_loss",
)
MIN_SCANS_FOR_INCIDENTS = 60
"""Shorter histories get no incidents: a fault needs a baseline before it and room after it."""

INCIDENT_SHARE = 0.15

_STABLE = GROUP_STATE_CODE["Stable"]
_PREPARING = GROUP_STATE_CODE["PreparingRebalance"]
_COMPLETING = GROUP_STATE_CODE["CompletingRebalance"]
_EMPTY = GROUP_STATE_CODE["Empty"]


@dataclass(frozen=True, slots=True)
class SynthResult:
    """What :func:`synthesize` wrote."""

    out: Path
    incidents_path: Path
    rows: int
    clusters: int
    groups: int
    partitions: int
    topics: int
    scans: int
    """Scheduled scans per cluster."""
    missed_scans: int
    """(cluster, scan) pairs that wrote nothing."""
    incidents: int
    incidents_by_kind: dict[str, int] = field(default_factory=dict)
    files: int = 0
    start: datetime = DEFAULT_START
    end: datetime = DEFAULT_START
    seconds: float = 0.0


@dataclass(slots=True)
class _Incident:
    group: int
    kind: str
    first: int  # first scan of the fault (a commit scan of the group)
    last: int  # last scan of the fault, inclusive
    length: int


def synthesize(
    out: Path,
    groups: int,
    partitions: int,
    hours: float,
    seed: int,
    interval_s: float = 10,
    start: datetime | None = None,
    clusters: int = 1,
) -> SynthResult:
    """Write a synthetic history into ``out`` plus ``out/incidents.csv``; return the counts.

    ``groups`` is the total over all clusters (dealt out evenly); every group consumes one topic
    of ``partitions`` partitions, so the history has ``groups × partitions`` rows per
    successful scan. Scans are ``interval_s`` apart for ``hours`` from ``start`` (default
    :data:`DEFAULT_START`). The same arguments always give the same data. ``out`` must not
    exist or be empty.
    """
    began = time.perf_counter()
    out = Path(out)
    n_scans = scan_count(out, groups, partitions, hours, interval_s, clusters)

    start = start or DEFAULT_START
    model = _Model(
        rng=np.random.default_rng(seed),
        n_groups=groups,
        n_partitions=partitions,
        n_scans=n_scans,
        n_clusters=clusters,
        interval_s=float(interval_s),
        t0_ms=to_ms(start),
    )
    model.build()
    out.mkdir(parents=True, exist_ok=True)
    rows, files = write_history(out, f"synth{seed}", model.arrays())
    incidents_path = out / INCIDENTS_FILE
    model.incidents_frame().to_csv(incidents_path, index=False)

    counts = {kind: 0 for kind in INCIDENT_KINDS}
    for incident in model.incidents:
        counts[incident.kind] += 1
    return SynthResult(
        out=out,
        incidents_path=incidents_path,
        incidents=len(model.incidents),
        incidents_by_kind=counts,
        **model.result_counts(rows, files, began),
    )


class _Model(SynthModel):
    """All arrays of one synthetic run; ``build`` fills them, ``arrays`` hands them out.

    Shapes: per group ``(G, S)``, per topic-partition ``(T·P, S)``, per group-partition
    ``(G·P, S)``; row ``g·P + p`` is partition ``p`` of group ``g`` (topics likewise).
    """

    incidents: list[_Incident]

    # -- build -------------------------------------------------------------------------------

    def build(self) -> None:
        self.incidents = []
        self._layout()
        self._scans()
        self._commit_schedule()
        self._choose_incidents()
        self._topics()
        self._log_offsets()
        self._consumers()
        self._membership()
        for incident in self.incidents:
            self._inject(incident)
        self._commits()

    def _layout(self) -> None:
        """Clusters, groups and which topic each group reads."""
        rng, G, C = self.rng, self.G, self.C
        per_cluster = np.full(C, G // C) + (np.arange(C) < G % C)
        self.cluster_of_group = np.repeat(np.arange(C, dtype=np.int32), per_cluster)
        self.cluster_names = [f"prod-{c + 1}" for c in range(C)]
        self.group_names = group_names(rng, G)

    def _scans(self) -> None:
        """Scan times per cluster (staggered, jittered, in order) and the failed scans."""
        rng, C, S = self.rng, self.C, self.S
        self.scan_ts = scan_times(rng, C, S, self.interval_s, self.t0_ms)
        ok = np.ones((C, S), dtype=bool)
        for c in range(C):
            episodes = rng.poisson(S * 0.002)
            if S >= 20:
                episodes = max(1, episodes)  # every realistic history has a gap somewhere
            for first in rng.integers(1, S, episodes):
                ok[c, first : first + min(6, int(rng.geometric(0.5)))] = False
        self.scan_ok = ok

    def _commit_schedule(self) -> None:
        """Per group a commit cadence (every scan, every minute, every five minutes), and for
        bursty groups how often they read (every 30 s to 5 min)."""
        rng, G = self.rng, self.G
        cadence_s = rng.choice(np.array([self.interval_s, 60.0, 300.0]), G, p=[0.5, 0.3, 0.2])
        self.cadence = self._scans_of(cadence_s)
        self.commits = self._every(self.cadence, rng.integers(0, 1 << 30, G) % self.cadence)
        burst_s = rng.uniform(30.0, 300.0, G)
        self.burst_every = np.where(rng.random(G) < 0.2, self._scans_of(burst_s), 0)
        self.burst_phase = rng.integers(0, 1 << 30, G) % np.maximum(self.burst_every, 1)

    def _scans_of(self, seconds: np.ndarray) -> np.ndarray:
        return np.maximum(1, np.round(seconds / self.interval_s)).astype(np.int64)

    def _every(self, period: np.ndarray, phase: np.ndarray) -> NDArray[np.bool_]:
        """``(rows, S)`` mask of the scans where ``(scan + phase) % period == 0``."""
        scans = np.arange(self.S)
        every = (scans[None, :] + phase[:, None]) % np.maximum(period, 1)[:, None] == 0
        return cast("NDArray[np.bool_]", every)  # numpy types == as Any

    def _choose_incidents(self) -> None:
        rng, G, S = self.rng, self.G, self.S
        if S < MIN_SCANS_FOR_INCIDENTS or G < 2:
            return
        count = min(G, max(round(INCIDENT_SHARE * G), min(len(INCIDENT_KINDS), G // 2)))
        chosen = rng.choice(G, count, replace=False)
        kinds = [INCIDENT_KINDS[i] for i in rng.permutation(len(INCIDENT_KINDS))]
        kinds += [INCIDENT_KINDS[i] for i in rng.integers(0, len(INCIDENT_KINDS), count)]
        max_length = max(6, int(4 * 3600 / self.interval_s))
        for g, kind in zip(chosen, kinds[:count], strict=True):
            # A fault must outlast a few commits and bursts, or it looks like normal behaviour.
            shortest = max(6, 4 * int(max(self.cadence[g], self.burst_every[g])))
            if shortest > 0.3 * S:
                # Too short a run for this group's habits: make it commit and read every scan.
                self.cadence[g], self.burst_every[g] = 1, 0
                self.commits[g] = True
                shortest = 6
            length = round(rng.uniform(0.06, 0.2) * S)
            length = int(np.clip(length, shortest, max(shortest, max_length)))
            latest = S - length - max(3, length // 2)
            # Faults start on one of the group's commit scans, so the first committed value in
            # the window is already the faulty one (a stall is constant from its first scan).
            starts = np.flatnonzero(self.commits[g, S // 10 : latest + 1]) + S // 10
            first = int(rng.choice(starts)) if starts.size else int(rng.integers(1, latest + 1))
            last = min(S - 2, first + length - 1)
            self.incidents.append(_Incident(int(g), kind, first, last, last - first + 1))

    def _topics(self) -> None:
        """Topic per group (healthy groups may share one), rates, retention."""
        rng, G, P = self.rng, self.G, self.P
        incident_groups = {i.group: i for i in self.incidents}
        topic_of_group = np.empty(G, dtype=np.int64)
        topic_cluster: list[int] = []
        for c in range(self.C):
            members = np.flatnonzero(self.cluster_of_group == c)
            healthy = np.array([g for g in members if g not in incident_groups], dtype=np.int64)
            if healthy.size:
                # Fan-out: about a third of the healthy groups read a topic another group reads.
                fresh = rng.random(healthy.size) < 0.7
                fresh[0] = True
                numbered = np.cumsum(fresh) - 1
                reuse = (rng.random(healthy.size) * (numbered + 1)).astype(np.int64)
                local = np.where(fresh, numbered, np.minimum(reuse, numbered))
                topic_of_group[healthy] = len(topic_cluster) + local
                topic_cluster += [c] * int(fresh.sum())
            for g in members:
                if g in incident_groups:
                    topic_of_group[g] = len(topic_cluster)
                    topic_cluster.append(c)
        T = self.n_topics = len(topic_cluster)
        self.topic_of_group = topic_of_group
        self.topic_names = topic_names(rng, T)

        # Records per second per partition: log-normal across topics, a few idle or slow ones.
        profile = rng.choice(3, T, p=[0.8, 0.1, 0.1])  # 0 normal, 1 slow, 2 idle
        rate = np.exp(rng.normal(np.log(8.0), 1.2, T)).clip(0.2, 2000.0)
        rate = np.where(profile == 1, rng.uniform(0.002, 0.05, T), rate)
        rate = np.where(profile == 2, 0.0, rate)
        retention_s = rng.choice(
            np.array([6.0, 24.0, 72.0, 168.0]) * 3600, T, p=[0.2, 0.3, 0.2, 0.3]
        )
        check_s = np.full(T, 300.0)
        for incident in self.incidents:
            t = topic_of_group[incident.group]
            # A faulty group's topic carries visible traffic, or the fault would not show.
            rate[t] = rng.uniform(5.0, 100.0)
            profile[t] = 0
            if incident.kind == "retention_loss":
                # Short retention so the log start overtakes the frozen consumer in the window.
                retention_s[t] = max(2, incident.length // 4) * self.interval_s
                check_s[t] = max(1, incident.length // 12) * self.interval_s
        weights = np.exp(rng.normal(0.0, 0.35, (T, P)))
        weights /= weights.mean(axis=1, keepdims=True)
        self.tp_rate = (rate[:, None] * weights).ravel()  # mean records/s per topic-partition
        self.topic_idle = profile == 2
        self.diurnal_amplitude = rng.uniform(0.2, 0.7, T)
        self.diurnal_peak_h = rng.normal(14.0, 3.0, T)
        self.noise_sigma = rng.uniform(0.05, 0.3, T)
        self.retention_scans = np.maximum(1, np.round(retention_s / self.interval_s)).astype(int)
        self.check_scans = np.maximum(1, np.round(check_s / self.interval_s)).astype(np.int64)

    def _log_offsets(self) -> None:
        """Log-end offsets (cumulative Poisson arrivals) and retention-driven log starts."""
        rng, P, S, T = self.rng, self.P, self.S, self.n_topics
        scans = np.arange(S)
        hour = ((self.t0_ms / 1000 + scans * self.interval_s) / 3600.0) % 24.0
        diurnal = 1.0 + self.diurnal_amplitude[:, None] * np.cos(
            2 * np.pi * (hour[None, :] - self.diurnal_peak_h[:, None]) / 24.0
        )
        noise = np.exp(rng.normal(0.0, 1.0, (T, S)) * self.noise_sigma[:, None])
        shape = np.repeat(diurnal * noise, P, axis=0)  # (T·P, S)
        arrivals = rng.poisson(shape * (self.tp_rate[:, None] * self.interval_s))

        retention = np.repeat(self.retention_scans, P)
        age_scans = retention + rng.integers(0, int(30 * 86400 / self.interval_s), T * P)
        leo0 = (self.tp_rate * self.interval_s * age_scans).astype(np.int64) + rng.integers(
            0, 1000, T * P
        )
        leo = np.cumsum(arrivals, axis=1, out=arrivals)
        leo += leo0[:, None]
        self.leo = leo

        # The oldest retained record is the one produced ``retention`` ago; before the run
        # starts, extrapolate at the mean rate.
        back = scans[None, :] - retention[:, None]
        target = np.take_along_axis(leo, np.maximum(back, 0), axis=1)
        before = leo0[:, None] - (self.tp_rate[:, None] * self.interval_s * -back).astype(np.int64)
        target = np.where(back >= 0, target, np.maximum(before, 0))
        # An idle topic's only segment never rolls, so nothing of it is deleted.
        idle = np.repeat(self.topic_idle, P)
        kept = rng.integers(0, 10_000, T * P)
        target[idle] = np.maximum(leo0[idle] - kept[idle], 0)[:, None]
        # Retention runs every check interval, so the log start moves in steps.
        phase = rng.integers(0, 1 << 30, T) % self.check_scans
        checks = (scans[None, :] + phase[:, None]) % self.check_scans[:, None] == 0
        self.log_start = np.take_along_axis(
            target, np.repeat(last_true_index(checks), P, axis=0), axis=1
        )

    def _consumers(self) -> None:
        """Each group-partition's consumed position: just behind the log end, or in bursts."""
        rng, P, S = self.rng, self.P, self.S
        tp_of_gp = (self.topic_of_group[:, None] * P + np.arange(P)[None, :]).ravel()
        self.tp_of_gp = tp_of_gp
        leo = self.leo[tp_of_gp]  # (G·P, S)
        # Streaming consumers are a fraction of the last scan's records behind, sometimes a
        # few scans' worth when a batch was slow.
        delay = np.minimum(rng.geometric(0.9, leo.shape), 8).astype(np.int32)
        earlier = np.maximum(np.arange(S, dtype=np.int32)[None, :] - delay, 0)
        del delay
        backlog = leo - np.take_along_axis(leo, earlier, axis=1)
        del earlier
        pos = leo - (rng.random(leo.shape) * backlog).astype(np.int64)
        del backlog
        # Bursty groups read everything there is every so often, and skip a burst now and then.
        bursty = np.flatnonzero(self.burst_every > 1)
        if bursty.size:
            bursts = self._every(self.burst_every[bursty], self.burst_phase[bursty])
            bursts &= rng.random((bursty.size, S)) < 0.9
            rows = (bursty[:, None] * P + np.arange(P)[None, :]).ravel()
            pos[rows] = np.take_along_axis(
                leo[rows], np.repeat(last_true_index(bursts), P, axis=0), axis=1
            )
        np.maximum.accumulate(pos, axis=1, out=pos)
        self.pos = pos

    def _membership(self) -> None:
        """Group state, member count and member-set generation per scan."""
        rng, G, P, S = self.rng, self.G, self.P, self.S
        base = rng.integers(1, min(P, 6) + 1, G)
        # Rebalances (deploys, scaling, restarts): about one per group every six hours.
        events = rng.poisson(S * self.interval_s / (6 * 3600), G)
        ev_group = np.repeat(np.arange(G), events)
        ev_scan = rng.integers(1, S, ev_group.size) if S > 1 else np.zeros(0, dtype=np.int64)
        step = np.zeros((G, S), dtype=np.int32)
        np.add.at(step, (ev_group, ev_scan), 1)
        self.generation = np.cumsum(step, axis=1, dtype=np.int32)

        counts = np.zeros((G, S), dtype=np.int32)
        counts[:, 0] = base
        counts[ev_group, ev_scan] = np.clip(
            base[ev_group] + rng.integers(-1, 2, ev_group.size), 1, P
        )
        self.members = np.take_along_axis(counts, last_true_index(counts > 0), axis=1)

        state = np.full((G, S), _STABLE, dtype=np.int8)
        caught = rng.random(ev_group.size)
        state[ev_group, ev_scan] = np.where(
            caught < 0.3, _PREPARING, np.where(caught < 0.45, _COMPLETING, _STABLE)
        )
        self.state = state
        self.group_salt = rng.integers(0, 1 << 62, G, dtype=np.int64)

    # -- incidents ---------------------------------------------------------------------------

    def _inject(self, incident: _Incident) -> None:
        rng, P, S = self.rng, self.P, self.S
        g, a, b = incident.group, incident.first, incident.last
        rows = slice(g * P, (g + 1) * P)
        pos = self.pos[rows]  # a view: changes land in self.pos
        leo = self.leo[self.tp_of_gp[rows]]
        window = slice(a, b + 1)
        recovery = max(3, int(incident.length * rng.uniform(0.3, 0.8)))
        self._quiet(g, a, b)

        if incident.kind == "lagging":
            share = rng.uniform(0.2, 0.6)
            cap = pos[:, a : a + 1] + (share * (leo[:, window] - leo[:, a : a + 1])).astype(
                np.int64
            )
            np.minimum(pos[:, window], cap, out=pos[:, window])
            self._drain(pos, b, recovery)
        elif incident.kind in ("stalled", "stopped", "stuck_rebalance"):
            np.minimum(pos[:, window], pos[:, a : a + 1], out=pos[:, window])
            self._drain(pos, b, recovery)
            if incident.kind == "stopped":
                self.state[g, window] = _EMPTY
                self.members[g, window] = 0
            elif incident.kind == "stuck_rebalance":
                self._churn(g, a, b)
            self._restart(g, b + 1)
        elif incident.kind == "rewound":
            # Back to an offset between the log start and half way to the current position,
            # then re-read at a steady pace until caught up at the end of the window.
            log_start = self.log_start[self.tp_of_gp[rows], a]
            depth = rng.uniform(0.05, 0.5)
            target = log_start + (depth * (pos[:, a] - log_start)).astype(np.int64)
            self._ramp(pos, a, b, target)
            self._restart(g, a)
        elif incident.kind == "retention_loss":
            share = rng.uniform(0.0, 0.25)
            tail = slice(a, S)
            cap = pos[:, a : a + 1] + (share * (leo[:, tail] - leo[:, a : a + 1])).astype(np.int64)
            slowed = np.minimum(pos[:, tail], cap)
            log_start = self.log_start[self.tp_of_gp[rows]]
            committed = np.take_along_axis(
                slowed, np.broadcast_to(self._last_commit(g)[a:] - a, slowed.shape), axis=1
            )
            lost = (committed < log_start[:, tail]).any(axis=0)
            if lost.any():
                # The consumer keeps failing for a few scans, then resets to the earliest offset.
                b = min(S - 2, a + int(np.argmax(lost)) + int(rng.integers(2, 6)))
            else:
                b = S - 2  # retention never caught up: the fault lasts to the end
            incident.last, incident.length = b, b - a + 1
            self._quiet(g, a, b)
            pos[:, a : b + 1] = slowed[:, : b + 1 - a]
            reset = np.maximum(pos[:, b], log_start[:, b + 1])
            self._ramp(pos, b + 1, min(S - 1, b + recovery), reset)

    def _quiet(self, g: int, first: int, last: int) -> None:
        """Keep unrelated rebalances out of a fault's window, so it shows only its own kind."""
        span = slice(first, last + 1)
        self.state[g, span] = _STABLE
        self.generation[g, span] = self.generation[g, first]
        self.members[g, span] = self.members[g, first]

    def _last_commit(self, g: int) -> NDArray[np.int32]:
        # numpy types an integer index as Any: here it is the one row of indices.
        return cast("NDArray[np.int32]", last_true_index(self.commits[g : g + 1])[0])

    def _drain(self, pos: np.ndarray, last: int, scans: int) -> None:
        """After a fault ending at ``last``, catch up linearly over ``scans`` scans."""
        if last + 1 >= self.S:
            return
        self._ramp(pos, last + 1, min(self.S - 1, last + scans), pos[:, last])

    def _ramp(self, pos: np.ndarray, first: int, last: int, begin: np.ndarray) -> None:
        """Limit positions on ``first..last`` to a line from ``begin`` to the normal position.

        Where the normal consumer is further behind than the line, it wins (``minimum``), so
        positions only fall below normal, never run ahead of the log end.
        """
        if first > last:
            return
        goal = pos[:, last]
        steps = last - first + 1
        fraction = np.arange(steps, dtype=np.float64)[None, :] / max(1, steps - 1)
        line = begin[:, None] + ((goal - begin)[:, None] * fraction).astype(np.int64)
        span = slice(first, last + 1)
        pos[:, span] = np.minimum(pos[:, span], line)

    def _churn(self, g: int, first: int, last: int) -> None:
        """A rebalance loop: preparing/completing, members dropping out and rejoining."""
        rng = self.rng
        n = last - first + 1
        span = slice(first, last + 1)
        self.state[g, span] = np.where(rng.random(n) < 0.7, _PREPARING, _COMPLETING)
        base = int(self.members[g, first])
        members = np.clip(base + rng.integers(-1, 2, n), 1, max(base, self.P))
        self.members[g, span] = members
        # Every join or loss is a new member set; the loop starts with one and has more.
        joins = np.diff(members, prepend=-1) != 0
        joins |= rng.random(n) < 0.4
        joins[n // 2] = True
        self.generation[g, span] += np.cumsum(joins).astype(np.int32)

    def _restart(self, g: int, at: int) -> None:
        """The group comes (back) up at ``at``: a new member set, maybe caught mid-join."""
        if at >= self.S:
            return
        self.generation[g, at:] += 1
        if self.state[g, at] == _STABLE and self.rng.random() < 0.5:
            self.state[g, at] = _COMPLETING

    # -- commits -----------------------------------------------------------------------------

    def _commits(self) -> None:
        """Committed offset = the position at the group's latest commit; null before the first
        commit of a new group."""
        rng, G, P, S = self.rng, self.G, self.P, self.S
        last = np.repeat(last_true_index(self.commits), P, axis=0)
        self.committed = np.take_along_axis(self.pos, last, axis=1)
        del last
        self.committed_null = None
        faulty = {i.group for i in self.incidents}
        candidates = np.array([g for g in range(G) if g not in faulty], dtype=np.int64)
        new = candidates[rng.random(candidates.size) < 0.03] if G >= 20 else candidates[:0]
        if new.size and S > 1:
            first_commit = rng.integers(1, max(2, S // 5), new.size)
            null = np.zeros((G, S), dtype=bool)
            null[new] = np.arange(S)[None, :] < first_commit[:, None]
            self.committed_null = np.repeat(null, P, axis=0)

    # -- output ------------------------------------------------------------------------------

    def incidents_frame(self) -> pd.DataFrame:
        rows = []
        for incident in sorted(self.incidents, key=lambda i: (i.first, i.group)):
            rows.append(self.label(incident.group, incident.first, incident.last, incident.kind))
        return pd.DataFrame(rows, columns=["cluster", "group", "start", "end", "kind"])
