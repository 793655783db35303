"""Score windows: run the rules over many partitions at once, roll them up per group, gate.

One :class:`Evaluator` serves the live service, ``notifier test-rules`` and the backtest. It
reads the :class:`~notifier.rules.store.WindowStore`, runs Burrow's kernel and every bound rule's
kind (:mod:`notifier.rules.kinds`) over the rows, keeps the per-group ``for`` /
``keep_firing_for`` state (:mod:`notifier.rules.state`), and returns an
:class:`~notifier.rules.results.Evaluation` whose arrays cover every window and whose group
results are built only for the groups someone asks about.

The complete-flag gate: a group whose windows are less complete than ``minimum_complete`` gets
a result marked ``partial``, and :class:`~notifier.rules.transitions.TransitionTracker` turns
a partial result into a transition only where a kind that needs no whole window (a rewind,
``RuleKind.pages_from_partial_windows``) raises the group's status.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from notifier.rules import kernels as kernels
from notifier.rules.kinds import Rows, RuleRun, as_int, kind_of
from notifier.rules.kinds import burrow as burrow
from notifier.rules.results import Evaluation
from notifier.rules.rulesfile import RulesConfig
from notifier.rules.settings import RuleBinding
from notifier.rules.state import RULE_STATE_FIELDS, RuleState
from notifier.rules.store import WindowStore, as_index
from notifier.types import GroupStatus

EVALUATE_CHUNK_ROWS = 1 << 16
"""Rows an evaluation reads and judges at a time (:meth:`Evaluator.evaluate`): at a million
rows, whole windows decoded at once were hundreds of MB of temporaries."""

Part = slice | np.ndarray
"""Positions in an evaluation's rows: a run of them, or some in ascending order."""


