"""Channel senders: Slack (incoming webhook and bot), e-mail, a generic webhook and PagerDuty.

A channel turns one :class:`~notifier.types.Notification` into one delivery attempt and reports
what happened as a :class:`Delivery`. Channels never retry by themselves: the caller owns the
retry loop (backoff, the next group interval, at-least-once), so a channel's job is to classify
each failure honestly — ``retryable`` or not, and for how long the receiver asked us to wait.

Message bodies are Jinja2 templates (see :class:`Templates` and ``templates/README.md``), except
where a receiver's schema leaves nothing to design (PagerDuty's event fields, the generic
webhook's documented default body), which are built here so their limits hold by construction.

Secrets (webhook URLs, tokens, SMTP passwords, routing keys) are held in :class:`Secret` and are
scrubbed from every error string a channel returns, from ``repr()`` and from httpx's request log.
"""

from __future__ import annotations

import abc
import base64
import dataclasses
import hashlib
import inspect
import json
import logging
import re
import types
import urllib.request
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from email.message import EmailMessage
from email.utils import format_datetime, parseaddr, parsedate_to_datetime
from pathlib import Path
from typing import Any, Literal

import aiosmtplib
import httpx
import jinja2

from notifier import __version__
from notifier.config import Scrubber, Secret, optional_secret, redact_url, secret_fragments
from notifier.notify import jsonenc
from notifier.notify.channels.transport import AsyncioTransport
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

__all__ = [
    "DEFAULT_TEMPLATE_DIR",
    "Channel",
    "Delivery",
    "Email",
    "PagerDuty",
    "Secret",
    "SlackBot",
    "SlackLookup",
    "SlackMessageRef",
    "SlackWebhook",
    "TemplateError",
    "TemplateProblem",
    "Templates",
    "Webhook",
    "alert_findings",
    "alert_status",
    "classify_http",
    "fit_slack_message",
    "headline_event",
    "humanize_lag",
    "humanize_seconds",
    "pagerduty_dedup_key",
    "pagerduty_events",
    "parse_retry_after",
    "redact_url",
    "sample_notification",
    "secret_fragments",
    "webhook_payload",
    "worst_status",
]

DEFAULT_TEMPLATE_DIR = Path(__file__).resolve().parents[3] / "templates"
"""The templates shipped with the repository; an override directory or file takes precedence."""

WEBHOOK_PAYLOAD_VERSION = "1"

# --------------------------------------------------------------------------------------------
# Secrets

_http_log = logging.getLogger("notifier.http")
"""One DEBUG line per channel request, its URL redacted (httpx's own request log is
``httpx.AsyncClient``'s, which the channels do not use)."""



# --------------------------------------------------------------------------------------------
# Delivery results


@dataclass(slots=True)
class Delivery:
    """The outcome of one :meth:`Channel.send`.

    ``retry_after`` is the wait (seconds) the receiver asked for (HTTP 429/503 ``Retry-After``);
    ``meta`` carries what the caller must keep for later sends, e.g. Slack's ``channel``/``ts``
    so a resolve can update the original message. ``error`` never contains a secret.
    """

    ok: bool
    retryable: bool = False
    retry_after: float | None = None
    status_code: int | None = None
    error: str | None = None
    meta: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def success(cls, status_code: int | None = None, **meta: Any) -> Delivery:
        return cls(ok=True, status_code=status_code, meta=dict(meta))

    @classmethod
    def failure(
        cls,
        error: str,
        *,
        retryable: bool,
        status_code: int | None = None,
        retry_after: float | None = None,
        **meta: Any,
    ) -> Delivery:
        return cls(
            ok=False,
            retryable=retryable,
            retry_after=retry_after,
            status_code=status_code,
            error=error,
            meta=dict(meta),
        )


def parse_retry_after(value: str | None, *, now: datetime | None = None) -> float | None:
    """``Retry-After`` as seconds: either delta-seconds (``"30"``) or an HTTP date."""
    if value is None:
        return None
    value = value.strip()
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return max(0.0, (when - (now or datetime.now(UTC))).total_seconds())


def _excerpt(text: str, limit: int = 300) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def classify_http(response: httpx.Response, scrub: Callable[[str], str]) -> Delivery:
    """2xx ok; 429 and 5xx (and 408) retryable, honouring ``Retry-After``; other codes final."""
    code = response.status_code
    if 200 <= code < 300:
        return Delivery.success(code)
    detail = scrub(_excerpt(response.text))
    error = f"HTTP {code}" + (f": {detail}" if detail else "")
    retry_after = parse_retry_after(response.headers.get("retry-after"))
    if code == 429 or code == 408 or code >= 500:
        return Delivery.failure(error, retryable=True, status_code=code, retry_after=retry_after)
    return Delivery.failure(error, retryable=False, status_code=code)


def _combine(deliveries: Sequence[Delivery], **meta: Any) -> Delivery:
    """Several requests for one notification (PagerDuty events, Slack thread + update)."""
    failures = [d for d in deliveries if not d.ok]
    if not failures:
        last = deliveries[-1] if deliveries else None
        return Delivery.success(last.status_code if last else None, **meta)
    retry_afters = [d.retry_after for d in failures if d.retry_after is not None]
    first = failures[0]
    meta = {**first.meta, **meta}
    return Delivery.failure(
        "; ".join(d.error or "failed" for d in failures),
        # A retry resends the whole notification, so one transient failure makes it worth it;
        # receivers dedupe (PagerDuty by dedup_key) or the duplicate beats a missed alert.
        retryable=any(d.retryable for d in failures),
        status_code=first.status_code,
        retry_after=max(retry_afters) if retry_afters else None,
        **meta,
    )


# --------------------------------------------------------------------------------------------
# Helpers shared by channels and templates

_EVENT_PRECEDENCE = (Event.ESCALATE, Event.OPEN, Event.REPEAT, Event.RESOLVE)


def headline_event(alerts: Sequence[Alert]) -> Event:
    """The event a multi-alert message is about: the most urgent one; resolve only if all are."""
    present = {alert.event for alert in alerts}
    for event in _EVENT_PRECEDENCE:
        if event in present:
            return event
    raise ValueError("a notification needs at least one alert")


def alert_status(alert: Alert) -> GroupStatus:
    """The group's status now: the latest evaluation's; for a vanished group (no result) the
    incident's while it fires and ``NOTFOUND`` once it resolves."""
    if alert.result is not None:
        return alert.result.status
    return GroupStatus.NOTFOUND if alert.event is Event.RESOLVE else alert.incident.status


