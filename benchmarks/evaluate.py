"""Benchmark: evaluate N windows of 10 samples, vectorized engine vs the reference.

The windows are built the way the service builds them: ten scans ingested into a WindowStore.
The mix of behaviours is realistic (mostly healthy, some lagging, stalled, stopped, rewound,
rebalancing, near retention). The vectorized evaluator runs over all N windows; the plain
per-partition reference implementation (tests/reference.py) runs over a slice in the same run.

    python benchmarks/evaluate.py            # N = 10^4, 10^5 (about a minute)
    python benchmarks/evaluate.py --full     # N = 10^4, 10^5, 10^6 (the issue's sizes)

Targets: 10^6 windows in <= 1 s on one core, >= 30x the reference, and <= 600 B per window
of memory: everything the store keeps (its arrays as allocated, spare rows included, and the
Python objects naming rows, groups and LEO tables, walked from the store) over the windows in
use; the same windows held as the reference holds them (traced with tracemalloc on the
reference slice) are the baseline.
Ends with one JSON line: name, figures, baseline figures, targets and whether each is met.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import resource
import sys
import time
import tracemalloc
import types
from pathlib import Path

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from notifier.rules import (  # noqa: E402
    Evaluator,
    RulesConfig,
    ScanColumns,
    WindowStore,
    load_rules,
)
from notifier.types import GROUP_STATE_CODE  # noqa: E402
from tests import reference as ref  # noqa: E402

INTERVAL_MS = 10_000
SCANS = 10
PARTITIONS_PER_GROUP = 10
MIX = {
    "healthy": 0.80,
    "lagging": 0.07,
    "stalled": 0.04,
    "stopped": 0.03,
    "rewound": 0.02,
    "rebalancing": 0.02,
    "retention": 0.02,
}


def build_store(
    n: int, rules: RulesConfig, seed: int = 1
) -> tuple[WindowStore, int, dict[str, int]]:
    rng = np.random.default_rng(seed)
    groups = n // PARTITIONS_PER_GROUP
    kinds = rng.choice(len(MIX), size=groups, p=list(MIX.values()))
    kind_of_row = np.repeat(kinds, PARTITIONS_PER_GROUP)[:n]
    names = list(MIX)
    group_names = [f"group-{i // PARTITIONS_PER_GROUP}" for i in range(n)]
    topic_names = [f"topic-{i // PARTITIONS_PER_GROUP}" for i in range(n)]
    partitions = (np.arange(n) % PARTITIONS_PER_GROUP).astype(np.int32)
    rate = rng.integers(10, 1000, size=n)
    leo = rng.integers(10_000, 10_000_000, size=n).astype(np.int64)
    committed = leo - rng.integers(0, 20, size=n)
    log_start = leo - rate * 100
    store = WindowStore(rules.window, INTERVAL_MS / 1000)
    start = 1_800_000_000_000
    stable = GROUP_STATE_CODE["Stable"]
    for scan in range(SCANS):
        produced = rate + rng.integers(0, 5, size=n)
        leo = leo + produced
        consumed = produced - rng.integers(-3, 3, size=n)
        state = np.full(n, stable, dtype=np.int8)
        members = np.full(n, 3, dtype=np.int32)
        member_hash = np.full(n, 7, dtype=np.int64)
        k = kind_of_row
        healthy = k == names.index("healthy")
        committed = np.where(healthy, leo - rng.integers(0, 20, size=n), committed)
        committed = np.where(k == names.index("lagging"), committed + produced // 2, committed)
        stopped = k == names.index("stopped")
        members = np.where(stopped, 0, members)
        state = np.where(stopped, GROUP_STATE_CODE["Empty"], state).astype(np.int8)
        rewound = k == names.index("rewound")
        committed = np.where(rewound, committed + consumed - (scan == 5) * rate * 20, committed)
        rebalancing = k == names.index("rebalancing")
        state = np.where(
            rebalancing & (scan > 2), GROUP_STATE_CODE["PreparingRebalance"], state
        ).astype(np.int8)
        member_hash = np.where(rebalancing, scan // 2, member_hash)
        retention = k == names.index("retention")
        log_start = np.where(retention, committed - rate, leo - rate * 100)
        committed = np.minimum(committed, leo)
        store.ingest_scan(
            ScanColumns(
                cluster="bench",
                ts=start + scan * INTERVAL_MS,
                group=group_names,
                topic=topic_names,
                partition=partitions,
                committed=committed.astype(np.int64),
                log_end=leo,
                log_start=log_start.astype(np.int64),
                state=state,
                members=members,
                member_hash=member_hash.astype(np.int64),
            )
        )
    now = start + (SCANS - 1) * INTERVAL_MS
    return store, now, {name: int((kind_of_row == i).sum()) for i, name in enumerate(names)}


def reference_windows(store: WindowStore, row: int) -> tuple[list, list, list]:
    """One row's window, commit ring and LEO table as the plain reference holds them."""
    window = [
        ref.Point(
            s["ts"],
            s["committed_offset"],
            s["log_end_offset"],
            s["log_start_offset"],
            s["group_state"],
            s["members"],
            s["member_set_changed"],
        )
        for s in store.samples(row)
    ]
    ring = [ref.Commit(c.offset, c.timestamp, c.lag) for c in store.ring(row)]
    return window, ring, store.leo_table(row)


