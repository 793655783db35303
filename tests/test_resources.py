"""The files notifier ships with (default rules, templates, examples) are found wherever the
package is imported from, and a user's own files win over them."""

from __future__ import annotations

import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
from click.testing import CliRunner

from notifier import resources
from notifier.cli import main
from notifier.config import parse_service_config
from notifier.notify.channels import Templates
from notifier.notify.channels.templates import sample_notification
from notifier.rules import load_rules

ROOT = Path(__file__).resolve().parents[1]


def run(*args: str):
    return CliRunner().invoke(main, list(args))


def test_in_a_checkout_the_shipped_files_are_the_repositorys_own_copies():
    assert resources.bundled_root() == ROOT
    assert resources.default_rules() == ROOT / "rules.yaml"
    assert (resources.template_dir() / "slack" / "open.json.j2").is_file()
    assert resources.example("rules.test.yaml") == ROOT / "examples" / "rules.test.yaml"
    assert resources.example("examples/grid.yaml") == ROOT / "examples" / "grid.yaml"
    assert "examples/sample-history.csv" in resources.bundled_files()
    assert load_rules(resources.default_rules()).rules


def test_the_wheel_maps_the_top_level_copies_where_resources_looks():
    """pyproject.toml packages rules.yaml, templates/ and examples/ under notifier/bundled."""
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())
    mapped = pyproject["tool"]["hatch"]["build"]["targets"]["wheel"]["force-include"]
    bundled = f"{resources.PACKAGE}/{resources.BUNDLED}"
    assert mapped == {
        resources.RULES: f"{bundled}/{resources.RULES}",
        resources.TEMPLATES: f"{bundled}/{resources.TEMPLATES}",
        resources.EXAMPLES: f"{bundled}/{resources.EXAMPLES}",
    }


def _install_like_a_wheel(site: Path) -> Path:
    """The package with its data laid out as the wheel installs it, away from any checkout."""
    package = site / "notifier"
    shutil.copytree(ROOT / "notifier", package, ignore=shutil.ignore_patterns("__pycache__"))
    bundled = package / "bundled"
    bundled.mkdir()
    shutil.copy(ROOT / "rules.yaml", bundled / "rules.yaml")
    shutil.copytree(ROOT / "templates", bundled / "templates")
    shutil.copytree(ROOT / "examples", bundled / "examples")
    return bundled


