"""Where the files notifier ships with are: the default rules, the message templates and the
examples.

The repository keeps one copy of each at its top level (``rules.yaml``, ``templates/``,
``examples/``); the wheel carries the same tree as package data under ``notifier/bundled/``
(``pyproject.toml`` maps one onto the other). :func:`bundled_root` finds whichever is there, with
:mod:`importlib.resources`, so the same code runs from an installed wheel, an editable install
and a plain checkout. A user's own files always win: callers look here only when none is given
(:func:`rules_or_default` for a rules file; the templates look in a user's directory first).

Imports nothing of notifier, so every stage may use it.
"""

from __future__ import annotations

from importlib import resources
from pathlib import Path

PACKAGE = "notifier"
BUNDLED = "bundled"
"""The package-data directory of the wheel that holds the repository's files."""

RULES = "rules.yaml"
TEMPLATES = "templates"
EXAMPLES = "examples"
SAMPLE_HISTORY = "sample-history.csv"
RULES_TESTS = "rules.test.yaml"


class BundledFilesMissing(FileNotFoundError):
    """Neither an installed package's data nor a source checkout holds the shipped files."""


def package_dir() -> Path:
    """The directory the ``notifier`` package is imported from."""
    location = resources.files(PACKAGE)
    if not isinstance(location, Path):
        # A zipped install has no real directories; the templates and SQLite need files.
        raise BundledFilesMissing(f"notifier must be installed as files, not in {location}")
    return location


def bundled_root() -> Path:
    """The directory holding ``rules.yaml``, ``templates/`` and ``examples/``.

    ``notifier/bundled`` when installed from a wheel; the repository when the package is imported
    from a source checkout (editable install or ``PYTHONPATH``), so an edit there is seen at once.
    """
    package = package_dir()
    installed = package / BUNDLED
    if (installed / RULES).is_file():
        return installed
    checkout = package.parent
    if (checkout / "pyproject.toml").is_file() and (checkout / RULES).is_file():
        return checkout
    raise BundledFilesMissing(
        f"no {RULES} in {installed} nor in a source checkout at {checkout}: reinstall notifier"
    )


def default_rules() -> Path:
    """The default rules file (``rules.yaml``)."""
    return bundled_root() / RULES


def template_dir() -> Path:
    """The built-in message templates (``templates/``; a user's directory is looked in first)."""
    return bundled_root() / TEMPLATES


def examples_dir() -> Path:
    """The example configs, rule tests, grid and sample history (``examples/``)."""
    return bundled_root() / EXAMPLES


def example(name: str) -> Path:
    """One bundled file by its name relative to the bundle: ``rules.test.yaml`` or
    ``examples/rules.test.yaml``, ``rules.yaml``, ``templates/slack/open.json.j2``."""
    root = bundled_root()
    parts = Path(name).parts
    if not parts or any(part in ("", ".", "..") for part in parts) or Path(name).is_absolute():
        raise BundledFilesMissing(f"no bundled file {name!r}")
    for candidate in (root.joinpath(*parts), root / EXAMPLES / Path(*parts)):
        if candidate.is_file():
            return candidate
    raise BundledFilesMissing(f"no bundled file {name!r}; there are: {', '.join(bundled_files())}")


def bundled_files() -> list[str]:
    """Every shipped file, relative to :func:`bundled_root` (``rules.yaml``,
    ``examples/service.yaml``, ``templates/slack/open.json.j2``, ...)."""
    root = bundled_root()
    names = [RULES]
    for directory in (EXAMPLES, TEMPLATES):
        names += sorted(
            path.relative_to(root).as_posix()
            for path in (root / directory).rglob("*")
            if path.is_file() and "__pycache__" not in path.parts
        )
    return names


def rules_or_default(path: Path | None, cwd: Path | None = None) -> Path:
    """The rules file a command uses: the one given; else ``./rules.yaml`` when there is one;
    else the default rules shipped with notifier."""
    if path is not None:
        return path
    local = (cwd or Path()) / RULES
    return local if local.is_file() else default_rules()
