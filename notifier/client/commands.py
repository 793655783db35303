"""The client commands: ``status``, ``incidents`` and ``silence add|list|expire`` ask a running
service over its API, as amtool asks Alertmanager; ``notify test`` tries a config's receivers.

Tables for people, ``--json`` for scripts. Exit codes: 0 done; 1 what was asked about is
unhealthy (``status --fail-on``) or a test notification failed; 2 the service could not be
asked (not reachable, token refused, bad request or config).
"""

from __future__ import annotations

import contextlib
import json
import re
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, NoReturn, TypeVar

import click

from notifier.client.api import (
    DEFAULT_URL,
    EXIT_CANNOT_ASK,
    EXIT_FAILED,
    TOKEN_VARIABLE,
    URL_VARIABLE,
    ClientError,
    ServiceClient,
    find_target,
)
from notifier.config import ConfigError, parse_duration

F = TypeVar("F", bound=Callable[..., Any])


def register(main: click.Group) -> None:
    """Add the client commands to the ``notifier`` command."""
    for command in (status, incidents, silence, notify):
        main.add_command(command)


def service_options(command: F) -> F:
    """``--url``, ``--config`` and ``--json``: which service to ask, and how to answer."""
    command = click.option(
        "--json", "as_json", is_flag=True, help="Print JSON for scripts instead of a table."
    )(command)
    command = click.option(
        "--config",
        "config_path",
        type=click.Path(path_type=Path, dir_okay=False),
        help="A service config: ask the service it describes (its api: section; its api.token "
        f"too when ${TOKEN_VARIABLE} is not set).",
    )(command)
    return click.option(
        "--url",
        envvar=URL_VARIABLE,
        help=f"The service's URL (default: from --config, else {DEFAULT_URL}; "
        f"${URL_VARIABLE}). The bearer token comes from ${TOKEN_VARIABLE}.",
    )(command)


def _fail(message: str, code: int = EXIT_CANNOT_ASK) -> NoReturn:
    click.echo(message, err=True)
    sys.exit(code)


@contextlib.contextmanager
def _asking() -> Iterator[None]:
    """One line on stderr and exit 2 for whatever keeps the service from being asked."""
    try:
        yield
    except ClientError as exc:
        _fail(str(exc), exc.exit_code)
    except ConfigError as exc:
        _fail(str(exc))


def _client(url: str | None, config_path: Path | None) -> ServiceClient:
    return ServiceClient(find_target(url, config_path))


def _print_json(data: Any) -> None:
    click.echo(json.dumps(data, indent=2, sort_keys=False))


def _group_pattern(value: str | None) -> re.Pattern[str] | None:
    if value is None:
        return None
    try:
        return re.compile(value)
    except re.error as exc:
        raise click.BadParameter(f"invalid regular expression {value!r}: {exc}") from None


def _selected(item: dict[str, Any], cluster: str | None, pattern: re.Pattern[str] | None) -> bool:
    if cluster is not None and item["cluster"] != cluster:
        return False
    return pattern is None or pattern.fullmatch(item["group"]) is not None


_RANK = {"OK": 0, "WARN": 1, "ERR": 2}


def _rank(status: str) -> int:
    return _RANK.get(status, -1)


# --------------------------------------------------------------------------------------------
# status


