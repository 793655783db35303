"""Benign patterns of real fleets (DOMAIN.md §9), each at a random point of its range."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import numpy as np

from notifier.synth.independent.script import (
    Script,
)


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
