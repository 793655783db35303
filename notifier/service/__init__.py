"""The running service: the coordinator that scans every cluster on a schedule and drives the
pipeline (scan → :mod:`notifier.rules.step` → transitions → sink), warm restarts and logs.

- :mod:`~notifier.service.coordinator`: the asyncio + APScheduler coordinator: the schedule,
  the lifecycle, and the one class the rest of notifier drives.
- :mod:`~notifier.service.cluster`: what it keeps per cluster (``ClusterState``) and how a
  cluster's collector is made.
- :mod:`~notifier.service.ingest`: a scan's outcome: through the step to the sink and the
  history, or counted as failed, backed off, the cluster reported down.
- :mod:`~notifier.service.restore`: a cluster's windows restored when it is first watched
  (checkpoint, the history's scans after it, the sink's open statuses).
- :mod:`~notifier.service.groupstate`: one group's state forgotten on request or handed over.
- :mod:`~notifier.service.reconfigure`: a reloaded config and rules taken by the coordinator.
- :mod:`~notifier.service.sink`: the ``TransitionSink`` protocol the notifier implements, and
  the log sink.
- :mod:`~notifier.service.checkpoint`: windows, ``for`` state and open statuses in SQLite.
- :mod:`~notifier.service.logs`: structured logs (JSON lines or key=value).
- :mod:`~notifier.service.reload`: reloading the config and rules in place (SIGHUP,
  ``POST /-/reload``).
- :mod:`~notifier.service.sharing`: the one seam to a fleet of instances (protocols both ways).

Imports :mod:`notifier.collect`, :mod:`notifier.rules`, :mod:`notifier.history`,
:mod:`notifier.config` and :mod:`notifier.types`; never :mod:`notifier.notify` (the sink is a
protocol), the API nor :mod:`notifier.fleet` (which implements the sharing protocol).
"""

from notifier.service.cluster import make_collector
from notifier.service.coordinator import Coordinator
from notifier.service.reload import ConfigReader, ReloadableNotifier, Reloader, ReloadResult
from notifier.service.sink import LogSink, TransitionSink

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
