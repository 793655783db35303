"""Scan times that a step of the wall clock cannot disturb.

Every duration the rules judge is a difference of scan times: how long an offset has waited,
how long a group has had no members, how far apart two samples are, lag in seconds. Scans are
stamped by the wall clock, which NTP, an operator or a hypervisor can step back or forward
between two scans. Stepped back, a scan would be stored before the one it follows (Burrow's
commit ring reads that as a rewind); stepped forward, every wait in progress would grow by the
step at once (a stall, lag in seconds over its threshold) though no time passed.

:class:`ScanClock` stamps each scan of a cluster with its wall-clock time as long as the wall
clock keeps pace with the elapsed clock (:func:`~notifier.collect.results.elapsed_clock`,
which nobody sets). When the two disagree by more than :data:`STEP_TOLERANCE_MS` between
scans, the wall clock was stepped: the scan time advances by the elapsed time instead, and
then rejoins the wall clock gradually, at most :data:`SLEW_RATE` faster or slower than real
time (a minute's step is absorbed over 20 minutes, and meanwhile durations come out within
5%, well inside the rules' tolerances). Time the machine really spent suspended is elapsed
time: it is a gap, as missed scans are. Scan times only ever increase, so the windows, the
history and the backtest see one timeline.
"""

from __future__ import annotations

import logging

log = logging.getLogger(__name__)

STEP_TOLERANCE_MS = 1_000
"""A disagreement between the wall clock and the elapsed clock up to this much between two
scans is followed as it is (NTP slews by far less); anything larger is a step."""

SLEW_RATE = 0.05
"""How much faster or slower than real time scan time may run while it rejoins the wall clock
after a step."""


class ScanClock:
    """The scan times of one cluster (see the module docstring)."""

    def __init__(self, cluster: str, resume_gap_ms: int) -> None:
        self.cluster = cluster
        self.resume_gap_ms = resume_gap_ms
        """After a restart, how far past the last stored scan the first one is put when the
        wall clock is behind it (how long the restart took is not known)."""
        self.offset_ms = 0.0
        """Scan time minus wall-clock time: the part of a step not yet absorbed."""
        self._previous: tuple[int, float] | None = None

    def stamp(self, wall_ms: int, elapsed_s: float | None, last_ts: int | None) -> int:
        """The scan time of a scan observed at ``wall_ms`` on the wall clock and ``elapsed_s``
        on the elapsed clock (None: unknown, the wall clock is taken as it is), given the
        newest scan time already stored for the cluster (``last_ts``, None: none)."""
        previous, self._previous = self._previous, None
        if elapsed_s is not None:
            if previous is not None:
                self._follow(wall_ms, elapsed_s, *previous)
            elif last_ts is not None and wall_ms <= last_ts:
                # The first scan since a restart, with the wall clock behind the stored
                # timeline: carry on from it.
                self.offset_ms = last_ts + self.resume_gap_ms - wall_ms
            self._previous = (wall_ms, elapsed_s)
        ts = wall_ms + round(self.offset_ms)
        if last_ts is not None and ts <= last_ts:
            ts = last_ts + 1  # never stored out of order, whatever the clocks say
        return ts

    def _follow(self, wall_ms: int, elapsed_s: float, before_ms: int, before_s: float) -> None:
        elapsed_ms = max(0.0, (elapsed_s - before_s) * 1000)
        step = (wall_ms - before_ms) - elapsed_ms
        if abs(step) > STEP_TOLERANCE_MS:
            self.offset_ms -= step
            log.warning(
                "the wall clock was stepped between two scans; scan times follow the elapsed "
                "time and rejoin the wall clock gradually",
                extra={"event": "wall_clock_step", "cluster": self.cluster,
                       "step_s": round(step / 1000, 3),
                       "offset_s": round(self.offset_ms / 1000, 3)},
            )  # fmt: skip
        allowance = SLEW_RATE * elapsed_ms
        self.offset_ms -= max(-allowance, min(allowance, self.offset_ms))
