"""The running service: the coordinator that scans every cluster on a schedule and drives the
pipeline (scan → :mod:`notifier.rules.step` → transitions → sink), warm restarts and logs.

- :mod:`~notifier.service.coordinator`: the asyncio + APScheduler coordinator, the
  ``TransitionSink`` protocol the notifier implements, and the log sink.
- :mod:`~notifier.service.checkpoint`: windows, ``for`` state and open statuses in SQLite.
- :mod:`~notifier.service.logs`: structured logs (JSON lines or key=value).
- :mod:`~notifier.service.reload`: reloading the config and rules in place (SIGHUP,
  ``POST /-/reload``).
- :mod:`~notifier.service.sharing`: the one seam to a fleet of instances (protocols both ways).

Imports :mod:`notifier.collect`, :mod:`notifier.rules`, :mod:`notifier.history`,
:mod:`notifier.config` and :mod:`notifier.types`; never :mod:`notifier.notify` (the sink is a
protocol), the API nor :mod:`notifier.fleet` (which implements the sharing protocol).
"""

from notifier.service.coordinator import Coordinator, LogSink, TransitionSink, make_collector
from notifier.service.reload import ConfigReader, ReloadableNotifier, Reloader, ReloadResult

__all__ = [
    "ConfigReader",
    "Coordinator",
    "LogSink",
    "ReloadResult",
    "ReloadableNotifier",
    "Reloader",
    "TransitionSink",
    "make_collector",
]
