"""The backtest on Spark: the session, reading the history, cutting the work into tasks, and the
distributed replay.

Groups are independent, so the work splits by group. Spark hashes (cluster, group) into buckets
and each task replays *many* groups at once through the vectorized engine: the evaluator's cost
per call is mostly fixed up to a few thousand rows, so a task amortizes it over all its rows.
About one task per core: as many buckets as keep ~2,000 rows of a scan in each
(:data:`ROWS_PER_TASK_SCAN`), times slices of the configurations when the fleet is too small for
that (:func:`plan_tasks`). Every task sees every scan time of its clusters (broadcast from the
driver), so a group behaves the same whichever bucket it lands in, and the Spark result equals
the single-process :func:`~notifier.backtest.replay.replay` over the whole history, row for row.
Routes that batch several groups into one notification (``group_by`` without ``group``) keep
those groups in one bucket (:func:`aggregation_scope`).

PySpark is imported inside the functions that need it, so that importing the backtest (and the
``local`` engine) works without it.
"""

from __future__ import annotations

import math
import os
import sys
import tempfile
import warnings
import zipfile
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import numpy as np
import pandas as pd
import pyarrow as pa

from notifier.backtest.grid import GridConfig
from notifier.backtest.replay import OUTPUT_SCHEMA, ReplayOptions, ReplayOutput, replay
from notifier.backtest.samples import SampleArrays
from notifier.config import NotifyConfig
from notifier.history import (
    HistoryError,
    HistoryNotFoundError,
    HistorySchemaError,
    validate_schema,
)
from notifier.notify import Route

if TYPE_CHECKING:
    from pyspark.sql import DataFrame as SparkFrame
    from pyspark.sql import SparkSession


_QUIET_LOG4J = """\
rootLogger.level = error
rootLogger.appenderRef.stderr.ref = stderr
appender.stderr.type = Console
appender.stderr.name = stderr
appender.stderr.target = SYSTEM_ERR
appender.stderr.layout.type = PatternLayout
appender.stderr.layout.pattern = %d{HH:mm:ss} %p %c{1}: %m%n
logger.gateway.name = org.apache.spark.api.python.PythonGatewayServer
logger.gateway.level = error
"""


def spark_session(
    master: str | None = None, conf: Mapping[str, str] | None = None
) -> tuple[SparkSession, bool]:
    """The active Spark session, or a new one; returns it and whether it was created here.

    A new session runs ``master`` (default ``local[*]``, or what ``spark-submit`` was given),
    with Spark's console progress bar off, UTC as the session time zone, Arrow on and logging
    at ERROR: the backtest prints its own progress, one line per stage. A local session uses
    this Python for its workers; on a cluster the notifier package is shipped to executors.
    """
    from pyspark import SparkContext
    from pyspark.sql import SparkSession

    active = SparkSession.getActiveSession()
    if active is not None:
        return active, False
    if SparkContext._active_spark_context is not None:  # a session made in another thread
        return SparkSession.builder.getOrCreate(), False
    builder = SparkSession.builder.appName("notifier-backtest")
    submitted = "PYSPARK_GATEWAY_PORT" in os.environ  # launched by spark-submit
    if master or not submitted:
        master = master or "local[*]"
        builder = builder.master(master)
    settings = {
        "spark.ui.showConsoleProgress": "false",
        "spark.sql.session.timeZone": "UTC",
        "spark.sql.execution.arrow.pyspark.enabled": "true",
    }
    if not submitted and (master or "").startswith("local"):
        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
        log4j = Path(tempfile.gettempdir()) / "notifier-backtest-log4j2.properties"
        log4j.write_text(_QUIET_LOG4J)
        settings["spark.driver.extraJavaOptions"] = f"-Dlog4j2.configurationFile=file:{log4j}"
        settings["spark.driver.memory"] = "4g"
    settings.update(conf or {})
    for key, value in settings.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    _ship_package(spark)
    return spark, True


