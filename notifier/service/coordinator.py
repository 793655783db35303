"""The coordinator: scans every cluster on a schedule and runs the one-way pipeline.

    scan → window store → evaluate → transitions → sink (the notifier, or structured logs)

Each cluster has its own store, evaluator and transition tracker (clusters may scan at
different intervals), its own collector and its own checkpoint. Every successful scan goes
through :mod:`notifier.rules.step`, the one step that replays and backtests run too (it also
runs Burrow's expire-group once a minute of scan time). APScheduler runs one scan job per
cluster (never two at once for the same cluster), a checkpoint job and a history-retention job,
all in the service's event loop.

A scan that fails is a gap: nothing is ingested, nothing is evaluated, so it can never become
an alert. It is logged and counted. A cluster no broker of which answers is tried again at every
tick: such a scan stops at its first connection attempts, as cheap as a probe, and the cluster
is scanned within one interval of answering again. A cluster that answers but whose scans fail
(a struggling one) is spared: the next tries back off exponentially, to at most
:data:`MAX_BACKOFF_INTERVALS` scan intervals. After
``down_after_failures`` failures in a row the cluster is reported down to the sink (which mutes
its groups and raises one cluster alert) until a scan succeeds again.

After a crash (:meth:`Coordinator.start`): the checkpoint gives the windows as they were when
it was saved; the scans the history recorded after it are replayed through the same step, so
the windows resume where the last process stopped and the gap is the downtime, not the time
since the last checkpoint (without a checkpoint yet, the scans of the span the windows hold are
replayed); and the open statuses are taken from the sink (the notifier's
incidents, committed with every transition), so a transition handled after the checkpoint is
neither repeated (no incident opened twice) nor missed (no incident left open).

Each scan's time, the ``now`` of everything the rules judge, comes from the cluster's
:class:`~notifier.service.scanclock.ScanClock`: the wall clock's, except that a step of the
wall clock between two scans (NTP, an operator, a hypervisor) is not taken for elapsed time,
so it can neither store a scan out of order nor make a wait look longer than it was. The
history gets the same times as the windows.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import signal
import time
import weakref
from collections.abc import Awaitable, Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import pyarrow as pa
import pyarrow.compute as pc
from apscheduler.schedulers.asyncio import AsyncIOScheduler

from notifier.collect import (
    ClusterCollector,
    ClusterLayout,
    ClusterUnreachableError,
    ScanError,
    ScanResult,
    collector_security,
)
from notifier.config import ClusterConfig, ServiceConfig
from notifier.diskfaults import WriteHealth, is_disk_error
from notifier.history import (
    HistoryEmptyError,
    HistoryError,
    HistoryNotFoundError,
    HistoryWriter,
    read_history,
)
from notifier.rules import (
    ClusterPipeline,
    Evaluation,
    Evaluator,
    LeoReset,
    RulesConfig,
    ScanColumns,
    TransitionTracker,
    WindowStore,
    scans,
    unavailable_samples,
)
from notifier.service import checkpoint
from notifier.service.scanclock import ScanClock
from notifier.service.sharing import STALE_AFTER_INTERVALS, GroupHandover, Share
from notifier.types import GroupMember, GroupStatus, Transition

log = logging.getLogger(__name__)

MAX_BACKOFF_INTERVALS = 3
"""Scans that fail although the cluster answers back off to at most this many scan intervals:
enough to spare a struggling cluster, short enough that its recovery is noticed within a few
intervals. (A cluster that does not answer at all is tried at every tick.)"""


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


EARLY_SCAN_SPACING = 0.25
"""A scan brought forward for shards taken over comes no sooner than this many scan intervals
after the cluster's latest sample (see :meth:`Coordinator.shards_taken_over`)."""

PUBLISH_TIMEOUT_S = 10.0
"""How long a scan waits at most (and never more than a scan interval) for its changes to reach
the state topic: a coordination cluster that does not answer must not stop the watching."""


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


@dataclass
class ScanMetrics:
    scans: int = 0
    failures: int = 0
    consecutive_failures: int = 0
    last_success_ms: int | None = None
    """When the last scan succeeded, by the wall clock."""
    last_error: str | None = None
    last_duration_s: float = 0.0
    last_requests: dict[str, int] = field(default_factory=dict)
    last_evaluate_s: float = 0.0
    down: bool = False


