"""What every config file shares: durations, patterns, one strict model base, errors that
name the file and the field, YAML reading and ${ENV} substitution."""

from __future__ import annotations

import os
import re
from collections.abc import Collection, Iterable, Mapping
from pathlib import Path
from typing import Annotated, Any, get_args, get_origin

import yaml
from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    ValidationError,
)

_DURATION_RE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h|d|w)?\s*$")
_UNIT_SECONDS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0, "w": 604800.0}


def parse_duration(value: Any) -> float:
    """Seconds from ``90``, ``"90s"``, ``"5m"``, ``"1h30m"``, ``"7d"`` or ``"250ms"``."""
    if isinstance(value, bool):
        raise ValueError("expected a duration such as 30s, 5m, 1h or a number of seconds")
    if isinstance(value, int | float):
        seconds = float(value)
    elif isinstance(value, str):
        parts = re.findall(r"(\d+(?:\.\d+)?)\s*(ms|s|m|h|d|w)", value)
        if parts and re.fullmatch(r"(\s*\d+(?:\.\d+)?\s*(ms|s|m|h|d|w)\s*)+", value):
            seconds = sum(float(number) * _UNIT_SECONDS[unit] for number, unit in parts)
        else:
            match = _DURATION_RE.match(value)
            if not match:
                raise ValueError(
                    f"expected a duration such as 30s, 5m, 1h or a number of seconds, got {value!r}"
                )
            seconds = float(match.group(1)) * _UNIT_SECONDS[match.group(2) or "s"]
    else:
        raise ValueError("expected a duration such as 30s, 5m, 1h or a number of seconds")
    if seconds < 0:
        raise ValueError("a duration cannot be negative")
    return seconds


def format_duration(seconds: float) -> str:
    """The inverse of :func:`parse_duration` for display (``"5m"``, ``"90s"``, ``"1h"``)."""
    for unit in ("w", "d", "h", "m", "s"):
        size = _UNIT_SECONDS[unit]
        if seconds >= size and float(seconds / size).is_integer():
            return f"{int(seconds / size)}{unit}"
    return f"{seconds:g}s"


Duration = Annotated[float, BeforeValidator(parse_duration)]
"""A duration in seconds, written in YAML as ``30s``, ``5m``, ``1h``, ``7d`` or a number."""


def _is_duration(annotation: Any, metadata: Iterable[Any] = ()) -> bool:
    if any(getattr(m, "func", None) is parse_duration for m in metadata):
        return True
    if get_origin(annotation) is Annotated:
        return _is_duration(get_args(annotation)[0], annotation.__metadata__)
    return any(_is_duration(arg) for arg in get_args(annotation))


def duration_fields(model: type[BaseModel]) -> frozenset[str]:
    """The fields of ``model`` that are :data:`Duration` (optional ones too), by their YAML
    names: what is written back as ``30s`` or ``5m`` rather than a number of seconds."""
    return frozenset(
        field.alias or name
        for name, field in model.model_fields.items()
        if _is_duration(field.annotation, field.metadata)
    )


NonNegativeInt = Annotated[int, Field(ge=0)]
Fraction = Annotated[float, Field(ge=0.0, le=1.0)]


def _compile_patterns(value: Any) -> list[str]:
    patterns = [value] if isinstance(value, str) else value
    if not isinstance(patterns, list) or not all(isinstance(p, str) for p in patterns):
        raise ValueError("expected a regular expression or a list of them")
    for pattern in patterns:
        try:
            re.compile(pattern)
        except re.error as exc:
            raise ValueError(f"invalid regular expression {pattern!r}: {exc}") from None
    return patterns


Patterns = Annotated[list[str], BeforeValidator(_compile_patterns)]


