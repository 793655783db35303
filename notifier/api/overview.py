"""/api/groups without holding the event loop: each cluster's rows are worked out after a scan
in small steps, beside the requests and the scans.

A row names its group's leading finding, which takes the group's full result; when every group
of a 1,000-group fleet fires, that is half a second of CPU per scan. Done in one go when the
first request after a scan asked for it, it held every other request (and a scan under way)
for that long. :class:`Overviews` works the rows out in a task of its own instead, a few
milliseconds at a time, giving way to requests between steps and to scans as the API does
(:mod:`~notifier.api.priority`); until a scan's rows are ready, the previous scan's are served,
each row saying how old its data is; the working out starts as soon as a scan has been
evaluated (:meth:`Overviews.scan_landed`), so the rows lag the cluster's data only while it
runs, not until the next request. Open incidents and silences are always the current ones:
they are joined in per request (from a cache keyed by the notifier's mapping of open incidents
and the active silences), never taken from an older answer. A cluster's first rows, and rows
of stale data (no scans come then), are worked out at once.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from notifier.api.cache import encode, joined_with_members
from notifier.api.sources import ClusterView, FleetSource
from notifier.api.views import (
    ActiveSilences,
    Freshness,
    ScanRow,
    freshness,
    incident_duration,
    incident_facts,
    joined_rows,
    overview_clock_members,
    scan_rows,
)
from notifier.types import GroupResult, Incident

log = logging.getLogger(__name__)

STEP_S = 0.005
"""How long one step of working rows out may hold the event loop."""


@dataclass(slots=True)
class _ScanRows:
    """A cluster's rows as one scan (and its list of groups) gives them, before open
    incidents and silences are joined in."""

    evaluation: object
    groups: object
    scanned_at: int | None
    """When that scan observed the cluster (epoch ms)."""
    stale: bool
    rows: list[ScanRow]

    def of(self, state: ClusterView) -> bool:
        return self.evaluation is state.evaluation and self.groups is state.groups

    def freshness(self, state: ClusterView, now: int) -> Freshness:
        """How old the rows' data is at ``now``."""
        if self.of(state) or self.scanned_at is None:
            return freshness(state, now)
        age = round(max(0, now - self.scanned_at) / 1000, 1)
        return Freshness(self.scanned_at, age, False, 1.0)


class Overviews:
    """Each cluster's /api/groups rows: :meth:`rows` answers at once, from the last scan
    whose rows are worked out. ``result_of(cluster, state, group)`` gives a group's result
    (shared with the endpoints that show it); ``scanning()`` says whether a scan is under
    way, during which the work takes at most ``share`` of the loop's time."""

    def __init__(
        self,
        result_of: Callable[[str, ClusterView, str], GroupResult],
        scanning: Callable[[], bool],
        share: float = 0.1,
    ) -> None:
        self.result_of = result_of
        self.scanning = scanning
        self.share = share
        self._latest: dict[str, _ScanRows] = {}
        self._joined: dict[str, _Joined] = {}
        self._work: dict[str, tuple[object, asyncio.Task[None]]] = {}

    def rows(
        self,
        name: str,
        state: ClusterView,
        incidents: Mapping[tuple[str, str], Incident],
        silences: ActiveSilences,
        now: int,
        fleet: FleetSource | None = None,
    ) -> bytes:
        """The cluster's rows as of ``now``, encoded and joined by commas (the inside of a
        JSON array). With a ``fleet``, only the groups this instance owns, each naming it."""
        current = self._latest.get(name)
        stale = freshness(state, now).stale
        if current is None or current.stale != stale or (stale and not current.of(state)):
            current = self._latest[name] = self._work_out_now(name, state, stale)
        elif not current.of(state):
            self._start(name, state)
        joined = self._joined.get(name)
        if (
            joined is None
            or joined.scan is not current
            or joined.incidents is not incidents
            or joined.silences != silences.key
            or joined.owned != (fleet.owned if fleet else None)
        ):
            scanned = current.rows
            if fleet is not None:
                mine = {"instance": fleet.instance}
                scanned = [
                    ({**row, **mine}, findings, shows)
                    for row, findings, shows in scanned
                    if fleet.owns(name, row["group"])
                ]
            rows = joined_rows(name, scanned, incidents, silences)
            joined = self._joined[name] = _Joined(current, incidents, silences.key, rows)
            joined.owned = fleet.owned if fleet else None
        return joined.at(current.freshness(state, now), now)

    def scan_landed(self, name: str, state: ClusterView) -> None:
        """A scan of the cluster was evaluated: work its rows out now, in the background,
        rather than when the first request after it comes (which would then be served the
        rows of whichever scan the previous request started, older than the cluster's
        ``data_age_seconds`` by as many intervals as passed between the two requests).
        Nothing until a request has asked for the cluster's rows once, nor outside a running
        event loop (a replay stepping scans synchronously)."""
        if name not in self._latest:
            return
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            return
        self._start(name, state)

    def _work_out_now(self, name: str, state: ClusterView, stale: bool) -> _ScanRows:
        rows = list(scan_rows(state, name, stale, self._results(name, state)))
        return _ScanRows(state.evaluation, state.groups, _scanned_at(state), stale, rows)

    def _results(self, name: str, state: ClusterView) -> Callable[[int, str], GroupResult]:
        return lambda _gid, group: self.result_of(name, state, group)

    def _start(self, name: str, state: ClusterView) -> None:
        """Work the scan's rows out in the background, unless that is under way."""
        under_way = self._work.get(name)
        if under_way is not None and under_way[0] is state.evaluation and not under_way[1].done():
            return
        task = asyncio.get_running_loop().create_task(
            self._work_out(name, state), name=f"api-overview-{name}"
        )
        self._work[name] = (state.evaluation, task)

    async def _work_out(self, name: str, state: ClusterView) -> None:
        evaluation, groups = state.evaluation, state.groups
        scanned_at = _scanned_at(state)
        rows: list[ScanRow] = []
        steps = scan_rows(state, name, False, self._results(name, state))
        try:
            while True:
                # The rows read the store, which only the next scan's evaluation changes.
                if state.evaluation is not evaluation or state.groups is not groups:
                    return  # a newer scan landed: the next request starts on it
                started = time.perf_counter()
                for row in steps:
                    rows.append(row)
                    if time.perf_counter() - started >= STEP_S:
                        break
                else:
                    self._latest[name] = _ScanRows(evaluation, groups, scanned_at, False, rows)
                    return
                took = time.perf_counter() - started
                await asyncio.sleep(took * (1 / self.share - 1) if self.scanning() else 0)
        except Exception:  # the previous rows stay; the next request tries again
            log.exception("working out the groups' overview failed", extra={"cluster": name})


