"""Evaluate a rules config over series-notation inputs (as `notifier test-rules` files have
them): the helpers of the rule tests."""

from __future__ import annotations

from typing import Any

from notifier.rules import RuleTest, parse_rules, replay_table, series_samples
from notifier.types import GroupResult, samples_to_table

BURROW_ONLY: dict[str, Any] = {"burrow": {"minimum_complete": 1.0}}


def evaluate(
    rules: dict[str, Any], inputs: list[dict[str, Any]], at: int, interval: str = "60s"
) -> GroupResult:
    """The group result at ``at`` seconds for series inputs of one group."""
    config = parse_rules(rules)
    test = RuleTest.model_validate(
        {
            "name": "t",
            "interval": interval,
            "input": inputs,
            "expect": [{"at": at, "group": inputs[0]["group"], "status": "OK"}],
        }
    )
    samples = series_samples(test, "test")
    at_ms = at * 1000
    evaluations = replay_table(samples_to_table(samples), config, test.interval, [at_ms])
    return evaluations[at_ms].result("local", inputs[0]["group"])


def series(**fields: Any) -> dict[str, Any]:
    return {"group": "g", "topic": "t", "partition": 0, **fields}


def rule_names(result: GroupResult) -> set[str]:
    return {f.rule for f in result.findings}


def only(rule: dict[str, Any]) -> dict[str, Any]:
    return {"burrow": {"enabled": False}, "rules": [{"name": "r", **rule}]}