def _ship_package(spark: SparkSession) -> None:
    """Executors need this package: send it along unless they run here with it installed."""
    from importlib import metadata

    master = spark.sparkContext.master or ""
    try:
        metadata.distribution("notifier")
        installed = True
    except metadata.PackageNotFoundError:
        installed = False
    if master.startswith("local") and installed:
        return
    package = Path(__file__).resolve().parents[1]
    target = Path(tempfile.mkdtemp(prefix="notifier-py-")) / "notifier.zip"
    with zipfile.ZipFile(target, "w", zipfile.ZIP_DEFLATED) as archive:
        for file in package.rglob("*"):
            if file.is_file() and "__pycache__" not in file.parts:
                archive.write(file, Path("notifier") / file.relative_to(package))
    spark.sparkContext.addPyFile(str(target))


def _spark_error(exc: Exception) -> str:
    """The first line of what went wrong, without the JVM stack."""
    text = str(exc).strip()
    for marker in ("HistorySchemaError: ", "AnalysisException: ", "Exception: "):
        if marker in text:
            text = text.split(marker, 1)[1]
            break
    return text.splitlines()[0][:500] if text else type(exc).__name__


def _arrow_schema(schema: Any) -> pa.Schema:
    """A Spark schema as Arrow, to check it with :func:`~notifier.history.validate_schema`."""
    from pyspark.sql.pandas.types import to_arrow_type

    fields = []
    for spark_field in schema.fields:
        try:
            kind = to_arrow_type(spark_field.dataType, timezone="UTC")
        except TypeError:  # an older PySpark without the time zone argument
            kind = to_arrow_type(spark_field.dataType)
        except Exception:  # a type Arrow cannot hold: certainly not a sample column
            kind = pa.binary()
        fields.append(pa.field(spark_field.name, kind))
    return pa.schema(fields)


def read_history_spark(
    spark: SparkSession,
    path: str,
    start_ms: int | None = None,
    end_ms: int | None = None,
    groups: str | None = None,
) -> SparkFrame:
    """The history at ``path`` (any URI Spark reads) as the replay's input columns: ``ts`` in
    epoch ms, null offsets as -1, rows in ``[start, end)`` of groups matching ``groups``.

    A dataset root is read as ``PATH/date=*`` with ``basePath`` (so ``incidents.csv`` and other
    files beside the partitions stay out); anything else as Parquet. Raises
    :class:`~notifier.history.HistoryNotFoundError` for a missing path and
    :class:`~notifier.history.HistorySchemaError` listing missing and mistyped columns.
    """
    from pyspark.sql import functions as F

    root = path.rstrip("/") or path
    partitioned = False
    try:
        jvm = spark.sparkContext._jvm
        hadoop_path = jvm.org.apache.hadoop.fs.Path(root)  # type: ignore[union-attr]
        fs = hadoop_path.getFileSystem(spark.sparkContext._jsc.hadoopConfiguration())
        if not fs.exists(hadoop_path):
            raise HistoryNotFoundError(f"history path {path} does not exist")
        pattern = jvm.org.apache.hadoop.fs.Path(root + "/date=*")  # type: ignore[union-attr]
        partitioned = bool(fs.globStatus(pattern))
    except HistoryError:
        raise
    except Exception:  # no JVM access (Spark Connect): let the reader decide
        partitioned = False
    try:
        if partitioned:
            frame = spark.read.option("basePath", root).parquet(root + "/date=*")
        else:
            frame = spark.read.parquet(root)
        schema = frame.schema
    except Exception as exc:
        message = _spark_error(exc)
        if "PATH_NOT_FOUND" in str(exc) or "does not exist" in message:
            raise HistoryNotFoundError(f"history path {path} does not exist") from None
        raise HistoryError(f"cannot read history at {path}: {message}") from None
    validate_schema(_arrow_schema(schema), path)
    frame = _with_availability(spark, frame, root, partitioned)

    ts = F.col("ts").cast("timestamp")
    if start_ms is not None:
        frame = frame.where(ts >= F.lit(_utc(start_ms)))
    if end_ms is not None:
        frame = frame.where(ts < F.lit(_utc(end_ms)))
    if groups is not None:
        frame = frame.where(F.col("group").rlike(groups))
    return frame.select(
        F.unix_millis(ts).alias("ts"),
        F.col("cluster").cast("string").alias("cluster"),
        F.col("group").cast("string").alias("group"),
        F.col("topic").cast("string").alias("topic"),
        F.col("partition").cast("int").alias("partition"),
        F.coalesce(F.col("committed_offset").cast("long"), F.lit(-1)).alias("committed_offset"),
        F.col("log_end_offset").cast("long").alias("log_end_offset"),
        F.coalesce(F.col("log_start_offset").cast("long"), F.lit(-1)).alias("log_start_offset"),
        F.col("group_state").cast("string").alias("group_state"),
        F.col("members").cast("int").alias("members"),
        F.col("member_hash").cast("long").alias("member_hash"),
        F.coalesce(F.col("available").cast("boolean"), F.lit(True)).alias("available"),
    )


