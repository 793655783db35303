"""A rule kind is one module plus one registration: a kind defined in the tests folder alone
(``tests/toy_rule_kind.py``), registered as README, "How to add a rule kind" says, is validated
from a rules file, tuned by overrides and grids, evaluated scan by scan and reported, with no
edit under ``notifier/``."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
import yaml
from click.testing import CliRunner

from notifier.api.series import thresholds
from notifier.backtest.job import default_slo_for
from notifier.cli import main
from notifier.config import ConfigError
from notifier.rules import (
    Evaluator,
    RulesConfig,
    ScanColumns,
    WindowStore,
    load_rules,
    register,
    replay_table,
    with_parameters,
)
from notifier.rules.kinds import ChartLine, kind_names, unregister
from notifier.rules.step import ClusterPipeline
from notifier.rules.testrules import RuleTest, series_samples
from notifier.service import checkpoint
from notifier.types import Sample, Transition, samples_to_table

from . import toy_rule_kind

RULES = """\
burrow: {enabled: false}
rules:
  - kind: few_members
    name: team-size
    at_least: 2
    overrides:
      - match: {group: solo-.*}
        at_least: 1
"""

TEST_FILE = """\
rules: rules.yaml
tests:
  - name: a consumer of two left the group
    interval: 10s
    input:
      - group: billing
        topic: orders
        committed: "0+10x9"
        log_end: "5+10x9"
        members: "2x4 1x4"
      - group: solo-etl
        topic: orders
        committed: "0+10x9"
        log_end: "5+10x9"
        members: "1x9"
    expect:
      - at: 40s
        group: billing
        status: OK
      - at: 50s
        group: billing
        status: WARN
        findings: [{rule: team-size, status: WARN}]
      - at: 90s
        group: solo-etl
        status: OK
