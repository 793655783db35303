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
    then each of ``kinds``' own.

    A row's evidence depends on its own values alone, so the rows go through a chunk of
    :data:`UPDATE_CHUNK_ROWS` at a time: each update reads, decodes and computes a few dozen
    values per row, hundreds of MB of temporaries for a million rows at once."""
    times = ScanTimes(churn_gap_ms, scan_interval_ms, max_gap_ms)
    writable = dict(columns)
    keeping = [kind.evidence for kind in kinds if kind.evidence is not None]
    rows = scan.had_sample.size
    for start in range(0, max(rows, 1), UPDATE_CHUNK_ROWS):
        part = slice(start, start + UPDATE_CHUNK_ROWS)
        at = index[part] if isinstance(index, np.ndarray) else _sub_slice(index, part)
        view = scan if rows <= UPDATE_CHUNK_ROWS else scan.part(part)
        habits.update(writable, at, view, times)
        for own in keeping:
            own.update(writable, at, view, times)


UPDATE_CHUNK_ROWS = 1 << 16
"""Rows whose evidence :func:`update` advances at a time (the results do not depend on it)."""


def _sub_slice(index: slice, part: slice) -> slice:
    """Positions ``part`` (a run from 0 up) of the rows ``index`` (a run)."""
    first = index.start or 0
    return slice(first + (part.start or 0), min(first + (part.stop or 0), index.stop))


__all__ = [
    "NULL",
    "UNSET_TS",
    "UPDATE_CHUNK_ROWS",
    "WAITS_TO_LEARN",
    "EvidenceColumn",
    "ScanView",
    "columns",
    "keeping_kinds",
    "update",
]
