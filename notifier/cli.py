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
@click.option(
    "--config",
    "config_path",
    type=click.Path(path_type=Path),
    help="Also check a service config and the rules file it names.",
)
def check(rules_files: tuple[Path, ...], config_path: Path | None) -> None:
    """Validate rules files (default: ./rules.yaml) and a service config; exit 1 on problems."""
    failed = False
    if config_path is not None:
        from notifier.settings import load_service_config

        try:
            service = load_service_config(config_path)
            click.echo(f"{config_path}: OK ({len(service.clusters)} cluster(s))")
            rules_files = (*rules_files, service.rules_path(config_path.parent))
        except ConfigError as exc:
            click.echo(str(exc), err=True)
            sys.exit(1)
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


@main.command()
@click.option(
    "--config",
    "config_path",
    required=True,
    type=click.Path(path_type=Path),
    help="The service config (YAML).",
)
def run(config_path: Path) -> None:
    """Watch the configured clusters until SIGINT/SIGTERM (SIGHUP reloads the rules)."""
    import asyncio

    from notifier import logs
    from notifier.coordinate import Coordinator
    from notifier.settings import load_service_config

    try:
        service = load_service_config(config_path)
        rules_path = service.rules_path(config_path.parent)
        rules = load_rules(rules_path)
    except ConfigError as exc:
        click.echo(str(exc), err=True)
        sys.exit(2)
    logs.configure(service.logging.level, service.logging.format)
    data_dir = service.data_path(config_path.parent)
    sink = build_sink(service, data_dir)
    coordinator = Coordinator(service, rules, data_dir, sink, rules_path=rules_path)
    companions = []
    if service.api.enabled:
        from notifier.api import ApiServer, create_app

        app = create_app(coordinator, getattr(sink, "notifier", None), service.api.token)
        companions.append(ApiServer(app, service.api.host, service.api.port))
    asyncio.run(coordinator.run_until_signalled(companions))


def build_sink(service, data_dir: Path):
    """The notification pipeline when one is configured, else structured transition logs."""
    from notifier.coordinate import LogSink

    return LogSink(data_dir / "transitions.jsonl")


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
