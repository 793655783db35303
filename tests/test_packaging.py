"""`pip install notifier` (no extras) runs every command: each third-party module the package
imports is a base dependency; and, when NOTIFIER_WHEEL_CHECK=1, the built wheel runs outside the
source tree (CI runs .ci/wheel-check itself, after the test suite)."""

from __future__ import annotations

import ast
import os
import re
import subprocess
import sys
import tomllib
from importlib import metadata
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _distribution_name(requirement: str) -> str:
    name = re.match(r"[A-Za-z0-9._-]+", requirement)
    assert name, requirement
    return re.sub(r"[-_.]+", "-", name[0]).lower()


def _imported_top_level_modules() -> dict[str, set[str]]:
    """Every top-level module imported anywhere in the package (lazy imports included), with
    the files that import it."""
    found: dict[str, set[str]] = {}
    for path in (ROOT / "notifier").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            else:
                continue
            for name in names:
                found.setdefault(name.split(".")[0], set()).add(str(path.relative_to(ROOT)))
    return found


def _module_level_imports(path: Path) -> set[str]:
    """The top-level modules ``path`` imports outside any function (imported on import)."""
    found: set[str] = set()
    pending: list[ast.AST] = [ast.parse(path.read_text(), str(path))]
    while pending:
        node = pending.pop()
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda):
            continue
        if isinstance(node, ast.Import):
            found |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.add(node.module.split(".")[0])
        pending.extend(ast.iter_child_nodes(node))
    return found


def test_every_module_the_package_imports_is_a_base_dependency():
    """Or, for a login mechanism's optional extra (msk-iam, kerberos), a module imported only
    inside the functions that use it, so that the base install never imports it."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    base = {_distribution_name(requirement) for requirement in project["dependencies"]}
    optional = {_distribution_name(requirement)
                for extra in ("msk-iam", "kerberos")
                for requirement in project["optional-dependencies"][extra]}  # fmt: skip
    distributions = metadata.packages_distributions()
    missing = {}
    for module, files in _imported_top_level_modules().items():
        if module in sys.stdlib_module_names or module in ("notifier", "__future__"):
            continue
        provided_by = {_distribution_name(d) for d in distributions.get(module, [module])}
        if provided_by & base:
            continue
        eager = sorted(f for f in files if module in _module_level_imports(ROOT / f))
        if not provided_by & optional or eager:
            missing[module] = eager or sorted(files)
    assert not missing, f"imported but not in [project] dependencies: {missing}"


def test_the_demos_smtp_receiver_is_a_base_dependency():
    """`notifier demo --local-receivers` after a plain `pip install notifier`."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    base = {_distribution_name(requirement) for requirement in project["dependencies"]}
    extras = {
        _distribution_name(requirement)
        for requirements in project["optional-dependencies"].values()
        for requirement in requirements
    }
    assert "aiosmtpd" in base and "aiosmtpd" not in extras


@pytest.mark.skipif(
    os.environ.get("NOTIFIER_WHEEL_CHECK") != "1",
    reason="builds and installs the wheel (minutes): set NOTIFIER_WHEEL_CHECK=1",
)
def test_the_wheel_runs_every_first_command_outside_the_source_tree():
    done = subprocess.run(
        ["bash", str(ROOT / ".ci" / "wheel-check")],
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert done.returncode == 0, done.stdout[-5000:] + done.stderr[-5000:]
    assert "every scenario detected, nothing else alerted" in done.stdout
    assert "wheel-check: OK" in done.stdout


def _make_dry_run(target: str, venv: Path) -> list[str]:
    """The commands `make <target>` would run on a fresh clone (a virtualenv not yet made)."""
    # --no-print-directory: run under `make test`, a nested make would add "Entering/Leaving
    # directory" lines of its own.
    done = subprocess.run(["make", "--no-print-directory", "-n", target, f"VENV={venv}"],
                          cwd=ROOT, capture_output=True, text=True, timeout=60,
                          check=True)  # fmt: skip
    return done.stdout.splitlines()


def test_make_demo_installs_the_package_alone_without_the_test_tools(tmp_path):
    """The README's first command needs no test tools and no system Kerberos (the test extra
    builds gssapi against libkrb5-dev)."""
    commands = _make_dry_run("demo", tmp_path / "venv")
    installs = [c for c in commands if " install " in c and "--upgrade pip" not in c]
    assert installs == [f"{tmp_path / 'venv'}/bin/pip install --quiet -e ."]
    assert not any("setup-system" in c or "[test]" in c for c in commands)
    assert commands[-1].startswith(f"{tmp_path / 'venv'}/bin/notifier demo ")


def test_make_test_installs_the_system_programs_before_the_test_extra(tmp_path):
    commands = _make_dry_run("test", tmp_path / "venv")
    setup = commands.index("bash tests/setup-system.sh")
    install = commands.index(f"{tmp_path / 'venv'}/bin/pip install --quiet -e '.[test]'")
    pytest_run = next(
        i for i, c in enumerate(commands) if c.startswith(f"{tmp_path / 'venv'}/bin/pytest -q")
    )
    assert setup < install < pytest_run


def test_the_readme_says_the_test_extra_needs_the_kerberos_headers():
    """`pip install '.[test]'` builds gssapi (the kerberos extra is in the test extra), which
    fails without libkrb5-dev: wherever the README names the test extra, it says so."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    extras = project["optional-dependencies"]
    assert any("kerberos" in requirement for requirement in extras["test"])
    naming = [p for p in (ROOT / "README.md").read_text().split("\n\n") if "[test]" in p]
    assert naming
    for paragraph in naming:
        assert "libkrb5-dev" in paragraph and "krb5-config" in paragraph, paragraph[:200]


def test_ci_runs_nothing_but_the_readmes_test_command_and_the_wheel_check():
    steps = [line for line in (ROOT / ".ci" / "run").read_text().splitlines()
             if line and not line.startswith("#")]  # fmt: skip
    assert steps == ["set -euo pipefail", 'cd "$(dirname "$0")/.."', "make test",
                     "make wheel-check"]  # fmt: skip
