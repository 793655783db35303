"""Score windows: run the rules over many partitions at once, roll them up per group, gate.

One :class:`Evaluator` serves the live service, ``notifier test-rules`` and the backtest. It
reads the :class:`~notifier.rules.store.WindowStore`, calls the pure kernels in
:mod:`notifier.rules.kernels`, keeps the per-group ``for`` / ``keep_firing_for`` state, and returns
an
:class:`Evaluation` whose arrays cover every window and whose :class:`GroupResult` objects are
built only for the groups someone asks about (the API, a transition, a test).

The complete-flag gate: a group whose windows are less complete than ``minimum_complete`` gets
a result marked ``partial``, and :class:`TransitionTracker` never turns a partial result into a
transition.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from notifier.config import (
    BurrowRule,
    ConsumersGoneRule,
    FallingBehindRule,
    LagRule,
    LagSecondsRule,
    ProgressRule,
    RebalanceStormRule,
    RetentionRule,
    RewindRule,
    RulesConfig,
    Selector,
    StuckRebalanceRule,
)
from notifier.rules import kernels as kernels
from notifier.rules.evidence import UNSET_TS, WAITS_TO_LEARN
from notifier.rules.store import NULL, WindowStore, as_index
from notifier.types import (
    GROUP_STATES,
    PARTITION_STATUS_CODES,
    CommitPoint,
    Finding,
    GroupResult,
    GroupStatus,
    PartitionResult,
    Severity,
    Transition,
)

_SEVERITY_CODE = {Severity.WARN: kernels.SEVERITY_WARN, Severity.ERR: kernels.SEVERITY_ERR}
_SEVERITY_NAME = {kernels.SEVERITY_WARN: "WARN", kernels.SEVERITY_ERR: "ERR"}
_RULE_PARAMS: dict[type, tuple[str, ...]] = {
    BurrowRule: ("allowed_lag",),
    LagRule: ("threshold", "clear_below"),
    LagSecondsRule: ("threshold", "clear_below"),
    ProgressRule: ("stall_after", "stop_after", "tolerance"),
    RewindRule: (),
    FallingBehindRule: ("ratio", "min_lag_seconds"),
    StuckRebalanceRule: ("samples",),
    RebalanceStormRule: ("max_changes", "lasting"),
    RetentionRule: ("warn_fraction",),
    ConsumersGoneRule: (),
}
_GROUP_LEVEL_KINDS = {"stuck_rebalance", "rebalance_storm", "consumers_gone"}


# --------------------------------------------------------------------------------------------
# Binding rule parameters to rows


class _Binding:
    """A rule's parameters per row: scalars when nothing varies, arrays when selectors or
    overrides make them differ by cluster, group or topic (resolved once per row)."""

    def __init__(self, rule: Any, name: str, kind: str):
        self.rule = rule
        self.name = name
        self.kind = kind
        self.params = _RULE_PARAMS[type(rule)]
        self.overrides = [
            (Selector.model_validate(o["match"]), {k: v for k, v in o.items() if k != "match"})
            for o in rule.overrides
        ]
        self.uniform = rule.match.is_empty() and rule.exclude is None and not self.overrides
        self._cache: dict[tuple[str, str, str], tuple] = {}
        self._columns: dict[str, np.ndarray] = {}
        self._bound_epoch = np.zeros(0, dtype=np.int64)

    def _scalars(self, rule: Any) -> tuple:
        severity = getattr(rule, "severity", Severity.ERR)
        return (
            bool(rule.enabled),
            _SEVERITY_CODE[Severity(severity)],
            float(rule.for_),
            float(rule.keep_firing_for),
            *(_parameter(rule, p) for p in self.params),
        )

    @property
    def names(self) -> tuple[str, ...]:
        return ("enabled", "severity", "for", "keep_firing_for", *self.params)

    def values(self, store: WindowStore, rows: np.ndarray) -> dict[str, Any]:
        if self.uniform:
            return dict(zip(self.names, self._scalars(self.rule)))
        self._ensure_capacity(store.capacity)
        stale = self._bound_epoch[rows] != store.row_epoch[rows]
        for row in rows[stale].tolist():
            cluster, group, topic, _ = store.row_key[row]
            key = (cluster, group, topic)
            values = self._cache.get(key)
            if values is None:
                values = self._resolve(cluster, group, topic)
                self._cache[key] = values
            for name, value in zip(self.names, values):
                self._columns[name][row] = value
            self._bound_epoch[row] = store.row_epoch[row]
        return {name: self._columns[name][rows] for name in self.names}

    def _resolve(self, cluster: str, group: str, topic: str) -> tuple:
        rule = self.rule
        for selector, params in self.overrides:
            if selector.matches(cluster, group, topic):
                rule = rule.model_copy(
                    update={_attr(k): _coerce(rule, k, v) for k, v in params.items()}
                )
                break
        values = self._scalars(rule)
        if not self.rule.applies_to(cluster, group, topic):
            values = (False, *values[1:])
        return values

    def _ensure_capacity(self, capacity: int) -> None:
        if self._bound_epoch.size >= capacity:
            return
        grown = np.full(capacity, -1, dtype=np.int64)
        grown[: self._bound_epoch.size] = self._bound_epoch
        self._bound_epoch = grown
        for name in self.names:
            column = np.zeros(capacity, dtype=np.float64)
            old = self._columns.get(name)
            if old is not None:
                column[: old.size] = old
            self._columns[name] = column


def _attr(key: str) -> str:
    return "for_" if key == "for" else key


def _parameter(rule: Any, name: str) -> float:
    value = getattr(rule, name)
    if value is None and name == "clear_below":
        value = rule.threshold  # no hysteresis: clear where it fires
    return float(value)


def _coerce(rule: Any, key: str, value: Any) -> Any:
    # Validate an override value through the model so durations and enums parse as in the file.
    data = rule.model_dump(by_alias=True, exclude={"overrides"}, exclude_none=True)
    data[key] = value
    return getattr(type(rule).model_validate(data), _attr(key))


# --------------------------------------------------------------------------------------------
# Per-group rule state (`for` and `keep_firing_for`)


RULE_STATE_FIELDS = ("pending_since", "last_true", "firing", "fired_severity")
"""A rule's per-group state, in the order :meth:`Evaluator.export_group` gives it."""


