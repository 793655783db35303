"""A reloaded config and rules taken by the running coordinator (:mod:`notifier.service.reload`
reads and checks the files; SIGHUP without a config re-reads the rules alone).

Each rule keeps its ``for`` state by name; clusters that left the config stop being scanned,
their groups' open alerts resolve as gone and their checkpoint is saved; new clusters are
restored and scanned at once; a cluster that stays keeps its windows, statuses and scan
history, with a new collector when its connection settings changed and a new schedule when its
interval did. What a running coordinator cannot take (the window settings, the fleet) is
refused by :func:`reload_problems` before anything changes.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import TYPE_CHECKING

from notifier.config import ClusterConfig, ConfigError, ServiceConfig
from notifier.rules import ClusterPipeline, RulesConfig, load_rules
from notifier.service import checkpoint
from notifier.service.cluster import ClusterState, wall_clock_ms

if TYPE_CHECKING:
    from notifier.service.coordinator import Coordinator

log = logging.getLogger("notifier.service.coordinator")
"""The coordinator's: every part of it logs under one name, the one operators filter on."""

SCHEDULE_SETTINGS = frozenset({"scan_interval", "down_after_failures"})
"""A cluster's settings that change when and how often it is scanned, not its collector (every
other one changes how it connects or what it scans)."""


def reload_rules(coordinator: Coordinator, rules_path: Path) -> bool:
    """Re-read the rules file. A bad file is reported and the running rules stay: a typo never
    takes the service down."""
    try:
        rules = load_rules(rules_path)
        for state in coordinator.clusters.values():
            state.evaluator.reconfigure(rules)
    except (ConfigError, ValueError) as exc:
        log.error("rules not reloaded; keeping the running rules",
                  extra={"event": "rules_reload_failed", "error": str(exc)})  # fmt: skip
        return False
    coordinator.rules = rules
    log.info("rules reloaded", extra={"event": "rules_reloaded", "path": str(rules_path)})
    return True


def reload_problems(
    running: ServiceConfig,
    running_rules: RulesConfig,
    config: ServiceConfig,
    rules: RulesConfig,
) -> list[tuple[str, str]]:
    """``(field, problem)`` for each change a running coordinator cannot take."""
    if config.coordination != running.coordination:
        return [
            (
                "coordination",
                "changed: the fleet an instance belongs to (and whether it belongs to one) "
                "changes on restart only; put the running section back to reload the rest",
            )
        ]
    if rules.window != running_rules.window:
        changed = sorted(
            name
            for name in type(rules.window).model_fields
            if getattr(rules.window, name) != getattr(running_rules.window, name)
        )
        return [
            (
                "window",
                f"{', '.join(changed)} changed: window settings size every stored window "
                "and apply on restart only; put the running values back to reload the rest",
            )
        ]
    return []


async def apply(coordinator: Coordinator, config: ServiceConfig, rules: RulesConfig) -> list[str]:
    """Take ``config`` and ``rules`` (see the module's docstring); returns what changed, in
    words. Raises ValueError, changing nothing, for what :func:`reload_problems` refuses."""
    problems = reload_problems(coordinator.config, coordinator.rules, config, rules)
    if problems:
        raise ValueError("; ".join(f"{where}: {problem}" for where, problem in problems))
    changes: list[str] = []
    if rules != coordinator.rules:
        changes.append("rules")
    coordinator.rules = rules
    new = {cluster.name: cluster for cluster in config.clusters}
    for name in [n for n in coordinator.clusters if n not in new]:
        await _forget_cluster(coordinator, name)
        changes.append(f"cluster {name} removed")
    for name, cluster in new.items():
        state = coordinator.clusters.get(name)
        if state is None:
            _add_cluster(coordinator, cluster)
            changes.append(f"cluster {name} added")
            continue
        state.evaluator.reconfigure(rules)
        if cluster != state.config:
            await _change_cluster(coordinator, state, cluster)
            changes.append(f"cluster {name} changed")
    scheduler = coordinator.scheduler
    if (
        config.checkpoint_interval != coordinator.config.checkpoint_interval
        and scheduler
        and scheduler.get_job("checkpoint")
    ):
        scheduler.reschedule_job(
            "checkpoint", trigger="interval", seconds=config.checkpoint_interval
        )
        changes.append("checkpoint_interval")
    coordinator.config = config
    return changes


def _add_cluster(coordinator: Coordinator, cluster: ClusterConfig) -> None:
    state = ClusterState(
        config=cluster,
        pipeline=ClusterPipeline(coordinator.rules, cluster.scan_interval),
        collector=None,
    )
    coordinator.clusters[cluster.name] = state
    if coordinator.scheduler is not None:
        coordinator._begin_watching(state)
        coordinator._schedule_scans(cluster.name)


async def _forget_cluster(coordinator: Coordinator, name: str) -> None:
    state = coordinator.clusters[name]
    scheduler = coordinator.scheduler
    if scheduler is not None and scheduler.get_job(f"scan:{name}"):
        scheduler.remove_job(f"scan:{name}")
    await coordinator._quiet(name)
    del coordinator.clusters[name]
    now = wall_clock_ms()
    try:
        if coordinator.fleet is None:
            checkpoint.save(
                coordinator.checkpoint_path(name), state.store, state.evaluator, state.tracker
            )
    except Exception:
        log.exception("checkpoint failed", extra={"event": "checkpoint_failed",
                                                  "cluster": name})  # fmt: skip
    gone = state.tracker.gone(sorted(state.tracker.statuses), now)
    sink = coordinator.sink
    if gone:
        sink.handle(gone, now)
    if state.metrics.down:
        sink.cluster_removed(name, now)
    if state.collector is not None:
        await state.collector.close()
        state.collector = None
    log.info("cluster removed from the config: no longer watched",
             extra={"event": "cluster_removed", "cluster": name,
                    "alerts_resolved": len(gone)})  # fmt: skip


async def _change_cluster(
    coordinator: Coordinator, state: ClusterState, cluster: ClusterConfig
) -> None:
    old = state.config
    name = cluster.name
    connection_changed = (
        old.model_copy(update={k: getattr(cluster, k) for k in SCHEDULE_SETTINGS}) != cluster
    )
    if connection_changed and coordinator.scheduler is not None:
        await coordinator._quiet(name)
        if state.collector is not None:
            await state.collector.close()
        state.collector = coordinator._make_collector(cluster)
        coordinator._share(state)
        state.retry_at = 0.0
    state.config = cluster
    if cluster.scan_interval != old.scan_interval:
        interval_ms = round(cluster.scan_interval * 1000)
        # The store judges gaps by the interval; the scan clock resumes by it.
        state.store.scan_interval_ms = interval_ms
        state.store.max_gap_ms = int(state.store.settings.max_gap_factor * interval_ms)
        state.clock.resume_gap_ms = interval_ms
        if coordinator.scheduler is not None:
            coordinator.scheduler.reschedule_job(
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
