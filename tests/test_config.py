"""rules.yaml: the default is valid, and every mistake names the file, the field and what was
expected."""

from __future__ import annotations

from pathlib import Path

import pytest

from notifier.config import ConfigError, parse_duration
from notifier.rules import load_rules, with_parameters

ROOT = Path(__file__).resolve().parents[1]


def problems(tmp_path: Path, text: str) -> list[tuple[str, str]]:
    path = tmp_path / "rules.yaml"
    path.write_text(text)
    with pytest.raises(ConfigError) as caught:
        load_rules(path)
    assert str(path) in str(caught.value)
    return caught.value.problems


def test_the_default_rules_file_is_valid():
    config = load_rules(ROOT / "rules.yaml")
    assert config.minimum_complete == 1.0
    assert config.window.intervals == 10
    assert {r.kind for r in config.rules} == {
        "progress",
        "rewind",
        "falling_behind",
        "lag_seconds",
        "stuck_rebalance",
        "rebalance_storm",
        "retention",
    }
    assert config.burrow.enabled is False  # Burrow's rules run for /v3 but do not notify


def test_unknown_rule_kind(tmp_path):
    [(where, message)] = problems(tmp_path, "rules: [{name: a, kind: lagg}]")
    assert where == "rules.a"
    assert "unknown rule kind 'lagg'" in message and "lag_seconds" in message


def test_unknown_field(tmp_path):
    [(where, message)] = problems(tmp_path, "burrow: {minimum_complet: 1}")
    assert (where, message) == ("burrow.minimum_complet", "unknown field")


def test_wrong_type_and_negative_threshold(tmp_path):
    found = dict(
        problems(
            tmp_path,
            "rules: [{name: a, kind: lag, threshold: -1}, {name: b, kind: lag, threshold: lots}]",
        )
    )
    assert "greater than or equal to 0" in found["rules.a.threshold"]
    assert "valid integer" in found["rules.b.threshold"]


def test_bad_regex_and_bad_duration(tmp_path):
    found = dict(
        problems(
            tmp_path,
            "rules: [{name: a, kind: lag_seconds, threshold: 5 minutes, match: {group: '([a-z'}}]",
        )
    )
    assert "invalid regular expression" in found["rules.a.match.group"]
    assert "expected a duration" in found["rules.a.threshold"]


def test_override_of_a_parameter_the_rule_does_not_have(tmp_path):
    [(where, message)] = problems(
        tmp_path,
        "rules: [{name: a, kind: retention, overrides: [{match: {group: x}, threshold: 5}]}]",
    )
    assert where == "rules.a" and "unknown parameter(s) threshold" in message


def test_duplicate_names_and_impossible_samples(tmp_path):
    [(_, message)] = problems(
        tmp_path, "rules: [{name: a, kind: lag, threshold: 1}, {name: a, kind: lag, threshold: 2}]"
    )
    assert "used twice" in message
    [(_, message)] = problems(tmp_path, "rules: [{name: s, kind: stuck_rebalance, samples: 20}]")
    assert "exceeds window.intervals" in message


def test_invalid_yaml_names_the_line(tmp_path):
    [(where, message)] = problems(tmp_path, "rules: [\n")
    assert where.startswith("line 2") and "invalid YAML" in message


def test_missing_file():
    with pytest.raises(ConfigError) as caught:
        load_rules("/nonexistent/rules.yaml")
    assert str(caught.value) == "no such file: /nonexistent/rules.yaml"


@pytest.mark.parametrize(
    "text,seconds",
    [("90", 90), (90, 90), ("5m", 300), ("1h30m", 5400), ("7d", 604800), ("250ms", 0.25)],
)
def test_durations(text, seconds):
    assert parse_duration(text) == seconds


def test_parameters_by_dotted_path():
    config = load_rules(ROOT / "rules.yaml")
    changed = with_parameters(
        config,
        {
            "burrow.allowed_lag": 100,
            "window.intervals": 6,
            "rules.lag-seconds-critical.threshold": 1500,
        },
    )
    assert changed.burrow.allowed_lag == 100 and changed.window.intervals == 6
    assert changed.rule("lag-seconds-critical").threshold == 1500
    assert config.burrow.allowed_lag == 0  # the original is untouched
    with pytest.raises(KeyError, match="no rule named"):
        with_parameters(config, {"rules.nope.threshold": 1})
    with pytest.raises(KeyError, match="not a parameter"):
        with_parameters(config, {"burrow.threshold": 1})
    with pytest.raises(ConfigError):
        with_parameters(config, {"burrow.minimum_complete": 2})


def test_environment_substitution_defaults_escapes_and_every_missing_variable():
    from notifier.config import substitute_env

    data = {"a": "${HOST}:${PORT:-9092}", "b": ["$${LITERAL}", "${NOPE}"], "c": {"d": "${ALSO}"}}
    out, problems = substitute_env(data, {"HOST": "kafka"})
    assert out["a"] == "kafka:9092"
    assert out["b"][0] == "${LITERAL}"
    assert problems == [("b[1]", "environment variable NOPE is not set"),
                        ("c.d", "environment variable ALSO is not set")]  # fmt: skip
    lenient, none = substitute_env(data, {}, strict=False)
    assert lenient["b"][1] == "${NOPE}" and none == []


def test_the_notify_section_takes_the_same_syntax_as_the_service_config():
    from notifier.config import load_service_config
    from notifier.notify.config import parse_notify

    config = load_service_config(ROOT / "examples" / "notify.yaml", {})
    notify = parse_notify(config.notify, "notify", env={})
    pagerduty = next(c.pagerduty for c in notify.receivers["oncall"] if c.pagerduty)
    assert pagerduty.routing_key.reveal() == "test-routing-key"  # ${PD_ROUTING_KEY:-...}