@dataclass(slots=True)
class _RuleState:
    pending_since: np.ndarray
    last_true: np.ndarray
    firing: np.ndarray
    fired_severity: np.ndarray

    @classmethod
    def empty(cls, size: int) -> _RuleState:
        return cls(
            pending_since=np.full(size, -1, dtype=np.int64),
            last_true=np.full(size, -1, dtype=np.int64),
            firing=np.zeros(size, dtype=np.bool_),
            fired_severity=np.zeros(size, dtype=np.int8),
        )

    def grow(self, size: int) -> None:
        if self.firing.size >= size:
            return
        bigger = _RuleState.empty(max(size, 2 * self.firing.size))
        for name in ("pending_since", "last_true", "firing", "fired_severity"):
            getattr(bigger, name)[: self.firing.size] = getattr(self, name)
        self.pending_since, self.last_true = bigger.pending_since, bigger.last_true
        self.firing, self.fired_severity = bigger.firing, bigger.fired_severity

    def reset(self, gids: np.ndarray) -> None:
        self.pending_since[gids] = -1
        self.last_true[gids] = -1
        self.firing[gids] = False
        self.fired_severity[gids] = 0

    def step(
        self,
        gids: np.ndarray,
        severity: np.ndarray,
        now: int,
        for_ms: np.ndarray | float,
        keep_ms: np.ndarray | float,
    ) -> np.ndarray:
        """Advance the state of ``gids`` with this evaluation's condition; return the severity
        each group fires with now (0 when pending or clear)."""
        true = severity > 0
        pending = self.pending_since[gids]
        pending = np.where(true, np.where(pending < 0, now, pending), -1)
        last_true = np.where(true, now, self.last_true[gids])
        was_firing = self.firing[gids]
        held = true & ((now - pending) >= for_ms)
        kept = ~true & was_firing & (last_true >= 0) & ((now - last_true) <= keep_ms)
        firing = held | (true & was_firing) | kept
        fired = np.where(true & firing, severity, np.where(kept, self.fired_severity[gids], 0))
        self.pending_since[gids] = pending
        self.last_true[gids] = last_true
        self.firing[gids] = firing
        self.fired_severity[gids] = np.where(firing, fired, 0)
        return fired.astype(np.int8)


# --------------------------------------------------------------------------------------------
# The evaluation