def alert_findings(alert: Alert) -> list[Finding]:
    """Why the alert is what it is: the latest result's findings, else the incident's."""
    if alert.result is not None and alert.result.findings:
        return list(alert.result.findings)
    return list(alert.incident.findings)


def worst_status(alerts: Iterable[Alert]) -> GroupStatus:
    """The most severe current status among ``alerts`` (what a message's colour shows)."""
    return max((alert_status(alert) for alert in alerts), key=lambda s: s.rank)


def humanize_seconds(seconds: float | None) -> str:
    """``2820`` → ``"47 min"``; ``None`` → ``"unknown"`` (never pretend an unknown lag is 0)."""
    if seconds is None:
        return "unknown"
    s = max(0, round(float(seconds)))
    if s < 60:
        return f"{s} s"
    if s < 3600:
        return f"{s // 60} min"
    if s < 86400:
        hours, minutes = divmod(s // 60, 60)
        return f"{hours} h {minutes} min" if minutes else f"{hours} h"
    days, hours = divmod(s // 3600, 24)
    return f"{days} d {hours} h" if hours else f"{days} d"


_LAG_UNITS = ("", "k", "M", "G", "T", "P")


def humanize_lag(messages: float | None) -> str:
    """``1234567`` → ``"1.23M"`` (three significant digits); ``None`` → ``"unknown"``."""
    if messages is None:
        return "unknown"
    value = float(messages)
    if abs(value) < 1000:
        return str(int(value))
    unit = 0
    while unit < len(_LAG_UNITS) - 1 and abs(float(f"{value:.3g}")) >= 1000:
        value /= 1000
        unit += 1
    return f"{float(f'{value:.3g}'):g}{_LAG_UNITS[unit]}"


_STATUS_EMOJI = {
    "OK": ":white_check_mark:",
    "WARN": ":warning:",
    "ERR": ":rotating_light:",
    "NOTFOUND": ":grey_question:",
    "RESOLVE": ":white_check_mark:",
}
_STATUS_COLOR = {"OK": "#2eb886", "WARN": "#daa038", "ERR": "#a30200", "NOTFOUND": "#9e9e9e"}


def status_emoji(status: object) -> str:
    return _STATUS_EMOJI.get(str(status).upper(), ":grey_question:")


def status_color(status: object) -> str:
    return _STATUS_COLOR.get(str(status).upper(), "#9e9e9e")


def iso8601(ms: int | None) -> str | None:
    """Epoch milliseconds → ``2024-05-01T12:00:00Z`` (milliseconds kept when non-zero)."""
    if ms is None:
        return None
    when = datetime.fromtimestamp(ms / 1000, UTC)
    text = when.isoformat(timespec="milliseconds" if ms % 1000 else "seconds")
    return text.replace("+00:00", "Z")


def utc(ms: int | None) -> str:
    """Epoch milliseconds → ``2024-05-01 10:00 UTC`` for people; ``"-"`` when unknown."""
    if ms is None:
        return "-"
    return datetime.fromtimestamp(ms / 1000, UTC).strftime("%Y-%m-%d %H:%M UTC")


def to_json(value: Any, indent: int | None = None) -> str:
    """JSON for templates and bodies: dataclasses, enums and datetimes serialise; non-ASCII
    kept readable."""
    return jsonenc.dumps(value, indent)


def format_evidence(evidence: Mapping[str, Any] | None) -> str:
    """``{"lag_start": 10, "lag_end": 900}`` → ``"lag_start=10, lag_end=900"``."""
    if not evidence:
        return ""
    parts = []
    for key, value in evidence.items():
        shown = value if isinstance(value, str) else to_json(value)
        parts.append(f"{key}={shown}")
    return ", ".join(parts)


def slack_escape(text: object) -> str:
    """Slack mrkdwn control characters (``&``, ``<``, ``>``) must be entity-escaped."""
    return str(text).replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def clip(text: object, limit: int, marker: str = "…") -> str:
    """Cut ``text`` to at most ``limit`` characters, marking the cut."""
    text = str(text)
    if len(text) <= limit:
        return text
    return text[: max(0, limit - len(marker))] + marker


def clip_lines(text: str, limit: int) -> str:
    """Cut at a line boundary to at most ``limit`` characters, ending ``… and N more``."""
    if len(text) <= limit:
        return text
    lines = text.split("\n")
    kept: list[str] = []
    size = 0
    for index, line in enumerate(lines):
        note = f"… and {len(lines) - index} more"
        if size + len(line) + 1 + len(note) > limit:
            if not kept:  # a single huge line: cut inside it
                return clip(line, limit - len(note) - 1) + "\n" + note
            return "\n".join(kept) + "\n" + note
        kept.append(line)
        size += len(line) + 1
    return "\n".join(kept)


# --------------------------------------------------------------------------------------------
# Templates


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
    directory laid out like the built-in one), then :data:`DEFAULT_TEMPLATE_DIR`. Undefined
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
        if builtin:
            directories.append(DEFAULT_TEMPLATE_DIR)
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
        )
        self.env.globals.update(Event=Event, GroupStatus=GroupStatus)

    @staticmethod
    def name(channel: str, event: Event | str, part: str) -> str:
        """The template name for a channel, event and part: ``slack/open.json.j2``."""
        return f"{channel}/{Event(event).value}.{part}.j2"

    def add(self, name: str, path: str | Path) -> None:
        """Use the file at ``path`` for template ``name`` (taking precedence over directories)."""
        self._loader.paths[name] = Path(path)
        if self.env.cache is not None:
            self.env.cache.clear()

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

    def render_check(self, names: Iterable[str] | None = None) -> list[TemplateProblem]:
        """Render every template (or ``names``) with sample data; report each failure.

        Partials are compiled; ``<channel>/<event>.<part>.j2`` templates are rendered with a
        sample notification for that event (other names with every event), and ``*.json.j2``
        output must parse as JSON. An empty list means every template is usable.
        """
        problems: list[TemplateProblem] = []
        wanted = list(names) if names is not None else self._loader.list_templates()
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
                        if name.startswith("slack/"):
                            _check_slack_shape(name, body)
                    else:
                        self.render(name, context)
                except TemplateError as exc:
                    problems.append(exc.problem)
                    break
        return problems


def _check_slack_shape(name: str, body: Any) -> None:
    if not isinstance(body, dict) or not (body.get("text") or body.get("blocks")):
        raise TemplateError(name, "a Slack message must be a JSON object with text or blocks")


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
        items.append(Alert(event=event, incident=incident, result=result))
    return Notification(
        id=f"sample-{event.value}",
        receiver="sample",
        group_key='{cluster="prod"}',
        alerts=items,
        created_at=base,
        status_page_url="https://notifier.example/status",
    )


