"""What happens to every group at once (broker restarts, the service's own gaps) and what the
service's scans saw."""

from __future__ import annotations

import zlib
from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from notifier.collect.samples import member_hash
from notifier.synth.independent.model import (
    BROKERS,
    CLUSTER,
    SCAN_INTERVAL_S,
    START,
    WARMUP_S,
    Event,
    Group,
)
from notifier.types import GROUP_STATES, SAMPLE_SCHEMA


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
