"""The ``notifier`` command line."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from notifier.client import register as register_client_commands
from notifier.config import ConfigError, NotifyConfig, parse_duration
from notifier.rules import load_rules

if TYPE_CHECKING:
    from notifier.config import ServiceConfig
    from notifier.service import Coordinator


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
@click.option(
    "--templates",
    "template_dir",
    type=click.Path(path_type=Path, exists=True, file_okay=False),
    help="Render the templates of this directory (laid out like the built-in one) in place of "
    "the built-in ones they override (default: the config's notify.templates).",
)
def check(
    rules_files: tuple[Path, ...], config_path: Path | None, template_dir: Path | None
) -> None:
    """Validate rules files (default: ./rules.yaml, else the default rules shipped with
    notifier), a service config and its notification routes, and render every notification
    template for every event it serves (open, escalate, repeat, resolve) with sample data; exit 1
    on problems."""
    from notifier import resources
    from notifier.diskfaults import data_dir_problem

    failed = False
    to_check = list(rules_files)
    notify = None
    if config_path is not None:
        from notifier.notify.config import load_service_config, parse_notify

        # The same loading as `notifier run`: what it would refuse, this reports.
        try:
            service = load_service_config(config_path)
            if service.notify:
                notify = parse_notify(service.notify, f"{config_path}: notify")
            _check_labels(service, load_rules(service.rules_path(config_path.parent)), config_path)
            problem = data_dir_problem(service.data_path(config_path.parent), create=False)
            if problem is not None:
                click.echo(f"{config_path}: {problem}", err=True)
                failed = True
            else:
                click.echo(f"{config_path}: OK ({len(service.clusters)} cluster(s))")
            if service.api.enabled and service.api.writes_refused:
                click.echo(f"{config_path}: warning: api: {service.api.writes_refused}", err=True)
            to_check.append(service.rules_path(config_path.parent))
        except ConfigError as exc:
            click.echo(str(exc), err=True)
            failed = True
    elif not to_check:
        to_check.append(resources.rules_or_default(None))
    failed |= not check_templates(notify, template_dir)
    for path in to_check:
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


def check_templates(notify: NotifyConfig | None, directory: Path | None = None) -> bool:
    """Render every notification template (a template directory's and the config's overrides
    and webhook body templates too) with sample data; print problems with template name and
    line. Finding no template at all is a problem too (a broken install renders nothing)."""
    from notifier.notify import check_templates as problems_in
    from notifier.notify.channels import Templates

    if notify is not None and directory is not None:
        notify = notify.model_copy(update={"templates": directory})
    if notify is not None and notify.templates is not None:
        directory = Path(notify.templates)
    templates = Templates(directory)
    problems = problems_in(notify, templates) if notify is not None else templates.render_check()
    for problem in problems:
        click.echo(f"template {problem}", err=True)
    rendered = templates.names()
    if not rendered:
        click.echo("templates: none found, so no notification could be sent", err=True)
        return False
    if not problems:
        where = f"{directory} and the built-in templates" if directory else "templates"
        click.echo(
            f"{where}: OK ({len(rendered)} templates, each rendered for every event it serves)"
        )
    return not problems


@main.command()
@click.option(
    "--config",
    "config_path",
    required=True,
    type=click.Path(path_type=Path),
    help="The service config (YAML).",
)
def run(config_path: Path) -> None:
    """Watch the configured clusters until SIGINT/SIGTERM (SIGHUP, or POST /-/reload, reloads
    the config and the rules it names)."""
    import asyncio

    from notifier.diskfaults import DataDirError, data_dir_problem
    from notifier.notify.config import load_service_config
    from notifier.service import Coordinator, logs

    try:
        service = load_service_config(config_path)
        rules_path = service.rules_path(config_path.parent)
        rules = load_rules(rules_path)
        _check_labels(service, rules, config_path)
    except ConfigError as exc:
        click.echo(str(exc), err=True)
        sys.exit(2)
    logs.configure(service.logging.level, service.logging.format)
    data_dir = service.data_path(config_path.parent)
    problem = data_dir_problem(data_dir, create=True)
    if problem is not None:
        click.echo(f"{config_path}: {problem}", err=True)
        sys.exit(2)
    try:
        sink = build_sink(service, data_dir, str(config_path))
    except ConfigError as exc:
        click.echo(str(exc), err=True)
        sys.exit(2)
    except DataDirError as exc:
        click.echo(f"{config_path}: {exc}", err=True)
        sys.exit(2)
    notifier = sink if hasattr(sink, "add_silence") else None
    if notifier is not None:
        # A template that cannot render would cost every message of its channel: refuse to
        # start, as for any other config error.
        problems = notifier.check()
        for problem in problems:
            click.echo(f"template {problem}", err=True)
        if problems:
            sys.exit(2)
    from notifier.notify import config as notify_config
    from notifier.service import Reloader

    coordinator = Coordinator(service, rules, data_dir, sink, rules_path=rules_path)
    reloader = Reloader(config_path, coordinator, notifier, service, notify_config)
    companions: list[Any] = [notifier] if notifier is not None else []
    fleet_instance = view = None
    if service.coordination is not None:
        fleet_instance, view = _fleet(service, coordinator, notifier)
        # Before the API: silences posted to it are published through the view. It joins
        # the view in the background, so an unreachable coordination cluster delays nothing.
        companions.append(view)
    if service.api.enabled:
        from notifier.api import ApiServer, ApiServerError, create_app

        api = service.api
        app = create_app(coordinator, notifier, api.token, host=api.host,
                         metric_families=service.metrics.families, fleet=view,
                         reloader=reloader)  # fmt: skip
        server = ApiServer(app, api.host, api.port, tls=api.tls)
        try:
            server.bind()  # a port in use is a config problem: say so before anything starts
        except ApiServerError as exc:
            click.echo(f"{config_path}: api: {exc}", err=True)
            sys.exit(2)
        if view is not None:
            view.api_url = server.url  # known once bound (port 0 picks one)
        companions.append(server)
    if fleet_instance is not None:
        # Last to start, first to stop (after the last scan): it flushes every shard and
        # leaves the fleet while the notifier still delivers.
        companions.append(fleet_instance)
    if notifier is None:
        sink.warn_nobody_notified(str(config_path))
    try:
        asyncio.run(
            coordinator.run_until_signalled(companions, on_reload=lambda: reloader.reload("sighup"))
        )
    except DataDirError as exc:  # a checkpoint the disk will not let be opened
        click.echo(f"{config_path}: {exc}", err=True)
        sys.exit(2)


def _fleet(service: ServiceConfig, coordinator: Coordinator, notifier: Any) -> tuple[Any, Any]:
    """The fleet instance (membership and shard state) and the fleet-wide view over it. The
    view is made before the membership exists (the API is built on it first): it asks the
    instance, which answers "no shards" until it has joined."""
    from notifier.fleet.instance import FleetInstance
    from notifier.fleet.view import FleetView, view_topic

    instance = FleetInstance(service, coordinator, notifier)  # refuses a config without them
    config, kafka = instance.config, instance.kafka
    view = FleetView(
        kafka.bootstrap_servers, view_topic(config.topic), instance, coordinator, notifier,
        security=kafka.security, stale_after_s=3 * config.session_timeout,
        member_interval_s=config.heartbeat_interval, background_start=True,
    )  # fmt: skip
    return instance, view


def _check_labels(service, rules, config_path: Path) -> None:
    """Labels the notify section matches on must be ones findings can have (a typo, or a
    label the rules no longer set, would never match)."""
    from notifier.config import unknown_labels
    from notifier.notify.config import notify_section

    notify = notify_section(service, str(config_path))
    if notify is not None:
        problems = unknown_labels(notify, rules)
        if problems:
            raise ConfigError(str(config_path), problems)


def build_sink(service, data_dir: Path, source: str):
    """The notification pipeline when one is configured, else structured transition logs."""
    from notifier.notify.config import notify_section
    from notifier.service import LogSink

    config = notify_section(service, source)
    if config is None:
        return LogSink(data_dir / "transitions.jsonl")
    from notifier.notify import Notifier

    data_dir.mkdir(parents=True, exist_ok=True)
    return Notifier(config, data_dir / "notify.sqlite")


@main.command("test-rules")
@click.argument("files", nargs=-1, required=True, type=click.Path(path_type=Path))
def test_rules(files: tuple[Path, ...]) -> None:
    """Run rule unit tests (promtool-style series); exit non-zero if any fails."""
    from notifier.rules import run_file

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
    type=click.Path(path_type=Path),
    help="The rules file (default: ./rules.yaml, else the default rules shipped with notifier).",
)
@click.option(
    "--interval", default="10s", show_default=True, help="The scan interval of the samples."
)
def replay(history_path: Path, rules_path: Path | None, interval: str) -> None:
    """Replay stored samples through the rule engine; print transitions and final statuses."""
    from notifier import resources
    from notifier.rules import print_replay

    try:
        rules = load_rules(resources.rules_or_default(rules_path))
        print_replay(history_path, rules, parse_duration(interval), click.echo)
    except ConfigError as exc:
        click.echo(str(exc), err=True)
        sys.exit(2)
    except (FileNotFoundError, ValueError) as exc:
        click.echo(f"{history_path}: {exc}", err=True)
        sys.exit(2)


@main.command()
@click.option(
    "--duration",
    default=None,
    help="Run the scripted timeline at most this long (e.g. 120 or 2m; it ends sooner once "
    "every scenario has fallen behind, failed and recovered), print the summary and exit "
    "non-zero unless every scenario was detected and nothing else alerted (with "
    "--local-receivers: and every scenario's open, escalation and resolve reached every "
    "channel). Default: until Ctrl-C.",
)
@click.option(
    "--kafka",
    metavar="VERSION|DIR",
    default=None,
    help="Run the stories on Apache Kafka instead of the embedded broker: a version such as "
    "4.4.0 or 3.9.2 (its jars resolved from Maven Central with mvn on first use, then cached; "
    "needs Java 17 and Maven) or a folder of Kafka jars (a Kafka download or its libs/).",
)
@click.option("--port", type=int, default=None, help="Port of the embedded broker (default: free).")
@click.option(
    "--data-dir",
    type=click.Path(path_type=Path),
    default=None,
    help="Where transitions, checkpoint, history and logs go (default: a new temp directory). "
    "A previous demo's checkpoint and transitions file there are replaced.",
)
@click.option(
    "--scan-interval", default="2s", show_default=True, help="How often the service scans."
)
@click.option(
    "--rules",
    "rules_path",
    type=click.Path(path_type=Path),
    default=None,
    help="Rules to run with demo timings (default: the rules.yaml shipped with notifier).",
)
@click.option(
    "--api-port", type=int, default=0, help="Port of the status page (default: a free one)."
)
@click.option(
    "--notify",
    "notify_path",
    type=click.Path(path_type=Path),
    help="Also send notifications: a file with a notify section (or a service config with one).",
)
@click.option(
    "--local-receivers",
    is_flag=True,
    help="Notify loopback stand-ins for Slack, PagerDuty, a webhook and SMTP, and show what "
    "each received for every scenario.",
)
def demo(
    duration: str | None,
    kafka: str | None,
    port: int | None,
    data_dir: Path | None,
    scan_interval: str,
    rules_path: Path | None,
    api_port: int,
    notify_path: Path | None,
    local_receivers: bool,
) -> None:
    """Watch scripted consumer groups on an embedded Kafka broker fall behind, fail and
    recover: each misbehaviour detected, each incident opened, escalated and resolved."""
    from notifier.demo import run as demo_module

    try:
        seconds = parse_duration(duration) if duration is not None else None
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="--duration") from None
    try:
        interval = parse_duration(scan_interval)
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="--scan-interval") from None
    if interval <= 0:
        raise click.BadParameter("must be greater than 0", param_hint="--scan-interval")
    settings = demo_module.DemoSettings(
        duration=seconds,
        port=port,
        data_dir=data_dir,
        scan_interval=interval,
        rules_path=rules_path,
        api_port=api_port,
        notify=_notify_section(notify_path) if notify_path else None,
        local_receivers=local_receivers,
        kafka=kafka,
    )
    try:
        code = demo_module.main(settings, out=click.echo)
    except (ConfigError, ValueError) as exc:
        click.echo(str(exc), err=True)
        sys.exit(2)
    sys.exit(code)


@main.command()
@click.option(
    "--history",
    required=True,
    help="The sample history: a dataset directory (date=* partitions) or Parquet, any URI "
    "Spark reads (file://, s3a://, hdfs://).",
)
@click.option(
    "--rules",
    type=click.Path(path_type=Path),
    help="The rules file; configuration 0 is this file unchanged (default: ./rules.yaml, else "
    "the default rules shipped with notifier).",
)
@click.option(
    "--grid",
    required=True,
    type=click.Path(path_type=Path),
    help="grid.yaml: {parameters: {dotted.path: [values]}}; the cartesian product is replayed.",
)
@click.option(
    "--incidents",
    type=click.Path(path_type=Path),
    help="Labelled incidents (CSV or Parquet: cluster, group, start, end[, kind]).",
)
@click.option("--out", required=True, type=click.Path(path_type=Path), help="Output directory.")
@click.option("--master", help="Spark master (default local[*]).")
@click.option("--from", "start", help="Replay from this time (ISO 8601, UTC if no zone).")
@click.option("--to", "end", help="Replay up to this time (exclusive).")
@click.option("--groups", help="Only groups whose name matches this regex.")
@click.option("--interval", default="10s", show_default=True, help="Scan interval of the history.")
@click.option(
    "--routes",
    type=click.Path(path_type=Path),
    help="A notify config whose routes count the notifications (default: one receiver, one "
    "notification per incident, repeat 4h, resolves sent).",
)
@click.option("--recall-target", type=float, default=0.95, show_default=True)
@click.option(
    "--slo", default="300s", show_default=True, help="Without labels: lag in seconds that breaches."
)
@click.option(
    "--slo-for", help="How long a breach must last (default: the rules' lag_seconds for)."
)
@click.option("--tolerance", help="Matching tolerance (default: one scan interval).")
@click.option(
    "--warmup",
    help="History replayed to prime windows but not counted (default 30m, at most a quarter "
    "of the history; with --from it precedes --from).",
)
@click.option(
    "--buckets",
    type=int,
    help="Group buckets (default: about one Spark task per core, as large as possible).",
)
@click.option(
    "--engine",
    type=click.Choice(["spark", "local"]),
    default="spark",
    show_default=True,
    help="local: replay in this process without Spark (small histories).",
)
def backtest(**options: object) -> None:
    """Replay a history for every configuration of a grid: what each would have sent.

    Writes summary.csv/.parquet, alerts.parquet, report.html and recommended-rules.yaml to
    --out. The same job runs on a cluster with `spark-submit notifier/backtest/__main__.py ...`.
    """
    from notifier.backtest import request_from_options, run_backtest, summary_text
    from notifier.history import HistoryError

    try:
        request = request_from_options(options)
        result = run_backtest(request, echo=lambda line: click.echo(line))
    except (ConfigError, HistoryError) as exc:
        click.echo(str(exc), err=True)
        sys.exit(2)
    click.echo(summary_text(result))


@main.group()
def history() -> None:
    """Work with sample histories."""


@history.command("synth")
@click.option("--out", required=True, type=click.Path(path_type=Path), help="A new directory.")
@click.option("--groups", required=True, type=click.IntRange(min=1), help="Consumer groups.")
@click.option("--partitions", required=True, type=click.IntRange(min=1), help="Per topic.")
@click.option("--hours", required=True, type=float, help="How much history.")
@click.option("--seed", required=True, type=int, help="The same seed gives the same data.")
@click.option("--interval", default="10s", show_default=True, help="Scan interval.")
@click.option("--clusters", default=1, show_default=True, type=click.IntRange(min=1))
@click.option("--start", help="First scan (ISO 8601; default 2026-01-05T00:00Z).")
@click.option(
    "--profile",
    type=click.Choice(["basic", "fleet"]),
    default="basic",
    show_default=True,
    help="basic: every group healthy but for its injected fault. fleet: a production fleet with "
    "benign restarts, deploys, spikes, batch consumers and outages, incidents labelled from when "
    "they can be told apart, and a patterns.csv.",
)
def synth(
    out: Path,
    groups: int,
    partitions: int,
    hours: float,
    seed: int,
    interval: str,
    clusters: int,
    start: str | None,
    profile: str,
) -> None:
    """Write a synthetic history with injected incidents and their incidents.csv."""
    from datetime import UTC, datetime

    from notifier.synth import FleetResult, SynthResult, synthesize, synthesize_fleet

    try:
        interval_s = parse_duration(interval)
        first = None
        if start is not None:
            first = datetime.fromisoformat(start.replace("Z", "+00:00"))
            first = first if first.tzinfo else first.replace(tzinfo=UTC)
        if profile == "fleet":
            result: SynthResult = synthesize_fleet(
                out, groups, partitions, hours, seed, interval_s, clusters, first
            )
        else:
            result = synthesize(out, groups, partitions, hours, seed, interval_s, first, clusters)
    except (ValueError, FileExistsError) as exc:
        click.echo(f"{out}: {exc}", err=True)
        sys.exit(2)
    kinds = ", ".join(f"{n} {k}" for k, n in result.incidents_by_kind.items() if n)
    click.echo(
        f"wrote {result.rows:,} samples ({result.groups} groups × {result.partitions} partitions "
        f"on {result.topics} topics, {result.scans:,} scans per cluster, "
        f"{result.missed_scans} missed) in {result.files} file(s) to {result.out} "
        f"in {result.seconds:.1f} s"
    )
    click.echo(
        f"{result.incidents} labelled incidents ({kinds or 'none'}) in {result.incidents_path}"
    )
    if isinstance(result, FleetResult):
        patterns = ", ".join(f"{n} {k}" for k, n in result.patterns_by_kind.items())
        click.echo(f"groups by pattern ({patterns}) in {result.patterns_path}")


@main.command()
@click.argument("name", required=False)
@click.option(
    "--copy",
    "copy_to",
    type=click.Path(path_type=Path, file_okay=False),
    help="Copy the default rules, the examples and the templates into this new directory, "
    "to edit (the examples' relative paths keep working there).",
)
def examples(name: str | None, copy_to: Path | None) -> None:
    """List the files shipped with notifier: the default rules, example configs, rule tests, a
    backtest grid, a sample history and the message templates. With NAME, print that file's
    path only (`notifier test-rules "$(notifier examples rules.test.yaml)"`)."""
    import shutil

    from notifier import resources

    try:
        if name is not None:
            click.echo(resources.example(name))
            return
        root = resources.bundled_root()
    except resources.BundledFilesMissing as exc:
        click.echo(str(exc), err=True)
        sys.exit(1)
    if copy_to is not None:
        if copy_to.exists() and any(copy_to.iterdir()):
            click.echo(f"{copy_to}: not empty; name a new directory", err=True)
            sys.exit(1)
        copy_to.mkdir(parents=True, exist_ok=True)
        ignore = shutil.ignore_patterns("__pycache__")
        shutil.copy2(root / resources.RULES, copy_to / resources.RULES)
        for directory in (resources.EXAMPLES, resources.TEMPLATES):
            shutil.copytree(root / directory, copy_to / directory, ignore=ignore)
        click.echo(f"copied rules.yaml, examples/ and templates/ to {copy_to}")
        click.echo(f"next: notifier check --config {copy_to / 'examples' / 'service.yaml'}")
        return
    click.echo(f"shipped with notifier, in {root}:")
    files = resources.bundled_files()
    for file in files:
        if not file.startswith(resources.TEMPLATES + "/"):
            click.echo(f"  {file}")
    templates = sum(file.startswith(resources.TEMPLATES + "/") for file in files)
    click.echo(f"  {resources.TEMPLATES}/ ({templates} files; see {resources.TEMPLATES}/README.md)")


def _notify_section(path: Path) -> dict[str, Any]:
    """The notify mapping of a file: a bare notify config, or a service config's section."""
    from notifier.config import read_yaml

    data = read_yaml(path)
    if isinstance(data, dict) and "notify" in data:
        data = data["notify"]
    if not isinstance(data, dict):
        raise click.BadParameter(f"{path}: expected a notify mapping", param_hint="--notify")
    return data


# status, incidents, silence and notify: the client of a running service (notifier/client/).
register_client_commands(main)

if __name__ == "__main__":
    main()
