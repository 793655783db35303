"""The coordinator: scans every cluster on a schedule and runs the one-way pipeline.

    scan → window store → evaluate → transitions → sink (the notifier, or structured logs)

Each cluster has its own store, evaluator and transition tracker (clusters may scan at
different intervals), its own collector and its own checkpoint
(:class:`~notifier.service.cluster.ClusterState`). Every successful scan goes through
:mod:`notifier.rules.step`, the one step that replays and backtests run too (it also runs
Burrow's expire-group once a minute of scan time). APScheduler runs one scan job per cluster
(never two at once for the same cluster), a checkpoint job and a history-retention job, all in
the service's event loop.

The coordinator is the schedule and the lifecycle; each concern it drives is a module of its
own:

- :mod:`~notifier.service.ingest`: what a scan's outcome does: a successful one through the
  step to the sink and the history, a failed one counted, backed off, reported down;
- :mod:`~notifier.service.restore`: the windows restored when a cluster is first watched
  (checkpoint, then the history's scans after it, then the sink's open statuses);
- :mod:`~notifier.service.groupstate`: a group forgotten on request, or handed over in a fleet;
- :mod:`~notifier.service.reconfigure`: a reloaded config and rules taken while running;
- :mod:`~notifier.service.sink`: the :class:`TransitionSink` protocol and the log sink.

Each scan's time, the ``now`` of everything the rules judge, comes from the cluster's
:class:`~notifier.service.scanclock.ScanClock`: the wall clock's, except that a step of the
wall clock between two scans (NTP, an operator, a hypervisor) is not taken for elapsed time,
so it can neither store a scan out of order nor make a wait look longer than it was. The
history gets the same times as the windows.
"""

from __future__ import annotations

import asyncio
import logging
import signal
import time
import weakref
from collections.abc import Awaitable, Callable, Collection, Mapping, Sequence
from pathlib import Path
from typing import Any

from apscheduler.schedulers.asyncio import AsyncIOScheduler

from notifier.collect import ClusterUnreachableError, ScanError, ScanResult
from notifier.config import ClusterConfig, ServiceConfig
from notifier.diskfaults import WriteHealth, is_disk_error
from notifier.history import HistoryError, HistoryWriter
from notifier.rules import ClusterPipeline, RulesConfig, ScanColumns, WindowStore
from notifier.service import checkpoint, groupstate, ingest, reconfigure
from notifier.service.cluster import ClusterState, make_collector, utc_datetime, wall_clock_ms
from notifier.service.restore import restore
from notifier.service.sharing import GroupHandover, Share
from notifier.service.sink import TransitionSink
from notifier.types import GroupStatus, Transition

log = logging.getLogger(__name__)

EARLY_SCAN_SPACING = 0.25
"""A scan brought forward for shards taken over comes no sooner than this many scan intervals
after the cluster's latest sample (see :meth:`Coordinator.shards_taken_over`)."""