def python_bytes(store: WindowStore) -> int:
    """The Python objects the store holds (its dicts and lists naming rows, groups and LEO
    tables, their keys and strings): everything reachable from it but its numpy arrays,
    which :meth:`WindowStore.array_bytes` counts as allocated."""
    seen: set[int] = set()
    pending: list[object] = [store]
    total = 0
    while pending:
        obj = pending.pop()
        if id(obj) in seen or isinstance(obj, (type, types.ModuleType, np.ndarray)):
            continue
        if callable(obj) and not isinstance(obj, WindowStore):
            continue
        seen.add(id(obj))
        total += sys.getsizeof(obj)
        pending.extend(gc.get_referents(obj))
    return total


def reference_bytes_per_window(store: WindowStore, rows: np.ndarray) -> float:
    """What the same windows take held as the reference holds them (Python objects): the
    baseline the store's figure is compared with in the same run."""
    gc.collect()
    tracemalloc.start()
    kept = [reference_windows(store, row) for row in rows.tolist()]
    held = tracemalloc.get_traced_memory()[0]
    tracemalloc.stop()
    del kept
    return held / max(rows.size, 1)


def reference_evaluate(
    store: WindowStore, rows: np.ndarray, now: int, rules: RulesConfig
) -> list[str]:
    """The plain implementation, one partition at a time, over the same windows."""
    out = []
    width = store.width
    allowed = rules.burrow.allowed_lag
    for row in rows.tolist():
        window, ring, _ = reference_windows(store, row)
        complete = ref.window_complete(window, width, now, store.max_gap_ms)
        last = window[-1]
        status, _ = ref.burrow(
            ring,
            [p.log_end for p in window],
            ref.lag_of(last),
            now,
            allowed,
            complete,
            rules.minimum_complete,
        )
        status = ref.split_stop_stall(status, last.state, last.members)
        ref.lag_seconds(store.leo_table(row), last.committed, now)
        ref.stuck_rebalance(window, 6)
        ref.rebalance_storm(window, 3)
        ref.retention(last, 0.1)
        ref.consumers_gone(window)
        out.append(status)
    return out


