"""api: the service's HTTP face, read-only over what the coordinator already computed (the
silences aside).

* ``app``: :func:`create_app`, every route, and the silence request model.
* ``auth``: :class:`WriteGuard`: reads open; writes need the token, or loopback without one.
* ``burrow``: Burrow's v3 JSON bodies.
* ``views``: the /api JSON the status page reads (groups overview, group detail, incidents).
* ``metrics``: /metrics (``add_metrics_routes``): notifier's families and kafka_exporter's and
  Kafka Lag Exporter's under their own names (``metrics.families``), rendered once per scan.
* ``page``: the status page's charts and incident endpoints (history, incidents with their
  deliveries) and its HTML pages; ``models``: their response models.
* ``series``: a group's lag over the last hours from the Parquet history, and its thresholds.
* ``notifylog``: the notifier's outbox and incidents, read-only, for the page.
* ``sources``: Protocols for what the API reads from the coordinator and the notifier.
* ``server``: :class:`ApiServer`, uvicorn in the service's event loop, HTTPS with ``api.tls``.
* ``static/``: the status page.

Imports from notifier: :mod:`notifier.config`, :mod:`notifier.rules`, :mod:`notifier.types`,
:mod:`notifier.history` (the page reads the history the service writes).
"""

from notifier.api.app import create_app
from notifier.api.server import ApiServer, ApiServerError
from notifier.api.sources import CoordinatorView, NotifierView

__all__ = [
    "ApiServer",
    "ApiServerError",
    "CoordinatorView",
    "NotifierView",
    "create_app",
]
