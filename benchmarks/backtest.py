"""Benchmark: the Spark backtest on local[2] against a plain per-partition reference replay.

A synthetic history (``notifier.synth.basic``) is replayed for a grid of 24 configurations plus
the
rules file (25 in all) by the real job (:func:`notifier.backtest.run_backtest` on a local[2]
Spark session, outputs included). In the same run, a slice of the same history — a few groups,
every scan — is replayed through the plain, one-partition-at-a-time reference implementation
(``tests/reference.py``: Burrow's rules, lag in seconds, the other rules, ``for`` and
``keep_firing_for``, the gate, incidents), which is the baseline; its incidents are compared
with the vectorized replay's on the same slice.

    python benchmarks/backtest.py            # ~500k samples (about a minute)
    python benchmarks/backtest.py --full     # 10M samples (the issue's size)

Target: >= 1 million sample-configurations per second on this 2-core machine, the whole job
(reading the history to writing the report) once the Spark session is up.
Ends with one JSON line: name, figures, baseline, targets and whether each is met.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import sys
import tempfile
import time
from collections import deque
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import pyarrow.parquet as pq  # noqa: E402

from notifier.backtest import (  # noqa: E402
    BacktestRequest,
    GridConfig,
    ReplayOptions,
    SampleArrays,
    replay,
    run_backtest,
    spark_session,
)
from notifier.history import read_history  # noqa: E402
from notifier.rules import RulesConfig  # noqa: E402
from notifier.synth import synthesize  # noqa: E402
from tests import reference as ref  # noqa: E402

INTERVAL_S = 10.0
GRID = {
    "burrow.allowed_lag": [0, 100, 1000],
    "burrow.for": ["0s", "2m"],
    "rules.lag-seconds-warn.threshold": ["5m", "10m"],
    "rules.lag-seconds-warn.for": ["2m", "10m"],
}
SIZES = {
    # groups × partitions rows per scan, scans: the fleet a task sees decides the throughput
    # (the evaluator's cost per call is mostly fixed up to a few thousand rows).
    "default": {"groups": 1000, "partitions": 4, "scans": 125},
    "full": {"groups": 2000, "partitions": 5, "scans": 1010},
}
REFERENCE_GROUPS = 12
REFERENCE_CONFIGS = 4


# --------------------------------------------------------------------------------------------
# The baseline: a plain replay, one partition at a time, from tests/reference.py


class _Partition:
    """One group-partition's window, commit ring and (shared) LEO table."""

    def __init__(self, width: int, table: list[tuple[int, int]]) -> None:
        self.window: deque[ref.Point] = deque(maxlen=width)
        self.ring: list[ref.Commit] = []
        self.table = table
        self.last_hash: int | None = None


def _severity(rule: Any) -> int:
    return 1 if str(getattr(rule, "severity", "err")) == "warn" else 2


def _partition_hits(
    config: RulesConfig, part: _Partition, now: int, width: int, max_gap_ms: int
) -> tuple[dict[str, int], float, int | None]:
    """Each rule's severity for one partition, its completeness and its current lag."""
    window = list(part.window)
    last = window[-1]
    complete = ref.window_complete(window, width, now, max_gap_ms)
    lag = ref.lag_of(last)
    burrow = config.burrow
    status, _ = ref.burrow(
        part.ring,
        [p.log_end for p in window],
        lag,
        now,
        burrow.allowed_lag,
        complete,
        burrow.minimum_complete,
    )
    status = ref.split_stop_stall(status, last.state, last.members)
    hits = {"burrow": {"OK": 0, "WARN": 1}.get(status, 2) if burrow.enabled else 0}
    seconds = ref.lag_seconds(part.table, last.committed, now)
    for rule in config.rules:
        severity = _severity(rule)
        hit = 0
        if not rule.enabled:
            pass
        elif rule.kind == "lag" and rule.scope == "partition":
            hit = severity if lag is not None and lag > rule.threshold else 0
        elif rule.kind == "lag_seconds":
            hit = severity if seconds is not None and seconds > rule.threshold else 0
        elif rule.kind == "stuck_rebalance":
            hit = severity if ref.stuck_rebalance(window, rule.samples) else 0
        elif rule.kind == "rebalance_storm":
            hit = severity if ref.rebalance_storm(window, rule.max_changes) else 0
        elif rule.kind == "retention":
            risk = ref.retention(last, rule.warn_fraction)
            hit = severity if risk == "lost" else (1 if risk == "near" else 0)
        elif rule.kind == "consumers_gone":
            hit = severity if ref.consumers_gone(window) else 0
        hits[rule.name] = hit
    return hits, complete, lag