def _scanned_at(state: ClusterView) -> int | None:
    return state.metrics.last_success_ms


class _Joined:
    """A cluster's rows from one :class:`_ScanRows`, set of open incidents and set of active
    silences, encoded without the members that change with the clock (the data's age, how
    long an incident has been open), which :meth:`at` adds."""

    def __init__(
        self,
        scan: _ScanRows,
        incidents: Mapping[tuple[str, str], Incident],
        silences: tuple[str, ...],
        rows: list[tuple[dict[str, Any], Incident | None]],
    ) -> None:
        self.scan = scan
        self.incidents = incidents
        self.silences = silences
        self.owned: frozenset[int] | None = None
        """The shards this instance owned when the rows were joined (with a fleet)."""
        self._open: list[tuple[bytes, Incident]] = []
        """The rows with an open incident, in order, each encoded up to the value of its
        incident's ``duration_seconds`` (the last member of ``incident``)."""
        self._quiet: list[list[bytes]] = [[]]
        """The runs of rows without one: before the first row with an incident, after each."""
        for row, incident in rows:
            if incident is None:
                self._quiet[-1].append(encode(row))
            else:
                facts = encode({"incident": incident_facts(incident)})
                head = encode(row)[:-1] + b"," + facts[1:-2] + b',"duration_seconds":'
                self._open.append((head, incident))
                self._quiet.append([])
        self._age: tuple[bool, float | None] | None = None
        self._quiet_joined: list[bytes] = []
        """Each run joined with the members of the age in ``_age`` (the same for each row)."""
        self._age_tail = b""
        """The age's members, ending a row (``,"stale":...}``)."""

    def at(self, fresh: Freshness, now: int) -> bytes:
        """The rows as of ``now``, joined by commas: the inside of a JSON array."""
        age = (fresh.stale, fresh.age_seconds)
        if self._age != age:
            members = overview_clock_members(None, fresh, now)
            self._quiet_joined = [joined_with_members(run, members) for run in self._quiet]
            self._age_tail = (
                b"}," + encode({k: v for k, v in members.items() if k != "incident"})[1:]
            )
            self._age = age
        parts = [self._quiet_joined[0]]
        tail = self._age_tail
        for (head, incident), after in zip(self._open, self._quiet_joined[1:], strict=True):
            parts.append(head + encode(incident_duration(incident, now)) + tail)
            parts.append(after)
        return b",".join(p for p in parts if p)
