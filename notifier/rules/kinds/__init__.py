"""The rule kinds: one module each, and the one registry of them.

A kind's module holds its config model, its kernel (``evaluate``, pure), its finding text
(``describe`` / ``describe_group``) and any evidence only it keeps from scan to scan
(``evidence``), and ends with ``KIND = RuleKind(...)``. The built-in kinds
are registered below, in the order the rules file's errors list them; a kind from elsewhere
(a test's, a plug-in's) calls :func:`register` itself. The rules file's discriminated union
(:mod:`notifier.rules.rulesfile`), parameter grids, the evaluator and the store's evidence
(:mod:`notifier.rules.evidence`), the charts' threshold lines (``chart_line``) and the
backtest's default SLO wait (``sets_slo_wait``) all read the registry, so adding a kind touches
nothing else. README, "How to add a rule kind, a channel or an endpoint".
"""

from notifier.rules.kinds import (
    consumers_gone,
    falling_behind,
    lag,
    lag_seconds,
    progress,
    rebalance_storm,
    retention,
    rewind,
    stuck_rebalance,
)
from notifier.rules.kinds.base import (
    AnyRegisteredKind,
    ChartLine,
    Description,
    GroupView,
    KindEvidence,
    PartitionView,
    Rows,
    RuleKind,
    RuleRun,
    Verdict,
    as_int,
    every_group,
    human_seconds,
    kind_names,
    kind_of,
    kinds,
    kinds_with_evidence,
    on_change,
    position_evidence,
    register,
    threshold_line,
    unregister,
    with_hysteresis,
)

BUILTIN_KINDS: tuple[RuleKind, ...] = (
    lag.KIND,
    lag_seconds.KIND,
    progress.KIND,
    rewind.KIND,
    falling_behind.KIND,
    stuck_rebalance.KIND,
    rebalance_storm.KIND,
    retention.KIND,
    consumers_gone.KIND,
)
"""The kinds every rules file knows (the registration a built-in kind adds a line to)."""

for _kind in BUILTIN_KINDS:
    register(_kind)

__all__ = [
    "BUILTIN_KINDS",
    "AnyRegisteredKind",
    "ChartLine",
    "Description",
    "GroupView",
    "KindEvidence",
    "PartitionView",
    "Rows",
    "RuleKind",
    "RuleRun",
    "Verdict",
    "as_int",
    "every_group",
    "human_seconds",
    "kind_names",
    "kind_of",
    "kinds",
    "kinds_with_evidence",
    "on_change",
    "position_evidence",
    "register",
    "threshold_line",
    "unregister",
    "with_hysteresis",
]
