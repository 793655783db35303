"""The rule engine: window store → evaluate → transitions, pure and clock-free.

- :mod:`~notifier.rules.store`: the window store (sample windows, Burrow's commit rings, LEO
  tables) in columnar numpy arrays.
- :mod:`~notifier.rules.lagtime`: lag in seconds from LEO tables.
- :mod:`~notifier.rules.evidence`: per-scan evidence that outlives the window (how long the
  offset has waited, each group's usual commit interval and restart, churn, rewinds, rates).
- :mod:`~notifier.rules.kernels`: the rules themselves, pure functions over arrays.
- :mod:`~notifier.rules.evaluate`: the evaluator (selectors, ``for`` / ``keep_firing_for``,
  the complete gate, group roll-up) and the transition tracker.
- :mod:`~notifier.rules.step`: one scan's step (ingest, forget, expire, evaluate, transitions),
  shared by the service, replays and the backtest.
- :mod:`~notifier.rules.replay` and :mod:`~notifier.rules.testrules`: samples from files
  replayed through that step; ``notifier replay`` and ``notifier test-rules``.

Imports only :mod:`notifier.config` and :mod:`notifier.types`; no I/O but reading sample files.
"""

from notifier.rules.evaluate import (
    Evaluation,
    Evaluator,
    TransitionTracker,
    group_without_partitions,
    not_found,
)
from notifier.rules.lagtime import LeoReset
from notifier.rules.replay import Moment, print_replay, read_samples, replay_table, scans
from notifier.rules.step import (
    EXPIRE_EVERY_MS,
    ClusterPipeline,
    StoreChange,
    StoreStep,
    evaluate_step,
)
from notifier.rules.store import NULL, ROW_COLUMN_NAMES, GroupRows, ScanColumns, WindowStore
from notifier.rules.testrules import RuleTest, run_file, series_samples

__all__ = [
    "EXPIRE_EVERY_MS",
    "NULL",
    "ROW_COLUMN_NAMES",
    "ClusterPipeline",
    "Evaluation",
    "Evaluator",
    "GroupRows",
    "LeoReset",
    "Moment",
    "RuleTest",
    "ScanColumns",
    "StoreChange",
    "StoreStep",
    "TransitionTracker",
    "WindowStore",
    "evaluate_step",
    "group_without_partitions",
    "not_found",
    "print_replay",
    "read_samples",
    "replay_table",
    "run_file",
    "scans",
    "series_samples",
]
