"""The rules file (``rules.yaml``): pydantic models, loading, and errors that name file and field.

Only validation and parameter plumbing live here; what the rules *do* is in
:mod:`notifier.rules.kernels`.
"""

from __future__ import annotations

import copy
import re
from pathlib import Path
from typing import Annotated, Any, ClassVar, Literal

from pydantic import (
    Field,
    ValidationError,
    field_validator,
    model_validator,
)

from notifier.config.base import (
    ConfigError,
    Duration,
    Fraction,
    NonNegativeInt,
    Patterns,
    StrictModel,
    duplicate_names,
    read_yaml,
    validation_problems,
)
from notifier.types import Severity


class Selector(StrictModel):
    """Which group-partitions a rule applies to: anchored regexes, any of a list matches."""

    cluster: Patterns | None = None
    group: Patterns | None = None
    topic: Patterns | None = None

    def matches(self, cluster: str, group: str, topic: str) -> bool:
        """True when every given field matches one of its patterns (no field: matches all)."""
        for patterns, value in ((self.cluster, cluster), (self.group, group), (self.topic, topic)):
            if patterns is not None and not any(re.fullmatch(p, value) for p in patterns):
                return False
        return True

    def is_empty(self) -> bool:
        return self.cluster is None and self.group is None and self.topic is None


# --------------------------------------------------------------------------------------------
# Rules


class _RuleBase(StrictModel):
    """What every rule has: selectors, severity, ``for`` and ``keep_firing_for``."""

    enabled: bool = True
    match: Selector = Field(default_factory=Selector)
    exclude: Selector | None = None
    for_: Duration = Field(default=0.0, alias="for")
    keep_firing_for: Duration = 0.0
    overrides: list[dict[str, Any]] = Field(default_factory=list)

    # Parameters an override may set; subclasses extend it.
    TUNABLE: ClassVar[tuple[str, ...]] = ("enabled", "for_", "keep_firing_for", "severity")

    def applies_to(self, cluster: str, group: str, topic: str) -> bool:
        if not self.match.matches(cluster, group, topic):
            return False
        return not (
            self.exclude is not None
            and not self.exclude.is_empty()
            and self.exclude.matches(cluster, group, topic)
        )

    @model_validator(mode="after")
    def _check_overrides(self) -> _RuleBase:
        for index, override in enumerate(self.overrides):
            if not isinstance(override, dict):
                raise ValueError(f"overrides[{index}]: expected a mapping")
            if "match" not in override:
                raise ValueError(f"overrides[{index}]: needs a `match` selector")
            params = {k: v for k, v in override.items() if k != "match"}
            unknown = [k for k in params if _attr_name(k) not in self.TUNABLE]
            if unknown:
                allowed = ", ".join(sorted(_yaml_name(k) for k in self.TUNABLE))
                raise ValueError(
                    f"overrides[{index}]: unknown parameter(s) {', '.join(unknown)}; "
                    f"expected one of: {allowed}"
                )
            try:
                Selector.model_validate(override["match"])
                type(self).model_validate({**self._own_params(), **params})
            except ValidationError as exc:
                first = exc.errors()[0]
                where = ".".join(str(p) for p in first["loc"])
                raise ValueError(f"overrides[{index}].{where}: {first['msg']}") from None
        return self

    def _own_params(self) -> dict[str, Any]:
        return self.model_dump(by_alias=True, exclude={"overrides"}, exclude_none=True)

    def resolved_for(self, cluster: str, group: str, topic: str) -> _RuleBase:
        """This rule with the first matching override applied (itself when none matches)."""
        for override in self.overrides:
            if Selector.model_validate(override["match"]).matches(cluster, group, topic):
                params = {k: v for k, v in override.items() if k != "match"}
                return type(self).model_validate({**self._own_params(), **params})
        return self


def _attr_name(key: str) -> str:
    return "for_" if key == "for" else key


def _yaml_name(key: str) -> str:
    return "for" if key == "for_" else key