@dataclass
class ClusterState:
    """Everything the coordinator keeps for one cluster."""

    config: ClusterConfig
    pipeline: ClusterPipeline
    collector: Any
    metrics: ScanMetrics = field(default_factory=ScanMetrics)
    evaluation: Evaluation | None = None
    groups: dict[str, str] = field(default_factory=dict)
    """Every group the last scan listed, with its state (groups without partitions too)."""
    not_evaluated: dict[str, str] = field(default_factory=dict)
    """Groups the last scan listed but left out, and why (not authorized to describe them; a
    share or streams group, which the rules do not know)."""
    leo_resets: dict[tuple[str, int], LeoReset] = field(default_factory=dict)
    """The latest log-end offset reset of each (topic, partition) since the service started."""
    group_members: Mapping[str, int] = field(default_factory=dict)
    """Each group's number of members in the last scan."""
    owners: Mapping[str, Mapping[tuple[str, int], GroupMember]] = field(default_factory=dict)
    layout: ClusterLayout | None = None
    """The brokers and topics of the last scan's metadata."""
    """Per group, the member that owns each assigned partition as of the last scan."""
    retry_at: float = 0.0
    clock: ScanClock = field(init=False)
    """Stamps each scan with its time on the cluster's one timeline (see scanclock)."""

    def __post_init__(self) -> None:
        self.clock = ScanClock(self.config.name, round(self.config.scan_interval * 1000))

    @property
    def store(self) -> WindowStore:
        return self.pipeline.store

    def stale(self, now_ms: int) -> bool:
        """No successful scan within the last :data:`STALE_AFTER_INTERVALS` intervals."""
        last = self.metrics.last_success_ms
        return (
            last is None or now_ms - last > STALE_AFTER_INTERVALS * self.config.scan_interval * 1000
        )

    @property
    def evaluator(self) -> Evaluator:
        return self.pipeline.evaluator

    @property
    def tracker(self) -> TransitionTracker:
        return self.pipeline.tracker


