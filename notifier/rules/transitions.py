"""Transitions: gated group statuses turned into OK→WARN→ERR→OK changes.

A partial result (less complete than ``minimum_complete``) keeps the group's last gated status,
except where a rule whose kind needs no whole window (a rewind) raises it: a rewind seen at the
first scan after a gap pages then. Nothing resolves from a partial result.

A rule that begins firing at the status a group already stands at is news for its incident
(a group paged as stopped whose offsets are then rewound): a transition with ``news`` and the
same status, so the incident is told, as Alertmanager tells a group of a new alert in it.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import numpy as np

from notifier.rules.results import Evaluation
from notifier.rules.settings import RuleBinding
from notifier.types import GroupStatus, Transition

_GroupKey = tuple[str, str]


class TransitionTracker:
    """Turns gated group statuses into transitions (OK→WARN→ERR→OK).

    Only groups that are not OK are remembered, so a fleet of healthy groups costs nothing. A
    partial result produces a transition only when the rules that need no whole window raise
    the group's status (``Evaluation.group_ungated_status``); else the group keeps its last
    gated status.
    """

    def __init__(self) -> None:
        self.statuses: dict[_GroupKey, GroupStatus] = {}
        self.told: dict[_GroupKey, frozenset[str]] = {}
        """Per group that is not OK: the rules seen firing at its status since it got there
        (a rule joining them is news). A group restored without them (a checkpoint) takes
        the rules firing at its first evaluation, without news."""

    def update(self, evaluation: Evaluation) -> list[Transition]:
        store = evaluation.evaluator.store
        gids = evaluation.group_ids
        ranks = evaluation.group_status[gids]
        partial = evaluation.group_partial[gids]
        candidates = set(gids[(ranks > 0) & ~partial].tolist())
        raised_while_partial = set(
            gids[partial & (evaluation.group_ungated_status[gids] > 0)].tolist()
        )
        evaluated = evaluation.group_status.size
        for key in self.statuses:  # the open ones: few, however large the fleet
            gid = store.group_id(*key)
            if (
                gid is not None
                and gid < evaluated
                and evaluation.group_status[gid] != GroupStatus.NOTFOUND.rank
                and not evaluation.group_partial[gid]
            ):
                candidates.add(gid)
        transitions = []
        order = sorted(candidates | raised_while_partial)
        index = np.asarray(order, dtype=np.int64)
        bindings = evaluation.evaluator.bindings
        gated_firing = _Firing(evaluation, index, evaluation.group_status[index], bindings)
        # Groups raised from a partial window are rare (a rewind after a gap): most scans
        # have none, and need not read every open group's rules a second time.
        ungated_firing = (
            _Firing(
                evaluation,
                index,
                evaluation.group_ungated_status[index],
                [b for b in bindings if b.kind.pages_from_partial_windows],
            )
            if raised_while_partial
            else None
        )
        for position, gid in enumerate(order):
            key = store.group_key[gid]
            previous = self.statuses.get(key, GroupStatus.OK)
            ungated = gid in raised_while_partial
            if ungated:
                current = evaluation.ungated_status_of(gid)
                if current.rank < previous.rank:
                    continue
                assert ungated_firing is not None  # built whenever a group is raised so
                firing = ungated_firing.at(position)
            else:
                current = evaluation.status_of(gid)
                firing = gated_firing.at(position)
            news: tuple[str, ...] = ()
            if current == previous:
                news = self._news(key, firing)
                if not news:
                    continue
            elif current == GroupStatus.OK:
                self.statuses.pop(key, None)
                self.told.pop(key, None)
            else:
                self.statuses[key] = current
                self.told[key] = firing
            transitions.append(
                Transition(
                    cluster=key[0],
                    group=key[1],
                    previous=previous,
                    current=current,
                    at=evaluation.now,
                    result=evaluation.result_for_gid(gid, ungated=ungated),
                    news=news,
                )
            )
        return transitions

    def hold(self, key: _GroupKey, status: GroupStatus) -> None:
        """Take a group's open status from elsewhere (a hand-over): no transition; the rules
        firing at its next evaluation are taken as told."""
        if status in (GroupStatus.OK, GroupStatus.NOTFOUND):
            self.forget([key])
            return
        if self.statuses.get(key) != status:
            self.told.pop(key, None)
        self.statuses[key] = status

    def restore(self, statuses: dict[_GroupKey, GroupStatus]) -> None:
        """Take every open status from elsewhere (a checkpoint, the notifier's log); a group
        keeps the rules it was told of only where its status stays the same."""
        self.told = {k: v for k, v in self.told.items() if statuses.get(k) == self.statuses.get(k)}
        self.statuses = dict(statuses)

    def forget(self, keys: Iterable[_GroupKey]) -> None:
        """Drop groups without a transition (handed to another instance)."""
        for key in keys:
            self.statuses.pop(key, None)
            self.told.pop(key, None)

    def _news(self, key: _GroupKey, firing: frozenset[str]) -> tuple[str, ...]:
        """The rules of ``firing`` not seen at the group's status before (remembered now)."""
        told = self.told.get(key)
        self.told[key] = firing if told is None else told | firing
        if told is None:
            return ()
        return tuple(sorted(firing - told))

    def gone(self, keys: list[tuple[str, str]], at: int) -> list[Transition]:
        """Groups (or their topics) that vanished: their open statuses end as "gone"."""
        out = []
        for key in keys:
            previous = self.statuses.pop(key, None)
            self.told.pop(key, None)
            if previous is not None:
                out.append(
                    Transition(
                        cluster=key[0],
                        group=key[1],
                        previous=previous,
                        current=GroupStatus.NOTFOUND,
                        at=at,
                        result=None,
                        gone=True,
                    )
                )
        return out


class _Firing:
    """The rules firing at each of many groups' status (``status``: per group, gated or not;
    ``bindings``: the rules that count for it), at once: one bit per rule, and one set of
    names per distinct combination (a fleet has few)."""

    def __init__(
        self,
        evaluation: Evaluation,
        gids: np.ndarray,
        status: np.ndarray,
        bindings: Sequence[RuleBinding],
    ) -> None:
        self.names = [binding.name for binding in bindings]
        self.sets: dict[int, frozenset[str]] = {0: frozenset()}
        self.bits = np.zeros(gids.size, dtype=object if len(self.names) > 62 else np.int64)
        for bit, name in enumerate(self.names):
            at_status = (evaluation.group_fired[name][gids] == status) & (status > 0)
            self.bits = self.bits | (at_status.astype(self.bits.dtype) << bit)

    def at(self, position: int) -> frozenset[str]:
        bits = int(self.bits[position])
        names = self.sets.get(bits)
        if names is None:
            names = frozenset(n for bit, n in enumerate(self.names) if bits >> bit & 1)
            self.sets[bits] = names
        return names
