"""backtest"""

from notifier.backtest.job import (
    BacktestRequest,
    GridConfig,
    ReplayOptions,
    SampleArrays,
    expand_grid,
    match_incidents,
    parse_grid,
    plan_tasks,
    recommend,
    replay,
    request_from_options,
    rules_yaml,
    run_backtest,
    summary_text,
)
from notifier.backtest.synth import INCIDENT_KINDS, SynthResult, synthesize

__all__ = [
    "INCIDENT_KINDS",
    "BacktestRequest",
    "GridConfig",
    "ReplayOptions",
    "SampleArrays",
    "SynthResult",
    "expand_grid",
    "match_incidents",
    "parse_grid",
    "plan_tasks",
    "recommend",
    "replay",
    "request_from_options",
    "rules_yaml",
    "run_backtest",
    "summary_text",
    "synthesize",
]
