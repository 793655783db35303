"""The rules file (``rules.yaml``): the window, Burrow's section and the list of rules of any
registered kind; loading, and errors that name file and field.

Only validation and parameter plumbing live here: what the rules share is in
:mod:`notifier.config.rules`, each kind's model and what it does in its module under
:mod:`notifier.rules.kinds`, whose registry makes the ``rules:`` list's discriminated union.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Annotated, Any

from pydantic import Field, ValidationError, field_validator, model_validator

from notifier.config import (
    ConfigError,
    StrictModel,
    WindowSettings,
    read_yaml,
    validation_problems,
)
from notifier.config.base import duplicate_names
from notifier.config.rules import KindRule, attr_name, yaml_name
from notifier.rules.kinds import AnyRegisteredKind, kind_names, kind_of, on_change
from notifier.rules.kinds.burrow import BurrowRule


class RulesConfig(StrictModel):
    """The whole rules file."""

    window: WindowSettings = Field(default_factory=WindowSettings)
    burrow: BurrowRule = Field(default_factory=BurrowRule)
    rules: list[Annotated[KindRule, AnyRegisteredKind()]] = Field(default_factory=list)

    @field_validator("rules")
    @classmethod
    def _unique_names(cls, rules: list[KindRule]) -> list[KindRule]:
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
            problem = rule.window_problem(self.window)
            if problem is not None:
                raise ValueError(f"rules[{index}] ({rule.name}): {problem}")
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
        problems = validation_problems(exc, data, kind_names())
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
        if attr_name(key) not in model.model_fields:
            known = ", ".join(sorted(yaml_name(k) for k in model.model_fields))
            raise KeyError(f"{dotted!r}: {key!r} is not a parameter here (known: {known})")
        node[key] = value
    return parse_rules(data, "grid parameters")


def _section_model(dotted: str, node: dict[str, Any]) -> type[StrictModel]:
    section = dotted.split(".")[0]
    if section == "window":
        return WindowSettings
    if section == "burrow":
        return BurrowRule
    return kind_of(node["kind"]).model


def _rebuild() -> None:
    # A kind registered (or forgotten) after this module was imported joins the union.
    RulesConfig.model_rebuild(force=True)


on_change(_rebuild)
