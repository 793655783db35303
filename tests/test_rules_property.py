"""The vectorized engine agrees with the plain reference implementation on random windows."""

from __future__ import annotations

import math

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from notifier.rules import Evaluator, RulesConfig, ScanColumns, WindowStore
from notifier.rules import kernels as kernels
from notifier.types import GROUP_STATES, PARTITION_STATUS_CODES, Sample

from . import reference as ref

RING = 6

commit = st.tuples(
    st.integers(0, 60),  # offset
    st.integers(1, 50_000),  # time step to the next commit
    st.one_of(st.none(), st.integers(0, 30)),  # lag, or none (Burrow's inserted commits)
)
ring_case = st.tuples(
    st.lists(commit, min_size=0, max_size=RING),
    st.lists(st.integers(0, 80), min_size=1, max_size=RING),  # stored broker offsets
    st.one_of(st.just(-1), st.integers(0, 30)),  # current lag (-1: unknown)
    st.integers(0, 200_000),  # now, after the last commit
    st.integers(0, 5),  # allowed lag
    st.floats(0, 1),  # complete
    st.sampled_from([0.0, 0.5, 1.0]),  # minimum complete
)


@settings(max_examples=150, deadline=None)
@given(st.lists(ring_case, min_size=1, max_size=12))
def test_burrow_kernel_matches_reference_on_a_batch_of_rings(cases):
    n = len(cases)
    offsets = np.full((n, RING), -1, dtype=np.int64)
    ts = np.zeros((n, RING), dtype=np.int64)
    lags = np.full((n, RING), -1, dtype=np.int64)
    counts = np.zeros(n, dtype=np.int16)
    brokers = np.zeros((n, RING), dtype=np.int64)
    broker_valid = np.zeros((n, RING), dtype=bool)
    current = np.zeros(n, dtype=np.int64)
    now = np.zeros(n, dtype=np.int64)
    allowed = np.zeros(n, dtype=np.int64)
    complete = np.zeros(n)
    minimum = np.zeros(n)
    expected = []
    for i, (commits, broker, cur, after, allow, comp, mincomp) in enumerate(cases):
        t = 1_000_000
        ring = []
        for offset, step, lag in commits:
            ring.append(ref.Commit(offset, t, lag))
            t += step
        k = len(ring)
        counts[i] = k
        for j, c in enumerate(ring):
            offsets[i, RING - k + j] = c.offset
            ts[i, RING - k + j] = c.timestamp
            lags[i, RING - k + j] = -1 if c.lag is None else c.lag
        brokers[i, RING - len(broker) :] = broker
        broker_valid[i, RING - len(broker) :] = True
        current[i] = cur
        now[i] = (ring[-1].timestamp if ring else 1_000_000) + after
        allowed[i] = allow
        complete[i] = comp
        minimum[i] = mincomp
        expected.append(
            ref.burrow(ring, broker, None if cur < 0 else cur, int(now[i]), allow, comp, mincomp)
        )
    out = kernels.burrow_status(
        offsets, ts, lags, counts, brokers, broker_valid, current, now, allowed, complete, minimum
    )
    for i, (status, rules) in enumerate(expected):
        assert PARTITION_STATUS_CODES[out.status[i]].value == status, cases[i]
        if counts[i]:
            assert bool(out.stopped[i]) == rules["stopped"]
            assert bool(out.recent_lag_zero[i]) == rules["recent_lag_zero"]
        assert int(out.rewind_index[i]) == rules["rewind_index"]
        assert bool(out.lag_always_not_zero[i]) == rules["lag_always_not_zero"]
        assert bool(out.stalled[i]) == rules["stalled"]
        assert bool(out.lag_not_decreasing[i]) == rules["lag_not_decreasing"]


# ---------------------------------------------------------------------------------------------
# End to end: random scans → store → evaluator, against the reference built from the same scans.

WIDTH = 5
INTERVAL_MS = 10_000
MAX_GAP_MS = 15_000

scan_point = st.tuples(
    st.booleans(),  # scan gap before this sample
    st.one_of(st.none(), st.integers(0, 40)),  # committed
    st.integers(0, 15),  # LEO growth since the last sample
    st.one_of(st.none(), st.integers(0, 30)),  # log start
    st.sampled_from(GROUP_STATES),
    st.integers(0, 2),  # members
    st.integers(0, 2),  # member hash
)
partition_series = st.lists(scan_point, min_size=1, max_size=12)

