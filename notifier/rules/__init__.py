"""The rule engine: window store → evaluate → transitions, pure and clock-free.

- :mod:`~notifier.rules.store`: the window store (sample windows, Burrow's commit rings, LEO
  tables) in columnar numpy arrays.
- :mod:`~notifier.rules.lagtime`: lag in seconds from LEO tables.
- :mod:`~notifier.rules.evidence`: per-scan evidence that outlives the window (how long the
  offset has waited, each group's usual commit interval and restart, churn, rewinds, rates).
- :mod:`~notifier.rules.kinds`: the rule kinds, one module each (config model, kernel, finding
  text) and the one registry of them; :mod:`~notifier.rules.kernels`: Burrow's rules and what
  the kinds share, pure functions over arrays.
- :mod:`~notifier.rules.rulesfile`: the rules file (``rules.yaml``), rules of any registered kind.
- :mod:`~notifier.rules.settings`: a rule's parameters bound to rows (selectors, overrides);
  :mod:`~notifier.rules.state`: its per-group ``for`` / ``keep_firing_for`` state.
- :mod:`~notifier.rules.evaluate`: the evaluator (every kind over the rows, the complete gate,
  group roll-up); :mod:`~notifier.rules.results`: the evaluation and the group results and
  findings built from it; :mod:`~notifier.rules.transitions`: the transition tracker.
- :mod:`~notifier.rules.step`: one scan's step (ingest, forget, expire, evaluate, transitions),
  shared by the service, replays and the backtest.
- :mod:`~notifier.rules.replay` and :mod:`~notifier.rules.testrules`: samples from files
  replayed through that step; ``notifier replay`` and ``notifier test-rules``.

Imports only :mod:`notifier.config` and :mod:`notifier.types`; no I/O but reading sample files.
"""

from notifier.rules.evaluate import Evaluator
from notifier.rules.kinds import RuleKind, register
from notifier.rules.lagtime import LeoReset
from notifier.rules.narrow import ColumnReader
from notifier.rules.replay import Moment, print_replay, read_samples, replay_table, scans
from notifier.rules.results import Evaluation, group_without_partitions, not_found
from notifier.rules.rulesfile import RulesConfig, load_rules, parse_rules, with_parameters
from notifier.rules.scancolumns import GroupRows, ScanColumns
from notifier.rules.step import (
    EXPIRE_EVERY_MS,
    ClusterPipeline,
    StoreChange,
    StoreStep,
    evaluate_step,
    unavailable_samples,
)
from notifier.rules.store import NULL, WindowStore
from notifier.rules.testrules import RuleTest, run_file, series_samples
from notifier.rules.transitions import TransitionTracker

__all__ = [
    "EXPIRE_EVERY_MS",
    "NULL",
    "ClusterPipeline",
    "ColumnReader",
    "Evaluation",
    "Evaluator",
    "GroupRows",
    "LeoReset",
    "Moment",
    "RuleKind",
    "RuleTest",
    "RulesConfig",
    "ScanColumns",
    "StoreChange",
    "StoreStep",
    "TransitionTracker",
    "WindowStore",
    "evaluate_step",
    "group_without_partitions",
    "load_rules",
    "not_found",
    "parse_rules",
    "print_replay",
    "read_samples",
    "register",
    "replay_table",
    "run_file",
    "scans",
    "series_samples",
    "unavailable_samples",
    "with_parameters",
]
