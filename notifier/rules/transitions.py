"""Transitions: gated group statuses turned into OK→WARN→ERR→OK changes.

A partial result (less complete than ``minimum_complete``) keeps the group's last gated status,
except where a rule whose kind needs no whole window (a rewind) raises it: a rewind seen at the
first scan after a gap pages then. Nothing resolves from a partial result.
"""

from __future__ import annotations

from notifier.rules.results import Evaluation
from notifier.types import GroupStatus, Transition


class TransitionTracker:
    """Turns gated group statuses into transitions (OK→WARN→ERR→OK).

    Only groups that are not OK are remembered, so a fleet of healthy groups costs nothing. A
    partial result produces a transition only when the rules that need no whole window raise
    the group's status (``Evaluation.group_ungated_status``); else the group keeps its last
    gated status.
    """

    def __init__(self) -> None:
        self.statuses: dict[tuple[str, str], GroupStatus] = {}

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
        for gid in sorted(candidates | raised_while_partial):
            key = store.group_key[gid]
            previous = self.statuses.get(key, GroupStatus.OK)
            ungated = gid in raised_while_partial
            if ungated:
                current = evaluation.ungated_status_of(gid)
                if current.rank <= previous.rank:
                    continue
            else:
                current = evaluation.status_of(gid)
            if current == previous:
                continue
            if current == GroupStatus.OK:
                self.statuses.pop(key, None)
            else:
                self.statuses[key] = current
            transitions.append(
                Transition(
                    cluster=key[0],
                    group=key[1],
                    previous=previous,
                    current=current,
                    at=evaluation.now,
                    result=evaluation.result_for_gid(gid, ungated=ungated),
                )
            )
        return transitions

    def gone(self, keys: list[tuple[str, str]], at: int) -> list[Transition]:
        """Groups (or their topics) that vanished: their open statuses end as "gone"."""
        out = []
        for key in keys:
            previous = self.statuses.pop(key, None)
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