# --------------------------------------------------------------------------------------------
# Channels


class Channel(abc.ABC):
    """A place notifications go. ``send`` never raises for delivery problems: it reports them."""

    name: str

    @abc.abstractmethod
    async def send(self, notification: Notification) -> Delivery:
        """Deliver ``notification`` once and classify the outcome."""

    async def aclose(self) -> None:  # noqa: B027 - channels without connections need nothing
        """Release connections."""

    async def __aenter__(self) -> Channel:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    def __repr__(self) -> str:
        # Deliberately no fields: constructors hold secrets.
        return f"{type(self).__name__}(name={self.name!r})"


def _no_alerts() -> Delivery:
    return Delivery.failure("notification has no alerts", retryable=False)


_DEFAULT_HEADERS = {
    "User-Agent": f"notifier/{__version__}",
    "Accept": "*/*",
    "Accept-Encoding": "gzip, deflate",
}


def basic_auth_header(username: str, password: str) -> str:
    """The ``Authorization`` value for HTTP basic auth (RFC 7617, UTF-8)."""
    token = base64.b64encode(f"{username}:{password}".encode()).decode("ascii")
    return f"Basic {token}"


def environment_proxy(scheme: str, host: str) -> str | None:
    """The proxy URL the environment sets for ``scheme://host`` (``HTTPS_PROXY``,
    ``HTTP_PROXY``, ``ALL_PROXY``, any case), or None when there is none or ``NO_PROXY``
    exempts the host: the rules curl and httpx follow."""
    proxies = urllib.request.getproxies_environment()
    proxy = proxies.get(scheme) or proxies.get("all")
    if not proxy or urllib.request.proxy_bypass_environment(host, proxies):
        return None
    return proxy if "://" in proxy else f"http://{proxy}"


