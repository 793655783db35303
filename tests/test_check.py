"""`notifier check --config` agrees with `notifier run`: a file one refuses, the other refuses
too, and check reports every problem of a file in one pass, naming rules by their name and
echoing the bad value (never a secret's)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from notifier.cli import main
from notifier.service import Coordinator

ROOT = Path(__file__).resolve().parents[1]
WEBHOOK = "https://hooks.example/T0/B0/s3cretT0ken"


def invoke(*args: str, env: dict[str, str] | None = None) -> Result:
    return CliRunner().invoke(main, list(args), env=env)


def config_file(tmp_path: Path, notify: str, extra: str = "") -> Path:
    shutil.copy(ROOT / "rules.yaml", tmp_path / "rules.yaml")
    path = tmp_path / "service.yaml"
    path.write_text(
        "clusters: [{name: prod, bootstrap_servers: '127.0.0.1:9092'}]\n"
        f"{extra}"
        "notify:\n"
        f"{notify}"
        "  route: {receiver: team}\n"
    )
    return path


@pytest.fixture(autouse=True)
def run_never_starts(monkeypatch):
    """These files must be refused before anything starts; one that is not fails the test
    instead of running a service."""

    async def started(self, companions):
        raise AssertionError("notifier run accepted the config and started")

    monkeypatch.setattr(Coordinator, "run_until_signalled", started)


def check_and_run(path: Path, env: dict[str, str] | None = None) -> tuple[Result, Result]:
    """Both commands on one file (each must refuse it)."""
    checked = invoke("check", "--config", str(path), env=env)
    ran = invoke("run", "--config", str(path), env=env)
    return checked, ran


def test_an_unset_variable_in_the_notify_section_is_refused_by_both(tmp_path):
    path = config_file(tmp_path, "  receivers: {team: {slack_webhook: {url: '${SLACK_URL}'}}}\n")
    checked, ran = check_and_run(path, env={"SLACK_URL": None})  # type: ignore[dict-item]
    problem = "notify.receivers.team.slack_webhook.url: environment variable SLACK_URL is not set"
    assert checked.exit_code == 1 and problem in checked.output
    assert ran.exit_code == 2 and problem in ran.output
    assert f"{path}: 1 problem(s)" in checked.output  # not also "expected a URL" for the field

    fine = invoke("check", "--config", str(path), env={"SLACK_URL": WEBHOOK})
    assert fine.exit_code == 0, fine.output


def test_a_url_that_is_not_one_is_refused_by_both_without_showing_the_secret(tmp_path):
    path = config_file(
        tmp_path, "  receivers: {team: {webhook: {url: 'hooks.example/s3cretT0ken'}}}\n"
    )
    checked, ran = check_and_run(path)
    problem = (
        "notify.receivers.team[0].webhook.url: expected an http:// or https:// URL with a host "
        "(a secret: not shown)"
    )
    assert checked.exit_code == 1 and problem in checked.output
    assert ran.exit_code == 2 and problem in ran.output
    assert "s3cretT0ken" not in checked.output + ran.output


def test_a_url_that_is_no_secret_is_echoed(tmp_path):
    path = config_file(
        tmp_path,
        "  receivers: {team: {pagerduty: {routing_key: k, url: 'not-a-url'}}}\n",
        extra="api: {public_url: 'ftp://status.example'}\n",
    )
    checked, ran = check_and_run(path)
    assert checked.exit_code == 1 and ran.exit_code == 2
    assert (
        "notify.receivers.team[0].pagerduty.url: expected an http:// or https:// URL with a "
        "host (got 'not-a-url')" in checked.output
    )
    assert (
        "api.public_url: expected an http:// or https:// URL with a host (got "
        "'ftp://status.example')" in checked.output
    )


def test_every_problem_of_a_service_config_in_one_pass(tmp_path):
    shutil.copy(ROOT / "rules.yaml", tmp_path / "rules.yaml")
    path = tmp_path / "service.yaml"
    path.write_text(
        "clusters:\n"
        "  - {name: prod, bootstrap_servers: '127.0.0.1:9092', scan_interval: soon}\n"
        "colour: blue\n"
        "notify:\n"
        "  receivers: {team: {webhook: {url: '${HOOK_URL}'}}}\n"
        "  route: {receiver: nobody}\n"
    )
    checked, ran = check_and_run(path, env={"HOOK_URL": None})  # type: ignore[dict-item]
    assert checked.exit_code == 1 and ran.exit_code == 2
    for output in (checked.output, ran.output):
        assert f"{path}: 4 problem(s)" in output
        assert "clusters.prod.scan_interval: expected a duration" in output
        assert "colour: unknown field" in output
        assert (
            "notify.receivers.team.webhook.url: environment variable HOOK_URL is not set" in output
        )
        assert "notify.route.receiver: unknown receiver 'nobody' (receivers: team)" in output
    assert "templates: OK" in checked.output  # the rest is still checked


def test_every_problem_of_a_rules_file_in_one_pass_naming_rules_by_name(tmp_path):
    rules = tmp_path / "rules.yaml"
    rules.write_text(
        "rules:\n"
        "  - {name: lag-high, kind: lag, threshold: -5}\n"
        "  - {name: typo, kind: lagg, threshold: 5}\n"
        "  - {name: twice, kind: lag, threshold: 1}\n"
        "  - {name: twice, kind: lag, threshold: 2}\n"
    )
    result = invoke("check", str(rules))
    assert result.exit_code == 1
    assert f"{rules}: 3 problem(s)" in result.output
    assert "rules.lag-high.threshold: Input should be greater than or equal to 0" in result.output
    assert "rules.typo: unknown rule kind 'lagg'; expected one of: lag," in result.output
    assert "rules: rule name 'twice' is used twice; names must be unique" in result.output


def test_a_missing_file_says_no_such_file(tmp_path):
    missing = tmp_path / "nope.yaml"
    for args, code in (
        (("check", str(missing)), 1),
        (("check", "--config", str(missing)), 1),
        (("run", "--config", str(missing)), 2),
        (("test-rules", str(missing)), 1),
    ):
        result = invoke(*args)
        assert result.exit_code == code, args
        assert f"no such file: {missing}\n" in result.output, args
        assert "<top>" not in result.output and "file not found" not in result.output


def test_an_unset_variable_is_one_problem_named_where_it_is(tmp_path):
    """examples/docker.yaml without KAFKA_BOOTSTRAP: said once, not again as a bad address."""
    checked, ran = check_and_run(
        ROOT / "examples" / "docker.yaml",
        env={"KAFKA_BOOTSTRAP": None, "SLACK_WEBHOOK_URL": WEBHOOK},  # type: ignore[dict-item]
    )
    problem = "clusters.main.bootstrap_servers: environment variable KAFKA_BOOTSTRAP is not set"
    for result, code in ((checked, 1), (ran, 2)):
        assert result.exit_code == code
        assert "docker.yaml: 1 problem(s)" in result.output and problem in result.output


def test_the_image_config_notifies_the_slack_webhook_its_variable_names(tmp_path):
    """examples/docker.yaml alerts someone: without SLACK_WEBHOOK_URL the image does not start;
    with it, the config names one receiver."""
    shutil.copy(ROOT / "examples" / "docker.yaml", tmp_path / "config.yaml")
    shutil.copy(ROOT / "rules.yaml", tmp_path / "rules.yaml")  # as in the image
    config = tmp_path / "config.yaml"
    env = {"KAFKA_BOOTSTRAP": "broker:9092", "SLACK_WEBHOOK_URL": None}
    checked, ran = check_and_run(config, env=env)  # type: ignore[arg-type]
    problem = (
        "notify.receivers.oncall[0].slack_webhook.url: "
        "environment variable SLACK_WEBHOOK_URL is not set"
    )
    for result, code in ((checked, 1), (ran, 2)):
        assert result.exit_code == code
        assert "config.yaml: 1 problem(s)" in result.output and problem in result.output

    checked = invoke("check", "--config", str(config), env={**env, "SLACK_WEBHOOK_URL": WEBHOOK})
    assert checked.exit_code == 0, checked.output
    assert f"{config}: OK (1 cluster(s))" in checked.output