def _with_availability(
    spark: SparkSession, frame: SparkFrame, root: str, partitioned: bool
) -> SparkFrame:
    """``frame`` with the ``available`` column: Spark takes one file's schema, and files
    written before the column existed lack it (their rows are available, a null once merged).
    When the file Spark took is one of those, the schemas are merged to find the column in
    newer files; a history without it anywhere reads as available throughout."""
    from pyspark.sql import functions as F

    if "available" in frame.columns:
        return frame
    try:
        reader = spark.read.option("mergeSchema", "true")
        if partitioned:
            merged = reader.option("basePath", root).parquet(root + "/date=*")
        else:
            merged = reader.parquet(root)
    except Exception:  # types that do not merge: no file can have told the column apart
        merged = frame
    if "available" in merged.columns:
        return merged
    return frame.withColumn("available", F.lit(True))


def _utc(ms: int) -> datetime:
    return datetime.fromtimestamp(ms / 1000, tz=UTC)


ROWS_PER_TASK_SCAN = 2000
"""Rows of one scan below which a task should not be split further. The evaluator's cost per
call is mostly fixed up to a few thousand rows (about 1 ms, then 0.5 µs a row), so splitting a
fleet's scans over more tasks adds work: small fleets split the configurations instead."""

MAX_SAMPLES_PER_TASK = 20_000_000
"""A task holds its samples in memory (about 150 bytes each as pandas): beyond this many, the
groups are split into more buckets whatever the cores."""


@dataclass(frozen=True, slots=True)
class TaskPlan:
    """How the replay is cut into Spark tasks: ``buckets`` of groups (by a stable hash of
    cluster and group) times ``slices`` of configurations (indexes into the configurations)."""

    buckets: int
    slices: list[list[int]]

    @property
    def tasks(self) -> int:
        return self.buckets * len(self.slices)


def aggregation_scope(notify: NotifyConfig | None) -> Literal["group", "cluster", "all"]:
    """How much of the fleet one notification may cover under these routes: a route whose
    ``group_by`` lacks ``group`` batches groups of a cluster together (or of every cluster when
    it lacks ``cluster`` too), so those must be replayed in one task."""
    if notify is None:
        return "group"
    scope: Literal["group", "cluster", "all"] = "group"
    for route in Route.build(notify.route).walk():
        labels = ("cluster", "group") if route.group_by is None else route.group_by
        if "group" not in labels:
            if "cluster" not in labels:
                return "all"
            scope = "cluster"
    return scope