class BurrowRule(_RuleBase):
    """Burrow's per-partition rules, exactly, with Burrow's ``allowed_lag`` and
    ``minimum_complete`` (which here is also the notification gate)."""

    allowed_lag: NonNegativeInt = 0
    minimum_complete: Fraction = 1.0
    TUNABLE: ClassVar[tuple[str, ...]] = (*_RuleBase.TUNABLE, "allowed_lag", "minimum_complete")


class LagRule(_RuleBase):
    kind: Literal["lag"]
    name: str
    severity: Severity = Severity.WARN
    threshold: NonNegativeInt
    scope: Literal["partition", "group"] = "partition"
    TUNABLE: ClassVar[tuple[str, ...]] = (*_RuleBase.TUNABLE, "threshold")


class LagSecondsRule(_RuleBase):
    kind: Literal["lag_seconds"]
    name: str
    severity: Severity = Severity.WARN
    threshold: Duration
    TUNABLE: ClassVar[tuple[str, ...]] = (*_RuleBase.TUNABLE, "threshold")


class StuckRebalanceRule(_RuleBase):
    kind: Literal["stuck_rebalance"]
    name: str
    severity: Severity = Severity.ERR
    samples: Annotated[int, Field(ge=1)] = 6
    TUNABLE: ClassVar[tuple[str, ...]] = (*_RuleBase.TUNABLE, "samples")


class RebalanceStormRule(_RuleBase):
    kind: Literal["rebalance_storm"]
    name: str
    severity: Severity = Severity.WARN
    max_changes: NonNegativeInt = 3
    TUNABLE: ClassVar[tuple[str, ...]] = (*_RuleBase.TUNABLE, "max_changes")


class RetentionRule(_RuleBase):
    """ERR when records were already lost (committed < log-start); WARN when the committed
    offset is within ``warn_fraction`` of the retained range from log-start."""

    kind: Literal["retention"]
    name: str
    severity: Severity = Severity.ERR
    warn_fraction: Fraction = 0.1
    TUNABLE: ClassVar[tuple[str, ...]] = (*_RuleBase.TUNABLE, "warn_fraction")


class ConsumersGoneRule(_RuleBase):
    """The group has no members through the window while its lag grows."""

    kind: Literal["consumers_gone"]
    name: str
    severity: Severity = Severity.ERR
    TUNABLE: ClassVar[tuple[str, ...]] = _RuleBase.TUNABLE


Rule = Annotated[
    LagRule
    | LagSecondsRule
    | StuckRebalanceRule
    | RebalanceStormRule
    | RetentionRule
    | ConsumersGoneRule,
    Field(discriminator="kind"),
]

RULE_KINDS = (
    "lag",
    "lag_seconds",
    "stuck_rebalance",
    "rebalance_storm",
    "retention",
    "consumers_gone",
)


class WindowSettings(StrictModel):
    intervals: Annotated[int, Field(ge=2, le=1000)] = 10
    """Samples per partition window, and the size of Burrow's commit ring."""
    min_distance: Duration = 0.0
    """Burrow's min-distance: a commit seen sooner than this after the previous replaces it."""
    expire_group: Duration = 7 * 86400.0
    """Burrow's expire-group: a group whose offsets have not moved for this long is dropped."""
    lag_time_points: Annotated[int, Field(ge=2, le=10000)] = 60
    """Points per partition in the LEO table used for lag in seconds."""
    max_gap_factor: Annotated[float, Field(gt=1.0)] = 1.5
    """Two samples further apart than this many scan intervals have a gap between them."""