class Evaluator:
    """Runs a rules config over a store. Holds the ``for``/``keep_firing_for`` state."""

    def __init__(
        self, config: RulesConfig, store: WindowStore, chunk_rows: int | None = None
    ) -> None:
        chunk_rows = EVALUATE_CHUNK_ROWS if chunk_rows is None else chunk_rows
        if chunk_rows < 1:
            raise ValueError(f"chunk_rows must be at least 1, got {chunk_rows}")
        self.config = config
        self.store = store
        self.chunk_rows = chunk_rows
        """Rows read and judged at a time (:func:`group_chunks`; default
        :data:`EVALUATE_CHUNK_ROWS`); results do not depend on it."""
        self.bindings: list[RuleBinding] = [RuleBinding(config.burrow, "burrow", burrow.KIND)]
        self.bindings += [RuleBinding(rule, rule.name, kind_of(rule.kind)) for rule in config.rules]
        _check_evidence_kept(self.bindings, store)
        self.state: dict[str, RuleState] = {b.name: RuleState.empty(1024) for b in self.bindings}
        self._group_epoch = np.zeros(0, dtype=np.int64)

    def reconfigure(self, config: RulesConfig) -> None:
        """Swap in new rules (same window settings); rules that keep their name keep their
        ``for``/``keep_firing_for`` state."""
        if config.window != self.config.window:
            raise ValueError("window settings changed; they apply on restart")
        old_state = self.state
        self.config = config
        self.bindings = [RuleBinding(config.burrow, "burrow", burrow.KIND)]
        self.bindings += [RuleBinding(rule, rule.name, kind_of(rule.kind)) for rule in config.rules]
        _check_evidence_kept(self.bindings, self.store)
        self.state = {b.name: old_state.get(b.name) or RuleState.empty(1024) for b in self.bindings}

    def _reset_reused_groups(self, n_groups: int) -> None:
        """Group ids the store handed to another group since we last looked start clean."""
        epochs = self.store.group_epoch[:n_groups]
        if self._group_epoch.size < n_groups:
            grown = np.zeros(max(1024, 2 * n_groups), dtype=np.int64)
            grown[: self._group_epoch.size] = self._group_epoch
            self._group_epoch = grown
        seen = self._group_epoch[:n_groups]
        changed = np.nonzero(seen != epochs)[0]
        if changed.size:
            for state in self.state.values():
                state.reset(changed)
            seen[changed] = epochs[changed]

    def adopt_group_epochs(self) -> None:
        """After a checkpoint restore: the restored state belongs to the restored groups."""
        n_groups = len(self.store.group_key)
        self._group_epoch = self.store.group_epoch[: max(n_groups, 1)].copy()

    def export_group(self, gid: int) -> dict[str, list[int]]:
        """One group's ``for``/``keep_firing_for`` state by rule: ``[pending_since,
        last_true, firing, fired_severity]`` (what :meth:`import_group` takes)."""
        out = {}
        for name, state in self.state.items():
            if gid < state.firing.size:
                out[name] = [int(getattr(state, f)[gid]) for f in RULE_STATE_FIELDS]
        return out

    def import_group(self, gid: int, exported: Mapping[str, Sequence[int]]) -> None:
        """Install state :meth:`export_group` gave (another process's, for a group the store
        just imported under ``gid``); rules this evaluator does not have are ignored, its rules
        the export does not name start clean."""
        n_groups = len(self.store.group_key)
        for name, state in self.state.items():
            state.grow(n_groups)
            state.reset(np.asarray([gid]))
            values = exported.get(name)
            if values is not None:
                for field_name, value in zip(RULE_STATE_FIELDS, values, strict=True):
                    getattr(state, field_name)[gid] = value
        # The state now belongs to the group the store has under this id.
        if self._group_epoch.size < n_groups:
            grown = np.zeros(max(1024, 2 * n_groups), dtype=np.int64)
            grown[: self._group_epoch.size] = self._group_epoch
            self._group_epoch = grown
        self._group_epoch[gid] = self.store.group_epoch[gid]

    def evaluate(self, now: int, rows: np.ndarray | None = None) -> Evaluation:
        """Evaluate ``rows`` (default: every live window) as of ``now`` (ms).

        Every rule judges a row by its own window and evidence, and by its group (the group's
        rows pooled, its ``for`` state): the rows are read and judged a chunk at a time
        (:func:`group_chunks`, about ``chunk_rows`` rows, a group's rows all in one chunk), so
        only one chunk's windows are decoded at once. What covers every row (the arrays of the
        :class:`Evaluation`, each group's total lag) is laid out whole."""
        store = self.store
        rows = store.alive_rows() if rows is None else np.asarray(rows, dtype=np.int64)
        index = as_index(rows)
        gids = store.row_group[index].astype(np.int64)
        n_groups = len(store.group_key)
        for st in self.state.values():
            st.grow(n_groups)
        self._reset_reused_groups(n_groups)

        chunks = group_chunks(gids, self.chunk_rows)
        # The newest sample is the window's last entry. Each group's total lag is the one
        # thing a chunk needs from rows of other chunks, so the lags come first.
        lag = np.empty(rows.size, dtype=np.int64)
        for part in chunks:
            at = _part_of(index, part)
            lag[part] = kernels.current_lag(store.latest_committed[at], store.latest_leo[at])
        total_lag = np.bincount(gids, weights=np.maximum(lag, 0), minlength=n_groups)
        burrow_complete = store.r_count[index] / store.ring_size
        params = {b.name: b.values(store, rows) for b in self.bindings}

        complete = np.empty(rows.size)
        seconds = np.empty(rows.size)
        usual_wait = np.empty(rows.size)
        learned_wait = np.empty(rows.size)
        waits_learned = np.empty(rows.size)
        status = np.empty(rows.size, dtype=np.int8)
        outcome: kernels.BurrowOutcome | None = None
        row_severity = {b.name: np.zeros(rows.size, dtype=np.int8) for b in self.bindings}
        detail: dict[str, np.ndarray] = {}
        for part in chunks:
            at = _part_of(index, part)
            chunk_rows = rows[part]
            count = store.s_count[at]
            committed = store.s_committed[at]
            log_end = store.s_leo[at]
            group_state = store.s_state[at]
            members = store.s_members[at]
            latest_committed = np.ascontiguousarray(committed[:, -1])
            latest_leo = np.ascontiguousarray(log_end[:, -1])
            complete[part] = kernels.window_complete(store.s_ts[at], count, now, store.max_gap_ms)
            seconds[part] = store.lag_seconds(chunk_rows, now, latest_committed)
            usual_wait[part], learned_wait[part], waits_learned[part] = store.usual_wait_ms(
                chunk_rows
            )
            allowed_lag = _part_of_value(as_int(params["burrow"]["allowed_lag"]), part)
            chunk_outcome = kernels.burrow_status(
                store.r_offset[at],
                store.ring_times(at),
                store.r_lag[at],
                store.r_count[at],
                log_end,
                kernels.valid_mask(count, store.width),
                lag[part],
                now,
                allowed_lag,
                complete[part],
                self.config.burrow.minimum_complete,
            )
            outcome = kernels.BurrowOutcome.scatter(outcome, rows.size, part, chunk_outcome)
            has_members = kernels.members_present(group_state[:, -1], members[:, -1])
            status[part] = kernels.split_stop_stall(chunk_outcome.status, has_members)
            rows_in = Rows(
                store=store,
                now=now,
                rows=chunk_rows,
                index=at,
                gids=gids[part],
                n_groups=n_groups,
                count=count,
                committed=committed,
                log_end=log_end,
                group_state=group_state,
                members=members,
                latest_committed=latest_committed,
                latest_leo=latest_leo,
                lag=lag[part],
                lag_seconds=seconds[part],
                usual_wait_ms=usual_wait[part],
                learned_wait_ms=learned_wait[part],
                has_members=has_members,
                total_lag=total_lag,
                status=status[part],
            )
            for binding in self.bindings:
                p = {k: _part_of_value(v, part) for k, v in params[binding.name].items()}
                run = RuleRun(binding.rule, p, as_int(p["severity"]), self.state[binding.name])
                verdict = binding.kind.evaluate(rows_in, run)
                row_severity[binding.name][part] = np.where(p["enabled"], verdict.severity, 0)
                if verdict.detail is not None:
                    if binding.name not in detail:
                        detail[binding.name] = np.zeros(rows.size, dtype=verdict.detail.dtype)
                    detail[binding.name][part] = verdict.detail
        assert outcome is not None  # group_chunks gives at least one chunk

        present = np.bincount(gids, minlength=n_groups)
        group_ids = np.nonzero(present)[0]
        group_fired: dict[str, np.ndarray] = {}
        worst = np.zeros(n_groups, dtype=np.int8)
        worst_ungated = np.zeros(n_groups, dtype=np.int8)
        for binding in self.bindings:
            sev = row_severity[binding.name]
            group_sev = _group_max_severity(gids, sev, n_groups)
            p = params[binding.name]
            for_ms = _group_param(gids, p["for"], n_groups, group_ids) * 1000.0
            keep_ms = _group_param(gids, p["keep_firing_for"], n_groups, group_ids) * 1000.0
            capped = _group_param(gids, p["keep_firing_capped"], n_groups, group_ids)
            fired = np.zeros(n_groups, dtype=np.int8)
            fired[group_ids] = self.state[binding.name].step(
                group_ids, group_sev[group_ids], now, for_ms, keep_ms, capped
            )
            group_fired[binding.name] = fired
            np.maximum(worst, fired, out=worst)
            if binding.kind.pages_from_partial_windows:
                np.maximum(worst_ungated, fired, out=worst_ungated)

        fully = np.bincount(gids, weights=complete >= 1.0, minlength=n_groups)
        burrow_fully = np.bincount(gids, weights=burrow_complete >= 1.0, minlength=n_groups)
        below = np.bincount(
            gids, weights=complete < self.config.minimum_complete, minlength=n_groups
        )
        with np.errstate(invalid="ignore", divide="ignore"):
            group_complete = np.where(present > 0, fully / np.maximum(present, 1), 0.0)
            group_burrow_complete = np.where(
                present > 0, burrow_fully / np.maximum(present, 1), 0.0
            )
        max_seconds = np.full(n_groups, np.nan)
        known = ~np.isnan(seconds)
        if known.any():
            np.fmax.at(max_seconds, gids[known], seconds[known])
        group_status = np.full(n_groups, GroupStatus.NOTFOUND.rank, dtype=np.int8)
        group_status[group_ids] = worst[group_ids]
        return Evaluation(
            evaluator=self,
            now=now,
            rows=rows,
            gids=gids,
            status=status,
            complete=complete,
            burrow_complete=burrow_complete,
            current_lag=lag,
            lag_seconds=seconds,
            burrow=outcome,
            row_severity=row_severity,
            group_ids=group_ids,
            group_status=group_status,
            group_partial=below > 0,
            group_ungated_status=worst_ungated,
            group_complete=group_complete,
            group_burrow_complete=group_burrow_complete,
            group_total_lag=total_lag.astype(np.int64),
            group_max_lag_seconds=max_seconds,
            group_fired=group_fired,
            detail=detail,
            usual_wait_ms=usual_wait,
            waits_learned=waits_learned,
        )