class Coordinator:
    """Runs the service: scans, evaluation, transitions, history, checkpoints."""

    def __init__(
        self,
        config: ServiceConfig,
        rules: RulesConfig,
        data_dir: Path,
        sink: TransitionSink,
        collector_factory: Callable[[ClusterConfig], Any] | None = None,
        rules_path: Path | None = None,
    ):
        self.rules_path = rules_path
        self.config = config
        self.rules = rules
        self.data_dir = Path(data_dir)
        self.sink = sink
        self._make_collector = collector_factory or make_collector
        self.clusters: dict[str, ClusterState] = {}
        for cluster in config.clusters:
            self.clusters[cluster.name] = ClusterState(
                config=cluster,
                pipeline=ClusterPipeline(rules, cluster.scan_interval),
                collector=None,
            )
        self.history: HistoryWriter | None = None
        self.checkpoint_health: dict[str, WriteHealth] = {}
        self.scheduler: AsyncIOScheduler | None = None
        self.started_at = time.time()
        self._stopping = asyncio.Event()
        # The scheduler's tasks (asyncio.current_task in a scan job): their result is its own.
        self._scans_in_flight: set[asyncio.Task[Any]] = set()
        self._scanning = 0
        self._scan_listeners: list[weakref.WeakMethod[Callable[[str], None]]] = []
        self._scan_task: dict[str, asyncio.Task[Any]] = {}
        """The scan under way for each cluster (a reload waits for it before it swaps the
        cluster's collector or forgets the cluster)."""
        self.fleet: Share | None = None
        """This instance's share of the groups when it runs in a fleet (see :meth:`join_fleet`;
        ``/readyz`` and ``/metrics`` say what it owns)."""

    def join_fleet(self, share: Share) -> None:
        """Watch only the groups ``share`` says are this instance's, each scan under its
        hand-over lock, and give it each successful scan to publish. Before :meth:`start`: the
        SQLite checkpoint is then not used (the fleet keeps each group's state)."""
        self.fleet = share

    # ---------------------------------------------------------------- lifecycle

    def checkpoint_path(self, cluster: str) -> Path:
        return self.data_dir / "state" / f"{cluster}.sqlite"

    async def start(self) -> None:
        self.data_dir.mkdir(parents=True, exist_ok=True)
        if self.config.history.enabled:
            # First: it writes out the journals a crash left, which the replay below reads.
            self.history = HistoryWriter(
                self.data_dir / "history",
                self.config.history.roll_interval,
                self.config.history.retention_days,
            )
        for state in self.clusters.values():
            self._begin_watching(state)
        self.scheduler = AsyncIOScheduler(timezone="UTC")
        for name in self.clusters:
            self._schedule_scans(name)
        if self.fleet is None:  # a fleet keeps its groups' state
            self.scheduler.add_job(
                self.save_checkpoints, "interval", seconds=self.config.checkpoint_interval,
                id="checkpoint", max_instances=1, coalesce=True,
            )  # fmt: skip
        if self.history is not None:
            self.scheduler.add_job(
                self.history.prune, "interval", hours=1, id="history-retention", coalesce=True
            )
        self.scheduler.start()

    def _begin_watching(self, state: ClusterState) -> None:
        """Restore the cluster's windows and open its collector (at start, or when a reload
        adds it)."""
        restored, replayed = (False, 0) if self.fleet is not None else self._restore(state)
        # Not "ready" yet: that is said once a scan has succeeded (see process).
        log.info("watching cluster", extra={"event": "cluster_starting",
                                            "cluster": state.config.name,
                                            "bootstrap_servers": state.config.bootstrap_servers,
                                            "warm_restart": restored,
                                            "replayed_scans": replayed})  # fmt: skip
        state.collector = self._make_collector(state.config)
        self._share(state)

    def _share(self, state: ClusterState) -> None:
        """A fleet instance's collector lists every group and scans only its own (asking the
        share at each scan: what it owns changes with every hand-over)."""
        share = self.fleet
        if share is not None and state.collector is not None:
            name = state.config.name
            state.collector.group_filter = lambda group: share.owns(name, group)

    def _schedule_scans(self, name: str) -> None:
        assert self.scheduler is not None
        self.scheduler.add_job(
            self._scan_job, "interval", seconds=self.clusters[name].config.scan_interval,
            args=[name], id=f"scan:{name}", max_instances=1, coalesce=True,
            next_run_time=_now_datetime(), misfire_grace_time=None,
        )  # fmt: skip

    def _restore(self, state: ClusterState) -> tuple[bool, int]:
        """Checkpoint, then the scans the history holds after it, then the sink's open
        statuses; returns whether a checkpoint was loaded and how many scans were replayed."""
        name = state.config.name
        try:
            restored = checkpoint.load(
                self.checkpoint_path(name), state.store, state.evaluator, state.tracker
            )
        except checkpoint.CheckpointError:  # logged; drop whatever was half loaded
            state.pipeline = ClusterPipeline(self.rules, state.config.scan_interval)
            restored = False
        replayed = self._replay_history(state)
        held = self.sink.open_statuses(name)
        if held is not None:
            statuses = {(name, group): status for group, status in held.items()}
            if statuses != state.tracker.statuses:
                log.info(
                    "open statuses taken from the notifier (the checkpoint was older)",
                    extra={"event": "statuses_from_sink", "cluster": name,
                           "checkpoint": len(state.tracker.statuses), "open": len(statuses)},
                )  # fmt: skip
            state.tracker.statuses = statuses
        return restored, replayed

    def _replay_history(self, state: ClusterState) -> int:
        """Step the cluster's pipeline through the scans the history recorded after the
        checkpoint, or, without one (a ``kill -9`` before the first checkpoint, a damaged
        one), through those of the span the windows remember (:func:`_remembered_span_ms`).
        Their transitions were handled before the crash: they are dropped."""
        name = state.config.name
        if self.history is None:
            return 0
        since = state.store.last_scan_ts.get(name)
        start = since + 1 if since is not None else _now_ms() - _remembered_span_ms(state.store)
        try:
            table = read_history(self.history.root, start=start)
        except (HistoryEmptyError, HistoryNotFoundError):
            return 0
        except Exception as exc:  # a damaged file costs the replay, never the start
            log.warning("history after the checkpoint cannot be read; windows keep a gap",
                        extra={"event": "history_replay_failed", "cluster": name,
                               "error": str(exc)})  # fmt: skip
            return 0
        replayed = 0
        for scan in scans(table.filter(pc.equal(table.column("cluster"), name))):
            state.evaluation, _ = state.pipeline.step(scan)
            replayed += 1
        return replayed

    async def stop(self) -> None:
        """Finish or cancel the scans under way, flush history, checkpoint, close."""
        if self.scheduler is not None:
            self.scheduler.pause()  # no new scans; let the ones under way finish
        if self._scans_in_flight:
            _, pending = await asyncio.wait(self._scans_in_flight, timeout=5)
            for task in pending:
                task.cancel()
            await asyncio.gather(*pending, return_exceptions=True)
        if self.scheduler is not None:
            self.scheduler.shutdown(wait=False)
            self.scheduler = None
        if self.history is not None:
            try:
                await asyncio.to_thread(self.history.close)
            except HistoryError as exc:  # logged by the writer; the checkpoint still matters
                log.error("history not flushed at shutdown: %s", exc,
                          extra={"event": "history_close_failed"})  # fmt: skip
            self.history = None
        self.save_checkpoints()
        for state in self.clusters.values():
            if state.collector is not None:
                await state.collector.close()
                state.collector = None

    async def run_until_signalled(
        self,
        companions: Sequence[Any] = (),
        on_reload: Callable[[], Awaitable[Any]] | None = None,
    ) -> None:
        """``notifier run``: start, wait for SIGINT/SIGTERM, stop cleanly. ``companions`` (the
        notifier, the API server) start before the coordinator scans and stop after its last
        scan, checkpoint and history flush. SIGHUP runs ``on_reload`` (the whole config, see
        :mod:`notifier.service.reload`), or without one re-reads the rules file."""
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, self._stopping.set)
        reloads: set[asyncio.Future[Any]] = set()

        def reload() -> None:
            if on_reload is None:
                self.reload_rules()
                return
            task = asyncio.ensure_future(on_reload())
            reloads.add(task)
            task.add_done_callback(reloads.discard)

        if self.rules_path is not None or on_reload is not None:
            loop.add_signal_handler(signal.SIGHUP, reload)
        started = []
        try:
            for companion in companions:
                await companion.start()
                started.append(companion)
            await self.start()
            await self._stopping.wait()
        finally:
            log.info("shutting down", extra={"event": "shutdown"})
            await self.stop()
            for companion in reversed(started):
                await companion.stop()

    def reload_rules(self) -> bool:
        """Re-read the rules file (SIGHUP). A bad file is reported and the running rules stay:
        a typo never takes the service down."""
        from notifier.config import ConfigError
        from notifier.rules import load_rules

        if self.rules_path is None:
            return False  # nothing to re-read: the rules were given, not loaded from a file
        try:
            rules = load_rules(self.rules_path)
            for state in self.clusters.values():
                state.evaluator.reconfigure(rules)
        except (ConfigError, ValueError) as exc:
            log.error("rules not reloaded; keeping the running rules",
                      extra={"event": "rules_reload_failed", "error": str(exc)})  # fmt: skip
            return False
        self.rules = rules
        log.info("rules reloaded", extra={"event": "rules_reloaded", "path": str(self.rules_path)})
        return True

    def check_reload(self, config: ServiceConfig, rules: RulesConfig) -> list[tuple[str, str]]:
        """``(field, problem)`` for each change a running coordinator cannot take (the
        window settings size every stored window: they change on restart; so does the fleet
        this instance belongs to)."""
        if config.coordination != self.config.coordination:
            return [
                (
                    "coordination",
                    "changed: the fleet an instance belongs to (and whether it belongs to one) "
                    "changes on restart only; put the running section back to reload the rest",
                )
            ]
        if rules.window != self.rules.window:
            changed = sorted(
                name
                for name in type(rules.window).model_fields
                if getattr(rules.window, name) != getattr(self.rules.window, name)
            )
            return [
                (
                    "window",
                    f"{', '.join(changed)} changed: window settings size every stored window "
                    "and apply on restart only; put the running values back to reload the rest",
                )
            ]
        return []

    async def apply(self, config: ServiceConfig, rules: RulesConfig) -> list[str]:
        """Take a reloaded config and rules (checked with :meth:`check_reload` first): new
        rules for every cluster (each rule keeps its ``for`` state by name); clusters that left
        the config stop being scanned, their groups' open alerts resolve as gone and their
        checkpoint is saved; new clusters are restored and scanned at once; a cluster that
        stays keeps its windows, statuses and scan history, with a new collector when its
        connection settings changed and a new schedule when its interval did. Returns what
        changed, in words."""
        problems = self.check_reload(config, rules)
        if problems:
            raise ValueError("; ".join(f"{where}: {problem}" for where, problem in problems))
        changes: list[str] = []
        if rules != self.rules:
            changes.append("rules")
        self.rules = rules
        new = {cluster.name: cluster for cluster in config.clusters}
        for name in [n for n in self.clusters if n not in new]:
            await self._forget_cluster(name)
            changes.append(f"cluster {name} removed")
        for name, cluster in new.items():
            state = self.clusters.get(name)
            if state is None:
                self._add_cluster(cluster)
                changes.append(f"cluster {name} added")
                continue
            state.evaluator.reconfigure(rules)
            if cluster != state.config:
                await self._change_cluster(state, cluster)
                changes.append(f"cluster {name} changed")
        if (
            config.checkpoint_interval != self.config.checkpoint_interval
            and self.scheduler
            and self.scheduler.get_job("checkpoint")
        ):
            self.scheduler.reschedule_job(
                "checkpoint", trigger="interval", seconds=config.checkpoint_interval
            )
            changes.append("checkpoint_interval")
        self.config = config
        return changes

    def _add_cluster(self, cluster: ClusterConfig) -> None:
        state = ClusterState(
            config=cluster,
            pipeline=ClusterPipeline(self.rules, cluster.scan_interval),
            collector=None,
        )
        self.clusters[cluster.name] = state
        if self.scheduler is not None:
            self._begin_watching(state)
            self._schedule_scans(cluster.name)

    async def _quiet(self, name: str) -> None:
        """Wait for the cluster's scan under way, if any (it cannot take long: every scan
        ends within ``scan_timeout``)."""
        task = self._scan_task.get(name)
        if task is not None and task is not asyncio.current_task():
            await asyncio.wait([task])

    async def _forget_cluster(self, name: str) -> None:
        state = self.clusters[name]
        if self.scheduler is not None and self.scheduler.get_job(f"scan:{name}"):
            self.scheduler.remove_job(f"scan:{name}")
        await self._quiet(name)
        del self.clusters[name]
        now = _now_ms()
        try:
            if self.fleet is None:
                checkpoint.save(
                    self.checkpoint_path(name), state.store, state.evaluator, state.tracker
                )
        except Exception:
            log.exception("checkpoint failed", extra={"event": "checkpoint_failed",
                                                      "cluster": name})  # fmt: skip
        gone = state.tracker.gone(sorted(state.tracker.statuses), now)
        if gone:
            self.sink.handle(gone, now)
        if state.metrics.down:
            self.sink.cluster_removed(name, now)
        if state.collector is not None:
            await state.collector.close()
            state.collector = None
        log.info("cluster removed from the config: no longer watched",
                 extra={"event": "cluster_removed", "cluster": name,
                        "alerts_resolved": len(gone)})  # fmt: skip

    async def _change_cluster(self, state: ClusterState, cluster: ClusterConfig) -> None:
        old = state.config
        name = cluster.name
        same_timing = {"scan_interval", "down_after_failures"}
        connection_changed = (
            old.model_copy(update={k: getattr(cluster, k) for k in same_timing}) != cluster
        )
        if connection_changed and self.scheduler is not None:
            await self._quiet(name)
            if state.collector is not None:
                await state.collector.close()
            state.collector = self._make_collector(cluster)
            self._share(state)
            state.retry_at = 0.0
        state.config = cluster
        if cluster.scan_interval != old.scan_interval:
            interval_ms = round(cluster.scan_interval * 1000)
            # The store judges gaps by the interval; the scan clock resumes by it.
            state.store.scan_interval_ms = interval_ms
            state.store.max_gap_ms = int(state.store.settings.max_gap_factor * interval_ms)
            state.clock.resume_gap_ms = interval_ms
            if self.scheduler is not None:
                self.scheduler.reschedule_job(
                    f"scan:{name}", trigger="interval", seconds=cluster.scan_interval
                )
        log.info(
            "cluster settings changed",
            extra={
                "event": "cluster_changed",
                "cluster": name,
                "new_collector": connection_changed,
            },
        )

    def save_checkpoints(self) -> None:
        if self.fleet is not None:
            return  # the fleet keeps its groups' state, not a local checkpoint
        for name, state in self.clusters.items():
            path = self.checkpoint_path(name)
            health = self.checkpoint_health.get(name)
            if health is None or health.path != path:
                health = self.checkpoint_health[name] = WriteHealth(
                    "checkpoint", path, extra={"cluster": name}
                )
            try:
                seconds = checkpoint.save(path, state.store, state.evaluator, state.tracker)
                log.debug("checkpoint saved", extra={"cluster": name, "seconds": round(seconds, 3)})
                health.succeeded(1 if health.failing else 0)
            except Exception as exc:
                if is_disk_error(exc):
                    # The state is in memory: the next checkpoint writes it whole (said once,
                    # and in /readyz meanwhile; a restart now would start from an older one).
                    health.failed(exc, 1)
                    continue
                log.exception(
                    "checkpoint failed", extra={"event": "checkpoint_failed", "cluster": name}
                )

    def write_health(self) -> list[WriteHealth]:
        """The state this coordinator writes (checkpoints, history) and whether the disk
        takes it, for ``/readyz`` and ``/metrics``."""
        health = [self.checkpoint_health[name] for name in sorted(self.checkpoint_health)]
        sink_health = getattr(self.sink, "health", None)
        if isinstance(sink_health, WriteHealth):
            health.append(sink_health)
        return [h for h in health if h.failing or h.errors]

    # ---------------------------------------------------------------- scanning

    async def _scan_job(self, cluster: str) -> None:
        task = asyncio.current_task()
        if task is not None:
            self._scans_in_flight.add(task)
            self._scan_task[cluster] = task
        try:
            if cluster in self.clusters:  # a reload may have removed it meanwhile
                await self.scan_once(cluster)
        finally:
            if task is not None:
                self._scans_in_flight.discard(task)
                if self._scan_task.get(cluster) is task:
                    del self._scan_task[cluster]

    @property
    def scanning(self) -> bool:
        """Whether a scan (or what follows it: evaluation, transitions) is under way: the API,
        on the same event loop, gives way to it."""
        return self._scanning > 0

    async def scan_once(self, cluster: str) -> list[Transition]:
        """One scan of one cluster and everything downstream of it; returns the transitions."""
        state = self.clusters[cluster]
        if time.monotonic() < state.retry_at:
            return []  # backing off after failures
        share = self.fleet
        if share is None:
            return (await self._scan(state))[1]
        async with share.handover:  # a fleet instance's groups never change hands mid-scan
            result, transitions = await self._scan(state)
            if result is not None:
                await self._publish(share, state, result)
            return transitions

    async def _scan(self, state: ClusterState) -> tuple[ScanResult | None, list[Transition]]:
        """Scan, then ingest and evaluate; (None, []) when the scan failed."""
        self._scanning += 1
        try:
            try:
                result = await state.collector.scan()
            except ScanError as exc:
                self._scan_failed(
                    state, str(exc), answered=not isinstance(exc, ClusterUnreachableError)
                )
                return None, []
            return result, self.process(state, result)
        finally:
            self._scanning -= 1

    async def _publish(self, share: Share, state: ClusterState, result: ScanResult) -> None:
        """A fleet instance's scan, made known to the fleet within a bounded time."""
        name = state.config.name
        try:
            async with asyncio.timeout(min(PUBLISH_TIMEOUT_S, state.config.scan_interval)):
                await share.publish(name, result)
        except Exception as exc:  # the watching goes on; the next owner loads older state
            log.warning("scan not published to the fleet",
                        extra={"event": "fleet_publish_failed", "cluster": name,
                               "error": str(exc) or type(exc).__name__})  # fmt: skip

    def shards_taken_over(self, shards: frozenset[int]) -> None:
        """The fleet membership's hook, once ``shards`` were taken over and their state loaded:
        each cluster's next scan is brought forward rather than left to its tick, which may be
        most of an interval away (after a ``kill -9``, the hand-over then costs the session
        timeout and the rebalance, not a scan interval more). The schedule goes on from that
        scan. It comes at once, or a quarter interval after the cluster's latest sample (this
        instance's own last scan, or the old owner's last scan of a shard just loaded, when
        later) if that is later: no sample comes closer than that to the one before it.
        Left as it is when a scan of the cluster is under way or waits for the hand-over (it
        takes the new shards), and while the cluster backs off after failures."""
        if self.scheduler is None or not shards:
            return
        now_ms = _now_ms()
        for name, state in self.clusters.items():
            if name in self._scan_task or time.monotonic() < state.retry_at:
                continue
            latest = state.store.last_scan_ts.get(name)
            spacing_ms = state.config.scan_interval * 1000 * EARLY_SCAN_SPACING
            at_ms = now_ms if latest is None else max(now_ms, latest + spacing_ms)
            job = self.scheduler.get_job(f"scan:{name}")
            if job is None or job.next_run_time is None:
                continue  # paused: stopping
            at = _datetime(at_ms)
            if job.next_run_time <= at:
                continue  # due by then anyway
            job.modify(next_run_time=at)
            log.info("scan brought forward for the shards taken over",
                     extra={"event": "fleet_scan_brought_forward", "cluster": name,
                            "shards": sorted(shards),
                            "in_s": round((at_ms - now_ms) / 1000, 1)})  # fmt: skip

    def _scan_failed(self, state: ClusterState, error: str, answered: bool = True) -> None:
        """``answered``: whether a broker answered before the scan failed (see the module's
        docstring: a cluster that answers backs off, one that does not is tried every tick)."""
        m = state.metrics
        m.failures += 1
        m.consecutive_failures += 1
        m.last_error = error
        interval = state.config.scan_interval
        backoff = interval
        if answered:
            backoff *= min(MAX_BACKOFF_INTERVALS, 2 ** (m.consecutive_failures - 1))
        state.retry_at = time.monotonic() + backoff - interval
        name = state.config.name
        log.warning(
            "scan failed", extra={"event": "scan_failed", "cluster": name, "error": error,
                                  "consecutive_failures": m.consecutive_failures,
                                  "next_try_s": round(backoff, 1)},
        )  # fmt: skip
        if not m.down and m.consecutive_failures >= state.config.down_after_failures:
            m.down = True
            self.sink.cluster_down(name, _now_ms(), error)

    def process(self, state: ClusterState, result: ScanResult) -> list[Transition]:
        """Ingest a successful scan, evaluate, and hand transitions to the sink."""
        name = state.config.name
        m = state.metrics
        m.scans += 1
        if m.scans == 1:
            log.info(
                "cluster ready: first scan succeeded",
                extra={"event": "cluster_ready", "cluster": name,
                       "groups": len(result.group_states), "rows": result.samples.num_rows,
                       "duration_s": round(result.duration_s, 3)},
            )  # fmt: skip
        m.consecutive_failures = 0
        m.last_success_ms = result.ts
        m.last_duration_s = result.duration_s
        m.last_requests = dict(result.requests)
        state.retry_at = 0.0
        if m.down:
            m.down = False
            self.sink.cluster_up(name, result.ts)

        started = time.perf_counter()
        ts = state.clock.stamp(result.ts, result.elapsed_at, state.store.last_scan_ts.get(name))
        samples = result.samples if ts == result.ts else _restamped(result.samples, ts)
        scan = ScanColumns.from_table(samples, name, ts)
        state.evaluation, transitions = state.pipeline.step(
            scan, result.group_states, result.unavailable_partitions
        )
        m.last_evaluate_s = time.perf_counter() - started
        state.groups = dict(result.group_states)
        state.not_evaluated = dict(result.skipped_groups)
        state.group_members, state.owners = result.group_members, result.owners
        state.layout = result.layout
        for transition in transitions:
            owners = result.owners.get(transition.group)
            if transition.result is not None and owners:
                transition.result.attach_owners(owners)
        for reset in state.store.leo_resets:
            self._leo_reset(state, reset)
        if transitions:
            # The sink schedules on the wall clock; the transitions carry their scan time.
            self.sink.handle(transitions, result.ts)
        if self.history is not None:
            # The windows the step kept for partitions the scan could not read go in too, so
            # that a replay of the history keeps them as well.
            lost = unavailable_samples(state.store, name, ts, result.unavailable_partitions)
            recorded = pa.concat_tables([samples, lost]) if lost.num_rows else samples
            if recorded.num_rows:
                self.history.append(recorded)
        self._tell_scan_listeners(name)
        log.debug(
            "scan", extra={"event": "scan", "cluster": name, "rows": result.samples.num_rows,
                           "duration_s": round(result.duration_s, 3),
                           "requests": result.total_requests, "transitions": len(transitions)},
        )  # fmt: skip
        return transitions

    def add_scan_listener(self, listener: Callable[[str], None]) -> None:
        """Call ``listener(cluster)`` after each successful scan has been evaluated (the API
        starts working out what it shows of the scan at once, rather than at the first request
        after it). ``listener`` is a bound method, held weakly: an app that is dropped is no
        longer told."""
        self._scan_listeners.append(weakref.WeakMethod(listener))

    def _tell_scan_listeners(self, cluster: str) -> None:
        alive = []
        for ref in self._scan_listeners:
            listener = ref()
            if listener is not None:
                alive.append(ref)
                listener(cluster)
        self._scan_listeners = alive

    @staticmethod
    def _leo_reset(state: ClusterState, reset: LeoReset) -> None:
        state.leo_resets[(reset.topic, reset.partition)] = reset
        log.warning(
            "log-end offset went backwards: the partition's log started over (topic recreated "
            "or cluster rebuilt); lag in seconds starts again from this scan",
            extra={"event": "log_end_offset_reset", "cluster": reset.cluster,
                   "topic": reset.topic, "partition": reset.partition,
                   "previous_log_end_offset": reset.previous, "log_end_offset": reset.current},
        )  # fmt: skip

    # ---------------------------------------------------------------- forgetting a group

    def forget_group(self, cluster: str, group: str, topic: str | None = None) -> bool:
        """Burrow's ``DELETE /v3/kafka/{cluster}/consumer/{group}``: drop everything kept about
        the group (windows, commit rings, evidence, rule state), resolve its open incident as
        ``removed``, and checkpoint the cluster at once, so a restart does not bring the group
        back. A group still consumed is listed by the next scan and starts over as a new group:
        its windows fill again before any rule may alert on it (the complete gate).

        With ``topic`` (``DELETE .../consumer/{group}/topic/{topic}``), only the group's
        partitions of that topic are forgotten, as Burrow does; a group left with no partition
        is forgotten whole. A topic still committed to comes back on the next scan.

        Returns False when neither the windows nor the last scan know the group (nothing
        changes). Raises KeyError for a cluster that is not configured."""
        state = self.clusters[cluster]
        key = (cluster, group)
        if state.store.group_id(cluster, group) is None and group not in state.groups:
            return False
        evaluation = state.evaluation
        now = evaluation.now if evaluation is not None else _now_ms()
        if topic is not None and self._forget_group_topic(state, key, topic, now):
            return True
        state.store.remove_groups([key])
        # The API reads these: they are replaced, never changed in place.
        state.groups = {g: s for g, s in state.groups.items() if g != group}
        state.owners = {g: o for g, o in state.owners.items() if g != group}
        state.group_members = {g: n for g, n in state.group_members.items() if g != group}
        # Evaluated again at the same time over the same windows, every other group's verdict
        # (and its for/keep_firing state) comes out as it was; the forgotten one is absent.
        state.evaluation = state.evaluator.evaluate(now) if state.store.alive_rows().size else None
        transitions = state.tracker.gone([key], now)
        for transition in transitions:
            transition.reason = "removed"
        log.warning(
            "consumer group forgotten on request; it comes back as a new group if the cluster "
            "still lists it", extra={"event": "group_removed", "cluster": cluster, "group": group,
                                     "resolved": len(transitions)},
        )  # fmt: skip
        if transitions:
            self.sink.handle(transitions, _now_ms())
        if self.fleet is None:
            checkpoint.save(
                self.checkpoint_path(cluster), state.store, state.evaluator, state.tracker
            )
        return True

    def _forget_group_topic(
        self, state: ClusterState, key: tuple[str, str], topic: str, now: int
    ) -> bool:
        """Forget the group's partitions of ``topic``; False (nothing done) when that would
        leave the group without partitions, which forgets it whole."""
        store = state.store
        gid = store.group_id(*key)
        rows = store.alive_rows()
        if gid is None:
            return False
        mine = [store.row_key_of(r) for r in rows[store.row_group[rows] == gid].tolist()]
        if all(t == topic for (_c, _g, t, _p) in mine):
            return False
        forgotten = store.remove_group_topic(key, topic)
        group = key[1]
        state.owners = {
            g: ({tp: m for tp, m in owned.items() if tp[0] != topic} if g == group else owned)
            for g, owned in state.owners.items()
        }
        state.evaluation = state.evaluator.evaluate(now)
        log.warning(
            "a consumer group's topic forgotten on request; it comes back if the group still "
            "commits to it", extra={"event": "group_topic_removed", "cluster": key[0],
                                    "group": group, "topic": topic, "partitions": forgotten},
        )  # fmt: skip
        if self.fleet is None:
            checkpoint.save(
                self.checkpoint_path(key[0]), state.store, state.evaluator, state.tracker
            )
        return True

    # ---------------------------------------------------------------- reading (API, demo)

    def ready(self, now_ms: int | None = None) -> bool:
        """Every cluster scanned successfully within the last three intervals (none stale)."""
        now_ms = _now_ms() if now_ms is None else now_ms
        return not any(s.stale(now_ms) for s in self.clusters.values())

    # ---------------------------------------------------------------- groups changing hands
    # (the :class:`~notifier.service.sharing.ShareHost` a fleet's share works with)

    def cluster_names(self) -> list[str]:
        return list(self.clusters)

    def store(self, cluster: str) -> WindowStore | None:
        state = self.clusters.get(cluster)
        return None if state is None else state.store

    def group_verdict(self, cluster: str, group: str) -> tuple[dict[str, list[int]], GroupStatus]:
        state = self.clusters[cluster]
        gid = state.store.group_id(cluster, group)
        rule_state = {} if gid is None else state.evaluator.export_group(gid)
        return rule_state, state.tracker.statuses.get((cluster, group), GroupStatus.OK)

    def export_group(self, cluster: str, group: str) -> GroupHandover | None:
        """What the next owner of a group needs of this coordinator's state (None: nothing
        kept): its windows and LEO tables, its rules' ``for`` state, its tracker status."""
        state = self.clusters[cluster]
        rows = state.store.export_group(cluster, group)
        gid = state.store.group_id(cluster, group)
        if rows is None or gid is None:
            return None
        status = state.tracker.statuses.get((cluster, group), GroupStatus.OK)
        return GroupHandover(rows, state.evaluator.export_group(gid), status)

    def import_group(self, handover: GroupHandover) -> None:
        """Take over a group another instance exported, in place of what was kept of it."""
        state = self.clusters[handover.rows.cluster]
        gid = state.store.import_group(handover.rows)
        self._adopt(state, handover.rows.group, gid, handover.rule_state, handover.status)

    def replay_group_scan(
        self,
        scan: ScanColumns,
        rule_state: Mapping[str, Mapping[str, Sequence[int]]],
        statuses: Mapping[str, GroupStatus],
    ) -> None:
        """Ingest a scan another instance made of groups taken over (no evaluation: their
        rules' state and status after that scan are given, by group)."""
        state = self.clusters[scan.cluster]
        state.store.replay_scan(scan)
        for group, status in statuses.items():
            gid = state.store.group_id(scan.cluster, group)
            if gid is not None:
                self._adopt(state, group, gid, rule_state.get(group, {}), status)

    @staticmethod
    def _adopt(
        state: ClusterState,
        group: str,
        gid: int,
        rule_state: Mapping[str, Sequence[int]],
        status: GroupStatus,
    ) -> None:
        state.evaluator.import_group(gid, rule_state)
        key = (state.config.name, group)
        if status in (GroupStatus.OK, GroupStatus.NOTFOUND):
            state.tracker.statuses.pop(key, None)
        else:
            state.tracker.statuses[key] = status

    def drop_groups(self, cluster: str, groups: Collection[str]) -> None:
        """Forget groups handed to another instance: no transition (they did not change,
        another instance watches them now)."""
        state = self.clusters.get(cluster)
        if state is None or not groups:
            return
        state.store.remove_groups((cluster, group) for group in groups)
        for group in groups:
            state.tracker.statuses.pop((cluster, group), None)
        # The API reads these: they are replaced, never changed in place.
        state.groups = {g: s for g, s in state.groups.items() if g not in groups}
        state.owners = {g: o for g, o in state.owners.items() if g not in groups}
        state.group_members = {g: n for g, n in state.group_members.items() if g not in groups}