"""


@pytest.fixture
def toy_kind() -> Iterator[None]:
    register(toy_rule_kind.KIND)
    yield
    unregister(toy_rule_kind.KIND.name)


def write_rules(tmp_path: Path, text: str = RULES) -> Path:
    path = tmp_path / "rules.yaml"
    path.write_text(text)
    return path


def test_the_toy_kind_is_validated_from_a_rules_file(toy_kind, tmp_path):
    config = load_rules(write_rules(tmp_path))
    rule = config.rule("team-size")
    assert isinstance(rule, toy_rule_kind.FewMembersRule)
    assert rule.at_least == 2
    assert "few_members" in kind_names()

    with pytest.raises(ConfigError) as bad:
        load_rules(write_rules(tmp_path, RULES.replace("at_least: 2", "at_least: 0")))
    assert str(tmp_path / "rules.yaml") in str(bad.value)
    assert ("rules.team-size.at_least", "Input should be greater than or equal to 1 (got 0)") in (
        bad.value.problems
    )

    with pytest.raises(ConfigError) as unknown:
        load_rules(write_rules(tmp_path, RULES.replace("few_members", "few_memberz")))
    assert "unknown rule kind 'few_memberz'" in str(unknown.value)
    assert "consumers_gone, few_members" in str(unknown.value)


def test_the_toy_kinds_parameters_take_part_in_grids(toy_kind, tmp_path):
    config = load_rules(write_rules(tmp_path))
    tuned = with_parameters(config, {"rules.team-size.at_least": 3})
    assert tuned.rule("team-size").at_least == 3
    with pytest.raises(KeyError, match="at_least"):
        with_parameters(config, {"rules.team-size.at_most": 3})


def test_the_toy_kind_is_evaluated_and_reported(toy_kind, tmp_path):
    write_rules(tmp_path)
    (tmp_path / "rules.test.yaml").write_text(TEST_FILE)
    result = CliRunner().invoke(main, ["test-rules", str(tmp_path / "rules.test.yaml")])
    assert result.exit_code == 0, result.output

    # What the service would hand to notify: a transition whose finding the kind wrote.
    spec = yaml.safe_load(TEST_FILE)["tests"][0]
    samples = series_samples(RuleTest.model_validate(spec), "toy")
    seen: list[Transition] = []
    replay_table(
        samples_to_table(samples),
        load_rules(tmp_path / "rules.yaml"),
        10,
        on_transitions=seen.extend,
    )
    [transition] = seen
    assert (transition.group, transition.previous.value, transition.current.value) == (
        "billing",
        "OK",
        "WARN",
    )
    assert transition.result is not None
    [finding] = transition.result.findings
    assert (finding.rule, finding.kind, finding.status) == ("team-size", "few_members", "WARN")
    assert finding.message == "1 member, fewer than 2"
    assert finding.evidence["members"] == 1
    assert finding.evidence["partitions"] == ["orders/0"]
    assert finding.evidence["fewest_members"] == 1


def test_a_kinds_own_evidence_is_allocated_checkpointed_and_read_from_its_declaration(tmp_path):
    # The toy kind declares e_fewest_members in its own module; nothing under notifier/ names it.
    store_before = WindowStore(RulesConfig().window)
    assert "e_fewest_members" not in store_before.evidence
    register(toy_rule_kind.KIND)
    try:
        config = load_rules(write_rules(tmp_path))
        pipeline = ClusterPipeline(config, 10)
        store = pipeline.store
        assert "e_fewest_members" in store.evidence and "e_rewind_from" in store.evidence
        assert "e_fewest_members" in store.row_column_names
        assert {"e_rewind_from", "e_churn_since"} <= set(store.row_column_names)
        assert store.evidence["e_fewest_members"].dtype == np.int32
        for i, members in enumerate((3, 1, 2)):
            pipeline.step(ScanColumns.from_samples([
                Sample(ts=1_000_000 + i * 10_000, cluster="toy", group="billing", topic="orders",
                       partition=0, committed_offset=i, log_end_offset=i + 5, members=members)
            ]))  # fmt: skip
        row = store.row("toy", "billing", "orders", 0)
        assert row is not None and int(store.evidence["e_fewest_members"][row]) == 1

        path = tmp_path / "toy.checkpoint"
        checkpoint.save(path, store, pipeline.evaluator, pipeline.tracker)
        restored = ClusterPipeline(config, 10)
        assert checkpoint.load(path, restored.store, restored.evaluator, restored.tracker)
        assert int(restored.store.evidence["e_fewest_members"][row]) == 1

        # A store built before the kind was registered lacks its evidence: refused, clearly.
        with pytest.raises(ValueError, match=r"e_fewest_members.*register the kind first"):
            Evaluator(config, store_before)
    finally:
        unregister(toy_rule_kind.KIND.name)


def test_a_kind_draws_its_chart_line_and_sets_the_slo_wait_by_declaring_them(tmp_path):
    # The status page's threshold lines and the backtest's default SLO wait read the kind's own
    # declarations: a kind that wants them says so in its module, nowhere else.
    waiting = RULES.replace("at_least: 2\n", "at_least: 2\n    for: 30s\n")
    rules_path = write_rules(tmp_path, waiting)

    register(toy_rule_kind.KIND)
    try:
        plain = load_rules(rules_path)
        assert thresholds(plain, "prod", "billing", ["orders"]) == []
        assert default_slo_for(plain) == 0.0
    finally:
        unregister(toy_rule_kind.KIND.name)

    def members_line(rule: toy_rule_kind.FewMembersRule) -> ChartLine:
        return ChartLine("lag", "group", float(rule.at_least), None, rule.severity.value)

    register(dataclasses.replace(toy_rule_kind.KIND, chart_line=members_line, sets_slo_wait=True))
    try:
        declared = load_rules(rules_path)
        assert thresholds(declared, "prod", "billing", ["orders"]) == [
            {"rule": "team-size", "metric": "lag", "scope": "group", "value": 2.0,
             "clear_below": None, "severity": "warn", "topics": ["orders"]},
        ]  # fmt: skip
        assert thresholds(declared, "prod", "solo-etl", ["orders"])[0]["value"] == 1.0
        assert default_slo_for(declared) == 30.0
    finally:
        unregister(toy_rule_kind.KIND.name)


def test_a_kind_whose_model_names_another_kind_is_refused():
    misnamed = dataclasses.replace(toy_rule_kind.KIND, name="team_size")
    with pytest.raises(TypeError, match=r"must be Literal\['team_size'\]"):
        register(misnamed)
    assert "team_size" not in kind_names()


def test_a_kind_nobody_registered_is_unknown(tmp_path):
    assert "few_members" not in kind_names()
    with pytest.raises(ConfigError, match="unknown rule kind 'few_members'"):
        load_rules(write_rules(tmp_path))
    assert RulesConfig().rules == []