@click.command()
@click.option("--cluster", help="Only this cluster's groups.")
@click.option(
    "--group",
    "group_regex",
    metavar="REGEX",
    help="Only groups whose whole name matches this regex ('orders-.*', or a plain name).",
)
@click.option("--only-bad", is_flag=True, help="Only groups that are not OK.")
@click.option(
    "--fail-on",
    type=click.Choice(["warn", "err"]),
    help="Exit 1 when a group shown is at this status or worse (a deploy gate); exit 2 when no "
    "group matches, since there is nothing to judge.",
)
@service_options
def status(
    cluster: str | None,
    group_regex: str | None,
    only_bad: bool,
    fail_on: str | None,
    url: str | None,
    config_path: Path | None,
    as_json: bool,
) -> None:
    """Every consumer group's status on a running service, worst first."""
    from notifier.client.tables import cluster_notes, groups_table, status_notes

    pattern = _group_pattern(group_regex)
    with _asking(), _client(url, config_path) as client:
        answer = client.groups()
        notifying = True if as_json else client.notifications_configured()
    known = [c["cluster"] for c in answer["clusters"]]
    if cluster is not None and cluster not in known:
        _fail(f"{client.target.url} watches no cluster {cluster!r} (clusters: {', '.join(known)})")
    groups = [g for g in answer["groups"] if _selected(g, cluster, pattern)]
    if only_bad:
        groups = [g for g in groups if _rank(g["status"]) > 0]
    groups.sort(key=lambda g: (-_rank(g["status"]), g["cluster"], g["group"]))
    clusters = [c for c in answer["clusters"] if cluster is None or c["cluster"] == cluster]

    if as_json:
        _print_json({"groups": groups, "clusters": clusters})
    else:
        if groups:
            for line in groups_table(groups):
                click.echo(line)
        counts = {s: sum(g["status"] == s for g in groups) for s in ("ERR", "WARN", "OK")}
        shown = ", ".join(f"{n} {s}" for s, n in counts.items() if n)
        click.echo(f"{len(groups)} group(s){': ' + shown if shown else ''}")
        for note in [*status_notes(groups), *cluster_notes(clusters)]:
            click.echo(note)
        if not notifying:
            click.echo(
                "the service has no receiver configured: nobody is notified of these (add a "
                "notify: section to its config)"
            )
    if fail_on is None:
        return
    if not groups:
        _fail("nothing to judge: no group matches", EXIT_CANNOT_ASK)
    level = _RANK[fail_on.upper()]
    failing = [g for g in groups if _rank(g["status"]) >= level]
    if failing:
        names = ", ".join(f"{g['cluster']}/{g['group']} ({g['status']})" for g in failing)
        _fail(f"FAIL: {len(failing)} group(s) at {fail_on.upper()} or worse: {names}", EXIT_FAILED)


# --------------------------------------------------------------------------------------------
# incidents


@click.command()
@click.option("--cluster", help="Only this cluster's incidents.")
@click.option("--group", "group_regex", metavar="REGEX", help="Only groups matching this regex.")
@click.option("--open", "open_only", is_flag=True, help="Only incidents still open.")
@service_options
def incidents(
    cluster: str | None,
    group_regex: str | None,
    open_only: bool,
    url: str | None,
    config_path: Path | None,
    as_json: bool,
) -> None:
    """Open and recent incidents on a running service, newest first."""
    from notifier.client.tables import incidents_table, now_ms

    pattern = _group_pattern(group_regex)
    with _asking(), _client(url, config_path) as client:
        found = client.incidents()
    chosen = [i for i in found if _selected(i, cluster, pattern)]
    if open_only:
        chosen = [i for i in chosen if i.get("closed_at") is None]
    chosen.sort(key=lambda i: i["opened_at"], reverse=True)
    if as_json:
        _print_json({"incidents": chosen})
        return
    if chosen:
        for line in incidents_table(chosen, now_ms()):
            click.echo(line)
    still_open = sum(i.get("closed_at") is None for i in chosen)
    click.echo(f"{len(chosen)} incident(s), {still_open} open")


# --------------------------------------------------------------------------------------------
# silence add | list | expire


@click.group()
def silence() -> None:
    """Silences on a running service: add, list, expire (as amtool's)."""


def _default_author() -> str:
    import getpass

    try:
        return getpass.getuser()
    except (KeyError, OSError):  # no $USER and no passwd entry (some containers)
        return "notifier-cli"


@silence.command("add")
@click.argument("matchers", nargs=-1, required=True)
@click.option(
    "--duration", default="1h", show_default=True, help="How long it lasts (30m, 2h, 1d)."
)
@click.option("--comment", required=True, help="Why (required, as in Alertmanager).")
@click.option("--author", default=_default_author, show_default="$USER", help="Who.")
@click.option("-q", "--quiet", is_flag=True, help="Print only the new silence's id.")
@service_options
def silence_add(
    matchers: tuple[str, ...],
    duration: str,
    comment: str,
    author: str,
    quiet: bool,
    url: str | None,
    config_path: Path | None,
    as_json: bool,
) -> None:
    """Hold back the alerts that match every one of MATCHERS: label=value, label!=value,
    label=~regex or label!~regex on cluster, group, topic, rule or severity, e.g.

    \b
    notifier silence add 'group=~"orders-.*"' cluster=prod \\
        --duration 2h --comment "schema migration"
    """
    from notifier.client.tables import at, now_ms, relative

    try:
        seconds = parse_duration(duration)
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="--duration") from None
    if seconds <= 0:
        raise click.BadParameter("must be greater than 0", param_hint="--duration")
    ends_at = now_ms() + round(seconds * 1000)
    with _asking(), _client(url, config_path) as client:
        created = client.add_silence(
            list(matchers), ends_at_ms=ends_at, author=author, comment=comment
        )
    if as_json:
        _print_json({"silence": created})
    elif quiet:
        click.echo(created["id"])
    else:
        until = f"{at(created['ends_at'])} ({relative(created['ends_at'], now_ms())})"
        click.echo(
            f"added silence {created['id']}: {' '.join(created['matchers'])} until {until}, "
            f"by {created['author']}"
        )


