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


def test_every_module_the_package_imports_is_a_base_dependency():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    base = {_distribution_name(requirement) for requirement in project["dependencies"]}
    distributions = metadata.packages_distributions()
    missing = {}
    for module, files in _imported_top_level_modules().items():
        if module in sys.stdlib_module_names or module in ("notifier", "__future__"):
            continue
        provided_by = {_distribution_name(d) for d in distributions.get(module, [module])}
        if not provided_by & base:
            missing[module] = sorted(files)
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