def group_chunks(gids: np.ndarray, size: int) -> list[Part]:
    """The positions of ``gids`` in chunks of at most ``size`` (a group with more rows has a
    chunk of its own), every group's positions in one chunk, each chunk in ascending order.
    Runs of positions when each group's rows are together (as the store hands rows out: a
    group's partitions at once), else position arrays."""
    n = int(gids.size)
    if n <= size:
        return [slice(0, n)]
    boundary = np.flatnonzero(gids[1:] != gids[:-1]) + 1
    together = boundary.size + 1 == np.count_nonzero(np.bincount(gids))
    order = None
    if not together:
        order = np.argsort(gids, kind="stable")
        ordered = gids[order]
        boundary = np.flatnonzero(ordered[1:] != ordered[:-1]) + 1
    starts = np.concatenate([[0], boundary, [n]])
    chunks: list[Part] = []
    begin = 0
    while begin < n:
        # The last group start within reach, or the end of a group bigger than a chunk.
        end = int(starts[np.searchsorted(starts, begin + size, side="right") - 1])
        if end <= begin:
            end = int(starts[np.searchsorted(starts, begin, side="right")])
        chunks.append(slice(begin, end) if order is None else np.sort(order[begin:end]))
        begin = end
    return chunks


def _part_of(index: slice | np.ndarray, part: Part) -> slice | np.ndarray:
    """The store index of positions ``part`` of the rows at ``index``."""
    if isinstance(index, slice):
        first = index.start or 0
        if isinstance(part, slice):
            return slice(first + (part.start or 0), first + (part.stop or 0))
        return first + part
    return index[part]


