"""The Jinja2 message templates: loading, rendering with line-accurate errors, and checking.

:class:`Templates` looks templates up in explicit files, an override directory, then the
built-in ``templates/`` shipped with notifier (:func:`notifier.resources.template_dir`; naming and
variables in ``templates/README.md``). :meth:`Templates.render_check` renders each one with a
:func:`sample_notification` and reports every failure as a :class:`TemplateProblem` (what
``notifier check`` prints). :func:`render_or_fall_back` is how channels render at send time: a
template that fails then (edited on disk, or data the checks did not foresee) costs the message
its custom look, never the alert.
"""

from __future__ import annotations

import json
import logging
import re
import types
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import jinja2

from notifier import resources
from notifier.notify.channels import registry
from notifier.notify.channels.format import (
    alert_findings,
    alert_status,
    clip,
    format_evidence,
    headline_event,
    humanize_lag,
    humanize_seconds,
    is_cluster_alert,
    iso8601,
    runbooks,
    slack_escape,
    status_color,
    status_emoji,
    to_json,
    utc,
    worst_status,
)
from notifier.types import (
    Alert,
    Event,
    Finding,
    GroupResult,
    GroupStatus,
    Incident,
    Notification,
    PartitionResult,
    PartitionStatus,
    Severity,
)

log = logging.getLogger("notifier.notify")

T = TypeVar("T")


@dataclass(slots=True, frozen=True)
class TemplateProblem:
    """One template that fails to compile or render (what ``notifier check`` prints)."""

    template: str
    line: int | None
    message: str

    def __str__(self) -> str:
        where = f"{self.template}:{self.line}" if self.line else self.template
        return f"{where}: {self.message}"


class TemplateError(Exception):
    """A template failed to load, render, or produced an unusable body (e.g. invalid JSON)."""

    def __init__(self, template: str, message: str, line: int | None = None) -> None:
        self.problem = TemplateProblem(template, line, message)
        super().__init__(f"template {self.problem}")

    @property
    def template(self) -> str:
        return self.problem.template

    @property
    def line(self) -> int | None:
        return self.problem.line


class _TemplateLoader(jinja2.BaseLoader):
    """Explicit per-template files first, then the override directory, then the built-ins.

    Remembers which file each name came from, so render errors can name the template and line.
    """

    def __init__(self, paths: Mapping[str, Path], directories: Sequence[Path]) -> None:
        self.paths = dict(paths)
        self.directories = list(directories)
        self.names_by_file: dict[str, str] = {}

    def _locate(self, name: str) -> Path | None:
        if name in self.paths:
            return self.paths[name]
        if any(part in ("", ".", "..") for part in name.split("/")):
            return None
        for directory in self.directories:
            candidate = directory.joinpath(*name.split("/"))
            if candidate.is_file():
                return candidate
        return None

    def get_source(
        self, environment: jinja2.Environment, template: str
    ) -> tuple[str, str, Callable[[], bool]]:
        path = self._locate(template)
        if path is None:
            raise jinja2.TemplateNotFound(template)
        try:
            source = path.read_text(encoding="utf-8")
            mtime = path.stat().st_mtime
        except OSError as exc:
            raise jinja2.TemplateNotFound(template, f"{template}: {exc}") from exc
        filename = str(path)
        self.names_by_file[filename] = template

        def uptodate() -> bool:
            try:
                return path.stat().st_mtime == mtime
            except OSError:
                return False

        return source, filename, uptodate

    def list_templates(self) -> list[str]:
        names = set(self.paths)
        for directory in self.directories:
            if directory.is_dir():
                for path in directory.rglob("*.j2"):
                    names.add(path.relative_to(directory).as_posix())
        return sorted(names)


_TEMPLATE_NAME = re.compile(r"^(?P<channel>[^/]+)/(?P<event>[^./]+)\.(?P<part>[^/]+)\.j2$")


