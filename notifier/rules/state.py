"""Each rule's per-group state: ``for`` (pending since) and ``keep_firing_for`` (last true),
whether it fires and with which severity.

:class:`RuleState` holds one array per field over group ids; the evaluator steps it once per
evaluation with the groups' conditions, and checkpoints and the fleet's hand-overs carry it.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

RULE_STATE_FIELDS = ("pending_since", "last_true", "firing", "fired_severity")
"""A rule's per-group state, in the order :meth:`Evaluator.export_group` gives it."""


@dataclass(slots=True)
class RuleState:
    pending_since: np.ndarray
    last_true: np.ndarray
    firing: np.ndarray
    fired_severity: np.ndarray

    @classmethod
    def empty(cls, size: int) -> RuleState:
        return cls(
            pending_since=np.full(size, -1, dtype=np.int64),
            last_true=np.full(size, -1, dtype=np.int64),
            firing=np.zeros(size, dtype=np.bool_),
            fired_severity=np.zeros(size, dtype=np.int8),
        )

    def grow(self, size: int) -> None:
        if self.firing.size >= size:
            return
        bigger = RuleState.empty(max(size, 2 * self.firing.size))
        for name in ("pending_since", "last_true", "firing", "fired_severity"):
            getattr(bigger, name)[: self.firing.size] = getattr(self, name)
        self.pending_since, self.last_true = bigger.pending_since, bigger.last_true
        self.firing, self.fired_severity = bigger.firing, bigger.fired_severity

    def reset(self, gids: np.ndarray) -> None:
        self.pending_since[gids] = -1
        self.last_true[gids] = -1
        self.firing[gids] = False
        self.fired_severity[gids] = 0

    def step(
        self,
        gids: np.ndarray,
        severity: np.ndarray,
        now: int,
        for_ms: np.ndarray | float,
        keep_ms: np.ndarray | float,
        capped: np.ndarray | float = 0.0,
    ) -> np.ndarray:
        """Advance the state of ``gids`` with this evaluation's condition; return the severity
        each group fires with now (0 when pending or clear). Where ``capped``, a
        ``keep_firing_for`` hold lasts no longer than the rule fired before it cleared."""
        true = severity > 0
        episode = self.pending_since[gids]
        last_true = np.where(true, now, self.last_true[gids])
        was_firing = self.firing[gids]
        # The episode's start is kept through a hold, so that a capped hold knows how long
        # the rule fired: a false alarm of one scan is not turned into minutes of page.
        fired_for = np.maximum(last_true - (episode + for_ms), 0)
        hold = np.where(np.asarray(capped) > 0, np.minimum(keep_ms, fired_for), keep_ms)
        kept = ~true & was_firing & (last_true >= 0) & ((now - last_true) <= hold)
        pending = np.where(true, np.where(episode < 0, now, episode), np.where(kept, episode, -1))
        held = true & ((now - pending) >= for_ms)
        firing = held | (true & was_firing) | kept
        fired = np.where(true & firing, severity, np.where(kept, self.fired_severity[gids], 0))
        self.pending_since[gids] = pending
        self.last_true[gids] = last_true
        self.firing[gids] = firing
        self.fired_severity[gids] = np.where(firing, fired, 0)
        return fired.astype(np.int8)