class _RuleClock:
    """``for`` and ``keep_firing_for`` of one rule for one group."""

    def __init__(self) -> None:
        self.pending = -1
        self.last_true = -1
        self.firing = False
        self.fired = 0

    def step(self, severity: int, now: int, for_ms: float, keep_ms: float) -> int:
        true = severity > 0
        self.pending = (now if self.pending < 0 else self.pending) if true else -1
        if true:
            self.last_true = now
        held = true and now - self.pending >= for_ms
        kept = not true and self.firing and self.last_true >= 0 and now - self.last_true <= keep_ms
        self.firing = held or (true and self.firing) or kept
        fired = severity if true and self.firing else (self.fired if kept else 0)
        self.fired = fired if self.firing else 0
        return fired


def reference_replay(rows: list[dict[str, Any]], configs: list[GridConfig]) -> set[tuple]:
    """Incidents (config_id, cluster, group, opened_at) of a plain replay of ``rows``."""
    window = configs[0].rules.window
    width = window.intervals
    max_gap_ms = int(window.max_gap_factor * INTERVAL_S * 1000)
    tables: dict[tuple[str, str, int], list[tuple[int, int]]] = {}
    partitions: dict[tuple[str, str, str, int], _Partition] = {}
    clocks: dict[tuple[int, str, str, str], _RuleClock] = {}
    status: dict[tuple[int, str, str], int] = {}
    opened: set[tuple] = set()
    scans: dict[tuple[int, str], list[dict[str, Any]]] = {}
    for row in rows:
        scans.setdefault((row["ts"], row["cluster"]), []).append(row)
    for (now, cluster), scan in sorted(scans.items()):
        groups: dict[str, list[_Partition]] = {}
        for row in scan:
            key = (cluster, row["group"], row["topic"], row["partition"])
            table = tables.setdefault((cluster, row["topic"], row["partition"]), [])
            part = partitions.get(key) or partitions.setdefault(key, _Partition(width, table))
            ref.add_leo_point(table, row["log_end_offset"], now, window.lag_time_points)
            changed = part.last_hash is not None and part.last_hash != row["member_hash"]
            part.last_hash = row["member_hash"]
            committed = row["committed_offset"]
            part.window.append(
                ref.Point(
                    now,
                    committed,
                    row["log_end_offset"],
                    row["log_start_offset"],
                    row["group_state"],
                    row["members"],
                    changed,
                )
            )
            if committed is not None and (not part.ring or part.ring[-1].offset != committed):
                lag = max(0, row["log_end_offset"] - committed)
                part.ring = [*part.ring, ref.Commit(committed, now, lag)][-width:]
            groups.setdefault(row["group"], []).append(part)
        for config in configs:
            rules = config.rules
            for group, parts in groups.items():
                results = [_partition_hits(rules, p, now, width, max_gap_ms) for p in parts]
                partial = any(c < rules.burrow.minimum_complete for _, c, _ in results)
                worst = 0
                for rule in [rules.burrow, *rules.rules]:
                    name = getattr(rule, "name", "burrow")
                    if rule is not rules.burrow and rule.kind == "lag" and rule.scope == "group":
                        lags = [lag for _, _, lag in results if lag is not None]
                        hit = bool(lags) and rule.enabled and sum(lags) > rule.threshold
                        severity = _severity(rule) if hit else 0
                    else:
                        severity = max(h[name] for h, _, _ in results)
                    clock = clocks.setdefault(
                        (config.config_id, cluster, group, name), _RuleClock()
                    )
                    fired = clock.step(
                        severity, now, rule.for_ * 1000.0, rule.keep_firing_for * 1000.0
                    )
                    worst = max(worst, fired)
                key = (config.config_id, cluster, group)
                if partial or worst == status.get(key, 0):
                    continue
                if status.get(key, 0) == 0:
                    opened.add((config.config_id, cluster, group, now))
                status[key] = worst
    return opened


# --------------------------------------------------------------------------------------------
# The run


def made_names(history: Path) -> set[str]:
    """The group names of a history (one column read, not the whole table)."""
    return {
        name
        for file in history.glob("date=*/*.parquet")
        for name in pq.read_table(file, columns=["group"]).column("group").unique().to_pylist()
    }


