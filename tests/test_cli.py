"""The `notifier` command as a user runs it: check, test-rules, replay."""

from __future__ import annotations

import shutil
from pathlib import Path

from click.testing import CliRunner

from notifier.cli import main

ROOT = Path(__file__).resolve().parents[1]


def run(*args: str):
    return CliRunner().invoke(main, list(args))


def test_check_accepts_the_default_rules():
    result = run("check", str(ROOT / "rules.yaml"))
    assert result.exit_code == 0, result.output
    assert "OK" in result.output


def test_check_rejects_a_broken_file_with_file_and_field(tmp_path):
    bad = tmp_path / "rules.yaml"
    bad.write_text("burrow: {allowed_lag: -1}\n")
    result = run("check", str(bad))
    assert result.exit_code == 1
    assert str(bad) in result.output and "burrow.allowed_lag" in result.output


def test_test_rules_passes_on_the_examples():
    result = run("test-rules", str(ROOT / "examples" / "rules.test.yaml"))
    assert result.exit_code == 0, result.output
    assert "0 failed" in result.output


def test_test_rules_fails_with_a_readable_diff(tmp_path):
    shutil.copy(ROOT / "rules.yaml", tmp_path / "rules.yaml")
    (tmp_path / "t.yaml").write_text(
        """
rules: rules.yaml
tests:
  - name: wrong expectation
    interval: 60s
    input:
      - {group: billing, topic: orders, committed: "10x9", log_end: "11+1x9"}
    expect:
      - at: 540s
        group: billing
        status: OK
        partitions: {orders/0: OK}
        findings: [{rule: burrow, status: WARN}]
"""
    )
    result = run("test-rules", str(tmp_path / "t.yaml"))
    assert result.exit_code == 1
    out = result.output
    assert "FAIL" in out and "wrong expectation" in out
    assert "status: expected OK, got ERR" in out
    assert "partition orders/0: expected OK, got STALL" in out
    assert "finding missing: {rule: burrow, status: WARN}" in out
    assert "1 failed" in out


def test_test_rules_reports_a_bad_series(tmp_path):
    (tmp_path / "t.yaml").write_text(
        "tests: [{name: x, input: [{group: g, topic: t, committed: '1 2', log_end: '1 2 3'}],"
        " expect: [{at: 0, group: g, status: OK}]}]"
    )
    result = run("test-rules", str(tmp_path / "t.yaml"))
    assert result.exit_code == 1
    assert "committed: has 2 samples but log_end has 3" in result.output


def test_replay_prints_transitions_and_a_final_table():
    result = run(
        "replay",
        "--history",
        str(ROOT / "examples" / "sample-history.csv"),
        "--rules",
        str(ROOT / "rules.yaml"),
    )
    assert result.exit_code == 0, result.output
    assert "-> ERR" in result.output
    assert "demo/stalled" in result.output


def test_check_renders_every_template_and_names_a_broken_one(tmp_path):
    (tmp_path / "tpl" / "slack").mkdir(parents=True)
    (tmp_path / "tpl" / "slack" / "open.json.j2").write_text(
        '{"text": "ok"}\n{{ notification.no_such_field }}\n'
    )
    shutil.copy(ROOT / "rules.yaml", tmp_path / "rules.yaml")
    (tmp_path / "service.yaml").write_text(
        "clusters: [{name: a, bootstrap_servers: '127.0.0.1:9092'}]\n"
        "notify:\n"
        "  receivers: {team: {slack_webhook: {url: '${SLACK_URL}'}}}\n"
        "  route: {receiver: team}\n"
        f"  templates: {tmp_path / 'tpl'}\n"
    )
    result = CliRunner().invoke(
        main,
        ["check", "--config", str(tmp_path / "service.yaml")],
        env={"SLACK_URL": "https://hooks.slack.example/services/T0/B0/x"},
    )
    assert result.exit_code == 1
    assert "slack/open.json.j2:2" in result.output and "no_such_field" in result.output
    assert run("check", str(ROOT / "rules.yaml")).output.startswith("templates: OK")
