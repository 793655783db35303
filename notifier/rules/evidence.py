"""The store's per-scan evidence, put together: the habits several kinds read
(:mod:`notifier.rules.habits`) and the evidence each kind keeps of its own
(``RuleKind.evidence`` in its module under :mod:`notifier.rules.kinds`).

:class:`~notifier.rules.store.WindowStore` allocates :data:`COLUMNS` (and checkpoints them by
name) and calls :func:`update` after each scan it ingests.
"""

from __future__ import annotations

import numpy as np

from notifier.rules import habits
from notifier.rules.habits import NULL, UNSET_TS, WAITS_TO_LEARN, ScanTimes, ScanView
from notifier.rules.kinds import kinds_with_evidence

_OWN = kinds_with_evidence()

COLUMNS: tuple[tuple[str, type, float], ...] = habits.COLUMNS + tuple(
    column for kind in _OWN if kind.evidence is not None for column in kind.evidence.columns
)
"""The evidence columns of :class:`~notifier.rules.store.WindowStore`, one value per row."""

_repeated = sorted({name for name, _, _ in COLUMNS if [n for n, _, _ in COLUMNS].count(name) > 1})
if _repeated:
    raise ValueError(f"evidence columns declared twice: {', '.join(_repeated)}")


def update(columns: dict[str, np.ndarray], index: slice | np.ndarray, scan: ScanView,
           churn_gap_ms: int, scan_interval_ms: int, max_gap_ms: int) -> None:  # fmt: skip
    """Advance the evidence of the rows at ``index`` by one scan, in place: the shared habits,
    then each kind's own."""
    times = ScanTimes(churn_gap_ms, scan_interval_ms, max_gap_ms)
    habits.update(columns, index, scan, times)
    for kind in _OWN:
        if kind.evidence is not None:
            kind.evidence.update(columns, index, scan, times)


__all__ = ["COLUMNS", "NULL", "UNSET_TS", "WAITS_TO_LEARN", "ScanView", "update"]