@dataclass
class Evaluation:
    """Every window's outcome at one moment, and each group's roll-up."""

    evaluator: Evaluator
    now: int
    rows: np.ndarray
    gids: np.ndarray
    status: np.ndarray
    complete: np.ndarray
    burrow_complete: np.ndarray
    current_lag: np.ndarray
    lag_seconds: np.ndarray
    burrow: kernels.BurrowOutcome
    row_severity: dict[str, np.ndarray]
    group_ids: np.ndarray
    group_status: np.ndarray
    group_partial: np.ndarray
    group_complete: np.ndarray
    group_burrow_complete: np.ndarray
    group_total_lag: np.ndarray
    group_max_lag_seconds: np.ndarray
    group_fired: dict[str, np.ndarray]
    progress_status: dict[str, np.ndarray] = field(default_factory=dict)
    """Per ``progress`` rule and row: kernels.STALL, kernels.STOP or 0."""
    usual_wait_ms: np.ndarray = field(default_factory=lambda: np.zeros(0))
    """Per row: its group's usual wait before the offset moves (``WindowStore.usual_wait_ms``)."""
    waits_learned: np.ndarray = field(default_factory=lambda: np.zeros(0))
    """Per row: how many waits of its group that was learned from."""
    _order: np.ndarray | None = field(default=None, repr=False)
    _starts: np.ndarray | None = field(default=None, repr=False)

    def __len__(self) -> int:
        return int(self.group_ids.size)

    def keys(self) -> list[tuple[str, str]]:
        store = self.evaluator.store
        return [store.group_key[g] for g in self.group_ids.tolist()]

    def status_of(self, gid: int) -> GroupStatus:
        return GroupStatus.from_rank(int(self.group_status[gid]))

    def results(self) -> Iterator[GroupResult]:
        for gid in self.group_ids.tolist():
            yield self.result_for_gid(gid)

    def result(self, cluster: str, group: str) -> GroupResult:
        gid = self.evaluator.store.group_id(cluster, group)
        if gid is None or not np.any(self.group_ids == gid):
            return not_found(cluster, group, self.now)
        return self.result_for_gid(gid)

    def _rows_of(self, gid: int) -> np.ndarray:
        if self._order is None:
            self._order = np.argsort(self.gids, kind="stable")
            self._sorted = self.gids[self._order]
        lo = np.searchsorted(self._sorted, gid, side="left")
        hi = np.searchsorted(self._sorted, gid, side="right")
        return self._order[lo:hi]

    def result_for_gid(self, gid: int) -> GroupResult:
        """Build the full result (partitions, findings, evidence) of one group."""
        ev = self.evaluator
        store = ev.store
        cluster, group = store.group_key_of(gid)
        local = self._rows_of(gid)
        local = local[
            np.lexsort((store.row_partition[self.rows[local]], _topics(store, self.rows[local])))
        ]
        partitions = [self._partition(i) for i in local.tolist()]
        findings: list[Finding] = []
        for binding in ev.bindings:
            fired = int(self.group_fired[binding.name][gid])
            if fired:
                findings.extend(self._findings(binding, gid, local, fired))
        known = [p for p in partitions if p.current_lag is not None]
        max_lag = max(known, key=lambda p: p.current_lag or 0) if known else None
        newest = int(self.rows[local[-1]]) if local.size else None
        max_seconds = float(self.group_max_lag_seconds[gid])
        return GroupResult(
            cluster=cluster,
            group=group,
            status=self.status_of(gid),
            complete=float(self.group_complete[gid]),
            burrow_complete=float(self.group_burrow_complete[gid]),
            partial=bool(self.group_partial[gid]),
            evaluated_at=self.now,
            partitions=partitions,
            findings=findings,
            total_lag=int(self.group_total_lag[gid]),
            max_lag=max_lag,
            max_lag_seconds=None if math.isnan(max_seconds) else max_seconds,
            group_state=GROUP_STATES[int(store.s_state[newest, -1])]
            if newest is not None
            else "Unknown",
            members=int(store.s_members[newest, -1]) if newest is not None else 0,
        )

    def _partition(self, i: int) -> PartitionResult:
        store = self.evaluator.store
        row = int(self.rows[i])
        _, _, topic, partition = store.row_key_of(row)
        ring = store.ring(row)
        committed = int(store.s_committed[row, -1])
        log_start = int(store.s_log_start[row, -1])
        lag = int(self.current_lag[i])
        seconds = float(self.lag_seconds[i])
        return PartitionResult(
            topic=topic,
            partition=partition,
            status=PARTITION_STATUS_CODES[int(self.status[i])],
            complete=float(self.complete[i]),
            burrow_complete=float(self.burrow_complete[i]),
            committed_offset=None if committed == NULL else committed,
            log_end_offset=int(store.s_leo[row, -1]),
            log_start_offset=None if log_start == NULL else log_start,
            current_lag=None if lag < 0 else lag,
            lag_seconds=None if math.isnan(seconds) else seconds,
            start=ring[0] if ring else None,
            end=ring[-1] if ring else None,
        )

    def _findings(
        self, binding: _Binding, gid: int, local: np.ndarray, fired: int
    ) -> list[Finding]:
        severity = Severity.WARN if fired == kernels.SEVERITY_WARN else Severity.ERR
        row_sev = self.row_severity[binding.name][local]
        state = self.evaluator.state[binding.name]
        since = int(state.pending_since[gid])
        if not row_sev.any():
            cleared = int(state.last_true[gid])
            return [
                Finding(
                    rule=binding.name,
                    kind=binding.kind,
                    severity=severity,
                    status=_SEVERITY_NAME[fired],
                    message=(
                        f"condition cleared; keeps firing for {binding.rule.keep_firing_for:g}s "
                        "after it last held (keep_firing_for)"
                    ),
                    evidence={"last_true": cleared},
                    since=None,
                )
            ]
        hits = local[row_sev > 0]
        if binding.kind in _GROUP_LEVEL_KINDS or (
            binding.kind == "lag" and binding.rule.scope == "group"
        ):
            return [self._group_finding(binding, gid, hits, severity, since)]
        return [self._partition_finding(binding, int(i), severity, since) for i in hits.tolist()]

    def _partition_finding(
        self, binding: _Binding, i: int, severity: Severity, since: int
    ) -> Finding:
        store = self.evaluator.store
        row = int(self.rows[i])
        _, _, topic, partition = store.row_key_of(row)
        window = store.samples(row)
        lags = [s["lag"] for s in window]
        lag = int(self.current_lag[i])
        seconds = float(self.lag_seconds[i])
        kind = binding.kind
        code = int(self.row_severity[binding.name][i])
        status = _SEVERITY_NAME.get(code, "OK")
        evidence: dict[str, Any] = {"lag": lags, "timestamps": [s["ts"] for s in window]}
        if kind == "burrow":
            status = PARTITION_STATUS_CODES[int(self.status[i])].value
            ring = store.ring(row)
            evidence = {
                "offsets": [c.offset for c in ring],
                "commit_timestamps": [c.timestamp for c in ring],
                "commit_lags": [c.lag for c in ring],
                "log_end_offsets": [s["log_end_offset"] for s in window],
                "current_lag": lag,
                "members": window[-1]["members"] if window else 0,
                "group_state": window[-1]["group_state"] if window else "Unknown",
            }
            message = _burrow_message(status, ring, self.now, lag)
        elif kind == "lag":
            message = f"lag {lag} > {binding.rule.threshold}"
            evidence["threshold"] = binding.rule.threshold
        elif kind == "lag_seconds":
            message = f"{_human_seconds(seconds)} behind > {_human_seconds(binding.rule.threshold)}"
            evidence.update(lag_seconds=seconds, threshold_s=binding.rule.threshold)
        elif kind in ("progress", "rewind", "falling_behind"):
            status, message, evidence = self._evidence_finding(binding, i, lag, seconds)
        else:  # retention
            last = window[-1]
            evidence = {
                "committed_offset": last["committed_offset"],
                "log_start_offset": last["log_start_offset"],
                "log_end_offset": last["log_end_offset"],
                "warn_fraction": binding.rule.warn_fraction,
            }
            if last["committed_offset"] < last["log_start_offset"]:
                lost = last["log_start_offset"] - last["committed_offset"]
                message = f"{lost} records deleted by retention before the group read them"
            else:
                message = "committed offset close to the retention edge: records about to be lost"
        return Finding(
            rule=binding.name,
            kind=kind,
            severity=Severity.ERR if code == kernels.SEVERITY_ERR else Severity.WARN,
            status=status,
            topic=topic,
            partition=partition,
            message=message,
            evidence=evidence,
            since=since if since >= 0 else None,
        )

    def _evidence_finding(
        self, binding: _Binding, i: int, lag: int, seconds: float
    ) -> tuple[str, str, dict[str, Any]]:
        """Status, sentence and evidence of the rules on per-scan evidence: each says what it
        saw and against which habit of the group, so a reader knows why it fired now."""
        store = self.evaluator.store
        row = int(self.rows[i])
        now = self.now
        committed = int(store.latest_committed[row])
        behind = _human_seconds(seconds) if not math.isnan(seconds) else "an unknown time"
        evidence: dict[str, Any] = {
            "committed_offset": committed,
            "log_end_offset": int(store.latest_leo[row]),
            "current_lag": lag,
            "lag_seconds": None if math.isnan(seconds) else seconds,
        }
        if binding.kind == "rewind":
            was = int(store.e_rewind_from[row])
            evidence.update(rewound_from=was, to_reread=max(0, was - committed))
            message = (
                f"committed offset went back from {was} to {committed}: "
                f"{was - committed} records to read again"
            )
            return "REWIND", message, evidence
        if binding.kind == "falling_behind":
            consume = float(store.e_consume_rate[row])
            normal = float(store.e_normal_rate[row])
            evidence.update(
                consume_rate=consume,
                produce_rate=float(store.e_produce_rate[row]),
                normal_rate=normal,
                ratio=binding.rule.ratio,
            )
            message = (
                f"consuming {consume:.3g} records/s, below {binding.rule.ratio:.0%} of the "
                f"{normal:.3g}/s this partition normally gets; lag {lag}, {behind} behind"
            )
            return "WARN", message, evidence
        stopped = int(self.progress_status[binding.name][i]) == kernels.STOP
        if stopped:
            since = int(store.e_memberless_since[row])
            usual = float(store.e_usual_memberless_ms[row]) / 1000
            evidence.update(members=0, memberless_since=since, usual_restart_s=usual)
            habit = f"its restarts take up to {_human_seconds(usual)}" if usual else "no restart"
            message = (
                f"no members for {_human_seconds((now - since) / 1000)} ({habit}); "
                f"lag {lag} and growing, {behind} behind"
            )
            return "STOP", message, evidence
        since = int(store.e_wait_since[row])
        usual = float(self.usual_wait_ms[i]) / 1000
        trusted = int(self.waits_learned[i]) >= WAITS_TO_LEARN
        arrived = int(store.latest_leo[row]) - int(store.e_wait_leo[row])
        evidence.update(waiting_since=since, usual_wait_s=usual, arrived=arrived)
        assumed = store.settings.assumed_commit_interval
        habit = (
            f"usually within {_human_seconds(usual)}"
            if trusted
            else f"habit not learned yet, {_human_seconds(max(usual, assumed))} assumed"
        )
        moved_at = int(store.e_move_ts[row])
        if since == UNSET_TS or moved_at < since - store.scan_interval_ms:
            # Held since a STOP or STALL: members are back (or rebalanced) but it has not read.
            evidence.update(offset_moved_at=moved_at if moved_at != UNSET_TS else None)
            quiet = "ever" if moved_at == UNSET_TS else _human_seconds((now - moved_at) / 1000)
            message = (
                f"members present but offset {committed} has not moved for {quiet} "
                f"({habit}); lag {lag}, {behind} behind"
            )
            return "STALL", message, evidence
        message = (
            f"members present but offset {committed} has not moved for "
            f"{_human_seconds((now - since) / 1000)} ({habit}) while {arrived} "
            f"record{'' if arrived == 1 else 's'} arrived"
        )
        return "STALL", message, evidence

    def _group_finding(
        self, binding: _Binding, gid: int, hits: np.ndarray, severity: Severity, since: int
    ) -> Finding:
        store = self.evaluator.store
        row = int(self.rows[hits[0]])
        window = store.samples(row)
        kind = binding.kind
        partitions = [
            "{}/{}".format(*store.row_key_of(int(self.rows[i]))[2:]) for i in hits.tolist()
        ]
        evidence: dict[str, Any] = {
            "timestamps": [s["ts"] for s in window],
            "partitions": partitions[:50],
            "partition_count": len(partitions),
        }
        if kind == "lag":
            total = int(self.group_total_lag[gid])
            message = f"group lag {total} > {binding.rule.threshold}"
            evidence.update(total_lag=total, threshold=binding.rule.threshold)
        elif kind == "stuck_rebalance":
            states = [s["group_state"] for s in window]
            message = f"rebalancing for the last {binding.rule.samples} scans or more"
            evidence.update(group_states=states, samples=binding.rule.samples)
        elif kind == "rebalance_storm" and binding.rule.lasting:
            changes = int(store.e_churn_changes[row])
            began = int(store.e_churn_since[row])
            message = (
                f"member set changed {changes} times in "
                f"{_human_seconds((self.now - began) / 1000)} and is still changing "
                f"(a rolling deploy is over within {_human_seconds(binding.rule.lasting)})"
            )
            evidence.update(member_changes=changes, churn_since=began)
        elif kind == "rebalance_storm":
            changes = sum(1 for s in window if s["member_set_changed"])
            message = (
                f"member set changed {changes} times in the window (> {binding.rule.max_changes})"
            )
            evidence.update(member_changes=changes, members=[s["members"] for s in window])
        else:  # consumers_gone
            message = "no members while lag grows"
            evidence.update(members=[s["members"] for s in window], lag=[s["lag"] for s in window])
        return Finding(
            rule=binding.name,
            kind=kind,
            severity=severity,
            status=_SEVERITY_NAME[int(self.group_fired[binding.name][gid])],
            message=message,
            evidence=evidence,
            since=since if since >= 0 else None,
        )