def _part_of_value(value: Any, part: Part) -> Any:
    """A per-row parameter at positions ``part`` (a scalar stays as it is)."""
    return value[part] if isinstance(value, np.ndarray) else value


def _check_evidence_kept(bindings: Sequence[RuleBinding], store: WindowStore) -> None:
    """A rule whose kind keeps evidence needs a store built after the kind was registered."""
    for binding in bindings:
        own = binding.kind.evidence
        missing = [] if own is None else [n for n, _, _ in own.columns if n not in store.evidence]
        if missing:
            raise ValueError(
                f"rule {binding.name!r} of kind {binding.kind.name!r} reads evidence the window "
                f"store does not keep ({', '.join(missing)}): the store was built before the "
                "kind was registered; register the kind first"
            )


def _group_max_severity(gids: np.ndarray, severity: np.ndarray, n_groups: int) -> np.ndarray:
    out = np.zeros(n_groups, dtype=np.int8)
    if not severity.any():
        return out
    any_hit = np.bincount(gids, weights=severity > 0, minlength=n_groups) > 0
    err = np.bincount(gids, weights=severity == kernels.SEVERITY_ERR, minlength=n_groups) > 0
    out[any_hit] = kernels.SEVERITY_WARN
    out[err] = kernels.SEVERITY_ERR
    return out


def _group_param(gids: np.ndarray, value: Any, n_groups: int, group_ids: np.ndarray) -> Any:
    """A per-row parameter as one value per group: the largest of the group's rows."""
    if not isinstance(value, np.ndarray):
        return value
    out = np.zeros(n_groups, dtype=np.float64)
    np.maximum.at(out, gids, value)
    return out[group_ids]
