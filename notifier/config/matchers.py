"""Matchers: which incidents a route, a silence or an inhibit rule applies to.

``label op value`` in Alertmanager's vocabulary (``=``, ``!=``, ``=~``, ``!~``), written as a
list of strings or a mapping of label to value; a regex that could take exponential time to
match is refused when the config (or an API silence) is read (:func:`regex_hazard`).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from re import _constants as re_constants  # type: ignore[attr-defined]
from re import _parser as re_parser  # type: ignore[attr-defined]
from typing import Annotated, Any, Literal

from pydantic import BeforeValidator, Field, PrivateAttr, model_validator

from notifier.config.annotations import BUILTIN_LABELS, LABEL_NAME
from notifier.config.base import FrozenModel

LABELS = BUILTIN_LABELS
"""What matchers can always look at: the incident's cluster and group, and any finding's
topic, rule and severity (``warn``/``err``). A finding also carries its rule's ``labels``
(``team: data``), which matchers name the same way."""


MAX_SILENCE_MATCHERS = 32
"""Matchers per silence: five labels, a few exclusions each; more is a mistake or an attack
(every silence is checked against every incident)."""

MAX_REGEX_LENGTH = 1000
"""The longest regex a matcher may hold (routes listing many groups stay well below it)."""


def regex_hazard(pattern: str) -> str | None:
    """Why matching ``pattern`` could take exponential time (Python's ``re`` backtracks and
    has no time limit), or None. Refused: a repeat of variable length inside another repeat
    (``(a+)+``), an alternation under a repeat whose branches can start with the same
    character (``(a|aa)*``), backreferences, and patterns longer than
    :data:`MAX_REGEX_LENGTH`. Conservative by design: a matcher never needs these, and one
    that has them can stall every routing and silence decision for minutes."""
    if len(pattern) > MAX_REGEX_LENGTH:
        return f"is longer than {MAX_REGEX_LENGTH} characters"
    # re._parser is the parser re.compile itself uses: the one way to see the pattern's
    # structure exactly as it will be matched.
    parsed = re_parser.parse(pattern)
    fold = bool(parsed.state.flags & re.IGNORECASE)
    return _hazard(list(parsed), repeated=False, fold=fold)


_REPEATS = (re_constants.MAX_REPEAT, re_constants.MIN_REPEAT, re_constants.POSSESSIVE_REPEAT)
_ANY_FIRST = None  # a branch whose first character cannot be pinned down


def _hazard(items: list[Any], *, repeated: bool, fold: bool) -> str | None:
    for op, arg in items:
        found = None
        if op in _REPEATS:
            low, high, body = arg
            if repeated and low != high:
                return (
                    "has a nested quantifier (a repeat inside a repeat, as in (a+)+): matching "
                    "it can take exponential time; write it without one, e.g. [a-z.]* rather "
                    "than ([a-z]+[.])*"
                )
            found = _hazard(list(body), repeated=repeated or high > 1, fold=fold)
        elif op is re_constants.BRANCH:
            branches = arg[1]
            if repeated and _branches_overlap(branches, fold):
                return (
                    "repeats an alternation whose branches can start alike, as in (a|aa)*: "
                    "matching it can take exponential time; make the branches start "
                    "differently or drop the repeat"
                )
            for branch in branches:
                found = found or _hazard(list(branch), repeated=repeated, fold=fold)
        elif op is re_constants.SUBPATTERN:
            found = _hazard(list(arg[3]), repeated=repeated, fold=fold)
        elif op in (re_constants.ASSERT, re_constants.ASSERT_NOT):
            found = _hazard(list(arg[1]), repeated=repeated, fold=fold)
        elif op is re_constants.ATOMIC_GROUP:
            found = _hazard(list(arg), repeated=repeated, fold=fold)
        elif op in (re_constants.GROUPREF, re_constants.GROUPREF_EXISTS):
            return "uses a backreference, which can take exponential time to match"
        if found:
            return found
    return None


def _branches_overlap(branches: list[Any], fold: bool) -> bool:
    seen: set[str] = set()
    for branch in branches:
        first = _first_characters(list(branch), fold)
        if first is _ANY_FIRST or first & seen:
            return True
        seen |= first
    return False


def _first_characters(items: list[Any], fold: bool) -> set[str] | None:
    """The characters a match of ``items`` can start with; None when that is not a short,
    known set (a class, a dot, an optional part, an empty branch)."""
    for op, arg in items:
        if op is re_constants.AT:
            continue  # anchors match no character
        if op is re_constants.LITERAL:
            char = chr(arg)
            return {char.lower()} if fold else {char}
        if op is re_constants.SUBPATTERN:
            return _first_characters(list(arg[3]), fold)
        if op in _REPEATS and arg[0] > 0:
            return _first_characters(list(arg[2]), fold)
        return _ANY_FIRST
    return _ANY_FIRST


class Matcher(FrozenModel):
    """``label op value``: ``=`` / ``!=`` compare, ``=~`` / ``!~`` full-match a regex.

    A missing value (a group-level finding has no topic) compares as the empty string, as in
    Alertmanager. Regexes that could take exponential time to match are refused
    (:func:`regex_hazard`).
    """

    label: Annotated[str, Field(pattern=LABEL_NAME.pattern)]
    """A built-in label (:data:`LABELS`) or one a rule sets (``team``)."""
    op: Literal["=", "!=", "=~", "!~"] = "="
    value: str
    _regex: re.Pattern[str] | None = PrivateAttr(default=None)

    @model_validator(mode="after")
    def _compile(self) -> Matcher:
        if self.op in ("=~", "!~"):
            try:
                self._regex = re.compile(self.value)
            except re.error as exc:
                raise ValueError(f"invalid regular expression {self.value!r}: {exc}") from None
            hazard = regex_hazard(self.value)
            if hazard:
                shown = self.value if len(self.value) <= 80 else self.value[:77] + "..."
                raise ValueError(f"regular expression {shown!r} {hazard}")
        return self

    def matches(self, value: str | None) -> bool:
        text = "" if value is None else value
        if self.label == "severity" and self.op in ("=", "!="):
            text, wanted = text.lower(), self.value.lower()
        else:
            wanted = self.value
        if self.op == "=":
            return text == wanted
        if self.op == "!=":
            return text != wanted
        assert self._regex is not None
        hit = self._regex.fullmatch(text) is not None
        return hit if self.op == "=~" else not hit

    def __str__(self) -> str:
        return f"{self.label}{self.op}{json.dumps(self.value)}"


_MATCHER_RE = re.compile(r"^\s*([A-Za-z0-9_]+)\s*(=~|!~|!=|=)\s*(.*?)\s*$")
_OPS = ("=~", "!~", "!=", "=")


def _matcher_dict(item: Any) -> Any:
    if isinstance(item, Matcher):
        return item
    if not isinstance(item, str):
        return item
    match = _MATCHER_RE.match(item)
    if not match:
        raise ValueError(f"expected `label op value` (ops: = != =~ !~), got {item!r}")
    label, op, value = match.groups()
    check_label(label)
    if value.startswith('"'):
        try:
            value = json.loads(value)
        except json.JSONDecodeError:
            raise ValueError(f"badly quoted value in {item!r}") from None
    return {"label": label, "op": op, "value": value}


def check_label(label: str) -> None:
    """Raise when ``label`` cannot be a label name (matchers, inhibit rules' ``equal``)."""
    if not LABEL_NAME.match(label):
        raise ValueError(
            f"label name {label!r}: expected letters, digits and _ (not starting with a digit):"
            f" one of {', '.join(LABELS)} or a label a rule sets, such as team"
        )


def parse_matchers(value: Any) -> list[Any]:
    """Matchers as a list of ``'group=~"orders-.*"'`` strings, or a mapping ``{label: value}``
    whose value may start with an operator (``{group: "=~orders-.*"}``; plain = equality)."""
    if value is None:
        return []
    if isinstance(value, Mapping):
        out = []
        for label, raw in value.items():
            check_label(str(label))
            text = str(raw)
            op = next((o for o in _OPS if text.startswith(o)), None)
            out.append({"label": label, "op": op or "=", "value": text[len(op) :] if op else text})
        return out
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list):
        raise ValueError("expected a list of matchers or a mapping of label to value")
    return [_matcher_dict(item) for item in value]


Matchers = Annotated[tuple[Matcher, ...], BeforeValidator(parse_matchers)]
