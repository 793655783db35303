"""A rule's settings bound to rows: its parameters per window, resolved once per row.

Selectors and overrides make a parameter differ by cluster, group or topic; a
:class:`RuleBinding` resolves them once for each row (again only when the row is reused by
another group-partition) and hands the evaluator scalars when nothing varies, arrays when
something does. Which parameters are bound is the rule kind's ``params``.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from notifier.config import Selector
from notifier.config.rules import attr_name
from notifier.rules.kernels import SEVERITY_ERR, SEVERITY_WARN
from notifier.rules.kinds import RuleKind
from notifier.rules.store import WindowStore
from notifier.types import Severity

SEVERITY_CODE = {Severity.WARN: SEVERITY_WARN, Severity.ERR: SEVERITY_ERR}


class RuleBinding:
    """A rule's parameters per row: scalars when nothing varies, arrays when selectors or
    overrides make them differ by cluster, group or topic (resolved once per row)."""

    def __init__(self, rule: Any, name: str, kind: RuleKind):
        self.rule = rule
        self.name = name
        self.kind = kind
        self.params = kind.params
        self.overrides = [
            (Selector.model_validate(o["match"]), {k: v for k, v in o.items() if k != "match"})
            for o in rule.overrides
        ]
        self.uniform = rule.match.is_empty() and rule.exclude is None and not self.overrides
        self._cache: dict[tuple[str, str, str], tuple[float, ...]] = {}
        self._columns: dict[str, np.ndarray] = {}
        self._bound_epoch = np.zeros(0, dtype=np.int64)

    def _scalars(self, rule: Any) -> tuple[float, ...]:
        severity = getattr(rule, "severity", Severity.ERR)
        return (
            bool(rule.enabled),
            SEVERITY_CODE[Severity(severity)],
            float(rule.for_),
            float(rule.keep_firing_for),
            float(rule.keep_firing_capped),
            *(_parameter(rule, p) for p in self.params),
        )

    @property
    def names(self) -> tuple[str, ...]:
        return ("enabled", "severity", "for", "keep_firing_for", "keep_firing_capped", *self.params)

    def values(self, store: WindowStore, rows: np.ndarray) -> dict[str, Any]:
        if self.uniform:
            return dict(zip(self.names, self._scalars(self.rule)))
        self._ensure_capacity(store.capacity)
        stale = self._bound_epoch[rows] != store.row_epoch[rows]
        for row in rows[stale].tolist():
            cluster, group, topic, _ = store.row_key_of(row)
            key = (cluster, group, topic)
            values = self._cache.get(key)
            if values is None:
                values = self._resolve(cluster, group, topic)
                self._cache[key] = values
            for name, value in zip(self.names, values):
                self._columns[name][row] = value
            self._bound_epoch[row] = store.row_epoch[row]
        return {name: self._columns[name][rows] for name in self.names}

    def _resolve(self, cluster: str, group: str, topic: str) -> tuple[float, ...]:
        rule = self.rule
        for selector, params in self.overrides:
            if selector.matches(cluster, group, topic):
                rule = rule.model_copy(
                    update={attr_name(k): _coerce(rule, k, v) for k, v in params.items()}
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


def _parameter(rule: Any, name: str) -> float:
    value = getattr(rule, name)
    if value is None and name == "clear_below":
        value = rule.threshold  # no hysteresis: clear where it fires
    return float(value)


def _coerce(rule: Any, key: str, value: Any) -> Any:
    # Validate an override value through the model so durations and enums parse as in the file.
    data = rule.model_dump(by_alias=True, exclude={"overrides"}, exclude_none=True)
    data[key] = value
    return getattr(type(rule).model_validate(data), attr_name(key))
