"""The store's per-scan evidence, put together: the habits several kinds read
(:mod:`notifier.rules.habits`) and the evidence each kind keeps of its own
(``RuleKind.evidence`` in its module under :mod:`notifier.rules.kinds`).

Nothing here lists a column: :func:`columns` reads the kinds' own declarations from the
registry. A :class:`~notifier.rules.store.WindowStore` takes the kinds registered when it is
built (:func:`keeping_kinds`), allocates :func:`columns` of them (and checkpoints them by
name), and calls :func:`update` with those kinds after each scan it ingests.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

import numpy as np

from notifier.rules import habits
from notifier.rules.habits import NULL, UNSET_TS, WAITS_TO_LEARN, ScanTimes, ScanView
from notifier.rules.kinds import RuleKind, kinds_with_evidence

EvidenceColumn = tuple[str, type, float]
"""``(name, dtype, value of a new row)``, as a kind's ``KindEvidence.columns`` declares it."""


def keeping_kinds() -> tuple[RuleKind, ...]:
    """The registered kinds that keep evidence of their own, in registration order."""
    return kinds_with_evidence()


def columns(kinds: Iterable[RuleKind] | None = None) -> tuple[EvidenceColumn, ...]:
    """The evidence columns of a store holding ``kinds``' evidence (default: every registered
    kind's): the shared habits, then each kind's own, one value per row."""
    chosen = keeping_kinds() if kinds is None else tuple(kinds)
    declared = habits.COLUMNS + tuple(
        column for kind in chosen if kind.evidence is not None for column in kind.evidence.columns
    )
    names = [name for name, _, _ in declared]
    repeated = sorted({name for name in names if names.count(name) > 1})
    if repeated:
        raise ValueError(f"evidence columns declared twice: {', '.join(repeated)}")
    bad = [name for name in names if not name.startswith("e_")]
    if bad:
        raise ValueError(f"evidence column names must start with 'e_': {', '.join(bad)}")
    return declared


def update(columns: Mapping[str, np.ndarray], kinds: Iterable[RuleKind],
           index: slice | np.ndarray, scan: ScanView,
           churn_gap_ms: int, scan_interval_ms: int, max_gap_ms: int) -> None:  # fmt: skip
    """Advance the evidence of the rows at ``index`` by one scan, in place: the shared habits,
    then each of ``kinds``' own."""
    times = ScanTimes(churn_gap_ms, scan_interval_ms, max_gap_ms)
    writable = dict(columns)
    habits.update(writable, index, scan, times)
    for kind in kinds:
        if kind.evidence is not None:
            kind.evidence.update(writable, index, scan, times)


__all__ = [
    "NULL",
    "UNSET_TS",
    "WAITS_TO_LEARN",
    "EvidenceColumn",
    "ScanView",
    "columns",
    "keeping_kinds",
    "update",
]
