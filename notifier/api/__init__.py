"""api: the service's HTTP face, read-only over what the coordinator already computed (the
silences aside). One router module per concern, composed by :func:`create_app`.

* ``app``: :func:`create_app` and :data:`~notifier.api.app.ROUTERS`, the routers it includes.
* ``context``: :class:`ApiContext`, what every endpoint shares, reached as ``api: Api``.
* Routers, each with its endpoints and their response models: ``burrow_v3`` (Burrow's reads
  of clusters, groups and topics), ``burrow_admin`` (the rest of Burrow's API), ``groups``
  (``/api/groups``, a group's history, ``/api/fleet``), ``incidents``, ``silences``, ``ops``
  (``/healthz``, ``/readyz``), ``reload`` (``POST /-/reload``), ``metrics`` (``/metrics``:
  notifier's families and kafka_exporter's and Kafka Lag Exporter's under their own names),
  ``statuspage`` (the HTML pages and ``static/``).
* ``errors``: the error body (Burrow's shape) and its handlers; ``bodylimit``: 413 for large
  bodies; ``auth``: :class:`WriteGuard`: reads open; writes need the token, or loopback
  without one; ``priority``: requests give way to a scan under way.
* ``burrow``: Burrow's v3 JSON bodies; ``views`` and ``overview``: the /api JSON the status
  page reads; ``models``: the history's and incidents' response models; ``cache``: answers
  worked out once per scan, encoded once.
* ``series``: a group's lag over the last hours from the Parquet history, and its thresholds.
* ``notifylog``: the notifier's outbox and incidents, read-only, for the page.
* ``sources``: Protocols for what the API reads from the coordinator and the notifier.
* ``owner``: in a fleet, what only a group's owner knows, asked of its API.
* ``server``: :class:`ApiServer`, uvicorn in the service's event loop, HTTPS with ``api.tls``.

Imports from notifier: :mod:`notifier.config`, :mod:`notifier.rules`, :mod:`notifier.types`,
:mod:`notifier.history` (the page reads the history the service writes),
:mod:`notifier.collect` (the request counts /metrics shows).
"""

from notifier.api.app import ROUTERS, create_app
from notifier.api.context import Api, ApiContext
from notifier.api.server import ApiServer, ApiServerError
from notifier.api.sources import CoordinatorView, NotifierView

__all__ = [
    "ROUTERS",
    "Api",
    "ApiContext",
    "ApiServer",
    "ApiServerError",
    "CoordinatorView",
    "NotifierView",
    "create_app",
]
