"""What a collector keeps open to one cluster between scans, and how every request goes out.

:class:`ClusterSession` pools aiokafka connections (``aiokafka.conn.create_conn``: version
negotiation, SSL and SASL) rather than going through ``AIOKafkaClient``, whose background
metadata task sends requests on its own schedule and refreshes on every broken connection:
neither would show up in the per-scan count, and the offset-fetch probe breaks a connection on
purpose. It holds the cluster metadata and each group's coordinator, and counts what a scan
sends, by API name (:attr:`ScanResult.requests`) and into the process's running count
(:mod:`notifier.collect.requestcount`), with each new connection's handshake.

``Metadata`` is fetched only when the cached copy is older than ``metadata_max_age_ms``, a
request failed, or the reader of a request asks for it (a leader refused a partition, a
coordinator is not in the metadata, a new group may commit to a new topic).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import Counter, defaultdict
from collections.abc import Awaitable, Iterable, Sequence
from typing import Any

from aiokafka.abc import AbstractTokenProvider
from aiokafka.conn import AIOKafkaConnection, CloseReason
from aiokafka.errors import CorrelationIdError, KafkaConnectionError, KafkaError
from aiokafka.protocol.api import Request
from aiokafka.protocol.coordination import FindCoordinatorRequest
from aiokafka.protocol.metadata import MetadataRequest

from notifier.collect.protocol import (
    API_NAMES,
    NONE,
    CoordinatorMoved,
    Metadata,
    parse_metadata,
)
from notifier.collect.requestcount import KafkaRequests
from notifier.collect.results import ScanError
from notifier.collect.security import (
    RefreshingTokenProvider,
    login_failure,
    open_connection,
)

RETRY_BACKOFF_S = 0.1
"""How long to wait before asking again after a coordinator moved or was loading."""


class TransportError(Exception):
    """A request got no usable answer: connection refused or dropped, timeout, undecodable."""


class _ProbeNoise(logging.Filter):
    """aiokafka logs a connection that broke on an answer it could not decode at ERROR, with
    the traceback. While a probe is in flight that break is the answer the probe asks for
    ("not supported"), and the collector says what it learned in one line of its own: the
    record is dropped then. Outside probes such records pass unchanged."""

    def __init__(self) -> None:
        super().__init__()
        self.probes_in_flight = 0

    def filter(self, record: logging.LogRecord) -> bool:
        return not (
            self.probes_in_flight and record.msg == "Unexpected exception in AIOKafkaConnection"
        )


_PROBE_NOISE = _ProbeNoise()
logging.getLogger("aiokafka.conn").addFilter(_PROBE_NOISE)


async def run_all(aws: Iterable[Awaitable[Any]]) -> None:
    """Run awaitables concurrently; the first failure cancels the rest and is re-raised as is."""
    try:
        async with asyncio.TaskGroup() as tg:
            for aw in aws:
                tg.create_task(aw)  # type: ignore[arg-type]
    except BaseExceptionGroup as group:
        raise group.exceptions[0] from None


def parse_address(server: str) -> tuple[str, int]:
    """``host:port`` (``[v6]:port``; port 9092 when none is given) as a pair."""
    server = server.strip()
    host, sep, port = server.rpartition(":")
    if not sep or not port.isdigit():
        return server.strip("[]"), 9092
    return host.strip("[]"), int(port)


class ClusterSession:
    """Connections, metadata and group coordinators of one cluster; every request of a scan.

    ``conn_settings`` go to aiokafka's connection as they are; ``login`` describes the login
    for error messages (:func:`~notifier.collect.security.describe_login`). One scan at a time:
    :meth:`begin_scan` resets the per-scan counts.
    """

    def __init__(
        self,
        bootstrap: Sequence[tuple[str, int]],
        *,
        conn_settings: dict[str, Any],
        login: str,
        token_provider: AbstractTokenProvider | None,
        request_timeout_s: float,
        metadata_max_age_s: float,
        requests: KafkaRequests,
    ) -> None:
        self._bootstrap = list(bootstrap)
        self._conn_settings = conn_settings
        self._login = login
        self._token_provider = token_provider
        self.request_timeout_s = request_timeout_s
        self._metadata_max_age_s = metadata_max_age_s
        self._conns: dict[tuple[str, int], AIOKafkaConnection] = {}
        self._conn_locks: defaultdict[tuple[str, int], asyncio.Lock] = defaultdict(asyncio.Lock)
        self.metadata: Metadata | None = None
        self.metadata_stale = True
        self.coordinators: dict[str, int] = {}
        """Each group's coordinator as last seen (ListGroups, FindCoordinator)."""
        self.requests: Counter[str] = Counter()
        """What the scan under way sent, by API name."""
        self._tally = requests.tally("scan")
        """The process's count (``notifier_kafka_requests_total``), which outlives each scan's."""
        self.connects = 0
        self.answered = False
        """Whether a broker answered during the scan under way (a connection handshake or a
        request): a scan that fails without one cost no more than a probe."""

    def begin_scan(self) -> None:
        """Reset the per-scan counts, and retire connections whose login is about to expire."""
        self.requests = Counter()
        self.connects = 0
        self.answered = False
        self._retire_expiring_logins()

    async def close(self) -> None:
        """Close every connection (waiting at most one request timeout)."""
        conns, self._conns = list(self._conns.values()), {}
        waiters = [conn.close(reason=CloseReason.SHUTDOWN) for conn in conns]
        if waiters:
            await asyncio.wait(waiters, timeout=self.request_timeout_s)

    # ----------------------------------------------------------------------------------------
    # Connections

    async def _connection(self, address: tuple[str, int]) -> AIOKafkaConnection:
        conn = self._conns.get(address)
        if conn is not None and conn.connected():
            return conn
        async with self._conn_locks[address]:
            conn = self._conns.get(address)
            if conn is not None and conn.connected():
                return conn
            host, port = address
            try:
                conn = await open_connection(host, port, **self._conn_settings)
            except (OSError, TimeoutError, KafkaError) as exc:
                self.metadata_stale = True
                # A broker that accepts the connection but never answers its handshake is a
                # timeout like any other request's: say so rather than "TimeoutError()".
                detail = (
                    f"no answer within {self.request_timeout_s:g}s"
                    if isinstance(exc, TimeoutError)
                    else login_failure(exc, self._login, self._conn_settings["sasl_mechanism"])
                    or repr(exc)
                )
                raise TransportError(f"cannot connect to {host}:{port}: {detail}") from exc
            self._conns[address] = conn
            self.connects += 1
            self.answered = True
            self._tally.add("ApiVersions")  # the handshake's, as aiokafka's clients count it
            return conn

    def _retire_expiring_logins(self) -> None:
        """Close every connection once the token they logged in with is due for renewal: a
        broker ends a SASL session when its token expires (KIP-368), and aiokafka cannot log in
        again on an open connection. Between scans nothing is in flight."""
        provider = self._token_provider
        if isinstance(provider, RefreshingTokenProvider) and provider.renewal_due():
            conns, self._conns = list(self._conns.values()), {}
            for conn in conns:
                conn.close(reason=CloseReason.SHUTDOWN)

    async def send(
        self, address: tuple[str, int], request: Request[Any], *, probing: bool = False
    ) -> Any:
        """Send one request (counted) and return its decoded answer, or raise TransportError.

        A failed request marks the metadata stale (a broker may be gone) unless ``probing``:
        then the caller expects some brokers to fail it and handles that itself.
        """
        api = API_NAMES.get(request.API_KEY, f"api{request.API_KEY}")
        conn = await self._connection(address)
        _PROBE_NOISE.probes_in_flight += probing
        try:
            answer = conn.send(request)  # encodes now: an unsupported version raises here
            self.requests[api] += 1
            self._tally.add(api)
            response = await answer
            self.answered = True
            return response
        except (KafkaConnectionError, CorrelationIdError, TimeoutError, OSError) as exc:
            conn.close(reason=CloseReason.CONNECTION_BROKEN)
            self._conns.pop(address, None)
            if not probing:
                self.metadata_stale = True
            cause = exc.__cause__
            detail = f"{exc!r}" + (f" (cause: {cause!r})" if cause is not None else "")
            if isinstance(exc, TimeoutError):
                detail = f"no answer within {self.request_timeout_s:g}s"
            raise TransportError(f"{api} to {address[0]}:{address[1]}: {detail}") from exc
        finally:
            _PROBE_NOISE.probes_in_flight -= probing

    def _address(self, node_id: int) -> tuple[str, int]:
        assert self.metadata is not None
        try:
            return self.metadata.brokers[node_id]
        except KeyError:
            self.metadata_stale = True
            raise ScanError(f"broker {node_id} is not in the cluster metadata") from None

    async def send_to_node(
        self, node_id: int, request: Request[Any], *, probing: bool = False
    ) -> Any:
        return await self.send(self._address(node_id), request, probing=probing)

    # ----------------------------------------------------------------------------------------
    # Metadata

    async def current_metadata(self) -> tuple[Metadata, bool]:
        """The metadata to scan with, and whether it was just fetched."""
        md = self.metadata
        if (
            md is None
            or self.metadata_stale
            or time.monotonic() - md.fetched_at >= self._metadata_max_age_s
        ):
            return await self.refresh_metadata(), True
        return md, False

    async def refresh_metadata(self) -> Metadata:
        candidates: list[tuple[str, int]] = []
        if self.metadata is not None:
            candidates.extend(self.metadata.brokers[n] for n in sorted(self.metadata.brokers))
        candidates.extend(a for a in self._bootstrap if a not in candidates)
        errors: list[str] = []
        for address in candidates:
            try:
                response = await self.send(address, MetadataRequest(None))
            except TransportError as exc:
                errors.append(str(exc))
                continue
            md = parse_metadata(response)
            if not md.brokers:
                errors.append(f"{address[0]}:{address[1]} returned metadata without brokers")
                continue
            self.metadata = md
            self.metadata_stale = False
            self._forget_dead_connections(md)
            return md
        raise ScanError("cannot fetch cluster metadata: " + "; ".join(errors))

    def _forget_dead_connections(self, md: Metadata) -> None:
        live = set(md.brokers.values()) | set(self._bootstrap)
        for address in [a for a in self._conns if a not in live]:
            self._conns.pop(address).close(reason=CloseReason.SHUTDOWN)

    # ----------------------------------------------------------------------------------------
    # Group coordinators

    def coordinator_of(self, group: str, listed_by: int) -> int:
        """The node to ask about ``group``: its coordinator as last seen, else the broker that
        listed it."""
        return self.coordinators.get(group, listed_by)

    async def find_coordinator(self, group: str) -> int:
        md = self.metadata
        assert md is not None
        response = await self.send_to_node(min(md.brokers), FindCoordinatorRequest(group, 0))
        if response.error_code != NONE:
            raise CoordinatorMoved(f"FindCoordinator({group!r}): error {response.error_code}")
        node_id = int(response.coordinator_id)
        if node_id not in md.brokers:
            await self.refresh_metadata()
        self.coordinators[group] = node_id
        return node_id
