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
    BeforeValidator,
    Field,
    ValidationError,
    field_validator,
    model_validator,
)

from notifier.config.annotations import check_annotations, check_labels
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


Labels = Annotated[dict[str, str], BeforeValidator(check_labels)]
RuleAnnotations = Annotated[dict[str, str], BeforeValidator(check_annotations)]


class _RuleBase(StrictModel):
    """What every rule has: selectors, severity, ``for`` and ``keep_firing_for``, and the
    ``labels`` and ``annotations`` its findings carry to the notifications."""

    enabled: bool = True
    match: Selector = Field(default_factory=Selector)
    exclude: Selector | None = None
    for_: Duration = Field(default=0.0, alias="for")
    keep_firing_for: Duration = 0.0
    overrides: list[dict[str, Any]] = Field(default_factory=list)
    labels: Labels = Field(default_factory=dict)
    """Added to every finding of the rule (``team: data``); routes and inhibit rules match
    them (:mod:`notifier.config.annotations`)."""
    annotations: RuleAnnotations = Field(default_factory=dict)
    """Jinja2 templates rendered over each finding: ``summary``, ``description``,
    ``runbook_url`` (:mod:`notifier.config.annotations`)."""

    # Parameters an override may set; subclasses extend it.
    TUNABLE: ClassVar[tuple[str, ...]] = (
        "enabled", "for_", "keep_firing_for", "severity", "labels", "annotations"
    )  # fmt: skip

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


class _Hysteresis:
    """``clear_below``: once firing, the rule holds until the value is at or below this
    (default: the threshold itself), so a value hovering around the threshold opens once."""

    threshold: Any
    clear_below: Any

    @model_validator(mode="after")
    def _clear_below_threshold(self) -> Any:
        if self.clear_below is not None and self.clear_below > self.threshold:
            raise ValueError(
                f"clear_below {self.clear_below:g} is above threshold {self.threshold:g}; "
                "expected a value at or below the threshold"
            )
        return self


class LagRule(_Hysteresis, _RuleBase):
    kind: Literal["lag"]
    name: str
    severity: Severity = Severity.WARN
    threshold: NonNegativeInt
    clear_below: NonNegativeInt | None = None
    scope: Literal["partition", "group"] = "partition"
    TUNABLE: ClassVar[tuple[str, ...]] = (*_RuleBase.TUNABLE, "threshold", "clear_below")


class LagSecondsRule(_Hysteresis, _RuleBase):
    kind: Literal["lag_seconds"]
    name: str
    severity: Severity = Severity.WARN
    threshold: Duration
    clear_below: Duration | None = None
    TUNABLE: ClassVar[tuple[str, ...]] = (*_RuleBase.TUNABLE, "threshold", "clear_below")


class ProgressRule(_RuleBase):
    """STALL and STOP from per-scan evidence, judged against each group's own habits.

    STALL: members present and the committed offset has not moved for ``tolerance`` × the
    partition's usual wait between moves (learned from its history), and at least
    ``stall_after``, while records arrived. STOP: no members for ``tolerance`` × the group's
    usual restart, and at least ``stop_after``, while records arrived.
    """

    kind: Literal["progress"]
    name: str
    severity: Severity = Severity.ERR
    stall_after: Duration = 30.0
    stop_after: Duration = 60.0
    tolerance: Annotated[float, Field(ge=1.0)] = 1.5
    TUNABLE: ClassVar[tuple[str, ...]] = (
        *_RuleBase.TUNABLE, "stall_after", "stop_after", "tolerance"
    )  # fmt: skip


class RewindRule(_RuleBase):
    """The committed offset went backwards; firing until the consumer is past where it was."""

    kind: Literal["rewind"]
    name: str
    severity: Severity = Severity.ERR
    TUNABLE: ClassVar[tuple[str, ...]] = _RuleBase.TUNABLE


class FallingBehindRule(_RuleBase):
    """Consuming slower than ``ratio`` × the partition's normal production rate while the lag
    grows and is more than ``min_lag_seconds`` behind."""

    kind: Literal["falling_behind"]
    name: str
    severity: Severity = Severity.WARN
    ratio: Annotated[float, Field(gt=0.0, le=1.0)] = 0.85
    min_lag_seconds: Duration = 30.0
    TUNABLE: ClassVar[tuple[str, ...]] = (*_RuleBase.TUNABLE, "ratio", "min_lag_seconds")


class StuckRebalanceRule(_RuleBase):
    kind: Literal["stuck_rebalance"]
    name: str
    severity: Severity = Severity.ERR
    samples: Annotated[int, Field(ge=1)] = 6
    TUNABLE: ClassVar[tuple[str, ...]] = (*_RuleBase.TUNABLE, "samples")


class RebalanceStormRule(_RuleBase):
    """More than ``max_changes`` member-set changes: within the window, or, with ``lasting``,
    in a run of changes (each at most ``window.churn_gap`` apart) that has lasted that long —
    which tells a storm from a rolling deploy, which ends."""

    kind: Literal["rebalance_storm"]
    name: str
    severity: Severity = Severity.WARN
    max_changes: NonNegativeInt = 3
    lasting: Duration = 0.0
    TUNABLE: ClassVar[tuple[str, ...]] = (*_RuleBase.TUNABLE, "max_changes", "lasting")


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
    | ProgressRule
    | RewindRule
    | FallingBehindRule
    | StuckRebalanceRule
    | RebalanceStormRule
    | RetentionRule
    | ConsumersGoneRule,
    Field(discriminator="kind"),
]

RULE_KINDS = (
    "lag",
    "lag_seconds",
    "progress",
    "rewind",
    "falling_behind",
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
    assumed_commit_interval: Duration = 600.0
    """Until a partition has shown how long its offset usually waits before moving, rules
    that judge it by that habit assume this much (a new group is not a stalled one)."""
    churn_gap: Duration = 90.0
    """Member-set changes at most this far apart belong to one run of churn (rebalance storms)."""


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
        "progress": ProgressRule,
        "rewind": RewindRule,
        "falling_behind": FallingBehindRule,
        "stuck_rebalance": StuckRebalanceRule,
        "rebalance_storm": RebalanceStormRule,
        "retention": RetentionRule,
        "consumers_gone": ConsumersGoneRule,
    }
    return models[node["kind"]]