class Templates:
    """Loads and renders the message templates.

    Naming: ``<channel>/<event>.<part>.j2`` — ``event`` is ``open``, ``escalate``, ``repeat`` or
    ``resolve``; ``part`` says what is rendered (``json``, ``subject``, ``txt``, ``html``,
    ``summary``). Files whose name starts with ``_`` are shared partials and macros (imported,
    never rendered on their own). ``*.html.j2`` templates are HTML-autoescaped; the others are
    not, so JSON templates must emit strings through ``|tojson``.

    Lookup order: ``paths`` (explicit per-template files), then ``directory`` (an override
    directory laid out like the built-in one), then the built-in templates
    (:func:`notifier.resources.template_dir`). Undefined
    variables are errors (``StrictUndefined``), so a typo fails ``render_check`` instead of
    sending an empty message.
    """

    EVENTS: tuple[str, ...] = tuple(event.value for event in Event)

    def __init__(
        self,
        directory: str | Path | None = None,
        *,
        paths: Mapping[str, str | Path] | None = None,
        builtin: bool = True,
    ) -> None:
        directories = [Path(directory)] if directory is not None else []
        self._customised = bool(directories or paths)
        if builtin:
            directories.append(resources.template_dir())
        self._fallback: Templates | None = None
        self._loader = _TemplateLoader(
            {name: Path(path) for name, path in (paths or {}).items()}, directories
        )
        self.env = jinja2.Environment(
            loader=self._loader,
            undefined=jinja2.StrictUndefined,
            autoescape=jinja2.select_autoescape(
                enabled_extensions=("html.j2",), default_for_string=False, default=False
            ),
            keep_trailing_newline=False,
            trim_blocks=True,
            lstrip_blocks=True,
        )
        self.env.filters.update(
            humanize_seconds=humanize_seconds,
            humanize_lag=humanize_lag,
            status_emoji=status_emoji,
            status_color=status_color,
            tojson=to_json,
            slack_escape=slack_escape,
            iso8601=iso8601,
            utc=utc,
            clip=clip,
            worst_status=worst_status,
            evidence=format_evidence,
            alert_status=alert_status,
            findings=alert_findings,
            runbooks=runbooks,
        )
        self.env.globals.update(Event=Event, GroupStatus=GroupStatus)
        self.env.tests["cluster_alert"] = is_cluster_alert

    @staticmethod
    def name(channel: str, event: Event | str, part: str) -> str:
        """The template name for a channel, event and part: ``slack/open.json.j2``."""
        return f"{channel}/{Event(event).value}.{part}.j2"

    def add(self, name: str, path: str | Path) -> None:
        """Use the file at ``path`` for template ``name`` (taking precedence over directories)."""
        self._loader.paths[name] = Path(path)
        self._customised = True
        if self.env.cache is not None:
            self.env.cache.clear()

    def fallback(self) -> Templates | None:
        """The shipped templates alone, for when an override fails at send time; None when
        these are the shipped templates already (nothing to fall back to)."""
        if not self._customised:
            return None
        if self._fallback is None:
            self._fallback = Templates()
        return self._fallback

    def names(self) -> list[str]:
        """Every renderable template (partials excluded)."""
        return [
            name
            for name in self._loader.list_templates()
            if not name.rsplit("/", 1)[-1].startswith("_")
        ]

    def context(
        self, notification: Notification, alerts: Sequence[Alert] | None = None, **extra: Any
    ) -> dict[str, Any]:
        """The variables every template sees.

        ``notification``; ``alerts`` (the ones to show — a channel may cap them) and
        ``all_alerts``; ``more_alerts`` (how many were left out); ``alert`` (the first shown,
        for per-alert templates); ``event`` (the headline event, a string); ``status``
        (``"firing"`` or ``"resolved"``); ``extras``, ``status_page_url``, ``receiver``,
        ``group_key``; plus whatever the channel adds.
        """
        shown = list(notification.alerts if alerts is None else alerts)
        event = headline_event(notification.alerts or shown)
        context: dict[str, Any] = {
            "notification": notification,
            "alerts": shown,
            "all_alerts": notification.alerts,
            "more_alerts": max(0, len(notification.alerts) - len(shown)),
            "alert": shown[0] if shown else None,
            "event": event.value,
            "status": "resolved" if event is Event.RESOLVE else "firing",
            "extras": notification.extras,
            "status_page_url": notification.status_page_url,
            "receiver": notification.receiver,
            "group_key": notification.group_key,
        }
        context.update(extra)
        return context

    def render(self, name: str, context: Mapping[str, Any]) -> str:
        """Render ``name``; any failure becomes a :class:`TemplateError` with the line."""
        try:
            template = self.env.get_template(name)
            return template.render(context)
        except jinja2.TemplateSyntaxError as exc:
            source = self._loader.names_by_file.get(exc.filename or "", exc.name or name)
            raise TemplateError(source, exc.message or str(exc), exc.lineno) from None
        except jinja2.TemplateNotFound as exc:
            missing = exc.name if isinstance(exc.name, str) else name
            message = "template not found" if missing == name else f"{missing!r} not found"
            raise TemplateError(name, message) from None
        except Exception as exc:
            source, line = self._locate_error(exc, name)
            raise TemplateError(source, f"{type(exc).__name__}: {exc}", line) from None

    def render_json(self, name: str, context: Mapping[str, Any]) -> Any:
        """Render ``name`` and parse it as JSON; invalid JSON names the template."""
        text = self.render(name, context)
        try:
            return json.loads(text)
        except json.JSONDecodeError as exc:
            raise TemplateError(
                name,
                f"rendered invalid JSON: {exc.msg} at output line {exc.lineno} column {exc.colno}",
            ) from None

    def _locate_error(self, exc: BaseException, name: str) -> tuple[str, int | None]:
        """Jinja rewrites tracebacks so template frames carry the template's file and line."""
        found: tuple[str, int | None] = (name, None)
        tb: types.TracebackType | None = exc.__traceback__
        while tb is not None:
            filename = tb.tb_frame.f_code.co_filename
            if filename in self._loader.names_by_file:
                found = (self._loader.names_by_file[filename], tb.tb_lineno)
            tb = tb.tb_next
        return found

    def render_check(
        self, names: Iterable[str] | None = None, *, exclude: Iterable[str] = ()
    ) -> list[TemplateProblem]:
        """Render every template (or ``names``) but ``exclude`` with sample data; report each
        failure.

        Partials are compiled; ``<channel>/<event>.<part>.j2`` templates are rendered with a
        sample notification for that event (other names with every event), and ``*.json.j2``
        output must parse as JSON and pass the check its channel kind registered for its
        folder (``ChannelKind.check_message``: a Slack message needs text or blocks). An
        empty list means every template is usable. (Templates a channel renders with a context
        of its own, such as a webhook's body template, are checked by that channel.)
        """
        problems: list[TemplateProblem] = []
        message_checks = registry.message_checks()
        skip = set(exclude)
        wanted = list(names) if names is not None else self._loader.list_templates()
        wanted = [name for name in wanted if name not in skip]
        for name in wanted:
            base = name.rsplit("/", 1)[-1]
            if base.startswith("_"):
                try:
                    self.env.get_template(name)
                except jinja2.TemplateSyntaxError as exc:
                    problems.append(TemplateProblem(name, exc.lineno, exc.message or str(exc)))
                except jinja2.TemplateNotFound:
                    problems.append(TemplateProblem(name, None, "template not found"))
                continue
            match = _TEMPLATE_NAME.match(name)
            events = [Event(match["event"])] if match and match["event"] in self.EVENTS else None
            for event in events or list(Event):
                notification = sample_notification(event)
                context = self.context(notification)
                try:
                    if name.endswith(".json.j2"):
                        body = self.render_json(name, context)
                        check_message = message_checks.get(name.split("/", 1)[0])
                        if check_message is not None:
                            check_message(name, body)
                    else:
                        self.render(name, context)
                except TemplateError as exc:
                    problems.append(exc.problem)
                    break
        return problems


