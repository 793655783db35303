"""Replay stored samples through the live code path: store → evaluate → transitions.

``notifier test-rules`` and ``notifier replay`` call :func:`replay_table`, which drives the
service's own step (:mod:`notifier.rules.step`), as the backtest does: what a test says is what
the service would do.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Collection, Iterable, Iterator
from datetime import UTC, datetime
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pacsv
import pyarrow.parquet as pq

from notifier.rules.results import Evaluation, not_found
from notifier.rules.rulesfile import RulesConfig
from notifier.rules.scancolumns import ScanColumns
from notifier.rules.step import ClusterPipeline
from notifier.types import (
    OPTIONAL_SAMPLE_COLUMNS,
    SAMPLE_SCHEMA,
    GroupResult,
    Transition,
    with_optional_columns,
)


def read_samples(path: Path) -> pa.Table:
    """Samples from a CSV file (``ts`` as ISO-8601 or epoch ms), a Parquet file or dataset."""
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError("no such file or directory")
    table = pacsv.read_csv(path) if path.suffix == ".csv" else pq.read_table(path)
    missing = [
        n
        for n in SAMPLE_SCHEMA.names
        if n not in table.column_names and n not in OPTIONAL_SAMPLE_COLUMNS
    ]
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
    return with_optional_columns(table).select(SAMPLE_SCHEMA.names).cast(SAMPLE_SCHEMA)


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


class Moment:
    """Every cluster's evaluation at one time (what ``test-rules`` checks its ``expect`` on)."""

    def __init__(self, now: int, evaluations: dict[str, Evaluation]) -> None:
        self.now = now
        self.evaluations = evaluations

    def result(self, cluster: str, group: str) -> GroupResult:
        evaluation = self.evaluations.get(cluster)
        if evaluation is None:
            return not_found(cluster, group, self.now)
        return evaluation.result(cluster, group)

    def results(self) -> Iterator[GroupResult]:
        for cluster in sorted(self.evaluations):
            yield from self.evaluations[cluster].results()


def replay_table(
    table: pa.Table,
    rules: RulesConfig,
    scan_interval_s: float,
    at_times: Iterable[int] = (),
    on_evaluation: Callable[[Evaluation], None] | None = None,
    on_transitions: Callable[[list[Transition]], None] | None = None,
) -> dict[int, Moment]:
    """Feed samples scan by scan through the live service's step (:mod:`notifier.rules.step`),
    one pipeline per cluster: each cluster is evaluated after each of its scans, and every
    cluster at each of ``at_times`` (ms). A group with no rows in a scan of its cluster is
    gone, as a group the cluster stops listing is in the service. Returns what every cluster's
    evaluation said at each of ``at_times``."""
    pipelines: dict[str, ClusterPipeline] = {}
    latest: dict[str, Evaluation] = {}
    pending = sorted(set(at_times))
    results: dict[int, Moment] = {}

    def report(cluster: str, evaluation: Evaluation | None, transitions: list[Transition]) -> None:
        if evaluation is not None:
            latest[cluster] = evaluation
            if on_evaluation is not None:
                on_evaluation(evaluation)
        else:
            latest.pop(cluster, None)
        if transitions and on_transitions is not None:
            on_transitions(transitions)

    def evaluate_all(now: int, skip: Collection[str] = ()) -> None:
        for cluster, pipeline in pipelines.items():
            if cluster not in skip:
                report(cluster, *pipeline.evaluate(now))
        results[now] = Moment(now, dict(latest))

    for ts, moment in itertools.groupby(scans(table), key=lambda scan: scan.ts):
        while pending and pending[0] < ts:
            evaluate_all(pending.pop(0))
        scanned = set()
        for scan in moment:
            pipeline = pipelines.get(scan.cluster)
            if pipeline is None:
                pipeline = pipelines[scan.cluster] = ClusterPipeline(rules, scan_interval_s)
            report(scan.cluster, *pipeline.step(scan))
            scanned.add(scan.cluster)
        if pending and pending[0] == ts:
            evaluate_all(pending.pop(0), skip=scanned)
    for now in pending:
        evaluate_all(now)
    return results


def _when(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, UTC).strftime("%Y-%m-%d %H:%M:%S")


def print_replay(
    path: Path, rules: RulesConfig, scan_interval_s: float, echo: Callable[[str], None]
) -> None:
    """``notifier replay``: transitions as they happen, then every group's final status."""
    table = read_samples(path)
    last: dict[int, Evaluation] = {}  # the latest evaluation of each cluster's evaluator

    def show(transitions: list[Transition]) -> None:
        for t in transitions:
            findings = "; ".join(
                f"{f.rule} {f.status}"
                + (f" {f.topic}/{f.partition}" if f.topic is not None else "")
                + f": {f.message}"
                for f in (t.result.findings if t.result else [])
            )
            change = f"{t.previous} -> {t.current}"
            if t.news:
                change = f"{t.current}, now also {', '.join(t.news)}"
            echo(f"{_when(t.at)}  {t.cluster}/{t.group}: {change}  {findings}")

    def keep(evaluation: Evaluation) -> None:
        last[id(evaluation.evaluator)] = evaluation

    echo(f"replaying {table.num_rows} samples from {path} with {len(rules.rules) + 1} rules")
    replay_table(table, rules, scan_interval_s, on_evaluation=keep, on_transitions=show)
    if not last:
        echo("no samples")
        return
    echo("")
    header = f"{'cluster/group':<32} {'status':<7} {'complete':>8} {'total lag':>10}"
    echo(f"{header} {'behind':>9}  findings")
    finals = (result for evaluation in last.values() for result in evaluation.results())
    for result in sorted(finals, key=lambda r: (r.cluster, r.group)):
        behind = "-" if result.max_lag_seconds is None else f"{result.max_lag_seconds:.0f}s"
        rules_fired = ", ".join(sorted({f"{f.rule}:{f.status}" for f in result.findings})) or "-"
        echo(
            f"{result.cluster + '/' + result.group:<32} {result.status.value:<7} "
            f"{result.complete:>8.2f} {result.total_lag:>10} {behind:>9}  {rules_fired}"
        )