def measure(n: int, rules: RulesConfig, reference_slice: int) -> dict:
    gc.collect()
    t0 = time.perf_counter()
    store, now, mix = build_store(n, rules)
    build_s = time.perf_counter() - t0
    array_bytes = store.array_bytes() / store.rows_in_use
    total_bytes = array_bytes + python_bytes(store) / store.rows_in_use
    evaluator = Evaluator(rules, store)
    evaluator.evaluate(now)  # warm-up (binds parameters, sizes state)
    best = float("inf")
    for _ in range(3):
        cpu0 = time.process_time()
        evaluation = evaluator.evaluate(now)
        best = min(best, time.process_time() - cpu0)
    statuses = np.bincount(evaluation.status, minlength=5)
    rows = evaluation.rows[:: max(1, n // reference_slice)][:reference_slice]
    cpu0 = time.process_time()
    expected = reference_evaluate(store, rows, now, rules)
    ref_s = time.process_time() - cpu0
    index = {int(r): i for i, r in enumerate(evaluation.rows.tolist())}
    agree = all(
        ("OK", "WARN", "STOP", "STALL", "REWIND")[evaluation.status[index[int(r)]]] == s
        for r, s in zip(rows, expected)
    )
    return {
        "windows": n,
        "build_s": round(build_s, 2),
        "evaluate_cpu_s": round(best, 4),
        "windows_per_s": round(n / best),
        "reference_windows": int(rows.size),
        "reference_windows_per_s": round(rows.size / ref_s),
        "speedup": round((n / best) / (rows.size / ref_s), 1),
        "reference_agrees": agree,
        "bytes_per_window": round(total_bytes, 1),
        "array_bytes_per_window": round(array_bytes, 1),
        "python_bytes_per_window": round(total_bytes - array_bytes, 1),
        "reference_bytes_per_window": round(reference_bytes_per_window(store, rows), 1),
        "mix": mix,
        "partition_statuses": dict(
            zip(("OK", "WARN", "STOP", "STALL", "REWIND"), statuses.tolist())
        ),
    }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--full", action="store_true", help="include N = 10^6 (the issue's size)")
    parser.add_argument("--rules", default=str(ROOT / "rules.yaml"))
    args = parser.parse_args()
    rules = load_rules(args.rules)
    sizes = [10_000, 100_000] + ([1_000_000] if args.full else [])
    results = []
    for n in sizes:
        result = measure(n, rules, reference_slice=min(n, 5_000))
        results.append(result)
        print(
            f"N={n:>9,}  vectorized {result['windows_per_s']:>12,} windows/s "
            f"({result['evaluate_cpu_s']:.3f} s CPU)  "
            f"reference {result['reference_windows_per_s']:>8,} windows/s  "
            f"ratio {result['speedup']:>6}x  agree={result['reference_agrees']}  "
            f"statuses={result['partition_statuses']}\n"
            f"             memory {result['bytes_per_window']} B/window "
            f"(arrays {result['array_bytes_per_window']}, Python objects "
            f"{result['python_bytes_per_window']}); the reference holds "
            f"{result['reference_bytes_per_window']} B/window",
            flush=True,
        )
    peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    largest = results[-1]
    projected_1m_s = 1_000_000 / largest["windows_per_s"]
    targets = {
        "seconds_for_1e6_windows": 1.0,
        "speedup_vs_reference": 30,
        "bytes_per_window": 600,
    }
    met = {
        "seconds_for_1e6_windows": projected_1m_s <= targets["seconds_for_1e6_windows"],
        "speedup_vs_reference": all(r["speedup"] >= 30 for r in results),
        "reference_agrees": all(r["reference_agrees"] for r in results),
        "bytes_per_window": largest["bytes_per_window"] <= targets["bytes_per_window"],
    }
    print(
        f"peak RSS {peak_mb:.0f} MiB; 10^6 windows "
        f"{'measured' if args.full else 'projected'}: {projected_1m_s:.3f} s"
    )
    print(
        json.dumps(
            {
                "name": "evaluate",
                "sizes": sizes,
                "windows_per_s": largest["windows_per_s"],
                "seconds_for_1e6_windows": round(projected_1m_s, 3),
                "measured_at": largest["windows"],
                "bytes_per_window": largest["bytes_per_window"],
                "array_bytes_per_window": largest["array_bytes_per_window"],
                "python_bytes_per_window": largest["python_bytes_per_window"],
                "peak_rss_mib": round(peak_mb),
                "speedup": largest["speedup"],
                "baseline": {
                    "name": "reference (tests/reference.py)",
                    "windows_per_s": largest["reference_windows_per_s"],
                    "bytes_per_window": largest["reference_bytes_per_window"],
                },
                "targets": targets,
                "met": met,
            }
        )
    )


if __name__ == "__main__":
    main()
