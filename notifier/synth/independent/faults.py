"""Faults, labelled from when a person would want to know (DOMAIN.md §9)."""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np

from notifier.synth.independent.model import (
    Group,
)
from notifier.synth.independent.script import (
    Script,
)


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