def plan_tasks(
    rows_per_scan: float,
    samples: int,
    parallelism: int,
    configs: Sequence[GridConfig],
    scope: str = "group",
    buckets: int | None = None,
) -> TaskPlan:
    """About one task per core, each as large as it can be: the more rows an evaluation
    covers, the less its fixed cost weighs. Groups are split into as many buckets as keeps
    :data:`ROWS_PER_TASK_SCAN` rows of a scan in each, up to the cores (or more, to keep
    :data:`MAX_SAMPLES_PER_TASK`; ``buckets`` overrides); cores still idle take slices of the
    configurations. Slices keep configurations with the same window settings together, so
    they share a store."""
    cores = max(1, parallelism)
    if scope == "all":
        groups = 1
    elif buckets:
        groups = max(1, buckets)
    else:
        groups = int(min(cores, max(1, rows_per_scan // ROWS_PER_TASK_SCAN)))
        groups = max(groups, math.ceil(samples / MAX_SAMPLES_PER_TASK))
    count = max(1, min(len(configs), math.ceil(cores / groups)))
    order = sorted(
        range(len(configs)), key=lambda k: (configs[k].rules.window.model_dump_json(), k)
    )
    slices = [chunk.tolist() for chunk in np.array_split(np.asarray(order, np.int64), count)]
    return TaskPlan(groups, [sorted(chunk) for chunk in slices if chunk])


def _task_labels(spark: SparkSession, tasks: int) -> list[int]:
    """A label per task such that ``repartition(tasks, label)`` puts each task in a partition
    of its own (Spark hash-partitions by murmur3(label) mod n, which would otherwise put two
    tasks in one partition now and then and leave a core idle)."""
    from pyspark.sql import functions as F

    value = F.col("id").cast("int")
    rows = (
        spark.range(0, 64 * tasks)
        .select(value.alias("v"), F.pmod(F.hash(value), F.lit(tasks)).alias("p"))
        .collect()
    )
    first: dict[int, int] = {}
    for row in rows:
        first.setdefault(int(row["p"]), int(row["v"]))
    if len(first) < tasks:
        return list(range(tasks))
    return [first[p] for p in range(tasks)]


def _task(
    configs: Sequence[GridConfig], plan: TaskPlan, options: ReplayOptions, scan_times: Any
) -> Callable[[pd.DataFrame], pd.DataFrame]:
    def replay_task(frame: pd.DataFrame) -> pd.DataFrame:
        chosen = [configs[k] for k in plan.slices[int(frame["slice"].iloc[0])]]
        samples = SampleArrays.from_pandas(frame)
        return replay(samples, chosen, options, scan_times.value).to_frame()

    return replay_task


def spark_replay(
    spark: SparkSession,
    frame: SparkFrame,
    configs: Sequence[GridConfig],
    options: ReplayOptions,
    scan_times: dict[str, np.ndarray],
    plan: TaskPlan,
    scope: str,
    path: str,
) -> ReplayOutput:
    """Replay ``frame`` as ``plan`` cuts it: a task per bucket of groups and slice of the
    configurations, each a :func:`~notifier.backtest.replay.replay` that also sees every scan
    time of its clusters (``scan_times``); returns the tasks' outputs combined. ``path`` names
    the history in errors."""
    from pyspark.sql import functions as F

    count = len(plan.slices)
    if scope == "all" or plan.buckets == 1:
        bucket = F.lit(0)
    else:
        keys = (F.col("cluster"),) if scope == "cluster" else (F.col("cluster"), F.col("group"))
        bucket = F.pmod(F.hash(*keys), F.lit(plan.buckets))
    if count > 1:
        frame = frame.withColumn("slice", F.explode(F.array(*(F.lit(i) for i in range(count)))))
    else:
        frame = frame.withColumn("slice", F.lit(0))
    labels = F.array(*(F.lit(v) for v in _task_labels(spark, plan.tasks)))
    index = bucket * F.lit(count) + F.col("slice") + F.lit(1)
    shared = spark.sparkContext.broadcast(scan_times)
    try:
        result = (
            frame.withColumn("task", F.element_at(labels, index.cast("int")))
            .repartition(plan.tasks, "task")
            .groupBy("task")
            .applyInPandas(_task(configs, plan, options, shared), OUTPUT_SCHEMA)
        )
        try:
            with warnings.catch_warnings():
                # PySpark warns that Arrow failed before raising the task's own error.
                warnings.simplefilter("ignore", UserWarning)
                collected = result.toPandas()
        except Exception as exc:
            if "HistorySchemaError" in str(exc):
                raise HistorySchemaError(f"{path}: {_spark_error(exc)}") from None
            raise
    finally:
        shared.unpersist()
    return ReplayOutput.from_frame(collected)


def spark_scans(frame: SparkFrame, path: str) -> pd.DataFrame:
    """Rows per (cluster, scan time): the scan calendar every task needs, the sample count,
    the time span, and a null check of the two key columns on the way."""
    stats = frame.groupBy("cluster", "ts").count().toPandas()
    for column in ("cluster", "ts"):
        if stats[column].isna().any():
            rows = int(stats.loc[stats[column].isna(), "count"].sum())
            raise HistorySchemaError(
                f"{path}: column {column} has {rows} null values but may not be null"
            )
    return stats.rename(columns={"count": "rows"})
