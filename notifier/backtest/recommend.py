"""Choosing a configuration from the summary, and writing it back as a rules file.

:func:`recommend` picks the quietest configuration that meets the target (recall with labels,
every SLO breach without); :func:`rules_yaml` writes its rules with readable durations and checks
they load back the same; :func:`show_parameter` shows a parameter value as a person reads it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import pandas as pd
import yaml
from pydantic import BaseModel

from notifier.config import WindowSettings, duration_fields, format_duration
from notifier.rules import RulesConfig, parse_rules
from notifier.rules.kinds import kind_of
from notifier.rules.kinds.burrow import BurrowRule


@dataclass(frozen=True, slots=True)
class Recommendation:
    config_id: int
    reason: str
    met: bool
    """Whether the chosen configuration meets the target (recall, or every SLO breach)."""


def recommend(summary: pd.DataFrame, labelled: bool, recall_target: float) -> Recommendation:
    """With labels: the configuration with the fewest notifications whose recall reaches the
    target. Without: the quietest that still fires for every SLO breach. Ties go to fewer
    incidents, then fewer alert minutes, then to the configuration that changes the fewest
    parameters of the rules file (configuration 0), then the lower id; when nothing qualifies,
    the best recall (or fewest missed breaches) wins and ``met`` is false."""
    parameters = [c for c in summary.columns if "." in c]
    base = summary.loc[summary["config_id"] == 0, parameters]
    changed = (
        (summary[parameters] != base.iloc[0]).sum(axis=1)
        if parameters and not base.empty
        else pd.Series(0, index=summary.index)
    )
    summary = summary.assign(_changed=changed)
    order = ["notifications", "incidents", "alert_minutes", "_changed", "config_id"]
    if labelled:
        eligible = summary[summary["recall"] >= recall_target - 1e-12]
        if not eligible.empty:
            row = eligible.sort_values(order).iloc[0]
            return Recommendation(
                int(row["config_id"]),
                f"the fewest notifications ({int(row['notifications'])}) with recall "
                f"{row['recall']:.2f} >= target {recall_target:.2f}",
                True,
            )
        best = summary.assign(_r=-summary["recall"].fillna(-1)).sort_values(["_r", *order])
        row = best.iloc[0]
        return Recommendation(
            int(row["config_id"]),
            f"no configuration reaches recall {recall_target:.2f}; the best recall is "
            f"{row['recall']:.2f} ({int(row['notifications'])} notifications)",
            False,
        )
    breaches = int(summary["slo_breaches"].iloc[0]) if len(summary) else 0
    eligible = summary[summary["slo_missed"] == 0]
    if not eligible.empty:
        row = eligible.sort_values(order).iloc[0]
        quietest = f"the quietest ({int(row['notifications'])} notifications)"
        reason = (
            f"{quietest} that fires for all {breaches} SLO breaches"
            if breaches
            else f"no group breached the SLO in this history, so simply {quietest}"
        )
        return Recommendation(int(row["config_id"]), reason, True)
    row = summary.sort_values(["slo_missed", *order]).iloc[0]
    return Recommendation(
        int(row["config_id"]),
        f"every configuration misses an SLO breach; this one misses the fewest "
        f"({int(row['slo_missed'])} of {breaches})",
        False,
    )


def _section_model(config: RulesConfig, section: str, rest: Sequence[str]) -> type[BaseModel]:
    if section == "window":
        return WindowSettings
    if section == "burrow":
        return BurrowRule
    return type(config.rule(rest[0]))


def is_duration(config: RulesConfig, dotted: str) -> bool:
    """Whether a dotted parameter is a duration (shown as ``2m`` rather than ``120``)."""
    section, *rest = dotted.split(".")
    return rest[-1] in duration_fields(_section_model(config, section, rest))


def show_parameter(config: RulesConfig, dotted: str, value: Any) -> str:
    """A parameter value as a person reads it."""
    if is_duration(config, dotted) and isinstance(value, int | float):
        return format_duration(float(value))
    return show_value(value)


def rules_yaml(config: RulesConfig, header: Sequence[str] = ()) -> str:
    """The whole rules file for ``config``, durations written as ``30s``/``5m``; checked to
    load back into the same configuration."""
    data = config.model_dump(by_alias=True, exclude_none=True, mode="json")
    sections: list[tuple[dict[str, Any], type[BaseModel]]] = [
        (data["window"], WindowSettings),
        (data["burrow"], BurrowRule),
        *((rule, kind_of(rule["kind"]).model) for rule in data["rules"]),
    ]
    for section, model in sections:
        durations = duration_fields(model)
        for key in list(section):
            if key in durations:
                section[key] = format_duration(float(section[key]))
        if section.get("match") == {}:
            del section["match"]
        if section.get("overrides") == []:
            del section["overrides"]
    text = yaml.safe_dump(data, sort_keys=False, allow_unicode=True)
    if parse_rules(yaml.safe_load(text), "recommended rules") != config:
        raise AssertionError("the recommended rules do not load back into the same configuration")
    comments = "".join(f"# {line}\n" if line else "#\n" for line in header)
    return comments + text


def show_value(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:g}"
    return str(value)
