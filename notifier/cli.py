"""The ``notifier`` command line."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from notifier.config import ConfigError, load_rules, parse_duration


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="notifier")
def main() -> None:
    """Kafka consumer-lag alerting: Burrow's rules, lag in seconds, durable notifications."""


@main.command()
@click.argument("rules_files", nargs=-1, type=click.Path(path_type=Path))
def check(rules_files: tuple[Path, ...]) -> None:
    """Validate rules files (default: ./rules.yaml); exit non-zero on the first problem."""
    failed = False
    for path in rules_files or (Path("rules.yaml"),):
        try:
            config = load_rules(path)
        except ConfigError as exc:
            click.echo(str(exc), err=True)
            failed = True
            continue
        click.echo(
            f"{path}: OK (burrow + {len(config.rules)} rules, window of "
            f"{config.window.intervals} samples, minimum_complete {config.minimum_complete:g})"
        )
    sys.exit(1 if failed else 0)


@main.command("test-rules")
@click.argument("files", nargs=-1, required=True, type=click.Path(path_type=Path))
def test_rules(files: tuple[Path, ...]) -> None:
    """Run rule unit tests (promtool-style series); exit non-zero if any fails."""
    from notifier.testrules import run_file

    passed = failed = 0
    for path in files:
        try:
            outcomes = run_file(path)
        except ConfigError as exc:
            click.echo(str(exc), err=True)
            failed += 1
            continue
        for outcome in outcomes:
            if outcome.passed:
                passed += 1
                click.echo(f"PASS {path}: {outcome.name}")
            else:
                failed += 1
                click.echo(f"FAIL {path}: {outcome.name}")
                for failure in outcome.failures:
                    click.echo("  " + failure.replace("\n", "\n  "))
    click.echo(f"{passed} passed, {failed} failed")
    sys.exit(1 if failed else 0)


@main.command()
@click.option(
    "--history",
    "history_path",
    required=True,
    type=click.Path(path_type=Path),
    help="Samples in the sample schema: a CSV file, a Parquet file or a history dataset.",
)
@click.option(
    "--rules",
    "rules_path",
    default="rules.yaml",
    show_default=True,
    type=click.Path(path_type=Path),
)
@click.option(
    "--interval", default="10s", show_default=True, help="The scan interval of the samples."
)
def replay(history_path: Path, rules_path: Path, interval: str) -> None:
    """Replay stored samples through the rule engine; print transitions and final statuses."""
    from notifier.replay import print_replay

    try:
        rules = load_rules(rules_path)
        print_replay(history_path, rules, parse_duration(interval), click.echo)
    except ConfigError as exc:
        click.echo(str(exc), err=True)
        sys.exit(2)
    except (FileNotFoundError, ValueError) as exc:
        click.echo(f"{history_path}: {exc}", err=True)
        sys.exit(2)


if __name__ == "__main__":
    main()
