"""The helpers a pattern scripts its group with."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from notifier.synth.independent.model import (
    WARMUP_S,
    Group,
)


class Script:
    """Helpers a pattern uses on its group."""

    def __init__(self, g: Group) -> None:
        self.g = g
        self.rng = g.rng
        self.after: list[Callable[[], None]] = []

    def ids(self, n: int) -> str:
        spec = self.g.spec
        if spec.client == "java":
            return f"consumer-{spec.name}-{n}-{self.rng.bytes(8).hex()}"
        return f"{spec.client}-{spec.name}-{n}-{self.rng.bytes(6).hex()}"

    def members(self, count: int | None = None, start: int = 0, **kw: Any) -> list[int]:
        count = count or int(self.g.spec.params["members"])
        return [self.g.proc(self.ids(i), start, **kw) for i in range(count)]

    def times(self, every: tuple[float, float], first: float = 300.0,
              margin: float = 300.0) -> list[int]:  # fmt: skip
        """Moments a recurring event happens, about every ``every`` seconds."""
        out, t = [], first + self.rng.uniform(0, every[1])
        while t < self.g.T - margin:
            out.append(int(t))
            t += self.rng.uniform(*every)
        return out

    def onset(self, length: float = 0.0) -> int:
        """A fault's start: after the warm-up, leaving ``length`` before the end if possible."""
        lo = WARMUP_S + 600
        hi = max(lo + 1, self.g.T - length - 300)
        return int(self.rng.uniform(lo, hi))

    def bursts(self, per_hour: float) -> None:
        """Producer spikes whose lag drains within about five minutes at the group's headroom."""
        g = self.g
        h = g.headroom
        for at in self.times((3600 / per_hour * 0.5, 3600 / per_hour * 1.5), first=60):
            length = int(self.rng.uniform(10, 300))
            most = h + 300 * (h - 1) / length
            factor = float(self.rng.uniform(1.5, max(1.6, min(20.0, most))))
            g.add_burst(at, length, factor)
            g.event("producer burst", at, seconds=length, factor=factor)

    def replace(self, proc: int, at: int, back_after: float, ending: str,
                instance_id: str | None = None) -> int:  # fmt: skip
        """End ``proc`` at ``at`` (``ending``) and start its successor ``back_after`` later."""
        old = self.g.procs[proc]
        old.end, old.ending = at, ending
        again = at + max(1, round(back_after))
        return self.g.proc(self.ids(len(self.g.procs)), again, instance_id=instance_id,
                           commit_every=old.commit_every)  # fmt: skip

    def live(self, at: int) -> list[int]:
        return [i for i, p in enumerate(self.g.procs) if p.start <= at < p.end]