def _topics(store: WindowStore, rows: np.ndarray) -> list[str]:
    return [store.row_key_of(int(r))[2] for r in rows]


def _human_seconds(seconds: float) -> str:
    if seconds < 120:
        return f"{seconds:.0f}s"
    if seconds < 7200:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"


def _burrow_message(status: str, ring: list[CommitPoint], now: int, lag: int) -> str:
    if not ring:
        return status
    quiet = (now - ring[-1].timestamp) / 1000
    span = (ring[-1].timestamp - ring[0].timestamp) / 1000
    if status == "STOP":
        return (
            f"no members and no progress: offset unchanged for {quiet:.0f}s "
            f"(> ring span {span:.0f}s), lag {lag}"
        )
    if status == "STALL":
        return (
            f"members present but offset {ring[-1].offset} not moving for {quiet:.0f}s "
            f"while lag is {lag}"
        )
    if status == "REWIND":
        return "committed offset went backwards and has not caught up"
    if status == "WARN":
        return f"lag never decreased across the window (now {lag})"
    return status


def not_found(cluster: str, group: str, now: int) -> GroupResult:
    """Burrow's answer for an unknown group: NOTFOUND, complete 1.0, no partitions."""
    return GroupResult(
        cluster=cluster,
        group=group,
        status=GroupStatus.NOTFOUND,
        complete=1.0,
        burrow_complete=1.0,
        partial=False,
        evaluated_at=now,
    )