PUBLISH_TIMEOUT_S = 10.0
"""How long a scan waits at most (and never more than a scan interval) for its changes to reach
the state topic: a coordination cluster that does not answer must not stop the watching."""


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
        restored, replayed = (
            (False, 0)
            if self.fleet is not None
            else restore(
                state, self.checkpoint_path(state.config.name), self.rules, self.history, self.sink
            )
        )
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
            next_run_time=utc_datetime(wall_clock_ms()), misfire_grace_time=None,
        )  # fmt: skip

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

    # ---------------------------------------------------------------- reloading
    # (the work is :mod:`notifier.service.reconfigure`'s)

    def reload_rules(self) -> bool:
        """Re-read the rules file (SIGHUP). A bad file is reported and the running rules stay:
        a typo never takes the service down."""
        if self.rules_path is None:
            return False  # nothing to re-read: the rules were given, not loaded from a file
        return reconfigure.reload_rules(self, self.rules_path)

    def check_reload(self, config: ServiceConfig, rules: RulesConfig) -> list[tuple[str, str]]:
        """``(field, problem)`` for each change a running coordinator cannot take (the
        window settings size every stored window: they change on restart; so does the fleet
        this instance belongs to)."""
        return reconfigure.reload_problems(self.config, self.rules, config, rules)

    async def apply(self, config: ServiceConfig, rules: RulesConfig) -> list[str]:
        """Take a reloaded config and rules (checked with :meth:`check_reload` first): new
        rules for every cluster (each rule keeps its ``for`` state by name); clusters that left
        the config stop being scanned, their groups' open alerts resolve as gone and their
        checkpoint is saved; new clusters are restored and scanned at once; a cluster that
        stays keeps its windows, statuses and scan history, with a new collector when its
        connection settings changed and a new schedule when its interval did. Returns what
        changed, in words."""
        return await reconfigure.apply(self, config, rules)

    async def _quiet(self, name: str) -> None:
        """Wait for the cluster's scan under way, if any (it cannot take long: every scan
        ends within ``scan_timeout``)."""
        task = self._scan_task.get(name)
        if task is not None and task is not asyncio.current_task():
            await asyncio.wait([task])

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
                ingest.scan_failed(
                    state,
                    str(exc),
                    self.sink,
                    answered=not isinstance(exc, ClusterUnreachableError),
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
        now = wall_clock_ms()
        for name, state in self.clusters.items():
            if name in self._scan_task or time.monotonic() < state.retry_at:
                continue
            latest = state.store.last_scan_ts.get(name)
            spacing_ms = state.config.scan_interval * 1000 * EARLY_SCAN_SPACING
            at_ms = now if latest is None else max(now, latest + spacing_ms)
            job = self.scheduler.get_job(f"scan:{name}")
            if job is None or job.next_run_time is None:
                continue  # paused: stopping
            at = utc_datetime(at_ms)
            if job.next_run_time <= at:
                continue  # due by then anyway
            job.modify(next_run_time=at)
            log.info("scan brought forward for the shards taken over",
                     extra={"event": "fleet_scan_brought_forward", "cluster": name,
                            "shards": sorted(shards),
                            "in_s": round((at_ms - now) / 1000, 1)})  # fmt: skip

    def process(self, state: ClusterState, result: ScanResult) -> list[Transition]:
        """Ingest a successful scan, evaluate, and hand transitions to the sink."""
        transitions = ingest.ingest(state, result, self.sink, self.history)
        name = state.config.name
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
        if not groupstate.forget_group(state, group, topic, self.sink):
            return False
        if self.fleet is None:
            checkpoint.save(
                self.checkpoint_path(cluster), state.store, state.evaluator, state.tracker
            )
        return True

    # ---------------------------------------------------------------- reading (API, demo)

    def ready(self, now_ms: int | None = None) -> bool:
        """Every cluster scanned successfully within the last three intervals (none stale)."""
        now_ms = wall_clock_ms() if now_ms is None else now_ms
        return not any(s.stale(now_ms) for s in self.clusters.values())

    # ---------------------------------------------------------------- groups changing hands
    # (the :class:`~notifier.service.sharing.ShareHost` a fleet's share works with)

    def cluster_names(self) -> list[str]:
        return list(self.clusters)

    def store(self, cluster: str) -> WindowStore | None:
        state = self.clusters.get(cluster)
        return None if state is None else state.store

    def group_verdict(self, cluster: str, group: str) -> tuple[dict[str, list[int]], GroupStatus]:
        return groupstate.group_verdict(self.clusters[cluster], group)

    def export_group(self, cluster: str, group: str) -> GroupHandover | None:
        """What the next owner of a group needs of this coordinator's state (None: nothing
        kept): its windows and LEO tables, its rules' ``for`` state, its tracker status."""
        return groupstate.export_group(self.clusters[cluster], group)

    def import_group(self, handover: GroupHandover) -> None:
        """Take over a group another instance exported, in place of what was kept of it."""
        groupstate.import_group(self.clusters[handover.rows.cluster], handover)

    def replay_group_scan(
        self,
        scan: ScanColumns,
        rule_state: Mapping[str, Mapping[str, Sequence[int]]],
        statuses: Mapping[str, GroupStatus],
    ) -> None:
        """Ingest a scan another instance made of groups taken over (no evaluation: their
        rules' state and status after that scan are given, by group)."""
        groupstate.replay_group_scan(self.clusters[scan.cluster], scan, rule_state, statuses)

    def drop_groups(self, cluster: str, groups: Collection[str]) -> None:
        """Forget groups handed to another instance: no transition (they did not change,
        another instance watches them now)."""
        state = self.clusters.get(cluster)
        if state is None or not groups:
            return
        groupstate.drop_groups(state, groups)
