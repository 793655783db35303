"""Backtest rule thresholds on stored history: what a grid of configurations would have sent.

``notifier backtest`` (or ``spark-submit notifier/backtest/__main__.py``) replays a sample
history through the live code path once per configuration of a parameter grid, and reports for
each configuration how many incidents it would have opened, how many notifications the routes
would have sent, how long it alerted, how often it flapped and, against labelled incidents, what
it caught, what it missed and how late.

:func:`run_backtest` is the whole job, in five stages each printing one line: check every input
(:mod:`~notifier.backtest.grid`), read the history (on Spark or in this process), replay
(:mod:`~notifier.backtest.replay`, on Spark through :mod:`~notifier.backtest.spark`), score
(:mod:`~notifier.backtest.scoring`, :mod:`~notifier.backtest.recommend`) and write the outputs
(:mod:`~notifier.backtest.report`).
"""

from __future__ import annotations

import os
import re
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import numpy as np
import pandas as pd

from notifier import resources
from notifier.backtest.grid import GridConfig, expand_grid, load_grid
from notifier.backtest.recommend import Recommendation, recommend, rules_yaml, show_parameter
from notifier.backtest.replay import ReplayOptions, ReplayOutput, replay
from notifier.backtest.report import write_report
from notifier.backtest.samples import SampleArrays
from notifier.backtest.scoring import HistorySpan, labels_frame, summarize
from notifier.backtest.spark import (
    aggregation_scope,
    plan_tasks,
    read_history_spark,
    spark_replay,
    spark_scans,
    spark_session,
)
from notifier.config import (
    ConfigError,
    NotifyConfig,
    format_duration,
    parse_duration,
    read_yaml,
)
from notifier.history import (
    HistoryEmptyError,
    HistoryError,
    load_incidents,
    read_history,
    to_ms,
)
from notifier.notify.config import parse_notify
from notifier.rules import RulesConfig, load_rules
from notifier.rules.kinds import kind_of

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

Echo = Callable[[str], None]

DEFAULT_WARMUP_S = 1800.0
"""A cold start is not what a running service sees: until a rarely committing group's commit
ring spans a few commits, Burrow's STOP rule fires on it. Thirty minutes covers groups that
commit every five minutes."""


@dataclass(slots=True)
class BacktestRequest:
    """Everything ``notifier backtest`` is given (durations in seconds)."""

    history: str
    rules: Path
    grid: Path
    out: Path
    incidents: Path | None = None
    routes: Path | None = None
    master: str | None = None
    start: str | None = None
    end: str | None = None
    groups: str | None = None
    interval_s: float = 10.0
    recall_target: float = 0.95
    slo_s: float = 300.0
    slo_for_s: float | None = None
    """Default: the shortest ``for`` of the rules file's ``lag_seconds`` rules (0 if none;
    :func:`default_slo_for`)."""
    tolerance_s: float | None = None
    """Default: one scan interval."""
    warmup_s: float | None = None
    """Replayed but not counted, to prime windows, commit rings and LEO tables as a running
    service has them. Default :data:`DEFAULT_WARMUP_S`, at most a quarter of the history;
    with ``start`` the replay begins this long before it."""
    buckets: int | None = None
    """Default: twice Spark's default parallelism (the cores of a local master)."""
    engine: Literal["spark", "local"] = "spark"
    """``local`` replays in this process without Spark (small histories, no Java)."""


@dataclass(slots=True)
class BacktestResult:
    configs: list[GridConfig]
    summary: pd.DataFrame
    alerts: pd.DataFrame
    output: ReplayOutput
    recommendation: Recommendation
    span: HistorySpan
    files: dict[str, Path]
    timings: dict[str, float] = field(default_factory=dict)
    labels: pd.DataFrame | None = None


def load_routes(path: str | os.PathLike[str]) -> NotifyConfig:
    """A notify config: a file with ``receivers`` and ``route``, or a service config's
    ``notify:`` section. Unset ``${ENV}`` secrets are fine: nothing is sent."""
    data = read_yaml(Path(path))
    if isinstance(data, dict) and "route" not in data and isinstance(data.get("notify"), dict):
        data = data["notify"]
    return parse_notify(data, str(path), strict_env=False)


