"""What every rule shares: selectors, ``for`` / ``keep_firing_for``, overrides, labels and
annotations, and the window settings.

The rule kinds build on these: each kind's model is in its own module under
:mod:`notifier.rules.kinds`, and the rules file that lists them is
:mod:`notifier.rules.rulesfile` (config imports no stage, so the file that names the kinds lives
with them).
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Annotated, Any, ClassVar

from pydantic import (
    BeforeValidator,
    Field,
    ValidationError,
    model_validator,
)

from notifier.config.annotations import check_annotations, check_labels
from notifier.config.base import (
    Duration,
    Patterns,
    StrictModel,
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


class RuleBase(StrictModel):
    """What every rule has: selectors, severity, ``for`` and ``keep_firing_for``, and the
    ``labels`` and ``annotations`` its findings carry to the notifications."""

    enabled: bool = True
    match: Selector = Field(default_factory=Selector)
    exclude: Selector | None = None
    for_: Duration = Field(default=0.0, alias="for")
    keep_firing_for: Duration = 0.0
    keep_firing_capped: bool = False
    """``keep_firing_for`` lasts no longer than the rule fired before it cleared, so a false
    alarm of one scan is not held for minutes (Prometheus holds it the whole time)."""
    overrides: list[dict[str, Any]] = Field(default_factory=list)
    labels: Labels = Field(default_factory=dict)
    """Added to every finding of the rule (``team: data``); routes and inhibit rules match
    them (:mod:`notifier.config.annotations`)."""
    annotations: RuleAnnotations = Field(default_factory=dict)
    """Jinja2 templates rendered over each finding: ``summary``, ``description``,
    ``runbook_url`` (:mod:`notifier.config.annotations`)."""

    # Parameters an override may set; subclasses extend it.
    TUNABLE: ClassVar[tuple[str, ...]] = (
        "enabled", "for_", "keep_firing_for", "keep_firing_capped", "severity", "labels",
        "annotations",
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
    def _check_overrides(self) -> RuleBase:
        for index, override in enumerate(self.overrides):
            if not isinstance(override, dict):
                raise ValueError(f"overrides[{index}]: expected a mapping")
            if "match" not in override:
                raise ValueError(f"overrides[{index}]: needs a `match` selector")
            params = {k: v for k, v in override.items() if k != "match"}
            unknown = [k for k in params if attr_name(k) not in self.TUNABLE]
            if unknown:
                allowed = ", ".join(sorted(yaml_name(k) for k in self.TUNABLE))
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

    def resolved_for(self, cluster: str, group: str, topic: str) -> RuleBase:
        """This rule with the first matching override applied (itself when none matches)."""
        for override in self.overrides:
            if Selector.model_validate(override["match"]).matches(cluster, group, topic):
                params = {k: v for k, v in override.items() if k != "match"}
                return type(self).model_validate({**self._own_params(), **params})
        return self


def attr_name(key: str) -> str:
    return "for_" if key == "for" else key


def yaml_name(key: str) -> str:
    return "for" if key == "for_" else key


class Hysteresis:
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


class KindRule(RuleBase):
    """A rule of the ``rules:`` list: a ``kind`` (which module judges it, see
    :mod:`notifier.rules.kinds`), a unique ``name`` and the ``severity`` it fires with. Each
    kind narrows ``kind`` to its own literal and adds its parameters."""

    if TYPE_CHECKING:
        # Declared by each kind, in its own place among its fields (the order a rules file
        # written back from a model keeps), so only for the type checker here.
        kind: str
        name: str
        severity: Severity

    def window_problem(self, window: WindowSettings) -> str | None:
        """Why this rule can never fire with these window settings (None: it can)."""
        return None


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
