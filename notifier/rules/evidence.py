"""The store's per-scan evidence, put together: the habits several kinds read
(:mod:`notifier.rules.habits`) and the evidence each kind keeps of its own
(``RuleKind.evidence`` in its module under :mod:`notifier.rules.kinds`).

Nothing here lists a column: :func:`columns` and :func:`group_columns` read the kinds' own
declarations from the registry. A :class:`~notifier.rules.store.WindowStore` takes the kinds
registered when it is built (:func:`keeping_kinds`), allocates their columns (and checkpoints
them by name), and calls :func:`update` with those kinds after each scan it ingests. A kind
whose evidence is the group's (``KindEvidence.per_group``) has it held once per group and
advanced once per scan from what the group showed (:func:`group_view`).
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
    """The per-row evidence columns of a store holding ``kinds``' evidence (default: every
    registered kind's): the shared habits, then each kind's own, one value per row."""
    chosen = _chosen(kinds)
    declared = habits.COLUMNS + tuple(
        column for kind in chosen if not _per_group(kind) for column in _declared(kind)
    )
    _check_names(declared + group_columns(chosen))
    return declared


def group_columns(kinds: Iterable[RuleKind] | None = None) -> tuple[EvidenceColumn, ...]:
    """The evidence columns of ``kinds`` (default: every registered kind's) held once per
    group (``KindEvidence.per_group``)."""
    declared = tuple(
        column for kind in _chosen(kinds) if _per_group(kind) for column in _declared(kind)
    )
    _check_names(declared)
    return declared


def _chosen(kinds: Iterable[RuleKind] | None) -> tuple[RuleKind, ...]:
    return keeping_kinds() if kinds is None else tuple(kinds)


def _per_group(kind: RuleKind) -> bool:
    return kind.evidence is not None and kind.evidence.per_group


def _declared(kind: RuleKind) -> tuple[EvidenceColumn, ...]:
    return () if kind.evidence is None else kind.evidence.columns


def _check_names(declared: tuple[EvidenceColumn, ...]) -> None:
    names = [name for name, _, _ in declared]
    repeated = sorted({name for name in names if names.count(name) > 1})
    if repeated:
        raise ValueError(f"evidence columns declared twice: {', '.join(repeated)}")
    bad = [name for name in names if not name.startswith("e_")]
    if bad:
        raise ValueError(f"evidence column names must start with 'e_': {', '.join(bad)}")


def update(columns: Mapping[str, np.ndarray], kinds: Iterable[RuleKind],
           index: slice | np.ndarray, scan: ScanView,
           churn_gap_ms: int, scan_interval_ms: int, max_gap_ms: int,
           row_group: np.ndarray | None = None,
           by_group: Mapping[str, np.ndarray] | None = None) -> None:  # fmt: skip
    """Advance the evidence of the rows at ``index`` by one scan, in place: the shared habits,
    then each of ``kinds``' own; the per-group evidence (``by_group``: arrays by group id) of
    the groups of those rows (``row_group``: each one's group id) once each.

    A row's evidence depends on its own values alone, so the rows go through a chunk of
    :data:`UPDATE_CHUNK_ROWS` at a time: each update reads, decodes and computes a few dozen
    values per row, hundreds of MB of temporaries for a million rows at once."""
    times = ScanTimes(churn_gap_ms, scan_interval_ms, max_gap_ms)
    chosen = tuple(kinds)
    writable = dict(columns)
    keeping = [kind.evidence for kind in chosen if kind.evidence and not kind.evidence.per_group]
    rows = scan.had_sample.size
    for start in range(0, max(rows, 1), UPDATE_CHUNK_ROWS):
        part = slice(start, start + UPDATE_CHUNK_ROWS)
        at = index[part] if isinstance(index, np.ndarray) else _sub_slice(index, part)
        view = scan if rows <= UPDATE_CHUNK_ROWS else scan.part(part)
        habits.update(writable, at, view, times)
        for own in keeping:
            own.update(writable, at, view, times)
    per_group = [kind.evidence for kind in chosen if kind.evidence and kind.evidence.per_group]
    if not per_group or rows == 0:
        return
    if row_group is None or by_group is None:
        raise ValueError("per-group evidence needs each row's group id and the group columns")
    gids, view = group_view(scan, row_group)
    group_writable = dict(by_group)
    for own in per_group:
        own.update(group_writable, gids, view, times)


def upgrade(arrays: dict[str, np.ndarray], kinds: Iterable[RuleKind] | None = None) -> None:
    """Derive, in place, the evidence columns an older layout of ``arrays`` (a checkpoint's or
    a hand-over's per-row arrays, by name) lacks from what it has (``KindEvidence.upgrade``)."""
    for kind in _chosen(kinds):
        if kind.evidence is not None and kind.evidence.upgrade is not None:
            kind.evidence.upgrade(arrays)


def group_view(scan: ScanView, row_group: np.ndarray) -> tuple[np.ndarray, ScanView]:
    """The groups of a scan's rows (``row_group``: each row's group id), sorted, and what the
    scan showed of each: its time, state and members (every row of a group has its group's),
    whether any of its partitions seen at the group's previous scan saw its member set change,
    whether any had a sample before, and the latest time one of them was seen before. Offsets
    are one partition's, read by no per-group update."""
    gids, first, slot = np.unique(row_group, return_index=True, return_inverse=True)

    def any_row(mask: np.ndarray) -> np.ndarray:
        return np.bincount(slot, weights=mask, minlength=gids.size) > 0

    previous_ts = np.full(gids.size, UNSET_TS, dtype=np.int64)
    np.maximum.at(previous_ts, slot, scan.previous_ts)
    own = scan.part(first)
    # Only a partition the group's previous scan saw says whether its members changed since:
    # one a scan left out (no leader during a broker restart) still compares with the member
    # set it last saw, a change the group's other partitions already showed.
    own.member_changed = any_row(scan.member_changed & (scan.previous_ts == previous_ts[slot]))
    own.had_sample = any_row(scan.had_sample)
    own.previous_ts = previous_ts
    return gids, own


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
    "group_columns",
    "group_view",
    "keeping_kinds",
    "update",
    "upgrade",
]