# --------------------------------------------------------------------------------------------
# The evaluator


class Evaluator:
    """Runs a rules config over a store. Holds the ``for``/``keep_firing_for`` state."""

    def __init__(self, config: RulesConfig, store: WindowStore):
        self.config = config
        self.store = store
        self.bindings: list[_Binding] = [_Binding(config.burrow, "burrow", "burrow")]
        self.bindings += [_Binding(rule, rule.name, rule.kind) for rule in config.rules]
        self.state: dict[str, _RuleState] = {b.name: _RuleState.empty(1024) for b in self.bindings}
        self._group_epoch = np.zeros(0, dtype=np.int64)

    def reconfigure(self, config: RulesConfig) -> None:
        """Swap in new rules (same window settings); rules that keep their name keep their
        ``for``/``keep_firing_for`` state."""
        if config.window != self.config.window:
            raise ValueError("window settings changed; they apply on restart")
        old_state = self.state
        self.config = config
        self.bindings = [_Binding(config.burrow, "burrow", "burrow")]
        self.bindings += [_Binding(rule, rule.name, rule.kind) for rule in config.rules]
        self.state = {
            b.name: old_state.get(b.name) or _RuleState.empty(1024) for b in self.bindings
        }

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
        """Evaluate ``rows`` (default: every live window) as of ``now`` (ms)."""
        store = self.store
        rows = store.alive_rows() if rows is None else np.asarray(rows, dtype=np.int64)
        index = as_index(rows)
        count = store.s_count[index]
        committed = store.s_committed[index]
        log_end = store.s_leo[index]
        state = store.s_state[index]
        members = store.s_members[index]
        gids = store.row_group[index].astype(np.int64)
        n_groups = len(store.group_key)
        for st in self.state.values():
            st.grow(n_groups)
        self._reset_reused_groups(n_groups)

        latest_committed = store.latest_committed[index]
        latest_leo = store.latest_leo[index]
        latest_state = store.latest_state[index]
        lag = kernels.current_lag(latest_committed, latest_leo)
        valid = kernels.valid_mask(count, store.width)
        complete = kernels.window_complete(store.s_ts[index], count, now, store.max_gap_ms)
        r_count = store.r_count[index]
        burrow_complete = r_count / store.ring_size
        seconds = store.lag_seconds(rows, now)

        params = {b.name: b.values(store, rows) for b in self.bindings}
        usual_wait, waits_learned = store.usual_wait_ms(rows)
        burrow_params = params["burrow"]
        outcome = kernels.burrow_status(
            store.r_offset[index],
            store.r_ts[index],
            store.r_lag[index],
            r_count,
            log_end,
            valid,
            lag,
            now,
            _as_int(burrow_params["allowed_lag"]),
            complete,
            self.config.burrow.minimum_complete,
        )
        has_members = kernels.members_present(latest_state, store.latest_members[index])
        status = kernels.split_stop_stall(outcome.status, has_members)

        row_severity: dict[str, np.ndarray] = {}
        progress_status: dict[str, np.ndarray] = {}
        burrow_sev = np.where(status == kernels.OK, 0, np.where(status == kernels.WARN, 1, 2))
        row_severity["burrow"] = np.where(burrow_params["enabled"], burrow_sev, 0).astype(np.int8)
        total_lag = np.bincount(gids, weights=np.maximum(lag, 0), minlength=n_groups)
        for binding in self.bindings[1:]:
            p = params[binding.name]
            sev = _as_int(p["severity"])
            rule = binding.rule
            if binding.kind == "lag":
                values = total_lag[gids] if rule.scope == "group" else lag
                if rule.scope == "group":
                    values = np.where(
                        np.bincount(gids, weights=lag >= 0, minlength=n_groups)[gids] > 0,
                        values,
                        -1,
                    )
                out = self._with_hysteresis(binding.name, gids, kernels.lag_above, values, p, sev)
            elif binding.kind == "lag_seconds":
                out = self._with_hysteresis(
                    binding.name, gids, kernels.lag_seconds_above, seconds, p, sev
                )
            elif binding.kind == "progress":
                progress = kernels.no_progress(
                    now,
                    store.e_wait_since[index],
                    store.e_wait_leo[index],
                    usual_wait,
                    store.e_memberless_since[index],
                    store.e_memberless_leo[index],
                    store.e_usual_memberless_ms[index],
                    latest_committed,
                    latest_leo,
                    has_members,
                    p["stall_after"] * 1000.0,
                    p["stop_after"] * 1000.0,
                    p["tolerance"],
                    sev,
                )
                rule_state = self.state[binding.name]
                held = kernels.not_moved_since(
                    rule_state.firing[gids],
                    rule_state.pending_since[gids],
                    store.e_move_ts[index],
                    store.e_move_leo[index],
                    latest_committed,
                    latest_leo,
                ) & (progress.severity == 0)
                out = np.where(held, rule_state.fired_severity[gids], progress.severity)
                stopped = progress.stopped | (held & ~has_members)
                stalled = progress.stalled | (held & has_members)
                progress_status[binding.name] = np.where(
                    stopped, kernels.STOP, np.where(stalled, kernels.STALL, 0)
                ).astype(np.int8)
            elif binding.kind == "rewind":
                out = kernels.rewound(store.e_rewind_from[index], sev)
            elif binding.kind == "falling_behind":
                out = kernels.falling_behind(
                    now,
                    latest_committed,
                    seconds,
                    usual_wait,
                    store.e_move_ts[index],
                    store.e_move_leo[index],
                    store.e_move_measured[index],
                    store.e_consume_rate[index],
                    store.e_produce_rate[index],
                    store.e_normal_rate[index],
                    p["ratio"],
                    p["min_lag_seconds"],
                    sev,
                )
            elif binding.kind == "stuck_rebalance":
                out = kernels.stuck_rebalance(state, count, p["samples"], sev)
            elif binding.kind == "rebalance_storm":
                lasting_s = np.asarray(p["lasting"])
                if not np.all(lasting_s > 0):  # some rows count changes in the window
                    out = kernels.rebalance_storm(
                        store.s_member_changed[index], count, p["max_changes"], sev
                    )
                if np.any(lasting_s > 0):
                    lasting = kernels.churning(
                        now,
                        store.e_churn_since[index],
                        store.e_churn_changes[index],
                        store.e_last_change_ts[index],
                        store.churn_gap_ms,
                        p["lasting"] * 1000.0,
                        p["max_changes"],
                        sev,
                    )
                    out = (
                        lasting if np.all(lasting_s > 0) else np.where(lasting_s > 0, lasting, out)
                    )
            elif binding.kind == "retention":
                out = kernels.retention_risk(
                    latest_committed,
                    latest_leo,
                    store.latest_log_start[index],
                    p["warn_fraction"],
                    sev,
                )
            else:
                out = kernels.consumers_gone(committed, log_end, members, state, count, sev)
            row_severity[binding.name] = np.where(p["enabled"], out, 0).astype(np.int8)

        present = np.bincount(gids, minlength=n_groups)
        group_ids = np.nonzero(present)[0]
        group_fired: dict[str, np.ndarray] = {}
        worst = np.zeros(n_groups, dtype=np.int8)
        for binding in self.bindings:
            sev = row_severity[binding.name]
            group_sev = _group_max_severity(gids, sev, n_groups)
            p = params[binding.name]
            for_ms = _group_param(gids, p["for"], n_groups, group_ids) * 1000.0
            keep_ms = _group_param(gids, p["keep_firing_for"], n_groups, group_ids) * 1000.0
            fired = np.zeros(n_groups, dtype=np.int8)
            fired[group_ids] = self.state[binding.name].step(
                group_ids, group_sev[group_ids], now, for_ms, keep_ms
            )
            group_fired[binding.name] = fired
            np.maximum(worst, fired, out=worst)

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
            group_complete=group_complete,
            group_burrow_complete=group_burrow_complete,
            group_total_lag=total_lag.astype(np.int64),
            group_max_lag_seconds=max_seconds,
            group_fired=group_fired,
            progress_status=progress_status,
            usual_wait_ms=usual_wait,
            waits_learned=waits_learned,
        )

    def _with_hysteresis(
        self,
        name: str,
        gids: np.ndarray,
        above: Callable[..., np.ndarray],
        values: np.ndarray,
        params: dict[str, Any],
        severity: Any,
    ) -> np.ndarray:
        """``above(values, threshold)``; rows of groups already firing this rule keep to the
        (lower) ``clear_below`` level, which is only looked at when some group is firing."""
        fires = above(values, params["threshold"], severity)
        firing = self.state[name].firing[gids]
        if not firing.any() or np.array_equal(params["clear_below"], params["threshold"]):
            return fires
        holds = above(values, params["clear_below"], severity)
        return np.where(firing, np.maximum(fires, holds), fires).astype(np.int8)