class _HttpChannel(Channel):
    """Shared HTTP plumbing: scrubbed and classified errors, straight on an httpx transport.

    Requests go to a :class:`~notifier.notify.channels.transport.AsyncioTransport` (httpcore's
    connection
    pool on asyncio streams) rather than through ``httpx.AsyncClient``: the client's
    per-request work (auth and redirect flows, cookies, URL merging, event hooks) is none of
    what a notifier needs, and at a thousand deliveries a second it cost as much as the
    request itself. What the client gave that we do need is kept: the proxy from
    ``HTTPS_PROXY``/``HTTP_PROXY``/``ALL_PROXY`` unless ``NO_PROXY`` exempts the host,
    ``SSL_CERT_FILE``/``SSL_CERT_DIR``, timeouts, and failures as ``httpx`` exceptions.
    Redirects are not followed (a webhook that redirects is misconfigured, and following one
    would resend the body elsewhere).
    """

    def __init__(
        self,
        *,
        name: str,
        timeout: float,
        secrets: Iterable[Secret | None],
        transport: httpx.AsyncBaseTransport | None,
    ) -> None:
        self.name = name
        self.timeout = timeout
        self._scrub = Scrubber(secrets)
        self._timeouts = httpx.Timeout(timeout).as_dict()
        self._fixed_transport = transport
        self._transports: dict[str | None, httpx.AsyncBaseTransport] = {}
        self._proxy_for_origin: dict[tuple[str, str], str | None] = {}
        self._urls: dict[str, httpx.URL] = {}  # parsing a URL costs more than sending on loopback

    def _transport(self, url: httpx.URL) -> httpx.AsyncBaseTransport:
        if self._fixed_transport is not None:
            return self._fixed_transport
        origin = (url.scheme, url.host)
        try:
            proxy = self._proxy_for_origin[origin]
        except KeyError:
            proxy = self._proxy_for_origin[origin] = environment_proxy(url.scheme, url.host)
        transport = self._transports.get(proxy)
        if transport is None:
            transport = self._transports[proxy] = AsyncioTransport(proxy=proxy)
        return transport

    async def aclose(self) -> None:
        transports, self._transports = list(self._transports.values()), {}
        for transport in transports:
            await transport.aclose()

    async def _request(
        self,
        method: str,
        url: str,
        *,
        body: Any = None,
        content: bytes | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> httpx.Response | Delivery:
        """Send one request and read its answer; a transport failure comes back as a retryable
        :class:`Delivery`, a URL that cannot work as a final one."""
        send_headers = {**_DEFAULT_HEADERS, **(headers or {})}
        if body is not None:
            content = jsonenc.dumps_bytes(body)
            send_headers.setdefault("Content-Type", "application/json; charset=utf-8")
        try:
            parsed = self._urls.get(url)
            if parsed is None:
                if len(self._urls) >= 1024:  # bounded: Slack API URLs are few, but be safe
                    self._urls.clear()
                parsed = self._urls[url] = httpx.URL(url)
            request = httpx.Request(
                method,
                parsed,
                content=content,
                headers=send_headers,
                extensions={"timeout": self._timeouts},
            )
            response = await self._transport(request.url).handle_async_request(request)
            try:
                await response.aread()
            finally:
                await response.aclose()
            if _http_log.isEnabledFor(logging.DEBUG):
                _http_log.debug(
                    "HTTP %s %s: %d (%s)",
                    method,
                    redact_url(url),
                    response.status_code,
                    self.name,
                )
            return response
        except httpx.TimeoutException as exc:
            return Delivery.failure(
                f"timed out after {self.timeout:g} s ({type(exc).__name__})", retryable=True
            )
        except (httpx.UnsupportedProtocol, httpx.InvalidURL) as exc:
            return Delivery.failure(
                self._scrub(f"request failed ({type(exc).__name__}): {exc}"), retryable=False
            )
        except httpx.TransportError as exc:
            return Delivery.failure(
                self._scrub(f"connection failed ({type(exc).__name__}): {exc}"), retryable=True
            )
        except httpx.HTTPError as exc:
            return Delivery.failure(
                self._scrub(f"request failed ({type(exc).__name__}): {exc}"), retryable=False
            )

    def _template_failure(self, exc: TemplateError) -> Delivery:
        return Delivery.failure(self._scrub(str(exc)), retryable=False, template=exc.template)


# ---- Slack


SLACK_MAX_BLOCKS = 50
SLACK_MAX_SECTION_TEXT = 3000
SLACK_MAX_HEADER_TEXT = 150
SLACK_MAX_FIELD_TEXT = 2000
SLACK_MAX_FIELDS = 10
SLACK_MAX_CONTEXT_ELEMENTS = 10
SLACK_MAX_TEXT = 3000
"""The fallback ``text`` is what phones show in a push notification; keep it readable."""


def _fit_block(block: dict[str, Any]) -> dict[str, Any]:
    kind = block.get("type")
    text = block.get("text")
    if kind == "header" and isinstance(text, dict) and isinstance(text.get("text"), str):
        text["text"] = clip(text["text"], SLACK_MAX_HEADER_TEXT)
    elif kind == "section":
        if isinstance(text, dict) and isinstance(text.get("text"), str):
            text["text"] = clip_lines(text["text"], SLACK_MAX_SECTION_TEXT)
        fields = block.get("fields")
        if isinstance(fields, list):
            del fields[SLACK_MAX_FIELDS:]
            for item in fields:
                if isinstance(item, dict) and isinstance(item.get("text"), str):
                    item["text"] = clip_lines(item["text"], SLACK_MAX_FIELD_TEXT)
    elif kind == "context":
        elements = block.get("elements")
        if isinstance(elements, list):
            del elements[SLACK_MAX_CONTEXT_ELEMENTS:]
            for item in elements:
                if isinstance(item, dict) and isinstance(item.get("text"), str):
                    item["text"] = clip_lines(item["text"], SLACK_MAX_SECTION_TEXT)
    return block


def _more_attachment(count: int) -> dict[str, Any]:
    return {
        "color": status_color("NOTFOUND"),
        "fallback": f"… and {count} more",
        "blocks": [{"type": "section", "text": {"type": "mrkdwn", "text": f"… and {count} more"}}],
    }


def fit_slack_message(message: dict[str, Any]) -> dict[str, Any]:
    """Enforce Slack's limits on a rendered message, whatever the template produced.

    Section texts are cut to 3000 characters at a line boundary (``… and N more``), header
    texts to 150; top-level blocks plus the blocks of all attachments to 50 in total — the
    trailing attachments (one per alert in the built-in templates) go first and are replaced
    by a single ``… and N more`` attachment.
    """
    if isinstance(message.get("text"), str):
        message["text"] = clip_lines(message["text"], SLACK_MAX_TEXT)
    blocks = message.get("blocks")
    if not isinstance(blocks, list):
        blocks = []
    attachments = message.get("attachments")
    if not isinstance(attachments, list):
        attachments = []
    for block in blocks:
        if isinstance(block, dict):
            _fit_block(block)
    for attachment in attachments:
        if isinstance(attachment, dict) and isinstance(attachment.get("blocks"), list):
            for block in attachment["blocks"]:
                if isinstance(block, dict):
                    _fit_block(block)

    def attachment_blocks(item: Any) -> int:
        inner = item.get("blocks") if isinstance(item, dict) else None
        return len(inner) if isinstance(inner, list) else 0

    total = len(blocks) + sum(attachment_blocks(a) for a in attachments)
    if total <= SLACK_MAX_BLOCKS:
        return message
    dropped = 0
    # Make room for the "… and N more" attachment's one block.
    while attachments and total > SLACK_MAX_BLOCKS - 1:
        total -= attachment_blocks(attachments.pop())
        dropped += 1
    if total > SLACK_MAX_BLOCKS - 1:  # the top-level blocks alone are too many
        cut = total - (SLACK_MAX_BLOCKS - 1)
        del blocks[len(blocks) - cut :]
        dropped += cut
    attachments.append(_more_attachment(dropped))
    message["blocks"] = blocks
    message["attachments"] = attachments
    return message


class _SlackRendering:
    """Slack message rendering shared by the webhook and the bot."""

    templates: Templates
    max_alerts: int

    def _render_slack(self, notification: Notification, alerts: Sequence[Alert]) -> dict[str, Any]:
        scoped = dataclasses.replace(notification, alerts=list(alerts))
        shown = list(alerts[: self.max_alerts])
        context = self.templates.context(scoped, shown)
        name = Templates.name("slack", context["event"], "json")
        message = self.templates.render_json(name, context)
        _check_slack_shape(name, message)
        return fit_slack_message(message)


class SlackWebhook(_HttpChannel, _SlackRendering):
    """A Slack incoming webhook: one message per notification, Block Kit with colour bars.

    The message is ``slack/<event>.json.j2``: a header, a context line (counts and the status
    page link) and one coloured attachment per alert. At most ``max_alerts`` alerts are shown
    (the rest summarised as ``… and N more``) so a storm of 200 groups still fits Slack's
    50-block limit in a single message rather than flooding the channel.
    """

    def __init__(
        self,
        url: str | Secret,
        *,
        name: str = "slack",
        templates: Templates | None = None,
        timeout: float = 10.0,
        max_alerts: int = 40,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        self.url = Secret(url)
        self.templates = templates or Templates()
        self.max_alerts = max(1, min(max_alerts, SLACK_MAX_BLOCKS - 4))
        super().__init__(name=name, timeout=timeout, secrets=[self.url], transport=transport)

    async def send(self, notification: Notification) -> Delivery:
        if not notification.alerts:
            return _no_alerts()
        try:
            message = self._render_slack(notification, notification.alerts)
        except TemplateError as exc:
            return self._template_failure(exc)
        response = await self._request("POST", self.url.reveal(), body=message)
        if isinstance(response, Delivery):
            return response
        return classify_http(response, self._scrub)


@dataclass(slots=True, frozen=True)
class SlackMessageRef:
    """Where an earlier message lives: a channel *ID* (chat.update needs the ID) and its ts."""

    channel: str
    ts: str


SlackLookup = Callable[[Incident], SlackMessageRef | Awaitable[SlackMessageRef | None] | None]
"""Finds the message an incident was first posted in (sync or async), e.g. from the caller's
store of ``Delivery.meta``."""

_SLACK_TRANSIENT_ERRORS = frozenset(
    {
        "ratelimited",
        "rate_limited",
        "internal_error",
        "fatal_error",
        "service_unavailable",
        "request_timeout",
    }
)
"""Slack Web API ``error`` codes worth retrying; every other ``ok: false`` is final."""

_SLACK_ORIGINAL_GONE = frozenset(
    {"message_not_found", "cant_update_message", "edit_window_closed", "thread_not_found"}
)
"""Errors meaning the original message cannot be followed up; post a new one instead."""


class SlackBot(_HttpChannel, _SlackRendering):
    """A Slack app posting with a bot token (``chat:write``), so follow-ups can find the original.

    ``open`` posts a new message with ``chat.postMessage``; its ``channel`` and ``ts`` come back
    in ``Delivery.meta`` for the caller to store per incident. For ``escalate``, ``repeat`` and
    ``resolve`` the original message is found from ``notification.extras["slack_ts"]`` (a ts for
    every alert, or a mapping incident id → ts, with the channel ID in
    ``extras["slack_channel"]``) or from ``lookup(incident)``; then, per ``followup``:
    ``"update"`` rewrites the original with ``chat.update`` (the channel shows the current
    state), ``"thread"`` replies under it (``thread_ts``, a timeline with a notification),
    ``"both"`` does both. ``chat.update`` replaces the whole message, so routes that batch many
    incidents into one message should use ``"thread"``. Alerts with no known original are
    posted as a new message.
    """

    def __init__(
        self,
        token: str | Secret,
        channel: str,
        *,
        api_url: str = "https://slack.com/api",
        name: str = "slack-bot",
        templates: Templates | None = None,
        timeout: float = 10.0,
        followup: Literal["update", "thread", "both"] = "both",
        lookup: SlackLookup | None = None,
        max_alerts: int = 40,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        if followup not in ("update", "thread", "both"):
            raise ValueError(f"followup must be 'update', 'thread' or 'both', not {followup!r}")
        self.token = Secret(token)
        self.channel = channel
        self.api_url = api_url.rstrip("/")
        self.templates = templates or Templates()
        self.followup = followup
        self.lookup = lookup
        self.max_alerts = max(1, min(max_alerts, SLACK_MAX_BLOCKS - 4))
        super().__init__(name=name, timeout=timeout, secrets=[self.token], transport=transport)

    async def send(self, notification: Notification) -> Delivery:
        if not notification.alerts:
            return _no_alerts()
        try:
            groups = await self._originals(notification)
            rendered = [
                (ref, alerts, self._render_slack(notification, alerts))
                for ref, alerts in groups.items()
            ]
        except TemplateError as exc:
            return self._template_failure(exc)

        results: list[Delivery] = []
        messages: list[dict[str, Any]] = []
        for ref, alerts, message in rendered:
            if not await self._deliver(ref, alerts, message, results, messages):
                break
        meta: dict[str, Any] = {"messages": messages}
        # The message later follow-ups should target: a fresh post, else the one followed up.
        root = next(
            (m for m in messages if m["method"] == "chat.postMessage" and not m["thread_ts"]), None
        )
        if root is not None:
            meta.update(channel=root["channel"], ts=root["ts"])
        elif isinstance(rendered[0][0], SlackMessageRef):
            meta.update(channel=rendered[0][0].channel, ts=rendered[0][0].ts)
        return _combine(results, **meta)

    async def _deliver(
        self,
        ref: SlackMessageRef | None,
        alerts: Sequence[Alert],
        message: dict[str, Any],
        results: list[Delivery],
        messages: list[dict[str, Any]],
    ) -> bool:
        """Post anew (no ``ref``) or follow up on ``ref``; False once a call has failed.

        If the original cannot be followed up (deleted, too old to edit, no permission), the
        alerts are posted as a new message instead: a duplicate beats a lost resolve.
        """
        steps: list[tuple[str, dict[str, str]]] = []
        if ref is None:
            steps.append(("chat.postMessage", {"channel": self.channel}))
        else:
            if self.followup in ("update", "both"):
                steps.append(("chat.update", {"channel": ref.channel, "ts": ref.ts}))
            if self.followup in ("thread", "both"):
                steps.append(("chat.postMessage", {"channel": ref.channel, "thread_ts": ref.ts}))
        for method, target in steps:
            delivery = await self._call(method, {**target, **message})
            if ref is not None and delivery.meta.get("slack_error") in _SLACK_ORIGINAL_GONE:
                return await self._deliver(None, alerts, message, results, messages)
            results.append(delivery)
            if not delivery.ok:
                return False
            messages.append(
                {
                    "method": method,
                    "channel": delivery.meta.get("channel") or target["channel"],
                    "ts": delivery.meta.get("ts"),
                    "thread_ts": target.get("thread_ts"),
                    "incident_ids": [alert.incident.id for alert in alerts],
                }
            )
        return True

    async def _originals(
        self, notification: Notification
    ) -> dict[SlackMessageRef | None, list[Alert]]:
        """Group the alerts by the message each one should follow up on (None: post anew).

        An ``open`` alert is a new incident and always starts a new message.
        """
        given = notification.extras.get("slack_ts")
        channel = notification.extras.get("slack_channel") or self.channel
        groups: dict[SlackMessageRef | None, list[Alert]] = {}
        for alert in notification.alerts:
            ref: SlackMessageRef | None = None
            if alert.event is Event.OPEN:
                pass
            elif isinstance(given, str) and given:
                ref = SlackMessageRef(channel, given)
            elif isinstance(given, Mapping) and given.get(alert.incident.id):
                ref = SlackMessageRef(channel, str(given[alert.incident.id]))
            elif self.lookup is not None:
                found = self.lookup(alert.incident)
                ref = await found if inspect.isawaitable(found) else found
            groups.setdefault(ref, []).append(alert)
        return groups

    async def _call(self, method: str, payload: dict[str, Any]) -> Delivery:
        response = await self._request(
            "POST",
            f"{self.api_url}/{method}",
            body=payload,
            headers={"Authorization": f"Bearer {self.token.reveal()}"},
        )
        if isinstance(response, Delivery):
            return response
        delivery = classify_http(response, self._scrub)
        if not delivery.ok:
            delivery.error = f"{method}: {delivery.error}"
            return delivery
        try:
            data = response.json()
        except ValueError:
            return Delivery.failure(
                f"{method}: HTTP {response.status_code} with a non-JSON body",
                retryable=True,
                status_code=response.status_code,
            )
        if not isinstance(data, dict) or not data.get("ok"):
            error = str(data.get("error", "unknown_error")) if isinstance(data, dict) else "?"
            return Delivery.failure(
                self._scrub(f"{method}: {error}"),
                retryable=error in _SLACK_TRANSIENT_ERRORS,
                status_code=response.status_code,
                retry_after=parse_retry_after(response.headers.get("retry-after")),
                slack_error=error,
            )
        return Delivery.success(
            response.status_code, channel=data.get("channel"), ts=data.get("ts")
        )


# ---- E-mail


def _msgid_token(text: str) -> str:
    """Incident ids may hold ``/``, ``@`` or spaces; a Message-ID's left part may not."""
    token = re.sub(r"[^A-Za-z0-9.\-_]+", "-", text).strip("-.")
    if len(token) > 120 or not token:
        token = token[:80] + "." + hashlib.sha256(text.encode()).hexdigest()[:24]
    return token


def _header_text(text: str, limit: int = 250) -> str:
    """One line: a newline in a template's output must not become header injection."""
    return clip(" ".join(text.split()), limit)


class Email(Channel):
    """Multipart (text + HTML) e-mail over SMTP, threaded per incident.

    Templates: ``email/<event>.subject.j2``, ``.txt.j2``, ``.html.j2``. The built-in subject is
    the same for every event of an incident (``[notifier] cluster/group``; for a multi-alert
    notification ``[notifier] consumer lag: <group_key>``), and the headers thread the
    messages: the ``open`` mail's ``Message-ID`` is ``<incident.ID@domain>``, and every later
    mail about the incident carries it in ``In-Reply-To``/``References``. Multi-alert mails
    thread on ``<group.HASH@domain>`` of the receiver and group key and reference each incident.

    ``tls``: ``"starttls"`` (port 587 by default), ``"implicit"`` (465), ``"none"`` (25).
    """

    def __init__(
        self,
        host: str,
        port: int | None = None,
        *,
        sender: str,
        recipients: Sequence[str],
        username: str | None = None,
        password: str | Secret | None = None,
        tls: Literal["starttls", "implicit", "none"] = "starttls",
        name: str = "email",
        templates: Templates | None = None,
        timeout: float = 10.0,
        validate_certs: bool = True,
    ) -> None:
        if tls not in ("starttls", "implicit", "none"):
            raise ValueError(f"tls must be 'starttls', 'implicit' or 'none', not {tls!r}")
        if not recipients:
            raise ValueError("an e-mail channel needs at least one recipient")
        self.name = name
        self.host = host
        self.port = port or {"starttls": 587, "implicit": 465, "none": 25}[tls]
        self.sender = sender
        self.recipients = list(recipients)
        self.username = username
        self.password = optional_secret(password)
        self.tls = tls
        self.timeout = timeout
        self.validate_certs = validate_certs
        self.templates = templates or Templates()
        self._scrub = Scrubber([self.password])
        domain = parseaddr(sender)[1].rpartition("@")[2]
        self.domain = _msgid_token(domain) if domain else "notifier.invalid"

    def thread_ids(self, notification: Notification) -> tuple[str, str | None, list[str]]:
        """``(Message-ID, In-Reply-To, References)`` for ``notification``."""
        alerts = notification.alerts
        event = headline_event(alerts)
        if len(alerts) == 1:
            incident = alerts[0].incident.id
            root = f"<incident.{_msgid_token(incident)}@{self.domain}>"
            if event is Event.OPEN:
                return root, None, []
            own = (
                f"<incident.{_msgid_token(incident)}.{event.value}"
                f".{_msgid_token(notification.id)}@{self.domain}>"
            )
            return own, root, [root]
        digest = hashlib.sha256(
            f"{notification.receiver}\x00{notification.group_key}".encode()
        ).hexdigest()[:24]
        root = f"<group.{digest}@{self.domain}>"
        own = f"<notification.{_msgid_token(notification.id)}@{self.domain}>"
        incidents = [f"<incident.{_msgid_token(a.incident.id)}@{self.domain}>" for a in alerts]
        return own, root, [root, *incidents[:50]]

    def build_message(self, notification: Notification) -> EmailMessage:
        """Render the templates into a ready-to-send message (raises :class:`TemplateError`)."""
        context = self.templates.context(notification)
        event = context["event"]
        subject = self.templates.render(Templates.name("email", event, "subject"), context)
        text = self.templates.render(Templates.name("email", event, "txt"), context)
        html = self.templates.render(Templates.name("email", event, "html"), context)
        message_id, in_reply_to, references = self.thread_ids(notification)

        message = EmailMessage()
        message["Subject"] = _header_text(subject)
        message["From"] = self.sender
        message["To"] = ", ".join(self.recipients)
        message["Date"] = format_datetime(
            datetime.fromtimestamp(notification.created_at / 1000, UTC)
        )
        message["Message-ID"] = message_id
        if in_reply_to:
            message["In-Reply-To"] = in_reply_to
        if references:
            message["References"] = " ".join(references)
        # RFC 3834: tells vacation responders not to answer an alert.
        message["Auto-Submitted"] = "auto-generated"
        message["X-Notifier-Event"] = event
        message["X-Notifier-Group-Key"] = _header_text(notification.group_key)
        message.set_content(text)
        message.add_alternative(html, subtype="html")
        return message

    async def send(self, notification: Notification) -> Delivery:
        if not notification.alerts:
            return _no_alerts()
        try:
            message = self.build_message(notification)
        except TemplateError as exc:
            return Delivery.failure(str(exc), retryable=False, template=exc.template)
        try:
            refused, _reply = await aiosmtplib.send(
                message,
                sender=parseaddr(self.sender)[1] or self.sender,
                recipients=self.recipients,
                hostname=self.host,
                port=self.port,
                username=self.username,
                password=self.password.reveal() if self.password else None,
                use_tls=self.tls == "implicit",
                start_tls=self.tls == "starttls",
                validate_certs=self.validate_certs,
                timeout=self.timeout,
            )
        except aiosmtplib.SMTPRecipientsRefused as exc:
            codes = [r.code for r in exc.recipients]
            detail = ", ".join(f"{r.recipient}: {r.code} {r.message}" for r in exc.recipients)
            return Delivery.failure(
                self._scrub(f"all recipients refused ({detail})"),
                retryable=any(400 <= c < 500 for c in codes),
                status_code=codes[0] if codes else None,
            )
        except aiosmtplib.SMTPResponseException as exc:
            return Delivery.failure(
                self._scrub(f"SMTP {exc.code}: {_excerpt(exc.message)}"),
                retryable=400 <= exc.code < 500,
                status_code=exc.code,
            )
        except (aiosmtplib.SMTPTimeoutError, TimeoutError):
            return Delivery.failure(f"SMTP timed out after {self.timeout:g} s", retryable=True)
        except (aiosmtplib.SMTPConnectError, aiosmtplib.SMTPServerDisconnected, OSError) as exc:
            return Delivery.failure(
                self._scrub(f"SMTP connection failed ({type(exc).__name__}): {exc}"),
                retryable=True,
            )
        except aiosmtplib.SMTPException as exc:  # e.g. STARTTLS or AUTH not offered: config
            return Delivery.failure(
                self._scrub(f"SMTP error ({type(exc).__name__}): {exc}"), retryable=False
            )
        meta: dict[str, Any] = {"message_id": message["Message-ID"]}
        if refused:
            meta["refused"] = {rcpt: f"{r.code} {r.message}" for rcpt, r in refused.items()}
        return Delivery.success(250, **meta)


# ---- Generic webhook


def _incident_document(incident: Incident) -> dict[str, Any]:
    return {
        "id": incident.id,
        "cluster": incident.cluster,
        "group": incident.group,
        "status": str(incident.status),
        "peak_status": str(incident.peak_status),
        "opened_at": iso8601(incident.opened_at),
        "closed_at": iso8601(incident.closed_at),
        "close_reason": incident.close_reason,
        "findings": [f.to_dict() for f in incident.findings],
    }


def _partition_document(p: PartitionResult) -> dict[str, Any]:
    return {
        "topic": p.topic,
        "partition": p.partition,
        "status": str(p.status),
        "committed_offset": p.committed_offset,
        "log_end_offset": p.log_end_offset,
        "log_start_offset": p.log_start_offset,
        "lag": p.current_lag,
        "lag_seconds": p.lag_seconds,
        "complete": p.complete,
    }


def _result_document(result: GroupResult, *, partitions: bool = True) -> dict[str, Any]:
    worst = result.max_lag
    document: dict[str, Any] = {
        "status": str(result.status),
        "complete": result.complete,
        "partial": result.partial,
        "evaluated_at": iso8601(result.evaluated_at),
        "group_state": result.group_state,
        "members": result.members,
        "total_lag": result.total_lag,
        "max_lag_seconds": result.max_lag_seconds,
        "max_lag_partition": None
        if worst is None
        else {"topic": worst.topic, "partition": worst.partition, "lag": worst.current_lag},
        "partition_count": result.partition_count,
    }
    if partitions:
        document["partitions"] = [_partition_document(p) for p in result.partitions]
    return document


def webhook_payload(notification: Notification) -> dict[str, Any]:
    """The generic webhook's default JSON body (``version`` "1"); see ``templates/README.md``.

    Top level: ``version``, ``notification_id``, ``receiver``, ``group_key``, ``status``
    (``firing`` unless every alert resolves), ``event`` (the headline event), ``created_at``,
    ``status_page_url``, ``alerts``. Each alert: ``event``, ``status``, ``incident`` (id,
    cluster, group, status, peak_status, opened_at, closed_at, close_reason, findings),
    ``result`` (the latest evaluation: status, complete, partial, evaluated_at, group_state,
    members, total_lag, max_lag_seconds, max_lag_partition, partition_count, partitions;
    ``null`` when the group is gone) and ``findings`` (the result's, else the incident's).
    Times are ISO-8601 UTC strings; unknown lags are ``null``, never 0.
    """
    event = headline_event(notification.alerts)
    return {
        "version": WEBHOOK_PAYLOAD_VERSION,
        "notification_id": notification.id,
        "receiver": notification.receiver,
        "group_key": notification.group_key,
        "status": "resolved" if event is Event.RESOLVE else "firing",
        "event": event.value,
        "created_at": iso8601(notification.created_at),
        "status_page_url": notification.status_page_url,
        "alerts": [
            {
                "event": alert.event.value,
                "status": "resolved" if alert.event is Event.RESOLVE else "firing",
                "incident": _incident_document(alert.incident),
                "result": None if alert.result is None else _result_document(alert.result),
                "findings": [f.to_dict() for f in alert_findings(alert)],
            }
            for alert in notification.alerts
        ],
    }


_CREDENTIAL_HEADER = re.compile(r"auth|token|key|secret|password|cookie|signature", re.I)


class Webhook(_HttpChannel):
    """A generic HTTP receiver (Alertmanager-style webhook, chat tools, ticketing glue).

    The body is :func:`webhook_payload` unless ``body_template`` names a template (a name the
    :class:`Templates` resolves, or a :class:`~pathlib.Path` to a file) that renders the JSON
    body from the usual context plus ``payload`` (the default document). A template that
    renders invalid JSON fails non-retryably with the template's name in the error.
    """

    def __init__(
        self,
        url: str | Secret,
        *,
        method: str = "POST",
        headers: Mapping[str, str | Secret] | None = None,
        basic_auth: tuple[str, str | Secret] | None = None,
        bearer_token: str | Secret | None = None,
        body_template: str | Path | None = None,
        name: str = "webhook",
        templates: Templates | None = None,
        timeout: float = 10.0,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        self.url = Secret(url)
        self.method = method.upper()
        # Header values that look like credentials are held as secrets even when given as str.
        self.headers: dict[str, str | Secret] = {
            k: Secret(v) if _CREDENTIAL_HEADER.search(k) else v for k, v in (headers or {}).items()
        }
        self.basic_auth = None if basic_auth is None else (basic_auth[0], Secret(basic_auth[1]))
        self.bearer_token = optional_secret(bearer_token)
        self.templates = templates or Templates()
        if isinstance(body_template, Path):
            template_name = body_template.as_posix()
            self.templates.add(template_name, body_template)
            self.body_template: str | None = template_name
        else:
            self.body_template = body_template
        secrets: list[Secret | None] = [self.url, self.bearer_token]
        secrets += [v for v in self.headers.values() if isinstance(v, Secret)]
        if self.basic_auth:
            secrets.append(self.basic_auth[1])
        super().__init__(name=name, timeout=timeout, secrets=secrets, transport=transport)

    def build_body(self, notification: Notification) -> Any:
        """The JSON document to send (raises :class:`TemplateError` for a bad template)."""
        payload = webhook_payload(notification)
        if self.body_template is None:
            return payload
        context = self.templates.context(notification, payload=payload)
        return self.templates.render_json(self.body_template, context)

    async def send(self, notification: Notification) -> Delivery:
        if not notification.alerts:
            return _no_alerts()
        try:
            body = self.build_body(notification)
        except TemplateError as exc:
            return self._template_failure(exc)
        headers = {k: v.reveal() if isinstance(v, Secret) else v for k, v in self.headers.items()}
        if self.bearer_token:
            headers["Authorization"] = f"Bearer {self.bearer_token.reveal()}"
        if self.basic_auth:
            headers["Authorization"] = basic_auth_header(
                self.basic_auth[0], self.basic_auth[1].reveal()
            )
        response = await self._request(self.method, self.url.reveal(), body=body, headers=headers)
        if isinstance(response, Delivery):
            return response
        return classify_http(response, self._scrub)


# ---- PagerDuty

PAGERDUTY_SEVERITIES = frozenset({"critical", "error", "warning", "info"})
PAGERDUTY_MAX_SUMMARY = 1024
PAGERDUTY_MAX_DEDUP_KEY = 255
PAGERDUTY_MAX_EVENT_BYTES = 512 * 1024


def pagerduty_dedup_key(incident_id: str) -> str:
    """The incident id, or — past PagerDuty's 255 characters — a stable prefix plus a hash."""
    if len(incident_id) <= PAGERDUTY_MAX_DEDUP_KEY:
        return incident_id
    digest = hashlib.sha256(incident_id.encode()).hexdigest()
    return incident_id[: PAGERDUTY_MAX_DEDUP_KEY - len(digest) - 1] + "-" + digest


def _event_size(event: Mapping[str, Any]) -> int:
    return len(jsonenc.dumps_bytes(event))


def _shrink_details(event: dict[str, Any], limit: int) -> None:
    """Trim ``custom_details`` until the event fits: partitions, evidence, then findings."""
    details = event["payload"]["custom_details"]
    if _event_size(event) <= limit:
        return
    details.pop("partitions", None)
    details["trimmed"] = True
    if _event_size(event) <= limit:
        return
    for finding in details.get("findings", []):
        finding["evidence"] = {}
    if _event_size(event) <= limit:
        return
    findings = details.get("findings", [])
    while findings and _event_size(event) > limit:
        keep = len(findings) // 2
        details["findings_omitted"] = details.get("findings_omitted", 0) + len(findings) - keep
        del findings[keep:]
    if _event_size(event) > limit:  # pathological names or messages: keep the essentials
        event["payload"]["custom_details"] = {
            key: details[key] for key in ("incident_id", "status", "trimmed") if key in details
        }


def pagerduty_events(
    notification: Notification,
    routing_key: str,
    *,
    templates: Templates,
    severity_map: Mapping[str, str],
    max_event_bytes: int = PAGERDUTY_MAX_EVENT_BYTES,
) -> list[dict[str, Any]]:
    """One Events API v2 event per alert: ``trigger`` for open/escalate/repeat, else ``resolve``.

    ``dedup_key`` is the incident id, so PagerDuty folds repeats and escalations into one
    incident and the resolve closes it. The summary comes from
    ``pagerduty/<event>.summary.j2`` (cut to 1024 characters); ``custom_details`` holds the
    findings with their evidence and the lagging partitions, trimmed to stay under 512 KB.
    """
    events: list[dict[str, Any]] = []
    for alert in notification.alerts:
        dedup_key = pagerduty_dedup_key(alert.incident.id)
        if alert.event is Event.RESOLVE:
            events.append(
                {"routing_key": routing_key, "event_action": "resolve", "dedup_key": dedup_key}
            )
            continue
        single = dataclasses.replace(notification, alerts=[alert])
        context = templates.context(single)
        summary = templates.render(Templates.name("pagerduty", alert.event, "summary"), context)
        status = alert_status(alert)
        severity = severity_map.get(str(status)) or severity_map.get(
            str(alert.incident.peak_status), "error"
        )
        result = alert.result
        details: dict[str, Any] = {
            "incident_id": alert.incident.id,
            "event": alert.event.value,
            "cluster": alert.incident.cluster,
            "group": alert.incident.group,
            "status": str(status),
            "peak_status": str(alert.incident.peak_status),
            "opened_at": iso8601(alert.incident.opened_at),
            "findings": [f.to_dict() for f in alert_findings(alert)],
        }
        if result is not None:
            details.update(
                total_lag=result.total_lag,
                max_lag_seconds=result.max_lag_seconds,
                behind=humanize_seconds(result.max_lag_seconds),
                complete=result.complete,
                group_state=result.group_state,
                members=result.members,
                partitions=[_partition_document(p) for p in result.partitions if p.status != "OK"],
            )
        else:
            details["gone"] = True
        event: dict[str, Any] = {
            "routing_key": routing_key,
            "event_action": "trigger",
            "dedup_key": dedup_key,
            "client": "notifier",
            "payload": {
                "summary": clip(" ".join(summary.split()), PAGERDUTY_MAX_SUMMARY),
                "source": alert.incident.cluster,
                "severity": severity,
                "timestamp": iso8601(result.evaluated_at if result else notification.created_at),
                "component": alert.incident.group,
                "group": alert.incident.cluster,
                "class": str(status),
                "custom_details": details,
            },
        }
        if notification.status_page_url:
            event["client_url"] = notification.status_page_url
            event["links"] = [{"href": notification.status_page_url, "text": "Status page"}]
        _shrink_details(event, max_event_bytes)
        events.append(event)
    return events


class PagerDuty(_HttpChannel):
    """PagerDuty Events API v2: one event per alert, deduplicated on the incident id.

    202 is success; 400 (an invalid event) is never retried; 429 and 5xx are. Events are sent in
    order and a retryable failure stops the batch — a retry resends all of them, which
    PagerDuty's dedup_key makes harmless.
    """

    def __init__(
        self,
        routing_key: str | Secret,
        *,
        url: str = "https://events.pagerduty.com/v2/enqueue",
        severity_map: Mapping[str, str] | None = None,
        name: str = "pagerduty",
        templates: Templates | None = None,
        timeout: float = 10.0,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        self.routing_key = Secret(routing_key)
        self.url = url
        self.severity_map = dict(severity_map or {"WARN": "warning", "ERR": "error"})
        wrong = {v for v in self.severity_map.values() if v not in PAGERDUTY_SEVERITIES}
        if wrong:
            raise ValueError(
                f"PagerDuty severities must be one of {sorted(PAGERDUTY_SEVERITIES)}, "
                f"not {sorted(wrong)}"
            )
        self.templates = templates or Templates()
        super().__init__(
            name=name, timeout=timeout, secrets=[self.routing_key], transport=transport
        )

    def build_events(self, notification: Notification) -> list[dict[str, Any]]:
        return pagerduty_events(
            notification,
            self.routing_key.reveal(),
            templates=self.templates,
            severity_map=self.severity_map,
        )

    async def send(self, notification: Notification) -> Delivery:
        if not notification.alerts:
            return _no_alerts()
        try:
            events = self.build_events(notification)
        except TemplateError as exc:
            return self._template_failure(exc)
        results: list[Delivery] = []
        sent: list[dict[str, Any]] = []
        for event in events:
            response = await self._request("POST", self.url, body=event)
            delivery = (
                response if isinstance(response, Delivery) else classify_http(response, self._scrub)
            )
            if not delivery.ok and delivery.error:
                delivery.error = f"{event['event_action']} {event['dedup_key']}: {delivery.error}"
            results.append(delivery)
            sent.append(
                {
                    "dedup_key": event["dedup_key"],
                    "event_action": event["event_action"],
                    "ok": delivery.ok,
                    "status_code": delivery.status_code,
                }
            )
            if not delivery.ok and delivery.retryable:
                break
        return _combine(results, events=sent)
