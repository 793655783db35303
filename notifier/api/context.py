"""What every endpoint shares, reached through one dependency: ``api: Api`` in an endpoint's
parameters gives the :class:`ApiContext` of the app that answers (``create_app`` makes one per
app and keeps it in ``app.state.api``).

The context holds the service the API reads (the coordinator, the notifier, the fleet view),
the clock the data's age is measured against, and what is worked out once per scan and shared
by the endpoints that show it (:class:`~notifier.api.cache.ScanCache`, the overview's rows,
the ``/metrics`` exposition).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Annotated, Any, TypeVar

from fastapi import Depends, HTTPException, Request

from notifier.api.cache import ScanCache
from notifier.api.overview import Overviews
from notifier.api.sources import ClusterView, CoordinatorView, FleetSource, NotifierView
from notifier.api.views import group_result
from notifier.types import GroupResult

if TYPE_CHECKING:  # both modules hold routers that reach the context
    from notifier.api.metrics import MetricsExposition
    from notifier.api.reload import Reloadable

T = TypeVar("T")

SLOW_READS = 2
"""History and outbox reads running at once in worker threads; more requests wait their turn."""


@dataclass(eq=False)
class ApiContext:
    """One app's shared state. ``clock`` gives epoch ms; ``fleet`` is None for an instance
    running alone; ``reloader`` is what ``POST /-/reload`` calls (None: no such endpoint)."""

    coordinator: CoordinatorView
    notifier: NotifierView | None
    clock: Callable[[], int]
    fleet: FleetSource | None
    metrics: MetricsExposition
    reloader: Reloadable | None = None
    scans: ScanCache = field(default_factory=ScanCache)
    overviews: Overviews = field(init=False)
    slow_reads: asyncio.Semaphore = field(default_factory=lambda: asyncio.Semaphore(SLOW_READS))

    def __post_init__(self) -> None:
        self.overviews = Overviews(
            lambda name, state, group: self.result_of(state, name, group),
            lambda: self.coordinator.scanning,
        )
        self.coordinator.add_scan_listener(self._scan_landed)

    def _scan_landed(self, cluster: str) -> None:
        state = self.coordinator.clusters.get(cluster)
        if state is not None:
            self.overviews.scan_landed(cluster, state)

    @property
    def mine(self) -> dict[str, Any]:
        """What answers about this instance's own groups add in a fleet: who answered them."""
        return {} if self.fleet is None else {"instance": self.fleet.instance}

    def cluster(self, name: str) -> ClusterView:
        """The cluster's state; 404 when there is no such cluster."""
        state = self.coordinator.clusters.get(name)
        if state is None:
            raise HTTPException(404, "cluster not found")
        return state

    def result_of(self, state: ClusterView, cluster: str, group: str) -> GroupResult:
        """The group's last result, worked out once per scan for every endpoint showing it."""
        return self.scans.get(
            cluster, state, ("result", group), lambda: group_result(state, cluster, group)
        )

    def silences(self) -> NotifierView:
        """The notifier, which keeps the silences; 404 when notifications are not configured."""
        if self.notifier is None:
            raise HTTPException(
                404, "silences need notifications to be configured (notify: in the config)"
            )
        return self.notifier

    async def in_thread(self, function: Callable[..., T], *args: Any) -> T:
        """``function(*args)`` in a worker thread (a slow read: Parquet, the outbox), at most
        :data:`SLOW_READS` at once, so the event loop the scans run on never waits for it."""
        async with self.slow_reads:
            return await asyncio.to_thread(function, *args)


async def api_context(request: Request) -> ApiContext:
    """The dependency: the answering app's context (async, so it costs no thread hop)."""
    context: ApiContext = request.app.state.api
    return context


Api = Annotated[ApiContext, Depends(api_context)]
"""An endpoint's parameter ``api: Api`` is the shared state of the app answering it."""
