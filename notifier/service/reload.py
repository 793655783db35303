"""Reloading the whole configuration without a restart (SIGHUP, ``POST /-/reload``).

The config file and the rules file it names are read and checked as ``notifier run`` checks
them at start (the notify section, its templates, and the labels routes and inhibit rules name
included). Anything wrong and nothing changes: the error names the file, the field and what
was expected, and the service goes on with what it runs. Otherwise the coordinator takes the
clusters and rules (:meth:`~notifier.service.Coordinator.apply`) and the notifier its
receivers, routes, silences and inhibit rules (``reconfigure``: sends in flight finish first).

What a running process cannot change — where the API listens, the data directory, history,
logging and metrics settings, and adding or removing the whole ``notify:`` section — is applied
by the next restart: the answer names each such section under ``restart_needed`` and says
``reloaded: false`` (the file is not all running), while everything else was applied
(``applied: true``). The window settings of the rules refuse the reload instead, since the
rules would differ from the file.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from notifier.config import (
    ConfigError,
    NotifyConfig,
    ServiceConfig,
    unknown_labels,
)
from notifier.rules import load_rules
from notifier.service.coordinator import Coordinator

log = logging.getLogger(__name__)

RESTART_ONLY = ("data_dir", "history", "api", "logging", "metrics")
"""Service settings a running process keeps until it restarts (so does the presence of the
``notify`` section)."""


class ReloadableNotifier(Protocol):
    """What a reload needs of the notification pipeline (:class:`notifier.notify.Notifier`)."""

    def config_problems(self, config: NotifyConfig) -> list[str]: ...

    async def reconfigure(self, config: NotifyConfig) -> None: ...

    @property
    def config(self) -> NotifyConfig: ...


@dataclass(slots=True)
class ReloadResult:
    """What a reload did: ``ok`` (the file was accepted and what can change live changed),
    what ``changed``, which sections wait for a restart; or the ``error`` that stopped it."""

    ok: bool
    source: str
    changed: list[str] = field(default_factory=list)
    restart_needed: list[str] = field(default_factory=list)
    error: str | None = None

    @property
    def message(self) -> str:
        if not self.ok:
            return self.error or "not reloaded"
        if self.restart_needed:
            return (f"reloaded, except {', '.join(self.restart_needed)}: the running process "
                    "keeps the old settings there until it restarts")  # fmt: skip
        return "reloaded"

    def to_dict(self) -> dict[str, Any]:
        """The API's answer, in the envelope every endpoint uses (``error``, ``message``):
        ``reloaded`` only when the whole file now runs, ``applied`` when the reload went
        through for what can change live."""
        return {
            "error": not self.ok,
            "message": self.message,
            "reloaded": self.ok and not self.restart_needed,
            "applied": self.ok,
            "source": self.source,
            "changed": self.changed,
            "restart_needed": self.restart_needed,
        }


class ConfigReader(Protocol):
    """How the service config and its notify section are read with the registered channel
    kinds (:mod:`notifier.notify.config` is one): the notify stage's to give, since the
    service imports no stage that notifies."""

    def load_service_config(
        self, path: str | Path, environ: dict[str, str] | None = None
    ) -> ServiceConfig: ...

    def notify_section(self, service: ServiceConfig, source: str) -> NotifyConfig | None: ...


class Reloader:
    """Re-reads ``config_path`` and hands what changed to the coordinator and the notifier;
    one reload at a time. ``reader`` reads the file as ``notifier run`` does."""

    def __init__(
        self,
        config_path: Path,
        coordinator: Coordinator,
        notifier: ReloadableNotifier | None,
        running: ServiceConfig,
        reader: ConfigReader,
    ) -> None:
        self.config_path = Path(config_path)
        self.reader = reader
        self.coordinator = coordinator
        self.notifier = notifier
        self.running = running
        self.started = running
        """The config the process started with: what restart-only sections still run."""
        self._lock = asyncio.Lock()
        self.reloads = 0
        self.failures = 0

    async def reload(self, source: str = "api") -> ReloadResult:
        """Reload from the file; ``source`` says who asked (``sighup``, ``api``)."""
        async with self._lock:
            try:
                result = await self._reload(source)
            except Exception as exc:  # a bug must not take the service down with it
                log.exception("reload failed", extra={"event": "reload_failed"})
                result = ReloadResult(False, source, error=f"{type(exc).__name__}: {exc}")
            if result.ok:
                self.reloads += 1
                log.info(
                    "configuration reloaded",
                    extra={"event": "reloaded", "source": source, "changed": result.changed,
                           "restart_needed": result.restart_needed,
                           "config": str(self.config_path)},
                )  # fmt: skip
            else:
                self.failures += 1
                log.error(
                    "configuration not reloaded; the running configuration stays",
                    extra={"event": "reload_failed", "source": source, "error": result.error,
                           "config": str(self.config_path)},
                )  # fmt: skip
            return result

    async def _reload(self, source: str) -> ReloadResult:
        path = self.config_path
        try:
            service = self.reader.load_service_config(path)
            rules_path = service.rules_path(path.parent)
            rules = load_rules(rules_path)
            notify = self.reader.notify_section(service, str(path))
        except ConfigError as exc:
            return ReloadResult(False, source, error=str(exc))
        problems = self._problems(service, notify, rules)
        if problems:
            return ReloadResult(False, source, error=str(ConfigError(str(path), problems)))
        changed = await self.coordinator.apply(service, rules)
        notifier = self.notifier
        if notify is not None and notifier is not None and notify != notifier.config:
            await notifier.reconfigure(notify)
            changed.append("notify")
        restart = [
            name for name in RESTART_ONLY if getattr(service, name) != getattr(self.started, name)
        ]
        if (notify is None) != (notifier is None):
            restart.append("notify")
        self.running = service
        return ReloadResult(True, source, changed, restart)

    def _problems(
        self, service: ServiceConfig, notify: NotifyConfig | None, rules: Any
    ) -> list[tuple[str, str]]:
        problems = list(self.coordinator.check_reload(service, rules))
        if notify is not None:
            problems += unknown_labels(notify, rules)
            if self.notifier is not None:
                problems += [("notify.templates", p) for p in self.notifier.config_problems(notify)]
        return problems