@silence.command("list")
@click.option("--expired", is_flag=True, help="Also silences that have ended.")
@click.option("-q", "--quiet", is_flag=True, help="Print only the ids.")
@service_options
def silence_list(
    expired: bool, quiet: bool, url: str | None, config_path: Path | None, as_json: bool
) -> None:
    """Active and pending silences (with --expired, ended ones too)."""
    from notifier.client.tables import now_ms, silences_table

    with _asking(), _client(url, config_path) as client:
        found = client.silences()
    shown = [s for s in found if expired or s.get("state") != "expired"]
    shown.sort(key=lambda s: s["ends_at"])
    if as_json:
        _print_json({"silences": shown})
    elif quiet:
        for s in shown:
            click.echo(s["id"])
    else:
        if shown:
            for line in silences_table(shown, now_ms()):
                click.echo(line)
        click.echo(f"{len(shown)} silence(s)")


@silence.command("expire")
@click.argument("silence_ids", nargs=-1, required=True)
@service_options
def silence_expire(
    silence_ids: tuple[str, ...], url: str | None, config_path: Path | None, as_json: bool
) -> None:
    """End silences now, by id (silences from the config file end only by editing it)."""
    failed = False
    expired = []
    with _asking(), _client(url, config_path) as client:
        for silence_id in silence_ids:
            try:
                client.expire_silence(silence_id)
            except ClientError as exc:
                if exc.status_code is None or exc.status_code in (401, 403):
                    raise  # no point trying the others
                click.echo(f"{silence_id}: {exc}", err=True)
                failed = True
                continue
            expired.append(silence_id)
            if not as_json:
                click.echo(f"expired silence {silence_id}")
    if as_json:
        _print_json({"expired": expired})
    if failed:
        sys.exit(EXIT_CANNOT_ASK)


# --------------------------------------------------------------------------------------------
# notify test


@click.group()
def notify() -> None:
    """Notification receivers."""


@notify.command("test")
@click.option(
    "--config",
    "config_path",
    required=True,
    type=click.Path(path_type=Path, dir_okay=False),
    help="The service config whose receivers to try (read as `notifier run` reads it).",
)
@click.option(
    "--receiver",
    "receivers",
    multiple=True,
    help="Only this receiver (repeat for several; default: every one).",
)
def notify_test(config_path: Path, receivers: tuple[str, ...]) -> None:
    """Send a test notification, clearly marked as one, through every channel of every
    receiver the config names; print what each channel answered; exit 1 if any failed."""
    import asyncio
    import socket

    from notifier.client.tables import now_ms
    from notifier.notify.config import load_service_config, parse_notify
    from notifier.notify.trial import try_receivers

    source = str(config_path)
    try:
        service = load_service_config(config_path)
        if not service.notify:
            _fail(f"{source}: no notify: section, so no receiver to try: nobody would be notified")
        config = parse_notify(service.notify, f"{source}: notify")
    except ConfigError as exc:
        _fail(str(exc))
    if service.api.public_url and not config.status_page_url:
        config = config.model_copy(update={"status_page_url": service.api.public_url})
    unknown = sorted(set(receivers) - set(config.receivers))
    if unknown:
        known = ", ".join(sorted(config.receivers))
        raise click.BadParameter(
            f"{', '.join(unknown)} not in {source} (receivers: {known})", param_hint="--receiver"
        )
    trials = asyncio.run(try_receivers(config, now_ms(), socket.gethostname(), receivers))
    names = {t.receiver for t in trials}
    click.echo(
        f"sending a test notification through {len(trials)} channel(s) of {len(names)} "
        f"receiver(s) in {source}:"
    )
    width = max(len(t.channel) for t in trials)
    for t in trials:
        outcome = "worked" if t.worked else "FAILED"
        click.echo(f"  {t.channel:<{width}}  {outcome}: {t.detail}")
    failed = sum(not t.worked for t in trials)
    if failed:
        _fail(f"{failed} of {len(trials)} channel(s) failed", EXIT_FAILED)
    click.echo("every channel worked: look for the TEST notification at each receiver")
