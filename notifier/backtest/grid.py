"""The parameter grid: which configurations a backtest replays.

A grid file maps dotted rules parameters (``burrow.allowed_lag``, ``rules.lag-seconds-warn.for``)
to lists of values. :func:`expand_grid` turns it into configuration 0 (the rules file unchanged)
and the cartesian product, every configuration built and validated before any replay starts.
"""

from __future__ import annotations

import enum
import itertools
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from notifier.config import ConfigError, read_yaml
from notifier.rules import RulesConfig, with_parameters


@dataclass(frozen=True, slots=True)
class GridConfig:
    """One configuration: its id (0 = the rules file unchanged), the grid parameters as the
    rules model holds them (durations in seconds), and the resulting rules."""

    config_id: int
    parameters: dict[str, Any]
    rules: RulesConfig


def parse_grid(data: Any, source: str = "<grid>") -> dict[str, list[Any]]:
    """``{parameters: {dotted.path: [values, ...]}}`` → ``{dotted.path: [values]}``.

    Only the shape is checked here; :func:`expand_grid` checks that each parameter exists and
    each value is valid for it.
    """
    usage = "expected a mapping `parameters: {dotted.path: [value, ...]}`"
    if not isinstance(data, dict) or "parameters" not in data:
        raise ConfigError(source, [("", usage)])
    problems = [(key, "unknown field") for key in data if key != "parameters"]
    parameters = data["parameters"]
    if not isinstance(parameters, dict) or not parameters:
        raise ConfigError(source, [("parameters", usage)])
    grid: dict[str, list[Any]] = {}
    for name, values in parameters.items():
        where = f"parameters.{name}"
        if not isinstance(values, list) or not values:
            problems.append((where, "expected a non-empty list of values"))
            continue
        seen: list[Any] = []
        for value in values:
            if value in seen:
                problems.append((where, f"value {value!r} is listed twice"))
            seen.append(value)
        grid[str(name)] = values
    if problems:
        raise ConfigError(source, problems)
    return grid


def load_grid(path: str | os.PathLike[str]) -> dict[str, list[Any]]:
    """Read and shape-check a grid file (YAML)."""
    return parse_grid(read_yaml(Path(path)), str(path))


def parameter_value(config: RulesConfig, dotted: str) -> Any:
    """The value a dotted parameter has in ``config`` (``burrow.allowed_lag``,
    ``rules.lag-seconds-warn.for``); durations in seconds, enums as their value."""
    section, *rest = dotted.split(".")
    node: object
    if section == "window":
        node, key = config.window, rest[0]
    elif section == "burrow":
        node, key = config.burrow, rest[0]
    else:
        node, key = config.rule(rest[0]), rest[1]
    value = getattr(node, "for_" if key == "for" else key)
    return value.value if isinstance(value, enum.Enum) else value


def expand_grid(
    rules: RulesConfig, grid: Mapping[str, Sequence[Any]], source: str = "<grid>"
) -> list[GridConfig]:
    """Configuration 0 (``rules`` unchanged), then the cartesian product of the grid, in the
    order the file lists parameters and values (the last parameter varies fastest).

    Every configuration is built and validated here, before any work starts: a parameter that
    does not exist, or a combination the rules reject (a value out of range, a
    ``stuck_rebalance`` rule needing more samples than ``window.intervals``) raises
    :class:`ConfigError` naming ``source`` and the parameter. Values are judged together, never
    alone, since one parameter may make another's value valid.
    """
    names = list(grid)
    problems: list[tuple[str, str]] = []
    for name in names:
        try:
            with_parameters(rules, {name: grid[name][0]})
        except KeyError as exc:
            message = str(exc.args[0]) if exc.args else name
            problems.append((f"parameters.{name}", f"no such parameter: {message}"))
        except ConfigError:
            pass  # judged with the other parameters below
    if problems:
        raise ConfigError(source, problems)
    configs = [GridConfig(0, {n: parameter_value(rules, n) for n in names}, rules)]
    invalid = 0
    combinations = itertools.product(*(grid[n] for n in names)) if names else iter(())
    for config_id, combination in enumerate(combinations, 1):
        chosen = dict(zip(names, combination))
        try:
            config = with_parameters(rules, chosen)
        except ConfigError as exc:
            invalid += 1
            if invalid <= 10:
                shown = ", ".join(f"{k}={v!r}" for k, v in chosen.items())
                reasons = "; ".join(f"{path}: {message}" for path, message in exc.problems)
                problems.append((f"configuration {config_id} ({shown})", reasons))
            continue
        configs.append(
            GridConfig(config_id, {n: parameter_value(config, n) for n in names}, config)
        )
    if invalid > 10:
        problems.append(("", f"… and {invalid - 10} more invalid configurations"))
    if problems:
        raise ConfigError(source, problems)
    return configs