def default_slo_for(rules: RulesConfig) -> float:
    """How long lag in seconds must exceed the SLO to count: the shortest ``for`` of the
    enabled rules of the kinds that page on lag in seconds (``lag_seconds``:
    :attr:`~notifier.rules.kinds.RuleKind.sets_slo_wait`), as a team paging on lag in seconds
    would wait."""
    waits = [r.for_ for r in rules.rules if kind_of(r.kind).sets_slo_wait and r.enabled]
    return min(waits) if waits else 0.0


def _time_arg(value: str | None, option: str) -> int | None:
    if value is None:
        return None
    try:
        return int(value) if value.strip().isdigit() else to_ms(value)
    except (ValueError, TypeError) as exc:
        raise HistoryError(
            f"{option} {value!r} is not a time (use ISO 8601, e.g. 2026-01-05T06:00Z)"
        ) from exc


def _when(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, tz=UTC).strftime("%Y-%m-%d %H:%M")


def _span_of(scans: pd.DataFrame, start_ms: int | None, warmup_s: float | None) -> HistorySpan:
    first, last = int(scans["ts"].min()), int(scans["ts"].max())
    if start_ms is not None:
        counted_from = max(start_ms, first)
    else:
        warmup_ms = round((DEFAULT_WARMUP_S if warmup_s is None else warmup_s) * 1000)
        counted_from = first + min(warmup_ms, (last - first) // 4)
    return HistorySpan(
        samples=int(scans["rows"].sum()),
        scans=len(scans),
        clusters=int(scans["cluster"].nunique()),
        start_ms=first,
        end_ms=last,
        counted_from_ms=counted_from,
    )


def _scan_calendar(scans: pd.DataFrame) -> dict[str, np.ndarray]:
    return {
        str(cluster): np.sort(part["ts"].to_numpy(np.int64))
        for cluster, part in scans.groupby("cluster")
    }


def _spacing_warning(calendar: Mapping[str, np.ndarray], interval_s: float) -> str | None:
    gaps = np.concatenate([np.diff(t) for t in calendar.values() if t.size > 1] or [np.zeros(0)])
    if gaps.size == 0:
        return None
    typical = float(np.median(gaps)) / 1000
    if abs(typical - interval_s) > 0.25 * interval_s:
        return (
            f"note: scans are typically {typical:.1f} s apart but --interval is {interval_s:g} s; "
            "windows and gaps are judged by --interval"
        )
    return None


def run_backtest(
    request: BacktestRequest, echo: Echo = print, spark: SparkSession | None = None
) -> BacktestResult:
    """Run the whole backtest: check inputs, read the history, replay, score, write ``out``.

    Every input is checked on the driver before any Spark work starts. Raises
    :class:`~notifier.config.rules.ConfigError` (rules, grid, routes) or
    :class:`~notifier.history.HistoryError` (history, incidents, time range) with a message
    naming the file and what is wrong.
    """
    timings: dict[str, float] = {}
    began = clock = time.perf_counter()

    def lap(stage: str) -> float:
        nonlocal clock
        now = time.perf_counter()
        timings[stage] = now - clock
        clock = now
        return timings[stage]

    # 1. inputs -------------------------------------------------------------------------------
    rules = load_rules(request.rules)
    grid = load_grid(request.grid)
    configs = expand_grid(rules, grid, str(request.grid))
    notify = load_routes(request.routes) if request.routes is not None else None
    labels_in = load_incidents(request.incidents) if request.incidents is not None else None
    start_ms = _time_arg(request.start, "--from")
    end_ms = _time_arg(request.end, "--to")
    if start_ms is not None and end_ms is not None and end_ms <= start_ms:
        raise HistoryError(
            f"empty time range: --to {request.end} is not after --from {request.start}"
        )
    if request.groups is not None:
        try:
            re.compile(request.groups)
        except re.error as exc:
            raise HistoryError(f"invalid --groups regex {request.groups!r}: {exc}") from None
    if not 0 < request.recall_target <= 1:
        raise ConfigError("--recall-target", [("", "expected a fraction in (0, 1]")])
    slo_for_s = default_slo_for(rules) if request.slo_for_s is None else request.slo_for_s
    tolerance_s = request.interval_s if request.tolerance_s is None else request.tolerance_s
    warmup_s = DEFAULT_WARMUP_S if request.warmup_s is None else request.warmup_s
    read_from = None if start_ms is None else start_ms - round(warmup_s * 1000)
    scope = aggregation_scope(notify)
    routes = f"routes from {request.routes}" if request.routes else "default route"
    labelled = (
        f"{len(labels_in)} labelled incidents from {request.incidents}"
        if labels_in is not None
        else f"no labels (SLO: lag > {format_duration(request.slo_s)} for "
        f"{format_duration(slo_for_s)})"
    )
    echo(
        f"[1/5] inputs: {len(configs)} configurations (0 = {request.rules}, "
        f"1-{len(configs) - 1} = {' × '.join(f'{k} ({len(v)})' for k, v in grid.items())}); "
        f"{routes}; {labelled}  ({lap('inputs'):.1f} s)"
    )

    created = False
    try:
        # 2. history --------------------------------------------------------------------------
        if request.engine == "local":
            table = read_history(request.history, read_from, end_ms, request.groups)
            samples = SampleArrays.from_arrow(table)
            scans = (
                pd.DataFrame({"cluster": samples.cluster_names[samples.cluster], "ts": samples.ts})
                .groupby(["cluster", "ts"], as_index=False)
                .size()
                .rename(columns={"size": "rows"})
            )
            where = "in this process"
        else:
            if spark is None:
                spark, created = spark_session(request.master)
            frame = read_history_spark(spark, request.history, read_from, end_ms, request.groups)
            scans = spark_scans(frame, request.history)
            where = f"on Spark {spark.sparkContext.master}"
        if scans.empty:
            window = f"[{request.start or '…'}, {request.end or '…'})"
            which = f" for groups matching {request.groups!r}" if request.groups else ""
            raise HistoryEmptyError(
                f"history at {request.history} has no rows"
                + (f" in the range {window}" if start_ms or end_ms else "")
                + which
            )
        span = _span_of(scans, start_ms, request.warmup_s)
        if span.counted_from_ms >= span.end_ms:
            raise HistoryEmptyError(
                f"history at {request.history} ends at {_when(span.end_ms)} UTC, before "
                f"counting would start at {_when(span.counted_from_ms)} UTC"
            )
        calendar = _scan_calendar(scans)
        options = ReplayOptions(
            request.interval_s, notify, request.slo_s, slo_for_s, span.counted_from_ms
        )
        warm = format_duration(round((span.counted_from_ms - span.start_ms) / 1000))
        echo(
            f"[2/5] history {request.history}: {span.samples:,} samples in {span.scans:,} scans "
            f"of {span.clusters} cluster(s), {_when(span.start_ms)} → {_when(span.end_ms)} UTC; "
            f"counting from {_when(span.counted_from_ms)} after a {warm} warm-up "
            f"({span.days:.2f} days)  ({lap('history'):.1f} s)"
        )
        warning = _spacing_warning(calendar, request.interval_s)
        if warning:
            echo(warning)

        # 3. replay ---------------------------------------------------------------------------
        if request.engine == "local":
            tasks = "1 task"
            output = replay(samples, configs, options)
        else:
            assert spark is not None
            plan = plan_tasks(
                span.samples / span.scans,
                span.samples,
                spark.sparkContext.defaultParallelism,
                configs,
                scope,
                request.buckets,
            )
            tasks = (
                f"{plan.tasks} tasks ({plan.buckets} group bucket(s) × "
                f"{len(plan.slices)} configuration slice(s))"
            )
            output = spark_replay(
                spark, frame, configs, options, calendar, plan, scope, request.history
            )
        seconds = lap("replay")
        work = span.samples * len(configs)
        if len(output.tasks) > 1:
            lengths = output.tasks["task_ms"] / 1000
            tasks += f" of {lengths.min():.1f}–{lengths.max():.1f} s"
        batching = {"group": "", "cluster": ", by cluster (routes batch a cluster's groups)",
                    "all": ", in one task (routes batch across clusters)"}[scope]  # fmt: skip
        echo(
            f"[3/5] replay {where}: {len(configs)} configurations × {span.samples:,} samples "
            f"of {len(output.groups):,} groups in {tasks}{batching}: "
            f"{work:,} sample-configurations, {work / max(seconds, 1e-9):,.0f}/s  ({seconds:.1f} s)"
        )
    finally:
        if created and spark is not None:
            spark.stop()

    # 4. scoring ------------------------------------------------------------------------------
    labels = None
    dropped = 0
    if labels_in is not None:
        labels = labels_frame(labels_in)
        known = output.groups[["cluster", "group"]].drop_duplicates()
        inside = labels.merge(known, on=["cluster", "group"], how="inner")
        counted = (inside["start_ms"] >= span.counted_from_ms) & (inside["start_ms"] <= span.end_ms)
        inside = inside[counted]
        dropped = len(labels) - len(inside)
        labels = inside.sort_values("label_id").reset_index(drop=True)
    tolerance_ms = round(tolerance_s * 1000)
    summary, alerts = summarize(configs, output, span, request.interval_s, tolerance_ms, labels)
    recommendation = recommend(summary, labels is not None, request.recall_target)
    summary["recommended"] = summary["config_id"] == recommendation.config_id
    if labels is not None:
        score = (
            f"against {len(labels)} labelled incidents"
            + (f" ({dropped} outside the counted time or groups ignored)" if dropped else "")
            + f": recall {summary['recall'].min():.2f}–{summary['recall'].max():.2f}"
        )
    else:
        score = (
            f"against {len(output.breaches)} SLO breaches: missed "
            f"{summary['slo_missed'].min()}–{summary['slo_missed'].max()}"
        )
    echo(
        f"[4/5] scored {len(configs)} configurations {score}; notifications "
        f"{summary['notifications'].min():,}–{summary['notifications'].max():,}  "
        f"({lap('scoring'):.1f} s)"
    )

    # 5. outputs ------------------------------------------------------------------------------
    out = Path(request.out)
    out.mkdir(parents=True, exist_ok=True)
    files = {
        "summary.csv": out / "summary.csv",
        "summary.parquet": out / "summary.parquet",
        "alerts.parquet": out / "alerts.parquet",
        "report.html": out / "report.html",
        "recommended-rules.yaml": out / "recommended-rules.yaml",
    }
    summary.to_csv(files["summary.csv"], index=False)
    summary.to_parquet(files["summary.parquet"], index=False)
    _alerts_table(alerts).to_parquet(files["alerts.parquet"], index=False)
    chosen = next(c for c in configs if c.config_id == recommendation.config_id)
    row = summary[summary["config_id"] == chosen.config_id].iloc[0]
    header = [
        f"Recommended by `notifier backtest` on {datetime.now(UTC):%Y-%m-%d %H:%M} UTC:",
        f"configuration {chosen.config_id} of {len(configs)} over {request.history}",
        f"({_when(span.start_ms)} to {_when(span.end_ms)} UTC, {span.samples:,} samples).",
        f"Why: {recommendation.reason}.",
        *(
            f"  {name} = {show_parameter(chosen.rules, name, value)}"
            for name, value in chosen.parameters.items()
        ),
        f"It would have opened {int(row['incidents'])} incidents and sent "
        f"{int(row['notifications'])} notifications.",
        "",
    ]
    files["recommended-rules.yaml"].write_text(rules_yaml(chosen.rules, header))
    context = {
        "history": f"{request.history} ({span.samples:,} samples, {span.scans:,} scans, "
        f"{len(output.groups):,} groups, {_when(span.start_ms)} → {_when(span.end_ms)} UTC)",
        "rules": f"{request.rules} (config 0)",
        "grid": f"{request.grid}: " + ", ".join(f"{k} {v}" for k, v in grid.items()),
        "routes": routes,
        "labels": labelled
        + (f"; {dropped} outside the replay ignored" if dropped else "")
        + (f"; tolerance {format_duration(tolerance_s)}" if labels is not None else ""),
        "SLO": f"lag in seconds > {format_duration(request.slo_s)} for at least "
        f"{format_duration(slo_for_s)}: {len(output.breaches)} breaches",
        "engine": f"{where}, {tasks}, replay {timings['replay']:.1f} s",
        "generated": f"{datetime.now(UTC):%Y-%m-%d %H:%M:%S} UTC",
    }
    images = write_report(
        files["report.html"],
        summary,
        alerts,
        labels,
        output.breaches,
        recommendation,
        span,
        context,
        tolerance_ms,
        request.recall_target,
        rules,
        notices=output.notices,
    )
    echo(
        f"[5/5] wrote {', '.join(files)} ({images} plots) to {out}  "
        f"({lap('outputs'):.1f} s; {time.perf_counter() - began:.1f} s in all)"
    )
    return BacktestResult(
        configs=configs,
        summary=summary,
        alerts=alerts,
        output=output,
        recommendation=recommendation,
        span=span,
        files=files,
        timings=timings,
        labels=labels,
    )


def _alerts_table(alerts: pd.DataFrame) -> pd.DataFrame:
    """alerts.parquet: every would-be incident with real timestamps (end null while open)."""
    end = alerts["end_ms"].where(alerts["end_ms"] >= 0)
    return pd.DataFrame(
        {
            "config_id": alerts["config_id"].astype(np.int32),
            "cluster": alerts["cluster"].astype(str),
            "group": alerts["group"].astype(str),
            "rule": alerts["rule"].astype(str),
            "status": alerts["status"].astype(str),
            "start": pd.to_datetime(alerts["start_ms"], unit="ms", utc=True),
            "end": pd.to_datetime(end, unit="ms", utc=True),
            "duration_s": ((end - alerts["start_ms"]) / 1000).astype("float64"),
            "close_reason": alerts["close_reason"].astype(object),
            "matched": alerts["matched"].astype("boolean"),
        }
    )


def summary_text(result: BacktestResult, limit: int = 40) -> str:
    """The summary as a plain table for the terminal (the key columns, recommended marked)."""
    summary = result.summary
    columns = ["config_id", *result.configs[0].parameters, "incidents", "notifications"]
    columns += ["alert_minutes", "flaps"]
    if "recall" in summary:
        columns += ["tp", "fp", "fn", "precision", "recall", "delay_p50_s", "delay_p90_s"]
    columns += ["slo_missed"]
    shown = summary[columns].head(limit).copy()
    shown.insert(0, " ", np.where(summary["recommended"].head(limit), "*", ""))
    text = shown.to_string(index=False, float_format=lambda v: f"{v:g}")
    more = f"\n… {len(summary) - limit} more in summary.csv" if len(summary) > limit else ""
    chosen = result.recommendation
    return f"{text}{more}\n* recommended: config {chosen.config_id} — {chosen.reason}" + (
        "" if chosen.met else " (target not met)"
    )


def request_from_options(options: Mapping[str, Any]) -> BacktestRequest:
    """A :class:`BacktestRequest` from parsed options (durations as strings)."""

    def seconds(name: str) -> float | None:
        value = options.get(name)
        if value is None:
            return None
        try:
            return parse_duration(value)
        except ValueError as exc:
            raise ConfigError(f"--{name.replace('_', '-')}", [("", str(exc))]) from None

    def path(name: str) -> Path | None:
        value = options.get(name)
        return None if value is None else Path(value)

    return BacktestRequest(
        history=str(options["history"]),
        rules=resources.rules_or_default(path("rules")),
        grid=Path(options["grid"]),
        out=Path(options["out"]),
        incidents=path("incidents"),
        routes=path("routes"),
        master=options.get("master"),
        start=options.get("start"),
        end=options.get("end"),
        groups=options.get("groups"),
        interval_s=seconds("interval") or 10.0,
        recall_target=float(options.get("recall_target") or 0.95),
        slo_s=seconds("slo") if options.get("slo") is not None else 300.0,  # type: ignore[arg-type]
        slo_for_s=seconds("slo_for"),
        tolerance_s=seconds("tolerance"),
        warmup_s=seconds("warmup"),
        buckets=options.get("buckets"),
        engine=options.get("engine") or "spark",
    )