def measure(size: str, workdir: Path, buckets: int | None) -> dict[str, Any]:
    shape = SIZES[size]
    history = workdir / "history"
    began = time.perf_counter()
    made = synthesize(
        history,
        groups=shape["groups"],
        partitions=shape["partitions"],
        hours=shape["scans"] * INTERVAL_S / 3600,
        seed=7,
        interval_s=INTERVAL_S,
    )
    synth_s = time.perf_counter() - began
    print(
        f"synthesized {made.rows:,} samples ({made.groups} groups × {made.partitions} "
        f"partitions, {made.scans} scans, {made.incidents} incidents) in {synth_s:.1f} s",
        flush=True,
    )
    grid = workdir / "grid.yaml"
    grid.write_text(json.dumps({"parameters": GRID}))
    spark, _ = spark_session("local[2]")
    try:
        started = time.perf_counter()
        result = run_backtest(
            BacktestRequest(
                history=str(history),
                rules=ROOT / "rules.yaml",
                grid=grid,
                out=workdir / "out",
                incidents=made.incidents_path,
                interval_s=INTERVAL_S,
                buckets=buckets,
            ),
            echo=lambda line: print("  " + line, flush=True),
            spark=spark,
        )
        wall_s = time.perf_counter() - started
    finally:
        spark.stop()
    configs = result.configs
    samples = result.span.samples
    figures = {
        "samples": samples,
        "configurations": len(configs),
        "groups": made.groups,
        "rows_per_scan": made.groups * made.partitions,
        "wall_s": round(wall_s, 2),
        "replay_s": round(result.timings["replay"], 2),
        "tasks": len(result.output.tasks),
        "task_s": sorted(round(ms / 1000, 1) for ms in result.output.tasks["task_ms"]),
        "rows_per_s": round(samples / wall_s),
        "sample_configurations_per_s": round(samples * len(configs) / wall_s),
        "replay_sample_configurations_per_s": round(
            samples * len(configs) / result.timings["replay"]
        ),
        "incidents": int(result.summary["incidents"].sum()),
        "recommended": result.recommendation.config_id,
    }

    # The baseline on a slice of the same history, and the agreement check.
    names = sorted(made_names(history))[:REFERENCE_GROUPS]
    piece = read_history(history, groups="^(" + "|".join(names) + ")$")
    picked = [configs[0], *configs[1 :: max(1, len(configs) // (REFERENCE_CONFIGS - 1))]]
    picked = picked[:REFERENCE_CONFIGS]
    rows = piece.to_pylist()
    for row in rows:
        row["ts"] = int(row["ts"].timestamp() * 1000)
    cpu = time.process_time()
    expected = reference_replay(rows, picked)
    reference_s = time.process_time() - cpu
    cpu = time.process_time()
    output = replay(SampleArrays.from_arrow(piece), picked, ReplayOptions(INTERVAL_S))
    vectorized_s = time.process_time() - cpu
    got = {
        (int(r.config_id), r.cluster, r.group, int(r.start_ms))
        for r in output.incidents.itertuples()
    }
    baseline = {
        "name": "reference (tests/reference.py), one partition at a time, one process",
        "samples": len(rows),
        "configurations": len(picked),
        "cpu_s": round(reference_s, 2),
        "sample_configurations_per_s": round(len(rows) * len(picked) / reference_s),
        "vectorized_same_slice_per_s": round(len(rows) * len(picked) / vectorized_s),
        "incidents": len(expected),
        "agrees": expected == got,
        "disagreements": len(expected ^ got),
    }
    figures["speedup_vs_baseline"] = round(
        figures["sample_configurations_per_s"] / baseline["sample_configurations_per_s"], 1
    )
    return {"figures": figures, "baseline": baseline, "synth_s": round(synth_s, 1)}


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--full", action="store_true", help="10M samples (the issue's size)")
    parser.add_argument("--keep", help="keep the history and outputs in this directory")
    parser.add_argument("--buckets", type=int, help="group buckets (default: the job's plan)")
    args = parser.parse_args()
    size = "full" if args.full else "default"
    workdir = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="bench-backtest-"))
    if args.keep and workdir.exists():
        shutil.rmtree(workdir)
    workdir.mkdir(parents=True, exist_ok=True)
    try:
        run = measure(size, workdir, args.buckets)
    finally:
        if not args.keep:
            shutil.rmtree(workdir, ignore_errors=True)
    figures, baseline = run["figures"], run["baseline"]
    print(
        f"backtest: {figures['samples']:,} samples × {figures['configurations']} configurations "
        f"in {figures['wall_s']} s wall ({figures['replay_s']} s replay in "
        f"{figures['tasks']} tasks of {figures['task_s']} s): "
        f"{figures['rows_per_s']:,} rows/s, "
        f"{figures['sample_configurations_per_s']:,} sample-configurations/s"
    )
    print(
        f"baseline: reference on {baseline['samples']:,} samples × {baseline['configurations']} "
        f"configurations: {baseline['sample_configurations_per_s']:,} sample-configurations/s "
        f"(vectorized on the same slice, one process: "
        f"{baseline['vectorized_same_slice_per_s']:,}/s); incidents agree: {baseline['agrees']}"
    )
    peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    targets = {"sample_configurations_per_s": 1_000_000, "configurations": 24}
    met = {
        "sample_configurations_per_s": figures["sample_configurations_per_s"]
        >= targets["sample_configurations_per_s"],
        "configurations": figures["configurations"] - 1 >= targets["configurations"],
        "samples_10M": figures["samples"] >= 10_000_000 if args.full else None,
        "reference_agrees": baseline["agrees"],
    }
    print(
        json.dumps(
            {
                "name": "backtest",
                "size": size,
                "cores": os.cpu_count(),
                "master": "local[2]",
                **figures,
                "driver_peak_rss_mib": round(peak_mb),
                "synth_s": run["synth_s"],
                "baseline": baseline,
                "targets": targets,
                "met": met,
            }
        )
    )


if __name__ == "__main__":
    main()
