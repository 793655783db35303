"""One scan's step through the pipeline, the same code for the live service, ``notifier
replay`` / ``test-rules`` and the backtest:

    ingest the scan into the window store → forget what vanished → expire → evaluate → transitions

:class:`StoreStep` moves one cluster's window store forward by one scan; :func:`evaluate_step`
evaluates the store and turns the result into transitions. The backtest shares one store
between the rule configurations that have the same window settings, so the two halves are
separate; :class:`ClusterPipeline` joins them for the usual case of one store, one evaluator and
one transition tracker per cluster.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa

from notifier.rules.annotate import annotator_for
from notifier.rules.evaluate import Evaluator
from notifier.rules.results import Evaluation
from notifier.rules.rulesfile import RulesConfig
from notifier.rules.scancolumns import ScanColumns
from notifier.rules.store import WindowStore
from notifier.rules.transitions import TransitionTracker
from notifier.types import GROUP_STATES, SAMPLE_SCHEMA, Transition

EXPIRE_EVERY_MS = 60_000
"""How often (in scan time) Burrow's expire-group runs: it drops groups after days, so once a
minute is plenty and keeps the per-scan cost flat."""

GroupKey = tuple[str, str]


@dataclass(slots=True)
class StoreChange:
    """What one scan removed from a store: the groups it forgot (sorted ``(cluster, group)``),
    their group ids, and the id → key table as it was before (ids may be reused later)."""

    gone: list[GroupKey] = field(default_factory=list)
    gone_ids: np.ndarray | None = None
    keys_before: list[GroupKey | None] | None = None


_NOTHING_GONE = StoreChange()


class StoreStep:
    """Moves one cluster's window store forward, one successful scan at a time."""

    def __init__(self, store: WindowStore, expire_every_ms: int = EXPIRE_EVERY_MS) -> None:
        self.store = store
        self.expire_every_ms = expire_every_ms
        self._touched: np.ndarray | None = None
        self._next_expire = -1

    def advance(
        self,
        scan: ScanColumns,
        listed_groups: Collection[str] | None = None,
        unavailable: Collection[tuple[str, int]] = (),
    ) -> StoreChange:
        """Ingest ``scan``; drop the group-partitions it no longer lists, except partitions
        that are only unavailable for the moment (``(topic, partition)``: the scan's own
        :attr:`~ScanColumns.unavailable`, which the history records, and ``unavailable``),
        and the groups
        the cluster no longer lists (``listed_groups``; default: the groups with rows in the
        scan); once every :data:`EXPIRE_EVERY_MS` of scan time, drop the groups Burrow's
        expire-group says are dead. Returns what was forgotten, so open alerts resolve as gone.
        """
        store = self.store
        now = scan.ts
        touched = store.ingest_scan(scan)
        # The store hands back the same rows array while a cluster's layout is unchanged: then
        # nothing can have vanished.
        layout_changed = touched is not self._touched
        expire_due = now >= self._next_expire
        expiring = expire_due and self._next_expire >= 0
        if expire_due:
            self._next_expire = now + self.expire_every_ms
        if not layout_changed and not expiring:
            return _NOTHING_GONE
        before = list(store.group_key)
        if layout_changed:
            self._touched = touched
            alive = store.alive_rows()
            if alive.size != touched.size:
                missing = np.setdiff1d(alive, touched, assume_unique=True)
                if unavailable or scan.unavailable:
                    keep = {*unavailable, *scan.unavailable}
                    missing = np.asarray(
                        [r for r in missing.tolist() if _topic_partition(store, r) not in keep],
                        dtype=np.int64,
                    )
                store.remove_rows(missing)
            if listed_groups is not None:
                listed = set(listed_groups)
                store.remove_groups(k for k in store.groups(scan.cluster) if k[1] not in listed)
        if expiring:
            store.expire(now)
        return _forgotten(store, before)