def make_collector(cluster: ClusterConfig) -> ClusterCollector:
    return ClusterCollector(
        cluster.bootstrap_servers,
        cluster=cluster.name,
        client_id=cluster.client_id,
        request_timeout_ms=int(cluster.request_timeout * 1000),
        scan_timeout_ms=int(cluster.scan_timeout * 1000),
        metadata_max_age_ms=int(cluster.metadata_max_age * 1000),
        group_allow=cluster.group_allow or None,
        group_deny=cluster.group_deny or None,
        describe_batch_size=cluster.describe_batch_size,
        offset_fetch_concurrency=cluster.offset_fetch_concurrency,
        offset_fetch_batch_size=cluster.offset_fetch_batch_size,
        **collector_security(cluster.security),
    )


def _restamped(samples: pa.Table, ts: int) -> pa.Table:
    """The scan's rows with their time replaced by its scan time, so that the history replays
    exactly what the windows saw."""
    index = samples.schema.get_field_index("ts")
    column = samples.schema.field(index)
    times = pa.repeat(pa.scalar(ts, column.type), samples.num_rows)
    return samples.set_column(index, column, times)


def _remembered_span_ms(store: WindowStore) -> int:
    """How far back the scans reach that a running service's windows are built from: a sample
    window holds ``intervals`` scans, a LEO table ``lag_time_points`` (the commit rings keep
    older changes too; replaying more than this would cost every start without a checkpoint
    a read of up to ``retention_days`` of history)."""
    settings = store.settings
    return max(settings.intervals, settings.lag_time_points) * store.scan_interval_ms


def _now_ms() -> int:
    return int(time.time() * 1000)


def _now_datetime():
    return _datetime(_now_ms())


def _datetime(epoch_ms: float):
    from datetime import UTC, datetime

    return datetime.fromtimestamp(epoch_ms / 1000, UTC)
