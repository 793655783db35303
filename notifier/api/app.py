"""The FastAPI app: :func:`create_app` composes the routers, one module per concern, each
holding its endpoints and their response models:

* :mod:`~notifier.api.burrow_v3`: Burrow's v3 reads of clusters, groups and topics;
* :mod:`~notifier.api.groups`: ``/api/groups`` (overview, one group, its history) and
  ``/api/fleet``;
* :mod:`~notifier.api.incidents`: ``/api/incidents`` with their deliveries;
* :mod:`~notifier.api.burrow_admin`: the rest of Burrow's API (topic consumers, forgetting a
  group, log level, config, Burrow's health paths);
* :mod:`~notifier.api.silences`: ``/api/silences``;
* :mod:`~notifier.api.ops`: ``/healthz`` and ``/readyz``; :mod:`~notifier.api.reload`:
  ``POST /-/reload`` (when the app is given a reloader);
* :mod:`~notifier.api.metrics`: Prometheus ``/metrics``;
* :mod:`~notifier.api.statuspage`: the status page's HTML and files.

Every route runs :class:`~notifier.api.auth.WriteGuard`: reads are open, writes need the token
(or loopback). An endpoint reaches the service through one dependency, ``api: Api``
(:mod:`~notifier.api.context`). Errors answer in Burrow's shape (:mod:`~notifier.api.errors`).

Everything here reads what the coordinator already computed (the last evaluation of each
cluster); no request ever triggers work on Kafka, so a scrape or a refreshing browser costs
the clusters nothing. The read endpoints run on the service's event loop, beside the scans:
what they return is worked out once per scan and encoded once (:mod:`~notifier.api.cache`), the
status page's files are served from memory.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Collection, Sequence

from fastapi import APIRouter, Depends, FastAPI

from notifier.api import (
    burrow_admin,
    burrow_v3,
    groups,
    incidents,
    metrics,
    ops,
    reload,
    silences,
    statuspage,
)
from notifier.api.auth import WriteGuard
from notifier.api.bodylimit import MAX_BODY_BYTES, BodyLimit
from notifier.api.context import ApiContext
from notifier.api.errors import add_error_handlers
from notifier.api.metrics import MetricsExposition
from notifier.api.priority import ScanPriority
from notifier.api.reload import Reloadable
from notifier.api.sources import CoordinatorView, FleetSource, NotifierView
from notifier.config import EXPORTER_FAMILIES, Secret

ROUTERS: tuple[APIRouter, ...] = (
    burrow_v3.router,
    groups.router,
    incidents.router,
    burrow_admin.router,
    silences.router,
    ops.router,
    metrics.router,
    statuspage.router,
)
"""Every router of the app, in the order their routes are matched and documented. A new
concern is a module with its ``router`` and one line here."""


def _wall_ms() -> int:
    return int(time.time() * 1000)


def create_app(
    coordinator: CoordinatorView,
    notifier: NotifierView | None = None,
    token: str | Secret | None = None,
    clock: Callable[[], int] = _wall_ms,
    host: str = "127.0.0.1",
    metric_families: Collection[str] = EXPORTER_FAMILIES,
    fleet: FleetSource | None = None,
    reloader: Reloadable | None = None,
    routers: Sequence[APIRouter] = (),
) -> FastAPI:
    """The app over a running coordinator (and notifier); ``clock`` (epoch ms) is what the age
    of the data is measured against. ``token`` and ``host`` (where the app will listen) decide
    who may write (:class:`~notifier.api.auth.WriteGuard`). ``metric_families``: the exporters
    whose families /metrics offers beside notifier's own (the config's ``metrics.families``).

    ``fleet``: the fleet-wide view when instances share the clusters (``coordination:``): the
    groups this instance owns are answered from its own state, every other group of the fleet
    from the view, each answer naming its ``instance``; silences made here are published to
    every instance; ``/metrics`` labels every series with this ``instance``.

    ``reloader``: what ``POST /-/reload`` calls (:class:`notifier.service.Reloader`); without
    one there is no such endpoint. ``routers``: more endpoints, included after
    :data:`ROUTERS` with the same write guard, error shape and ``api: Api`` dependency."""
    guard = WriteGuard(token, host)
    app = FastAPI(
        title="notifier",
        description=(
            "Kafka consumer-lag alerting: Burrow-compatible v3 API, group status, incidents, "
            "silences, Prometheus metrics."
        ),
        version="0.1.0",
        dependencies=[Depends(guard)],
    )
    instance = fleet.instance if fleet is not None else None
    exposition = MetricsExposition(coordinator, notifier, clock, metric_families, instance)
    app.state.api = ApiContext(
        coordinator=coordinator, notifier=notifier, clock=clock, fleet=fleet,
        metrics=exposition, reloader=reloader,
    )  # fmt: skip
    app.state.write_guard = guard  # the server reads it (which addresses may write)
    app.add_middleware(BodyLimit, max_bytes=MAX_BODY_BYTES)
    app.add_middleware(ScanPriority, scanning=lambda: coordinator.scanning)
    add_error_handlers(app)
    for router in ROUTERS:
        app.include_router(router)
    if reloader is not None:
        app.include_router(reload.router)
    for router in routers:
        app.include_router(router)
    return app
