"""The Kafka requests a process sends, by client role and API: ``notifier_kafka_requests_total``.

Every request of an aiokafka consumer, producer or admin client is written by one of its
client's connections (:class:`aiokafka.conn.AIOKafkaConnection`), and every connection the
client uses after its bootstrap comes from ``AIOKafkaClient._get_conn``: the requests that
``AIOKafkaClient.send`` sends (produce, fetch, offsets, the group protocol, admin requests) and
the metadata requests, which go to a connection directly (the periodic refresh, the fleet's
reachability probe). :func:`count_requests` wraps that one method on one client object, so each
connection it hands out counts what it sends into the role's :class:`RequestTally`; other
clients of the same class in the process are left as they are. The collector sends on its own
connections and counts into its tally itself.

What is counted: each request written to the broker, and the ``ApiVersions`` that opens each
connection. What is not: a client's bootstrap (one ``Metadata`` per start) and logins (SASL),
both once per connection or client rather than per scan.

A process has one :data:`KAFKA_REQUESTS` (one ``notifier run`` is one fleet instance), which
``/metrics`` exports; counting is a dict increment per request.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from aiokafka.client import AIOKafkaClient

from notifier.collect.protocol import API_NAMES
from notifier.types import KafkaClientRole

_COUNTED = "_notifier_counted"
"""Set on a connection whose ``send`` counts already (a client hands the same one out often)."""


class RequestTally:
    """One client role's requests so far, by API name."""

    __slots__ = ("counts",)

    def __init__(self) -> None:
        self.counts: dict[str, int] = {}

    def add(self, api: str) -> None:
        self.counts[api] = self.counts.get(api, 0) + 1

    def add_key(self, api_key: int) -> None:
        self.add(API_NAMES.get(api_key) or f"api{api_key}")


class KafkaRequests:
    """A process's requests: one :class:`RequestTally` per client role."""

    def __init__(self) -> None:
        self._tallies: dict[KafkaClientRole, RequestTally] = {}

    def tally(self, role: KafkaClientRole) -> RequestTally:
        found = self._tallies.get(role)
        if found is None:
            found = self._tallies[role] = RequestTally()
        return found

    def counts(self) -> dict[tuple[KafkaClientRole, str], int]:
        """Every (role, API) counted so far, sorted; a copy."""
        return {
            (role, api): count
            for role, tally in sorted(self._tallies.items())
            for api, count in sorted(tally.counts.items())
        }


KAFKA_REQUESTS = KafkaRequests()
"""This process's requests (what ``/metrics`` exports)."""


def count_requests(
    kafka: Any, role: KafkaClientRole, requests: KafkaRequests | None = None
) -> None:
    """Count every request ``kafka`` sends from now on under ``role`` (in ``requests``, by
    default the process's). ``kafka``: an ``AIOKafkaConsumer``, ``AIOKafkaProducer``,
    ``AIOKafkaAdminClient`` or ``AIOKafkaClient``, before it starts (its connections are opened
    from then on)."""
    client = _client_of(kafka)
    tally = (requests or KAFKA_REQUESTS).tally(role)
    get_conn: Callable[..., Awaitable[Any]] = client._get_conn

    async def counted_get_conn(node_id: Any, **kwargs: Any) -> Any:
        conn = await get_conn(node_id, **kwargs)
        if conn is not None and not getattr(conn, _COUNTED, False):
            _count_sends(conn, tally)
        return conn

    client._get_conn = counted_get_conn


def _count_sends(conn: Any, tally: RequestTally) -> None:
    send = conn.send

    def counted_send(request: Any, expect_response: bool = True) -> Any:
        sent = send(request, expect_response)  # raises before writing when it cannot encode
        tally.add_key(request.API_KEY)
        return sent

    conn.send = counted_send
    setattr(conn, _COUNTED, True)
    tally.add("ApiVersions")  # what the connection's handshake asked first


def _client_of(kafka: Any) -> AIOKafkaClient:
    if isinstance(kafka, AIOKafkaClient):
        return kafka
    # The consumer and the admin client keep theirs as _client, the producer as client.
    for attribute in ("_client", "client"):
        client = getattr(kafka, attribute, None)
        if isinstance(client, AIOKafkaClient):
            return client
    raise TypeError(f"not an aiokafka client, consumer, producer or admin client: {kafka!r}")
