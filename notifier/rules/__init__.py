"""rules"""

from notifier.rules.evaluate import (
    Evaluation,
    Evaluator,
    TransitionTracker,
    group_without_partitions,
    not_found,
)
from notifier.rules.replay import print_replay, read_samples, replay_table, scans
from notifier.rules.store import NULL, ScanColumns, WindowStore
from notifier.rules.testrules import RuleTest, run_file, series_samples

__all__ = [
    "NULL",
    "Evaluation",
    "Evaluator",
    "RuleTest",
    "ScanColumns",
    "TransitionTracker",
    "WindowStore",
    "group_without_partitions",
    "not_found",
    "print_replay",
    "read_samples",
    "replay_table",
    "run_file",
    "scans",
    "series_samples",
]
