"""Replay stored samples through the live code path: store → evaluate → transitions.

``notifier test-rules``, ``notifier replay`` and the backtest's single-process reference all
call :func:`replay_table`, so that what a test or a backtest says is what the service would do.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from datetime import UTC, datetime
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pacsv
import pyarrow.parquet as pq

from notifier.config import RulesConfig
from notifier.rules.evaluate import Evaluation, Evaluator, TransitionTracker
from notifier.rules.store import ScanColumns, WindowStore
from notifier.types import SAMPLE_SCHEMA, Transition


def read_samples(path: Path) -> pa.Table:
    """Samples from a CSV file (``ts`` as ISO-8601 or epoch ms), a Parquet file or dataset."""
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError("no such file or directory")
    table = pacsv.read_csv(path) if path.suffix == ".csv" else pq.read_table(path)
    missing = [n for n in SAMPLE_SCHEMA.names if n not in table.column_names]
    if missing:
        raise ValueError(f"missing column(s): {', '.join(missing)}")
    ts = table.column("ts")
    if pa.types.is_integer(ts.type):
        ts = pc.cast(ts, pa.timestamp("ms", tz="UTC"))
    elif pa.types.is_string(ts.type):
        ts = pc.cast(
            pc.strptime(ts, format="%Y-%m-%dT%H:%M:%S", unit="ms"), pa.timestamp("ms", tz="UTC")
        )
    table = table.set_column(table.schema.get_field_index("ts"), "ts", ts)
    return table.select(SAMPLE_SCHEMA.names).cast(SAMPLE_SCHEMA)


def scans(table: pa.Table) -> Iterable[ScanColumns]:
    """Split samples into scans (one cluster, one time), in time order."""
    if table.num_rows == 0:
        return
    ts = pc.cast(table.column("ts"), pa.int64())
    table = table.set_column(table.schema.get_field_index("ts"), "ts", ts)
    table = table.sort_by([("ts", "ascending"), ("cluster", "ascending")])
    ts_values = table.column("ts").to_numpy()
    clusters = table.column("cluster").to_numpy(zero_copy_only=False)
    change = np.ones(table.num_rows, dtype=bool)
    change[1:] = (ts_values[1:] != ts_values[:-1]) | (clusters[1:] != clusters[:-1])
    starts = np.nonzero(change)[0]
    ends = np.append(starts[1:], table.num_rows)
    for start, end in zip(starts.tolist(), ends.tolist()):
        yield ScanColumns.from_table(
            table.slice(start, end - start), clusters[start], int(ts_values[start])
        )


def replay_table(
    table: pa.Table,
    rules: RulesConfig,
    scan_interval_s: float,
    at_times: Iterable[int] = (),
    on_evaluation: Callable[[Evaluation], None] | None = None,
    on_transitions: Callable[[list[Transition]], None] | None = None,
) -> dict[int, Evaluation]:
    """Feed samples scan by scan to a fresh store, evaluating after each scan (and at each of
    ``at_times``, ms) as the service does. Returns the evaluations at ``at_times``."""
    store = WindowStore(rules.window, scan_interval_s)
    evaluator = Evaluator(rules, store)
    tracker = TransitionTracker()
    pending = sorted(set(at_times))
    results: dict[int, Evaluation] = {}

    def evaluate(now: int) -> None:
        if store.rows_in_use == 0:
            return
        evaluation = evaluator.evaluate(now)
        if on_evaluation is not None:
            on_evaluation(evaluation)
        if on_transitions is not None:
            transitions = tracker.update(evaluation)
            if transitions:
                on_transitions(transitions)
        if now in at_times_set:
            results[now] = evaluation

    at_times_set = set(pending)

    def ingest_and_evaluate(batch: list[ScanColumns]) -> None:
        """One moment: the scans of every cluster at that time, then one evaluation (with any
        requested evaluation times that fall before it)."""
        ts = batch[0].ts
        while pending and pending[0] < ts:
            evaluate(pending.pop(0))
        for scan in batch:
            store.ingest_scan(scan)
        if pending and pending[0] == ts:
            pending.pop(0)
        evaluate(ts)

    batch: list[ScanColumns] = []
    for scan in scans(table):
        if batch and scan.ts != batch[0].ts:
            ingest_and_evaluate(batch)
            batch = []
        batch.append(scan)
    if batch:
        ingest_and_evaluate(batch)
    for now in pending:
        evaluate(now)
    return results


def _when(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, UTC).strftime("%Y-%m-%d %H:%M:%S")


def print_replay(
    path: Path, rules: RulesConfig, scan_interval_s: float, echo: Callable[[str], None]
) -> None:
    """``notifier replay``: transitions as they happen, then every group's final status."""
    table = read_samples(path)
    last: list[Evaluation] = []

    def show(transitions: list[Transition]) -> None:
        for t in transitions:
            findings = "; ".join(
                f"{f.rule} {f.status}"
                + (f" {f.topic}/{f.partition}" if f.topic is not None else "")
                + f": {f.message}"
                for f in (t.result.findings if t.result else [])
            )
            echo(f"{_when(t.at)}  {t.cluster}/{t.group}: {t.previous} -> {t.current}  {findings}")

    def keep(evaluation: Evaluation) -> None:
        last[:] = [evaluation]

    echo(f"replaying {table.num_rows} samples from {path} with {len(rules.rules) + 1} rules")
    replay_table(table, rules, scan_interval_s, on_evaluation=keep, on_transitions=show)
    if not last:
        echo("no samples")
        return
    final = last[-1]
    echo("")
    header = f"{'cluster/group':<32} {'status':<7} {'complete':>8} {'total lag':>10}"
    echo(f"{header} {'behind':>9}  findings")
    for result in sorted(final.results(), key=lambda r: (r.cluster, r.group)):
        behind = "-" if result.max_lag_seconds is None else f"{result.max_lag_seconds:.0f}s"
        rules_fired = ", ".join(sorted({f"{f.rule}:{f.status}" for f in result.findings})) or "-"
        echo(
            f"{result.cluster + '/' + result.group:<32} {result.status.value:<7} "
            f"{result.complete:>8.2f} {result.total_lag:>10} {behind:>9}  {rules_fired}"
        )
