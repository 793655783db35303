"""Where the coordinator's transitions go: the :class:`TransitionSink` protocol the notifier
implements, and :class:`LogSink`, which logs them (and writes them as JSON lines) when the
service runs without a ``notify:`` section."""

from __future__ import annotations

import contextlib
import json
import logging
import os
from pathlib import Path
from typing import Any, Protocol

from notifier.diskfaults import WriteHealth
from notifier.types import GroupStatus, Transition

log = logging.getLogger("notifier.service.coordinator")
"""The coordinator's: every part of it logs under one name, the one operators filter on."""


class TransitionSink(Protocol):
    """The narrow interface between the coordinator and the notification pipeline."""

    def handle(self, transitions: list[Transition], now: int) -> None: ...

    def cluster_down(self, cluster: str, now: int, reason: str) -> None: ...

    def cluster_up(self, cluster: str, now: int) -> None: ...

    def cluster_removed(self, cluster: str, now: int) -> None:
        """The cluster left the config (a reload): its own down alert, if any, ends."""

    def open_statuses(self, cluster: str) -> dict[str, GroupStatus] | None:
        """The status of each group of ``cluster`` the sink holds open (None: it keeps no
        state, trust the checkpoint). Read once at start, to resume where the sink is."""


class LogSink:
    """Transitions as structured log lines, and optionally as JSON lines in a file."""

    def __init__(self, path: Path | None = None):
        self.path = path
        self.count = 0
        self.health = WriteHealth("transitions file", path or Path())
        self._unwritten: list[str] = []
        """Lines the disk refused: written, in order, before the next one."""

    def _write(self, record: dict[str, Any]) -> None:
        self.count += 1
        log.info("transition", extra={"event": "transition", **record})
        if self.path is None:
            return
        self._unwritten.append(json.dumps(record, default=str) + "\n")
        end = None
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            with self.path.open("ab") as handle:
                end = handle.tell()
                handle.write("".join(self._unwritten).encode())
        except OSError as exc:
            # A full or read-only disk must not fail the scan that handed the transition over:
            # the lines wait for the next write, and what part of them got in is cut off.
            if end is not None:
                with contextlib.suppress(OSError):
                    os.truncate(self.path, end)
            self.health.failed(exc, len(self._unwritten))
            return
        written, self._unwritten = len(self._unwritten), []
        self.health.succeeded(written if self.health.failing else 0)

    def warn_nobody_notified(self, config: str) -> None:
        """Say loudly, once, that the service runs without receivers (``notifier run`` with
        no ``notify:`` section): a service that alerts nobody looks healthy otherwise."""
        where = f"only logged and written to {self.path}" if self.path else "only logged"
        log.warning(
            f"NO RECEIVER CONFIGURED: nobody will be notified of any incident; transitions are "
            f"{where}. Add a notify: section to {config} (README, 'Notifications') and try it "
            f"with `notifier notify test --config {config}`",
            extra={"event": "no_receivers"},
        )

    def handle(self, transitions: list[Transition], now: int) -> None:
        for t in transitions:
            self._write(transition_record(t))

    def cluster_down(self, cluster: str, now: int, reason: str) -> None:
        self._write({"kind": "cluster_down", "cluster": cluster, "at": now, "reason": reason})

    def cluster_up(self, cluster: str, now: int) -> None:
        self._write({"kind": "cluster_up", "cluster": cluster, "at": now})

    def cluster_removed(self, cluster: str, now: int) -> None:
        self._write({"kind": "cluster_removed", "cluster": cluster, "at": now})

    def open_statuses(self, cluster: str) -> dict[str, GroupStatus] | None:
        return None  # a log remembers nothing: the checkpoint's statuses stand


def transition_record(t: Transition) -> dict[str, Any]:
    """A transition as a flat JSON-able record (logs, the demo's JSON-lines file)."""
    result = t.result
    return {
        "kind": "transition",
        "cluster": t.cluster,
        "group": t.group,
        "previous": t.previous.value,
        "current": t.current.value,
        "gone": t.gone,
        "reason": t.reason,
        "news": list(t.news),
        "at": t.at,
        "total_lag": result.total_lag if result else None,
        "max_lag_seconds": result.max_lag_seconds if result else None,
        "findings": [
            {
                "rule": f.rule,
                "status": f.status,
                "severity": f.severity.value,
                "topic": f.topic,
                "partition": f.partition,
                "message": f.message,
            }
            for f in (result.findings if result else [])
        ],
    }