def _in_fresh_python(site: Path, cwd: Path, code: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", code],
        cwd=cwd,
        env={"PYTHONPATH": str(site), "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_installed_the_package_data_is_found_inside_the_package(tmp_path):
    bundled = _install_like_a_wheel(tmp_path / "site")
    (tmp_path / "elsewhere").mkdir()
    done = _in_fresh_python(
        tmp_path / "site",
        tmp_path / "elsewhere",
        "from notifier import resources\n"
        "from notifier.notify.channels import Templates\n"
        "print(resources.default_rules())\n"
        "print(resources.template_dir())\n"
        "print(len(Templates().names()), Templates().render_check())\n",
    )
    assert done.returncode == 0, done.stderr
    rules, templates, rendered = done.stdout.splitlines()
    assert rules == str(bundled / "rules.yaml")
    assert templates == str(bundled / "templates")
    count, problems = rendered.split(" ", 1)
    assert int(count) == len(Templates().names()) > 0 and problems == "[]"


def test_without_the_package_data_the_error_says_what_is_missing(tmp_path, monkeypatch):
    package = tmp_path / "site-packages" / "notifier"
    package.mkdir(parents=True)
    monkeypatch.setattr(resources, "package_dir", lambda: package)
    with pytest.raises(resources.BundledFilesMissing, match=r"no rules\.yaml in .*bundled"):
        resources.default_rules()


def test_a_bundled_name_cannot_escape_the_bundle():
    for name in ("../pyproject.toml", "/etc/passwd", "", "no-such-example.yaml"):
        with pytest.raises(resources.BundledFilesMissing, match="no bundled file"):
            resources.example(name)


# --------------------------------------------------------------------------------------------
# A user's own files win


def test_a_rules_file_given_or_in_the_working_directory_wins_over_the_default(tmp_path):
    mine = tmp_path / "mine.yaml"
    assert resources.rules_or_default(mine, cwd=tmp_path) == mine
    assert resources.rules_or_default(None, cwd=tmp_path) == resources.default_rules()
    (tmp_path / "rules.yaml").write_text("burrow: {}\n")
    assert resources.rules_or_default(None, cwd=tmp_path) == tmp_path / "rules.yaml"


def test_a_template_directory_overrides_only_the_templates_it_holds(tmp_path):
    (tmp_path / "slack").mkdir()
    (tmp_path / "slack" / "open.json.j2").write_text('{"text": "ours: {{ event }}"}\n')
    templates = Templates(tmp_path)
    context = templates.context(sample_notification("open"))
    assert templates.render_json("slack/open.json.j2", context) == {"text": "ours: open"}
    escalated = templates.render_json(
        "slack/escalate.json.j2", templates.context(sample_notification("escalate"))
    )
    assert "blocks" in escalated  # still the built-in one
    assert templates.render_check() == []


def test_a_service_config_without_rules_uses_its_neighbour_else_the_default(tmp_path):
    config = parse_service_config(
        {"clusters": [{"name": "a", "bootstrap_servers": "127.0.0.1:9092"}]}, "service.yaml"
    )
    assert config.rules_path(tmp_path) == resources.default_rules()
    (tmp_path / "rules.yaml").write_text("burrow: {}\n")
    assert config.rules_path(tmp_path) == tmp_path / "rules.yaml"
    named = config.model_copy(update={"rules": "team/rules.yaml"})
    assert named.rules_path(tmp_path) == tmp_path / "team" / "rules.yaml"


# --------------------------------------------------------------------------------------------
# The command line


def test_check_with_no_file_checks_the_shipped_rules_and_templates(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    result = run("check")
    assert result.exit_code == 0, result.output
    assert result.output.startswith(f"templates: OK ({len(Templates().names())} templates")
    assert f"{resources.default_rules()}: OK (burrow + " in result.output


def test_check_with_no_file_prefers_the_rules_in_the_working_directory(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "rules.yaml").write_text("burrow: {allowed_lag: -1}\n")
    result = run("check")
    assert result.exit_code == 1
    assert "rules.yaml" in result.output and "burrow.allowed_lag" in result.output


def test_check_renders_a_template_directory_given_on_the_command_line(tmp_path):
    (tmp_path / "email").mkdir()
    (tmp_path / "email" / "open.subject.j2").write_text("{{ incident.nope }}\n")
    result = run("check", "--templates", str(tmp_path), str(ROOT / "rules.yaml"))
    assert result.exit_code == 1
    assert "template email/open.subject.j2:1" in result.output
    assert "'incident' is undefined" in result.output


def test_check_fails_when_no_template_is_found(tmp_path, monkeypatch):
    """A broken install that ships no templates would send nothing: that is not 'OK'."""
    monkeypatch.setattr(resources, "template_dir", lambda: tmp_path / "missing")
    result = run("check", str(ROOT / "rules.yaml"))
    assert result.exit_code == 1
    assert "templates: none found" in result.output
    assert "templates: OK" not in result.output


def test_examples_lists_the_shipped_files_and_prints_one_path():
    listed = run("examples")
    assert listed.exit_code == 0, listed.output
    assert f"shipped with notifier, in {resources.bundled_root()}:" in listed.output
    for name in ("rules.yaml", "examples/service.yaml", "examples/rules.test.yaml"):
        assert f"  {name}\n" in listed.output
    assert "templates/ (" in listed.output

    one = run("examples", "sample-history.csv")
    assert one.exit_code == 0 and one.output == f"{ROOT / 'examples' / 'sample-history.csv'}\n"

    missing = run("examples", "nope.yaml")
    assert missing.exit_code == 1
    assert "no bundled file 'nope.yaml'; there are: rules.yaml, examples/" in missing.output


def test_examples_copy_gives_files_that_work_where_they_land(tmp_path):
    target = tmp_path / "mine"
    copied = run("examples", "--copy", str(target))
    assert copied.exit_code == 0, copied.output
    assert (target / "rules.yaml").is_file() and (target / "templates" / "README.md").is_file()
    tested = run("test-rules", str(target / "examples" / "rules.test.yaml"))
    assert tested.exit_code == 0 and "0 failed" in tested.output
    checked = run("check", "--config", str(target / "examples" / "service.yaml"))
    assert checked.exit_code == 0, checked.output
    assert f"{target / 'examples' / '..' / 'rules.yaml'}: OK" in checked.output

    again = run("examples", "--copy", str(target))
    assert again.exit_code == 1 and "not empty" in again.output


def test_replay_without_rules_uses_the_shipped_default(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    result = run("replay", "--history", str(resources.example("sample-history.csv")))
    assert result.exit_code == 0, result.output
    assert "demo/stalled" in result.output