def _topic_partition(store: WindowStore, row: int) -> tuple[str, int]:
    _, _, topic, partition = store.row_key_of(row)  # rows handed out by alive_rows() are in use
    return topic, partition


def _forgotten(store: WindowStore, before: list[GroupKey | None]) -> StoreChange:
    gids = [g for g, key in enumerate(before) if key is not None and store.group_key[g] is None]
    if not gids:
        return _NOTHING_GONE
    gone = sorted(key for g in gids if (key := before[g]) is not None)
    return StoreChange(gone, np.asarray(gids, dtype=np.int64), before)


def unavailable_samples(
    store: WindowStore, cluster: str, ts: int, unavailable: Collection[tuple[str, int]]
) -> pa.Table:
    """What the history records of the partitions a scan of ``cluster`` at ``ts`` could not
    read (``(topic, partition)``): one row per window the step kept of them, marked unavailable,
    its log offsets null and its commit and group as last seen, in the sample schema. Replayed,
    a scan's unavailable rows keep the same windows (:attr:`ScanColumns.unavailable`)."""
    columns: dict[str, list[object]] = {name: [] for name in SAMPLE_SCHEMA.names}
    if unavailable:
        lost = set(unavailable)
        for row in store.alive_rows().tolist():
            key = store.row_key[row]
            if key is None or key[0] != cluster or (key[2], key[3]) not in lost:
                continue
            committed = int(store.latest_committed[row])
            state = int(store.latest_state[row])
            for name, value in (
                ("ts", ts), ("cluster", cluster), ("group", key[1]), ("topic", key[2]),
                ("partition", key[3]), ("committed_offset", None if committed < 0 else committed),
                ("log_end_offset", None), ("log_start_offset", None),
                ("group_state", GROUP_STATES[state] if 0 <= state < len(GROUP_STATES)
                 else "Unknown"),
                ("members", int(store.latest_members[row])),
                ("member_hash", int(store.last_hash[row])), ("available", False),
            ):  # fmt: skip
                columns[name].append(value)
    return pa.Table.from_pydict(columns, schema=SAMPLE_SCHEMA)


def evaluate_step(
    evaluator: Evaluator, tracker: TransitionTracker, gone: list[GroupKey], now: int
) -> tuple[Evaluation | None, list[Transition]]:
    """Evaluate every live window of the evaluator's store as of ``now``; the transitions are
    the groups that ``gone`` (resolved as gone) and every change of a group's status, their
    findings labelled and annotated by their rules (:mod:`notifier.rules.annotate`)."""
    transitions = tracker.gone(gone, now) if gone else []
    rows = evaluator.store.alive_rows()
    if rows.size == 0:
        return None, transitions
    evaluation = evaluator.evaluate(now, rows)
    transitions.extend(tracker.update(evaluation))
    if transitions:
        annotator_for(evaluator.config).annotate(transitions)
    return evaluation, transitions


class ClusterPipeline:
    """One cluster's store, evaluator and transition tracker, stepped one scan at a time."""

    def __init__(self, rules: RulesConfig, scan_interval_s: float) -> None:
        self.store = WindowStore(rules.window, scan_interval_s)
        self.evaluator = Evaluator(rules, self.store)
        self.tracker = TransitionTracker()
        self._step = StoreStep(self.store)

    def step(
        self,
        scan: ScanColumns,
        listed_groups: Collection[str] | None = None,
        unavailable: Collection[tuple[str, int]] = (),
    ) -> tuple[Evaluation | None, list[Transition]]:
        """One successful scan: ingest, forget, expire, evaluate, transitions."""
        change = self._step.advance(scan, listed_groups, unavailable)
        return evaluate_step(self.evaluator, self.tracker, change.gone, scan.ts)

    def evaluate(self, now: int) -> tuple[Evaluation | None, list[Transition]]:
        """An evaluation between scans (``test-rules`` asks for results at given times)."""
        return evaluate_step(self.evaluator, self.tracker, [], now)
