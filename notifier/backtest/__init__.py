"""Backtests: replay stored history through the live rules and notification code once per
configuration of a parameter grid, and say what each would have sent (``notifier backtest``).

Modules: ``grid`` (the grid and its configurations), ``samples`` (the replay's input as numpy
columns), ``replay`` (the replay engine), ``scoring`` (matching incidents to labels or SLO
breaches, the summary), ``recommend`` (choosing a configuration, its rules file), ``report`` (the
HTML report), ``spark`` (session, history reading, task planning, the distributed replay), ``job``
(the whole job: :func:`run_backtest`), ``kafkasim`` (a second-by-second model of brokers and
client libraries), ``sweep`` (every benign pattern and incident kind over a grid of its
parameters, on kafkasim), ``sweepreport`` (the sweep's heat maps), ``__main__`` (the
spark-submit command line). The synthetic histories it is measured on are made by
:mod:`notifier.synth`.

May import ``notifier.config``, ``notifier.history``, ``notifier.rules``, ``notifier.notify`` and
``notifier.types``. PySpark and matplotlib are imported only when used.
"""

from notifier.backtest.grid import GridConfig, expand_grid, parse_grid
from notifier.backtest.job import (
    BacktestRequest,
    BacktestResult,
    request_from_options,
    run_backtest,
    summary_text,
)
from notifier.backtest.recommend import Recommendation, recommend, rules_yaml
from notifier.backtest.replay import (
    COUNTER_COLUMNS,
    INCIDENT_COLUMNS,
    ReplayOptions,
    ReplayOutput,
    replay,
)
from notifier.backtest.samples import SampleArrays
from notifier.backtest.scoring import HistorySpan, match_incidents, summarize
from notifier.backtest.spark import (
    TaskPlan,
    aggregation_scope,
    plan_tasks,
    read_history_spark,
    spark_replay,
    spark_scans,
    spark_session,
)

__all__ = [
    "COUNTER_COLUMNS",
    "INCIDENT_COLUMNS",
    "BacktestRequest",
    "BacktestResult",
    "GridConfig",
    "HistorySpan",
    "Recommendation",
    "ReplayOptions",
    "ReplayOutput",
    "SampleArrays",
    "TaskPlan",
    "aggregation_scope",
    "expand_grid",
    "match_incidents",
    "parse_grid",
    "plan_tasks",
    "read_history_spark",
    "recommend",
    "replay",
    "request_from_options",
    "rules_yaml",
    "run_backtest",
    "spark_replay",
    "spark_scans",
    "spark_session",
    "summarize",
    "summary_text",
]