def _as_int(value: Any) -> Any:
    if isinstance(value, np.ndarray):
        return value.astype(np.int64)
    return int(value)


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


# --------------------------------------------------------------------------------------------
# Transitions


def kept_firing(finding: Finding) -> bool:
    """Whether ``finding`` is a rule whose condition has cleared but that keeps firing for its
    ``keep_firing_for`` (its evidence is when the condition last held)."""
    return finding.since is None and set(finding.evidence) == {"last_true"}


class TransitionTracker:
    """Turns gated group statuses into transitions (OK→WARN→ERR→OK).

    Only groups that are not OK are remembered, so a fleet of healthy groups costs nothing. A
    partial result never produces a transition: the group keeps its last gated status.
    """

    def __init__(self) -> None:
        self.statuses: dict[tuple[str, str], GroupStatus] = {}

    def update(self, evaluation: Evaluation) -> list[Transition]:
        store = evaluation.evaluator.store
        gids = evaluation.group_ids
        ranks = evaluation.group_status[gids]
        partial = evaluation.group_partial[gids]
        candidates = set(gids[(ranks > 0) & ~partial].tolist())
        evaluated = evaluation.group_status.size
        for key in self.statuses:  # the open ones: few, however large the fleet
            gid = store.group_id(*key)
            if (
                gid is not None
                and gid < evaluated
                and evaluation.group_status[gid] != GroupStatus.NOTFOUND.rank
                and not evaluation.group_partial[gid]
            ):
                candidates.add(gid)
        transitions = []
        for gid in sorted(candidates):
            key = store.group_key[gid]
            current = evaluation.status_of(gid)
            previous = self.statuses.get(key, GroupStatus.OK)
            if current == previous:
                continue
            if current == GroupStatus.OK:
                self.statuses.pop(key, None)
            else:
                self.statuses[key] = current
            transitions.append(
                Transition(
                    cluster=key[0],
                    group=key[1],
                    previous=previous,
                    current=current,
                    at=evaluation.now,
                    result=evaluation.result_for_gid(gid),
                )
            )
        return transitions

    def gone(self, keys: list[tuple[str, str]], at: int) -> list[Transition]:
        """Groups (or their topics) that vanished: their open statuses end as "gone"."""
        out = []
        for key in keys:
            previous = self.statuses.pop(key, None)
            if previous is not None:
                out.append(
                    Transition(
                        cluster=key[0],
                        group=key[1],
                        previous=previous,
                        current=GroupStatus.NOTFOUND,
                        at=at,
                        result=None,
                        gone=True,
                    )
                )
        return out


def group_without_partitions(cluster: str, group: str, now: int) -> GroupResult:
    """A group the cluster lists with no partitions (its topics were deleted): Burrow answers
    OK with complete 0."""
    return GroupResult(
        cluster=cluster,
        group=group,
        status=GroupStatus.OK,
        complete=0.0,
        burrow_complete=0.0,
        partial=False,
        evaluated_at=now,
    )