class StrictModel(BaseModel):
    """The base of every config model: unknown fields are errors, aliases and names both work."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True)


class FrozenModel(StrictModel):
    """A strict model whose instances cannot change (and so can be hashed and shared)."""

    model_config = ConfigDict(frozen=True)


class ConfigError(Exception):
    """A config file is wrong. ``problems`` are ``(field path, message)`` pairs; ``summary``
    replaces the usual "N problem(s)" text when one line says it all (a missing file)."""

    def __init__(
        self, source: str, problems: list[tuple[str, str]], summary: str | None = None
    ) -> None:
        self.source = source
        self.problems = problems
        if summary is not None:
            super().__init__(summary)
            return
        lines = [f"{source}: {len(problems)} problem(s)"]
        lines += [f"  {path or '<top>'}: {message}" for path, message in problems]
        super().__init__("\n".join(lines))


SECRET_NOT_SHOWN = "(a secret: not shown)"
"""Ends the message of a wrong secret value; the value itself is never echoed."""

NAMED_LISTS = ("rules", "clusters")
"""Top-level lists whose items are named in error paths by their ``name`` (``rules.lag-high``,
as in backtest grids) rather than by position."""


def _item_path(path: str, index: int, item: Any) -> str:
    """``rules.lag-high`` for a named item of a top-level named list, else ``path[index]``."""
    name = item.get("name") if isinstance(item, dict) else None
    if path in NAMED_LISTS and isinstance(name, str) and name:
        return f"{path}.{name}"
    return f"{path}[{index}]"


def _format_loc(loc: Iterable[Any], data: Any, tags: Collection[str]) -> str:
    """``rules.lag-high.threshold`` or ``receivers.team[0].url`` from pydantic's location tuple,
    dropping union tag noise."""
    out = ""
    node = data
    for part in loc:
        if isinstance(part, int):
            item = node[part] if isinstance(node, list) and part < len(node) else None
            out = _item_path(out, part, item)
            node = item
            continue
        # pydantic inserts the discriminator value ("lag", ...) as a location step
        if isinstance(node, dict) and part not in node and part in tags:
            continue
        key = "for" if part == "for_" else str(part)
        out += f".{key}" if out else key
        node = node.get(key) if isinstance(node, dict) else None
    return out


def _describe(error: Mapping[str, Any], tags: Collection[str]) -> str:
    kind = error["type"]
    msg = str(error["msg"])
    if kind == "extra_forbidden":
        return "unknown field"
    if kind == "union_tag_invalid":
        tag = error.get("ctx", {}).get("tag")
        return f"unknown rule kind {tag!r}; expected one of: {', '.join(tags)}"
    if kind == "union_tag_not_found":
        return f"missing `kind`; expected one of: {', '.join(tags)}"
    if msg.startswith("Value error, "):
        msg = msg[len("Value error, ") :]
    if "input" in error and kind != "missing" and SECRET_NOT_SHOWN not in msg:
        shown = repr(error["input"])
        if len(shown) < 60 and shown not in msg and not isinstance(error["input"], dict | list):
            msg += f" (got {shown})"
    return msg


def validation_problems(
    exc: ValidationError, data: Any, tags: Collection[str] = ()
) -> list[tuple[str, str]]:
    """``(field path, message)`` pairs from pydantic's errors. ``tags`` are the values of a
    discriminated union's tag (the rule kinds), which pydantic inserts into locations."""
    return [(_format_loc(e["loc"], data, tags), _describe(e, tags)) for e in exc.errors()]


def _unindexed(path: str) -> str:
    return re.sub(r"\[\d+\]", "", path)


def with_env_problems(
    env_problems: list[tuple[str, str]], problems: list[tuple[str, str]]
) -> list[tuple[str, str]]:
    """Unset variables first, then the other problems, leaving out those of a field whose
    variable is unset (its ``${NAME}`` is no URL or number: saying so again is noise). A
    receiver written as one mapping is a list of one to the validator, hence no indices."""
    unset = {_unindexed(path) for path, _ in env_problems}
    return env_problems + [p for p in problems if _unindexed(p[0]) not in unset]


def duplicate_names(items: Any, where: str, what: str) -> list[tuple[str, str]]:
    """A problem for each ``name`` used by more than one mapping of ``items`` (checked on the raw
    data, so it is reported together with every other problem of the file)."""
    if not isinstance(items, list):
        return []
    names = [item.get("name") for item in items if isinstance(item, dict)]
    repeated = sorted({n for n in names if isinstance(n, str) and names.count(n) > 1})
    return [(where, f"{what} name {n!r} is used twice; names must be unique") for n in repeated]


def read_yaml(path: Path) -> Any:
    try:
        text = path.read_text()
    except FileNotFoundError:
        missing = f"no such file: {path}"
        raise ConfigError(str(path), [("", missing)], summary=missing) from None
    except OSError as exc:
        raise ConfigError(str(path), [("", f"cannot read: {exc.strerror}")]) from None
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        problem = getattr(exc, "problem", None) or str(exc)
        raise ConfigError(str(path), [(where, f"invalid YAML: {problem}")]) from None


_ENV_RE = re.compile(r"\$\$\{|\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}")


def substitute_env(
    data: Any, env: Mapping[str, str] | None = None, *, strict: bool = True, path: str = ""
) -> tuple[Any, list[tuple[str, str]]]:
    """Replace ``${NAME}`` (or ``${NAME:-default}``) in every string of ``data`` from ``env``
    (default ``os.environ``); ``$${`` is a literal ``${``. Returns the new data and
    ``(field, problem)`` pairs for unset variables without a default (left as they are when
    not ``strict``, e.g. for ``notifier check``)."""
    env = os.environ if env is None else env
    problems: list[tuple[str, str]] = []

    def replace(text: str, where: str) -> str:
        def one(match: re.Match[str]) -> str:
            if match.group(0) == "$${":
                return "${"
            name, default = match.group(1), match.group(2)
            if name in env:
                return env[name]
            if default is not None:
                return default
            if strict:
                problems.append((where, f"environment variable {name} is not set"))
            return match.group(0)

        return _ENV_RE.sub(one, text)

    def walk(node: Any, where: str) -> Any:
        if isinstance(node, str):
            return replace(node, where) if "${" in node else node
        if isinstance(node, dict):
            return {k: walk(v, f"{where}.{k}" if where else str(k)) for k, v in node.items()}
        if isinstance(node, list):
            return [walk(v, _item_path(where, i, v)) for i, v in enumerate(node)]
        return node

    return walk(data, path), problems