class RulesConfig(StrictModel):
    """The whole rules file."""

    window: WindowSettings = Field(default_factory=WindowSettings)
    burrow: BurrowRule = Field(default_factory=BurrowRule)
    rules: list[Rule] = Field(default_factory=list)

    @field_validator("rules")
    @classmethod
    def _unique_names(cls, rules: list[Any]) -> list[Any]:
        seen: set[str] = set()
        for rule in rules:
            if rule.name == "burrow":
                raise ValueError("the name 'burrow' is reserved for the built-in Burrow rule set")
            if rule.name in seen:
                raise ValueError(f"rule name {rule.name!r} is used twice; names must be unique")
            seen.add(rule.name)
        return rules

    @model_validator(mode="after")
    def _fits_the_window(self) -> RulesConfig:
        for index, rule in enumerate(self.rules):
            if isinstance(rule, StuckRebalanceRule) and rule.samples > self.window.intervals:
                raise ValueError(
                    f"rules[{index}] ({rule.name}): samples {rule.samples} exceeds "
                    f"window.intervals {self.window.intervals}; it could never fire"
                )
        return self

    @property
    def minimum_complete(self) -> float:
        """The gate: results from windows less complete than this never notify."""
        return self.burrow.minimum_complete

    def rule(self, name: str) -> Any:
        if name == "burrow":
            return self.burrow
        for rule in self.rules:
            if rule.name == name:
                return rule
        raise KeyError(name)


def parse_rules(data: Any, source: str = "<rules>") -> RulesConfig:
    """Validate an already-parsed mapping; :class:`ConfigError` names ``source`` and the field."""
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise ConfigError(source, [("", "expected a mapping with window, burrow and rules")])
    try:
        return RulesConfig.model_validate(data)
    except ValidationError as exc:
        problems = validation_problems(exc, data, RULE_KINDS)
        # pydantic checks names only once every rule is valid: report a repeat in the same pass
        problems += [
            p for p in duplicate_names(data.get("rules"), "rules", "rule") if p not in problems
        ]
        raise ConfigError(source, problems) from None


def load_rules(path: str | Path) -> RulesConfig:
    """Load and validate a rules file."""
    path = Path(path)
    return parse_rules(read_yaml(path), str(path))


# --------------------------------------------------------------------------------------------
# Parameters by dotted path (for backtest grids)


def _walk(data: dict[str, Any], dotted: str) -> tuple[dict[str, Any], str]:
    parts = dotted.split(".")
    if len(parts) < 2:
        raise KeyError(f"{dotted!r}: expected section.parameter, e.g. burrow.allowed_lag")
    section, rest = parts[0], parts[1:]
    if section in ("window", "burrow"):
        if len(rest) != 1:
            raise KeyError(f"{dotted!r}: expected {section}.<parameter>")
        return data.setdefault(section, {}), rest[0]
    if section == "rules":
        if len(rest) != 2:
            raise KeyError(f"{dotted!r}: expected rules.<rule name>.<parameter>")
        for rule in data.get("rules", []):
            if rule.get("name") == rest[0]:
                return rule, rest[1]
        names = ", ".join(r.get("name", "?") for r in data.get("rules", []))
        raise KeyError(f"{dotted!r}: no rule named {rest[0]!r} (rules: {names})")
    raise KeyError(f"{dotted!r}: unknown section {section!r}; expected window, burrow or rules")


def with_parameters(config: RulesConfig, parameters: dict[str, Any]) -> RulesConfig:
    """A copy of ``config`` with dotted parameters set, e.g. ``{"burrow.allowed_lag": 100}``.

    Raises :class:`KeyError` naming a parameter that does not exist, and :class:`ConfigError`
    when a value is invalid for it.
    """
    data = copy.deepcopy(config.model_dump(by_alias=True, exclude_none=True))
    for dotted, value in parameters.items():
        node, key = _walk(data, dotted)
        model = _section_model(dotted, node)
        if _attr_name(key) not in model.model_fields:
            known = ", ".join(sorted(_yaml_name(k) for k in model.model_fields))
            raise KeyError(f"{dotted!r}: {key!r} is not a parameter here (known: {known})")
        node[key] = value
    return parse_rules(data, "grid parameters")


def _section_model(dotted: str, node: dict[str, Any]) -> type[StrictModel]:
    section = dotted.split(".")[0]
    if section == "window":
        return WindowSettings
    if section == "burrow":
        return BurrowRule
    models: dict[str, type[StrictModel]] = {
        "lag": LagRule,
        "lag_seconds": LagSecondsRule,
        "stuck_rebalance": StuckRebalanceRule,
        "rebalance_storm": RebalanceStormRule,
        "retention": RetentionRule,
        "consumers_gone": ConsumersGoneRule,
    }
    return models[node["kind"]]