RULES = RulesConfig.model_validate(
    {
        "window": {"intervals": WIDTH, "lag_time_points": 4},
        "burrow": {"allowed_lag": 2, "minimum_complete": 0.4},
        "rules": [
            {"name": "lag", "kind": "lag", "threshold": 10, "severity": "warn"},
            {"name": "seconds", "kind": "lag_seconds", "threshold": 20, "severity": "err"},
            {"name": "stuck", "kind": "stuck_rebalance", "samples": 2},
            {"name": "storm", "kind": "rebalance_storm", "max_changes": 1},
            {"name": "retention", "kind": "retention", "warn_fraction": 0.3},
            {"name": "gone", "kind": "consumers_gone"},
        ],
    }
)


def _samples(series_list):
    out = []
    for p, series in enumerate(series_list):
        t = 0
        leo = 50
        for gap, committed, growth, log_start, state, members, mhash in series:
            t += INTERVAL_MS * (3 if gap else 1)
            leo += growth
            out.append(
                Sample(
                    ts=t,
                    cluster="c",
                    group=f"g{p % 2}",
                    topic="t",
                    partition=p,
                    committed_offset=committed,
                    log_end_offset=leo,
                    log_start_offset=log_start,
                    group_state=state,
                    members=members,
                    member_hash=mhash,
                )
            )
    return out


def _reference_partition(samples, now):
    """Every rule's outcome for one partition, from its samples up to ``now``."""
    points, ring, table = [], [], []
    last_hash = None
    for s in samples:
        changed = last_hash is not None and s.member_hash != last_hash
        last_hash = s.member_hash
        points.append(
            ref.Point(
                s.ts,
                s.committed_offset,
                s.log_end_offset,
                s.log_start_offset,
                s.group_state,
                s.members,
                changed,
            )
        )
        if s.committed_offset is not None and (not ring or ring[-1].offset != s.committed_offset):
            ring.append(
                ref.Commit(s.committed_offset, s.ts, max(0, s.log_end_offset - s.committed_offset))
            )
            ring = ring[-WIDTH:]
        ref.add_leo_point(table, s.log_end_offset, s.ts, 4)
    window = points[-WIDTH:]
    last = window[-1]
    complete = ref.window_complete(window, WIDTH, now, MAX_GAP_MS)
    lag = ref.lag_of(last)
    status, _ = ref.burrow(ring, [p.log_end for p in window], lag, now, 2, complete, 0.4)
    status = ref.split_stop_stall(status, last.state, last.members)
    return {
        "status": status,
        "complete": complete,
        "lag": lag,
        "seconds": ref.lag_seconds(table, last.committed, now),
        "lag_rule": lag is not None and lag > 10,
        "stuck": ref.stuck_rebalance(window, 2),
        "storm": ref.rebalance_storm(window, 1),
        "retention": ref.retention(last, 0.3),
        "gone": ref.consumers_gone(window),
    }


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(partition_series, min_size=1, max_size=4))
def test_store_and_evaluator_match_reference(series_list):
    samples = _samples(series_list)
    store = WindowStore(RULES.window, scan_interval_s=INTERVAL_MS / 1000)
    evaluator = Evaluator(RULES, store)
    for ts in sorted({s.ts for s in samples}):
        store.ingest_scan(ScanColumns.from_samples([s for s in samples if s.ts == ts]))
    now = max(s.ts for s in samples)
    evaluation = evaluator.evaluate(now)
    for p in range(len(series_list)):
        expected = _reference_partition([s for s in samples if s.partition == p], now)
        row = store.row("c", f"g{p % 2}", "t", p)
        i = int(np.nonzero(evaluation.rows == row)[0][0])
        assert PARTITION_STATUS_CODES[evaluation.status[i]].value == expected["status"]
        assert math.isclose(evaluation.complete[i], expected["complete"])
        assert (
            None if evaluation.current_lag[i] < 0 else int(evaluation.current_lag[i])
        ) == expected["lag"]
        seconds = float(evaluation.lag_seconds[i])
        if expected["seconds"] is None:
            assert math.isnan(seconds)
        else:
            assert math.isclose(seconds, expected["seconds"], rel_tol=1e-9, abs_tol=1e-6)
        sev = evaluation.row_severity
        assert bool(sev["lag"][i]) == expected["lag_rule"]
        assert bool(sev["stuck"][i]) == expected["stuck"]
        assert bool(sev["storm"][i]) == expected["storm"]
        assert int(sev["retention"][i]) == {None: 0, "near": 1, "lost": 2}[expected["retention"]]
        assert bool(sev["gone"][i]) == expected["gone"]
        assert bool(sev["seconds"][i]) == (
            expected["seconds"] is not None and expected["seconds"] > 20
        )
