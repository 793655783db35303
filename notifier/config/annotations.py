"""Rule ``labels`` and ``annotations``: what a rule says about its findings beyond the status.

Labels (``team: data``) are plain strings that routes, silences and inhibit rules match like
the built-in labels. Annotations (``summary``, ``description``, ``runbook_url`` and any other
name) are Jinja2 templates rendered over each finding, as Prometheus renders an alerting
rule's annotations over its alert; the variables they may use are :data:`VARIABLES`.

This module validates both when the rules file is read (a template that does not compile, or
that names a variable no finding has, is an error naming the field) and builds the one
Jinja2 environment the rule engine renders them with.
"""

from __future__ import annotations

import re
from typing import Any

import jinja2
import jinja2.meta

LABEL_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
"""A label or annotation name, as Prometheus spells them."""

BUILTIN_LABELS = ("cluster", "group", "topic", "rule", "severity")
"""Labels every finding has; a rule cannot set them (``status`` is reserved as well)."""

RESERVED_LABELS = (*BUILTIN_LABELS, "status", "partition")

VARIABLES = {
    "cluster": "the cluster's name",
    "group": "the consumer group",
    "topic": "the topic (empty for a finding about the whole group)",
    "partition": "the partition (none for a finding about a topic or the group)",
    "rule": "the rule's name",
    "kind": "what the finding says: stall, stop, rewind, falling_behind, lag, ...",
    "status": "the finding's status word: STALL, STOP, REWIND, WARN, ERR",
    "severity": "warn or err",
    "message": "the rule's own sentence about what it saw",
    "evidence": "the values that made it fire (a mapping; its keys depend on the rule)",
    "since": "when the condition started (epoch ms, or none)",
    "labels": "the finding's labels, the rule's and the built-in ones",
}
"""What an annotation template may use."""

ANNOTATION_HINT = "summary, description and runbook_url are the usual ones"


def environment() -> jinja2.Environment:
    """The environment annotations are rendered in: undefined names are errors, nothing is
    escaped (annotations are text; channels escape them for their own markup)."""
    env = jinja2.Environment(
        undefined=jinja2.StrictUndefined, autoescape=False, keep_trailing_newline=False
    )
    env.filters["seconds"] = _seconds
    return env


def _seconds(value: Any) -> str:
    """``2820`` → ``47 min``: a duration in seconds for people."""
    if value is None:
        return "unknown"
    seconds = float(value)
    if seconds < 120:
        return f"{seconds:.0f}s"
    if seconds < 7200:
        return f"{seconds / 60:.0f} min"
    if seconds < 172800:
        return f"{seconds / 3600:.1f} h"
    return f"{seconds / 86400:.1f} days"


_CHECKER = environment()


def check_labels(value: Any) -> dict[str, str]:
    """Validate a rule's ``labels``: names as Prometheus spells them, none of the built-in
    ones, string values."""
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise ValueError("expected a mapping of label name to value, e.g. {team: data}")
    out: dict[str, str] = {}
    for name, label_value in value.items():
        name = str(name)
        if not LABEL_NAME.match(name):
            raise ValueError(
                f"label name {name!r}: expected letters, digits and _ (not starting with a digit)"
            )
        if name in RESERVED_LABELS:
            raise ValueError(
                f"label name {name!r} is built in (every finding has cluster, group, topic, "
                "rule and severity); choose another name"
            )
        if not isinstance(label_value, str | int | float | bool):
            raise ValueError(f"label {name!r}: expected a string value")
        out[name] = str(label_value)
    return out


def check_annotations(value: Any) -> dict[str, str]:
    """Validate a rule's ``annotations``: each a Jinja2 template that compiles and names only
    :data:`VARIABLES`."""
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise ValueError(f"expected a mapping of annotation name to template ({ANNOTATION_HINT})")
    out: dict[str, str] = {}
    for name, template in value.items():
        name = str(name)
        if not LABEL_NAME.match(name):
            raise ValueError(
                f"annotation name {name!r}: expected letters, digits and _ ({ANNOTATION_HINT})"
            )
        if not isinstance(template, str):
            raise ValueError(f"annotation {name!r}: expected a string (a Jinja2 template)")
        try:
            parsed = _CHECKER.parse(template)
        except jinja2.TemplateSyntaxError as exc:
            raise ValueError(
                f"annotation {name!r}: template error on line {exc.lineno}: {exc.message}"
            ) from None
        unknown = sorted(jinja2.meta.find_undeclared_variables(parsed) - set(VARIABLES))
        if unknown:
            raise ValueError(
                f"annotation {name!r}: unknown variable(s) {', '.join(unknown)}; expected "
                f"some of: {', '.join(VARIABLES)}"
            )
        out[name] = template
    return out


def labels_rules_set(rules: Any) -> set[str]:
    """Every label name a rules config (:class:`~notifier.rules.RulesConfig`) sets, its
    overrides' included."""
    names: set[str] = set()
    for rule in [rules.burrow, *rules.rules]:
        names.update(rule.labels)
        for override in rule.overrides:
            labels = override.get("labels")
            if isinstance(labels, dict):
                names.update(str(name) for name in labels)
    return names


def unknown_labels(notify: Any, rules: Any) -> list[tuple[str, str]]:
    """``(field, problem)`` for each label a notify config's routes, silences or inhibit rules
    name that neither every finding has nor any rule sets: a matcher on it could never match
    (a typo, or a label removed from the rules)."""
    known = labels_rules_set(rules)
    problems = []
    for where, label in notify.matcher_labels():
        if label not in known:
            set_by_rules = ", ".join(sorted(known)) or "none"
            problems.append(
                (
                    f"notify.{where}",
                    f"label {label!r} is set by no rule; expected one of "
                    f"{', '.join(BUILTIN_LABELS)} or a label the rules set ({set_by_rules})",
                )
            )
    return problems
