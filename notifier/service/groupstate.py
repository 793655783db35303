"""What the coordinator keeps of one group of a cluster, taken out or put in whole: forgotten on
request (Burrow's ``DELETE``), and handed over between the instances of a fleet (the
:class:`~notifier.service.sharing.ShareHost` side: exported, imported, replayed, dropped).

The API reads a cluster's ``groups``, ``owners`` and ``group_members``: they are replaced,
never changed in place.
"""

from __future__ import annotations

import logging
from collections.abc import Collection, Mapping, Sequence

from notifier.rules import ScanColumns
from notifier.service.cluster import ClusterState, wall_clock_ms
from notifier.service.sharing import GroupHandover
from notifier.service.sink import TransitionSink
from notifier.types import GroupStatus

log = logging.getLogger("notifier.service.coordinator")
"""The coordinator's: every part of it logs under one name, the one operators filter on."""


def forget_group(state: ClusterState, group: str, topic: str | None, sink: TransitionSink) -> bool:
    """Drop everything kept about the group (or, with ``topic``, its partitions of that topic)
    and resolve its open incident as ``removed`` (see
    :meth:`notifier.service.Coordinator.forget_group`); False when neither the windows nor the
    last scan know the group. The caller checkpoints the cluster."""
    cluster = state.config.name
    key = (cluster, group)
    if state.store.group_id(cluster, group) is None and group not in state.groups:
        return False
    evaluation = state.evaluation
    now = evaluation.now if evaluation is not None else wall_clock_ms()
    if topic is not None and _forget_group_topic(state, key, topic, now):
        return True
    state.store.remove_groups([key])
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
        sink.handle(transitions, wall_clock_ms())
    return True


def _forget_group_topic(state: ClusterState, key: tuple[str, str], topic: str, now: int) -> bool:
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
    return True


def group_verdict(state: ClusterState, group: str) -> tuple[dict[str, list[int]], GroupStatus]:
    """The group's rules' state and its tracked status after the latest scan."""
    cluster = state.config.name
    gid = state.store.group_id(cluster, group)
    rule_state = {} if gid is None else state.evaluator.export_group(gid)
    return rule_state, state.tracker.statuses.get((cluster, group), GroupStatus.OK)


def export_group(state: ClusterState, group: str) -> GroupHandover | None:
    """What the next owner of a group needs of this cluster's state (None: nothing kept): its
    windows and LEO tables, its rules' ``for`` state, its tracker status."""
    cluster = state.config.name
    rows = state.store.export_group(cluster, group)
    gid = state.store.group_id(cluster, group)
    if rows is None or gid is None:
        return None
    status = state.tracker.statuses.get((cluster, group), GroupStatus.OK)
    return GroupHandover(rows, state.evaluator.export_group(gid), status)


def import_group(state: ClusterState, handover: GroupHandover) -> None:
    """Take over a group another instance exported, in place of what was kept of it."""
    gid = state.store.import_group(handover.rows)
    _adopt(state, handover.rows.group, gid, handover.rule_state, handover.status)


def replay_group_scan(
    state: ClusterState,
    scan: ScanColumns,
    rule_state: Mapping[str, Mapping[str, Sequence[int]]],
    statuses: Mapping[str, GroupStatus],
) -> None:
    """Ingest a scan another instance made of groups taken over (no evaluation: their rules'
    state and status after that scan are given, by group)."""
    state.store.replay_scan(scan)
    for group, status in statuses.items():
        gid = state.store.group_id(scan.cluster, group)
        if gid is not None:
            _adopt(state, group, gid, rule_state.get(group, {}), status)


def _adopt(
    state: ClusterState,
    group: str,
    gid: int,
    rule_state: Mapping[str, Sequence[int]],
    status: GroupStatus,
) -> None:
    state.evaluator.import_group(gid, rule_state)
    state.tracker.hold((state.config.name, group), status)


def drop_groups(state: ClusterState, groups: Collection[str]) -> None:
    """Forget groups handed to another instance: no transition (they did not change, another
    instance watches them now)."""
    cluster = state.config.name
    state.store.remove_groups((cluster, group) for group in groups)
    state.tracker.forget((cluster, group) for group in groups)
    state.groups = {g: s for g, s in state.groups.items() if g not in groups}
    state.owners = {g: o for g, o in state.owners.items() if g not in groups}
    state.group_members = {g: n for g, n in state.group_members.items() if g not in groups}