def render_or_fall_back(
    channel: str, templates: Templates, build: Callable[[Templates], T], fallback: str = "built-in"
) -> T:
    """``build(templates)``; if a template fails, ``build`` again with the shipped templates
    and log the failure (event ``template_failed``, at ERROR, naming the template and line).
    Raises :class:`TemplateError` only when the shipped templates fail too."""
    try:
        return build(templates)
    except TemplateError as exc:
        shipped = templates.fallback()
        if shipped is None:
            raise
        built = build(shipped)
        log_template_failure(channel, exc, fallback)
        return built


def log_template_failure(channel: str, exc: TemplateError, fallback: str) -> None:
    """The line an operator searches for when a custom template broke at send time."""
    log.error(
        "template %s failed at send time; sent with the %s template instead",
        exc.problem,
        fallback,
        extra={"event": "template_failed", "channel": channel, "template": exc.template,
               "line": exc.line, "error": exc.problem.message, "fallback": fallback},
    )  # fmt: skip


def sample_notification(event: Event | str = Event.OPEN, *, alerts: int = 3) -> Notification:
    """A realistic notification for template checks, previews and tests.

    The alerts cover the shapes a template must survive: many findings with evidence, a
    partition whose lag is unknown, and a group that vanished (``result`` is ``None``).
    """
    event = Event(event)
    base = 1_714_560_000_000
    status = (
        GroupStatus.OK
        if event is Event.RESOLVE
        else GroupStatus.ERR
        if event is Event.ESCALATE
        else GroupStatus.WARN
    )
    items: list[Alert] = []
    for index in range(alerts):
        group = f"orders-consumer-{index}"
        findings = (
            []
            if status is GroupStatus.OK
            else [
                Finding(
                    rule="burrow.stall" if status is GroupStatus.ERR else "burrow.lag_growing",
                    kind="stall" if status is GroupStatus.ERR else "lag_growing",
                    severity=Severity.ERR if status is GroupStatus.ERR else Severity.WARN,
                    status="STALL" if status is GroupStatus.ERR else "WARN",
                    topic="orders",
                    partition=index,
                    message="committed offset has not moved while lag grew over the window",
                    evidence={"lag_start": 1200, "lag_end": 48_000, "window_s": 600},
                    since=base - 600_000,
                    labels={"team": "orders"},
                    annotations={
                        "summary": f"{group} on prod is not making progress",
                        "description": "Check the consumer's logs for errors",
                        "runbook_url": "https://runbooks.example/consumer-lag",
                    },
                )
            ]
        )
        partitions = [
            PartitionResult(
                topic="orders",
                partition=p,
                status=PartitionStatus.STALL if findings and p == index else PartitionStatus.OK,
                complete=1.0,
                burrow_complete=1.0,
                committed_offset=None if p == 2 else 10_000 * (p + 1),
                log_end_offset=10_000 * (p + 1) + 48_000,
                log_start_offset=0,
                current_lag=None if p == 2 else 48_000,
                lag_seconds=None if p == 2 else 2820.0,
                start=None,
                end=None,
                # Partition 2 has no member: the sample shows both sentences.
                owner="" if p == 2 else f"10.2.0.{14 + p}",
                client_id="" if p == 2 else f"billing-7f9c-{p}",
            )
            for p in range(3)
        ]
        incident = Incident(
            id=f"prod/{group}/{base - 3_600_000}",
            cluster="prod",
            group=group,
            opened_at=base - 3_600_000,
            status=GroupStatus.ERR if status is GroupStatus.OK else status,
            peak_status=GroupStatus.ERR,
            closed_at=base if event is Event.RESOLVE else None,
            close_reason="recovered" if event is Event.RESOLVE else None,
            findings=findings
            or [
                Finding(
                    rule="burrow.stall",
                    kind="stall",
                    severity=Severity.ERR,
                    status="STALL",
                    topic="orders",
                    partition=0,
                    message="committed offset stopped moving",
                    evidence={"lag_end": 48_000},
                )
            ],
        )
        gone = index == alerts - 1 and alerts > 1
        result = (
            None
            if gone
            else GroupResult(
                cluster="prod",
                group=group,
                status=status,
                complete=1.0,
                burrow_complete=1.0,
                partial=False,
                evaluated_at=base,
                partitions=partitions,
                findings=findings,
                total_lag=0 if status is GroupStatus.OK else 96_000,
                max_lag=None if status is GroupStatus.OK else partitions[0],
                max_lag_seconds=0.0 if status is GroupStatus.OK else 2820.0,
                group_state="Stable",
                members=3,
            )
        )
        muted = (
            [
                Finding(
                    rule="falling-behind",
                    kind="falling_behind",
                    severity=Severity.WARN,
                    status="WARN",
                    topic="orders",
                    partition=index,
                    message="reading slower than the partition normally gets",
                )
            ]
            if index == 0 and status is not GroupStatus.OK
            else []
        )
        items.append(Alert(event=event, incident=incident, result=result, muted=muted))
    return Notification(
        id=f"sample-{event.value}",
        receiver="sample",
        group_key='{cluster="prod"}',
        alerts=items,
        created_at=base,
        status_page_url="https://notifier.example/status",
    )
