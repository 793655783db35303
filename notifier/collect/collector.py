"""The collector: one scan of a Kafka cluster turned into a table of samples.

A scan reads, for every consumer group the allow/deny regexes let through, its state and
members, its committed offsets, and the log-end and log-start offsets of the partitions it
commits to or is assigned. Tools that send a request per partition or per group-partition fall
over at a few thousand groups (docs/architecture.md, "What a scan reads"), so the request pattern
here is fixed:

* ``ListGroups`` once per broker (v5 where the broker has it, so each group comes with its
  type: classic, consumer (KIP-848), share, streams);
* ``DescribeGroups`` for classic groups and ``ConsumerGroupDescribe`` for consumer-protocol
  groups, in batches per group coordinator (the batch size shrinks, and stays shrunk, when a
  broker drops or times out a batch: it is split in halves until the halves go through);
  share and streams groups are listed as what they are and not described or evaluated;
* ``OffsetFetch`` for many groups at once where the coordinator has v8 (KIP-709: in batches of
  ``offset_fetch_batch_size`` groups per coordinator, found out and split like DescribeGroups
  batches), once per group where it has not (negotiated from ApiVersions: nothing multi-group
  is sent to such a broker); all of a group's partitions in one request, with bounded
  concurrency;
* ``ListOffsets`` twice per partition leader (latest and earliest: a partition may appear only
  once per request), whatever the number of partitions;
* ``Metadata`` only when the cached copy is older than ``metadata_max_age_ms``, a request
  failed, a leader refused a partition as not its own, or a partition's leader is unknown
  (at most every 5 s for that reason, so a commit left on a deleted topic costs nothing).

:attr:`ScanResult.requests` counts what a scan sent, by API name, so tests and the metrics can
check that the number of requests does not grow with partitions; the process's running count
(:mod:`notifier.collect.requestcount`) adds them up, with each new connection's handshake.

Connections are aiokafka's (``aiokafka.conn.create_conn``: version negotiation, SSL and SASL)
but pooled here rather than through ``AIOKafkaClient``, whose background metadata task sends
requests on its own schedule and refreshes on every broken connection: neither would show up
in the per-scan count, and the offset-fetch probe below breaks a connection on purpose.

Brokers that lack parts of the protocol are handled by behaviour, never by name:

* a broker that drops the connection on ``OffsetFetch`` with no topic list ("all partitions of
  the group", KIP-88) is asked once; from then on this collector names the partitions: those of
  the topics the group is assigned or subscribed to, those it committed to in earlier scans,
  and every topic in the metadata when it knows none of those or the metadata was just
  refreshed (so a known group's commits to a new topic are found within
  ``metadata_max_age_ms``; a group id not seen before refreshes the metadata at once);
* DescribeGroups batches that fail are split, as above;
* a broker without ListGroups v5 lists groups without their type, and every group is
  described with DescribeGroups; a group DescribeGroups does not know (``GROUP_ID_NOT_FOUND``:
  it may be a consumer-protocol group, or have become one since it was listed) is asked for with
  ConsumerGroupDescribe where the coordinator has it, and a consumer-protocol group
  ConsumerGroupDescribe does not know (it went back to classic) with DescribeGroups; a
  coordinator without ConsumerGroupDescribe describes its groups with DescribeGroups.

The requests, error codes and answer parsers are in :mod:`notifier.collect.protocol` (with
the DescribeGroups request that works around an aiokafka decoding bug) and, for group types,
in :mod:`notifier.collect.grouptypes`.
"""

from __future__ import annotations

import asyncio
import logging
import re
import ssl
import time
from collections import Counter, defaultdict
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from typing import Any

from aiokafka.abc import AbstractTokenProvider
from aiokafka.conn import AIOKafkaConnection, CloseReason
from aiokafka.errors import (
    CorrelationIdError,
    IncompatibleBrokerVersion,
    KafkaConnectionError,
    KafkaError,
)
from aiokafka.helpers import create_ssl_context
from aiokafka.protocol.api import Request
from aiokafka.protocol.coordination import FindCoordinatorRequest
from aiokafka.protocol.metadata import MetadataRequest
from aiokafka.protocol.offset import OffsetRequest

from notifier.collect.grouptypes import (
    CLASSIC,
    CONSUMER,
    EVALUATED_TYPES,
    SHARE,
    ConsumerGroupDescribe,
    ListGroups,
    parse_consumer_group,
    parse_list_groups,
    unevaluated_reason,
)
from notifier.collect.protocol import (
    API_NAMES,
    COORDINATOR_ERRORS,
    COORDINATOR_LOAD_IN_PROGRESS,
    EARLIEST,
    GROUP_AUTHORIZATION_FAILED,
    GROUP_ID_NOT_FOUND,
    LATEST,
    LEADER_ERRORS,
    NONE,
    READ_UNCOMMITTED,
    CoordinatorMoved,
    DescribeGroups,
    Group,
    Metadata,
    OffsetFetch,
    OffsetFetchWanted,
    decode_member,
    group_member,
    parse_metadata,
    parse_offset_fetch,
    parse_offset_fetch_groups,
)
from notifier.collect.readonly import ReadOnly
from notifier.collect.requestcount import KAFKA_REQUESTS, KafkaRequests
from notifier.collect.results import (
    ClusterUnreachableError,
    ScanError,
    ScanResult,
    TopicPartition,
    elapsed_clock,
)
from notifier.collect.samples import build_samples, normalize_group_state
from notifier.collect.security import (
    RefreshingTokenProvider,
    describe_login,
    login_failure,
    open_connection,
    sasl_settings,
)
from notifier.collect.sharegroups import (
    DescribeShareGroupOffsets,
    ShareGroupDescribe,
    ShareOffsets,
    parse_share_group,
    parse_share_offsets,
)
from notifier.types import GroupMember

log = logging.getLogger("notifier.collect")  # the name it logged under before the split


SECURITY_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")

_RETRY_BACKOFF_S = 0.1
_SPREAD_MIN_BATCH = 64
_LEADER_REFRESH_MIN_S = 5.0


class _TransportError(Exception):
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


def _compile(patterns: str | Sequence[str] | None) -> list[re.Pattern[str]]:
    if patterns is None:
        return []
    if isinstance(patterns, str):
        patterns = [patterns]
    return [re.compile(p) for p in patterns]


async def _run_all(aws: Iterable[Awaitable[Any]]) -> None:
    """Run awaitables concurrently; the first failure cancels the rest and is re-raised as is."""
    try:
        async with asyncio.TaskGroup() as tg:
            for aw in aws:
                tg.create_task(aw)  # type: ignore[arg-type]
    except BaseExceptionGroup as group:
        raise group.exceptions[0] from None


def _spread(count: int, largest: int, ways: int) -> int:
    """A batch size for ``count`` groups: at most ``largest`` (what the broker takes), and small
    enough that the batches keep ``ways`` requests in flight, down to
    :data:`_SPREAD_MIN_BATCH` groups (below that, fewer requests matter more): a broker that
    answers each request on one thread, as the embedded one does, answers sooner."""
    return max(1, min(largest, max(_SPREAD_MIN_BATCH, -(-count // ways))))


def _chunks(items: Sequence[str], size: int) -> list[list[str]]:
    return [list(items[i : i + size]) for i in range(0, len(items), size)]


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


class ClusterCollector:
    """Scans one Kafka cluster; keeps what it learns about the cluster between scans.

    ``group_allow``/``group_deny`` are regexes matched anywhere in the group id (``re.search``,
    as Burrow does); a group is scanned when it matches an allow pattern (or there are none)
    and no deny pattern. Everything else is connection settings passed to aiokafka; SSL
    settings build a context with :func:`aiokafka.helpers.create_ssl_context` unless
    ``ssl_context`` is given. Every request it sends also counts in ``requests`` (by default the
    process's, :data:`~notifier.collect.requestcount.KAFKA_REQUESTS`) as the ``scan`` client's.

    One scan runs at a time per collector. What a collector learns (coordinators, a working
    DescribeGroups batch size, whether the cluster answers "all partitions" offset fetches,
    the topics each group committed to) lives as long as the object.
    """

    def __init__(
        self,
        bootstrap_servers: str | Sequence[str],
        *,
        cluster: str = "default",
        client_id: str = "notifier",
        request_timeout_ms: int = 10_000,
        scan_timeout_ms: int = 60_000,
        metadata_max_age_ms: int = 300_000,
        connections_max_idle_ms: int = 540_000,
        group_allow: str | Sequence[str] | None = None,
        group_deny: str | Sequence[str] | None = None,
        describe_batch_size: int = 500,
        offset_fetch_concurrency: int = 16,
        offset_fetch_batch_size: int = 500,
        security_protocol: str = "PLAINTEXT",
        ssl_context: ssl.SSLContext | None = None,
        ssl_cafile: str | None = None,
        ssl_certfile: str | None = None,
        ssl_keyfile: str | None = None,
        ssl_password: str | None = None,
        sasl_mechanism: str = "PLAIN",
        sasl_username: str | None = None,
        sasl_password: str | None = None,
        sasl_oauth_token_provider: AbstractTokenProvider | None = None,
        sasl_kerberos_service_name: str = "kafka",
        sasl_kerberos_domain_name: str | None = None,
        requests: KafkaRequests | None = None,
    ) -> None:
        if isinstance(bootstrap_servers, str):
            bootstrap_servers = [s for s in bootstrap_servers.split(",") if s.strip()]
        self._bootstrap = [_parse_address(s) for s in bootstrap_servers]
        if not self._bootstrap:
            raise ValueError("bootstrap_servers is empty")
        if describe_batch_size < 1:
            raise ValueError("describe_batch_size must be at least 1")
        if offset_fetch_concurrency < 1:
            raise ValueError("offset_fetch_concurrency must be at least 1")
        if offset_fetch_batch_size < 1:
            raise ValueError("offset_fetch_batch_size must be at least 1")
        if security_protocol not in SECURITY_PROTOCOLS:
            raise ValueError(f"security_protocol must be one of {SECURITY_PROTOCOLS}")
        sasl = sasl_settings(
            security_protocol,
            sasl_mechanism,
            username=sasl_username,
            password=sasl_password,
            token_provider=sasl_oauth_token_provider,
            kerberos_service_name=sasl_kerberos_service_name,
            kerberos_domain_name=sasl_kerberos_domain_name,
        )
        if security_protocol in ("SSL", "SASL_SSL") and ssl_context is None:
            ssl_context = create_ssl_context(
                cafile=ssl_cafile,
                certfile=ssl_certfile,
                keyfile=ssl_keyfile,
                password=ssl_password,
            )
        self._cluster = cluster
        self._conn_settings: dict[str, Any] = {
            "client_id": client_id,
            "request_timeout_ms": request_timeout_ms,
            "ssl_context": ssl_context if security_protocol in ("SSL", "SASL_SSL") else None,
            "security_protocol": security_protocol,
            "max_idle_ms": connections_max_idle_ms,
            **sasl,
        }
        self._token_provider = sasl.get("sasl_oauth_token_provider")
        self._login = describe_login(
            security_protocol,
            sasl.get("sasl_mechanism"),
            username=sasl_username,
            token_provider=self._token_provider,
            client_certificate=ssl_certfile,
        )
        self._request_timeout_s = request_timeout_ms / 1000
        self._scan_timeout_s = scan_timeout_ms / 1000
        self._metadata_max_age_s = metadata_max_age_ms / 1000
        self._leader_refresh_min_s = min(self._metadata_max_age_s, _LEADER_REFRESH_MIN_S)
        self._allow = _compile(group_allow)
        self._deny = _compile(group_deny)
        self._describe_batch = describe_batch_size
        self._concurrency = offset_fetch_concurrency

        self._conns: dict[tuple[str, int], AIOKafkaConnection] = {}
        self._conn_locks: defaultdict[tuple[str, int], asyncio.Lock] = defaultdict(asyncio.Lock)
        self._metadata: Metadata | None = None
        self._metadata_stale = True
        self._coordinators: dict[str, int] = {}
        self._fetch_all: bool | None = None
        self._fetch_batch = offset_fetch_batch_size
        self._one_group_fetch: set[int] = set()
        self._group_topics: dict[str, set[str]] = {}
        self._group_types: dict[str, str | None] = {}
        self._told_unevaluated: set[str] = set()
        self._told_no_consumer_describe: set[int] = set()
        self._told_no_share_apis: set[int] = set()
        self._seen_groups: set[str] = set()
        self._scan_lock = asyncio.Lock()
        self.group_filter: Callable[[str], bool] | None = None
        """Set by a fleet instance: the groups it owns. The others are listed by ListGroups
        (one request per broker) and left alone: not described, no offsets fetched."""
        self._requests: Counter[str] = Counter()
        self._tally = (requests or KAFKA_REQUESTS).tally("scan")
        """The process's count (``notifier_kafka_requests_total``), which outlives each scan's."""
        self._connects = 0
        self._answered = False
        """Whether a broker answered during the scan under way (a connection handshake or a
        request): a scan that fails without one cost no more than a probe."""
        self._closed = False

    # ----------------------------------------------------------------------------------------
    # Public surface

    cluster = ReadOnly[str]("_cluster")
    describe_batch_size = ReadOnly[int](
        "_describe_batch",
        "The DescribeGroups and ConsumerGroupDescribe batch size in use (shrinks when a broker "
        "rejects a batch).",
    )
    offset_fetch_batch_size = ReadOnly[int](
        "_fetch_batch",
        "Groups per OffsetFetch where the coordinator has v8 (shrinks when a broker rejects a "
        "batch).",
    )
    offset_fetch_all_partitions = ReadOnly[bool | None](
        "_fetch_all",
        'Whether the cluster answers "all partitions" OffsetFetch (None: not tried yet).',
    )

    def matches(self, group: str) -> bool:
        """Whether the allow/deny regexes let ``group`` through."""
        if self._allow and not any(p.search(group) for p in self._allow):
            return False
        return not any(p.search(group) for p in self._deny)

    async def scan(self) -> ScanResult:
        """Scan the cluster once; raises :class:`ScanError` on any failure or timeout
        (:class:`ClusterUnreachableError` when no broker answered at all)."""
        if self._closed:
            raise ScanError(f"collector for cluster {self._cluster!r} is closed")
        async with self._scan_lock:
            self._requests = Counter()
            self._connects = 0
            self._answered = False
            self._retire_expiring_logins()
            started = time.monotonic()
            deadline = asyncio.timeout(self._scan_timeout_s)
            try:
                async with deadline:
                    result = await self._scan(started)
            except Exception as exc:
                self._metadata_stale = True
                failure = ScanError if self._answered else ClusterUnreachableError
                if isinstance(exc, TimeoutError) and deadline.expired():
                    raise failure(
                        f"scan of cluster {self._cluster!r} timed out after "
                        f"{self._scan_timeout_s:g}s"
                    ) from exc
                raise failure(
                    f"scan of cluster {self._cluster!r} failed: {exc or type(exc).__name__}"
                ) from exc
            return result

    async def close(self) -> None:
        """Close every connection; the collector cannot scan afterwards."""
        self._closed = True
        conns, self._conns = list(self._conns.values()), {}
        waiters = [conn.close(reason=CloseReason.SHUTDOWN) for conn in conns]
        if waiters:
            await asyncio.wait(waiters, timeout=self._request_timeout_s)

    async def __aenter__(self) -> ClusterCollector:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()

    # ----------------------------------------------------------------------------------------
    # The scan

    async def _scan(self, started: float) -> ScanResult:
        metadata, refreshed = await self._current_metadata()
        listed = await self._list_groups(metadata)
        owns = self.group_filter
        matching = [g for g in listed if self.matches(g)]
        selected = {g: listed[g] for g in matching if owns is None or owns(g)}
        unevaluated = self._unevaluated(selected)
        groups, skipped = await self._describe(
            {g: node for g, node in selected.items() if g not in unevaluated}
        )
        skipped.update({g: unevaluated_reason(t) for g, t in unevaluated.items()})
        commits = await self._fetch_commits(groups, rediscover=refreshed)
        shared = {g: selected[g] for g, kind in unevaluated.items() if kind == SHARE}
        share_offsets: dict[str, ShareOffsets] = {}
        if shared:
            share_groups, share_offsets, share_skipped = await self._share_groups(shared)
            for name in share_groups:
                skipped.pop(name, None)
            skipped.update(share_skipped)
            groups.update(share_groups)
            commits.update({name: found.starts for name, found in share_offsets.items()})

        wanted: set[TopicPartition] = set()
        for name, group in groups.items():
            wanted.update(commits.get(name, {}))
            wanted.update(group.assigned)
        (ts, elapsed_at), log_end, log_start, unavailable = await self._list_offsets(wanted)
        for name, found in share_offsets.items():
            commits[name] = found.offsets(log_end)

        samples = build_samples(
            ts=ts,
            cluster=self._cluster,
            groups=groups,
            commits=commits,
            log_end=log_end,
            log_start=log_start,
        )
        return ScanResult(
            cluster=self._cluster,
            ts=ts,
            samples=samples,
            requests=dict(self._requests),
            group_states={
                n: normalize_group_state(g.state, g.group_type) for n, g in sorted(groups.items())
            },
            group_members={n: len(g.member_ids) for n, g in groups.items()},
            group_types=dict(
                sorted({**{n: g.group_type for n, g in groups.items()}, **unevaluated}.items())
            ),
            skipped_groups=skipped,
            unavailable_partitions=tuple(sorted(unavailable)),
            connections_opened=self._connects,
            duration_s=time.monotonic() - started,
            elapsed_at=elapsed_at,
            owners={n: g.owners for n, g in sorted(groups.items()) if g.owners},
            layout=(self._metadata or metadata).layout,
            listed_groups=tuple(matching),
        )

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
                self._metadata_stale = True
                # A broker that accepts the connection but never answers its handshake is a
                # timeout like any other request's: say so rather than "TimeoutError()".
                detail = (
                    f"no answer within {self._request_timeout_s:g}s"
                    if isinstance(exc, TimeoutError)
                    else login_failure(exc, self._login, self._conn_settings["sasl_mechanism"])
                    or repr(exc)
                )
                raise _TransportError(f"cannot connect to {host}:{port}: {detail}") from exc
            self._conns[address] = conn
            self._connects += 1
            self._answered = True
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

    async def _send(
        self, address: tuple[str, int], request: Request[Any], *, probing: bool = False
    ) -> Any:
        """Send one request (counted) and return its decoded answer, or raise _TransportError.

        A failed request marks the metadata stale (a broker may be gone) unless ``probing``:
        then the caller expects some brokers to fail it and handles that itself.
        """
        api = API_NAMES.get(request.API_KEY, f"api{request.API_KEY}")
        conn = await self._connection(address)
        _PROBE_NOISE.probes_in_flight += probing
        try:
            answer = conn.send(request)  # encodes now: an unsupported version raises here
            self._requests[api] += 1
            self._tally.add(api)
            response = await answer
            self._answered = True
            return response
        except (KafkaConnectionError, CorrelationIdError, TimeoutError, OSError) as exc:
            conn.close(reason=CloseReason.CONNECTION_BROKEN)
            self._conns.pop(address, None)
            if not probing:
                self._metadata_stale = True
            cause = exc.__cause__
            detail = f"{exc!r}" + (f" (cause: {cause!r})" if cause is not None else "")
            if isinstance(exc, TimeoutError):
                detail = f"no answer within {self._request_timeout_s:g}s"
            raise _TransportError(f"{api} to {address[0]}:{address[1]}: {detail}") from exc
        finally:
            _PROBE_NOISE.probes_in_flight -= probing

    def _address(self, node_id: int) -> tuple[str, int]:
        assert self._metadata is not None
        try:
            return self._metadata.brokers[node_id]
        except KeyError:
            self._metadata_stale = True
            raise ScanError(f"broker {node_id} is not in the cluster metadata") from None

    async def _send_to_node(
        self, node_id: int, request: Request[Any], *, probing: bool = False
    ) -> Any:
        return await self._send(self._address(node_id), request, probing=probing)

    # ----------------------------------------------------------------------------------------
    # Metadata

    async def _current_metadata(self) -> tuple[Metadata, bool]:
        md = self._metadata
        if (
            md is None
            or self._metadata_stale
            or time.monotonic() - md.fetched_at >= self._metadata_max_age_s
        ):
            return await self._refresh_metadata(), True
        return md, False

    async def _refresh_metadata(self) -> Metadata:
        candidates: list[tuple[str, int]] = []
        if self._metadata is not None:
            candidates.extend(self._metadata.brokers[n] for n in sorted(self._metadata.brokers))
        candidates.extend(a for a in self._bootstrap if a not in candidates)
        errors: list[str] = []
        for address in candidates:
            try:
                response = await self._send(address, MetadataRequest(None))
            except _TransportError as exc:
                errors.append(str(exc))
                continue
            md = parse_metadata(response)
            if not md.brokers:
                errors.append(f"{address[0]}:{address[1]} returned metadata without brokers")
                continue
            self._metadata = md
            self._metadata_stale = False
            self._forget_dead_connections(md)
            return md
        raise ScanError("cannot fetch cluster metadata: " + "; ".join(errors))

    def _forget_dead_connections(self, md: Metadata) -> None:
        live = set(md.brokers.values()) | set(self._bootstrap)
        for address in [a for a in self._conns if a not in live]:
            self._conns.pop(address).close(reason=CloseReason.SHUTDOWN)

    # ----------------------------------------------------------------------------------------
    # Groups

    async def _list_groups(self, md: Metadata) -> dict[str, int]:
        """Every group id, mapped to the broker that listed it (its coordinator); each group's
        type (None where the broker's ListGroups has none) goes to ``_group_types``."""
        listed: dict[str, int] = {}
        types: dict[str, str | None] = {}

        async def one(node_id: int) -> None:
            for attempt in range(2):
                response = await self._send_to_node(node_id, ListGroups())
                if response.error_code == NONE:
                    for group_id, group_type in parse_list_groups(response):
                        listed[group_id] = node_id
                        types[group_id] = group_type
                    return
                if response.error_code != COORDINATOR_LOAD_IN_PROGRESS or attempt:
                    raise ScanError(
                        f"ListGroups on broker {node_id} failed with error code "
                        f"{response.error_code}"
                    )
                await asyncio.sleep(_RETRY_BACKOFF_S)

        await _run_all(one(node) for node in sorted(md.brokers))
        self._group_types = types
        self._coordinators.update(listed)
        for gone in set(self._coordinators) - set(listed):
            del self._coordinators[gone]
        for gone in set(self._group_topics) - set(listed):
            del self._group_topics[gone]
        return listed

    async def _find_coordinator(self, group: str) -> int:
        md = self._metadata
        assert md is not None
        response = await self._send_to_node(min(md.brokers), FindCoordinatorRequest(group, 0))
        if response.error_code != NONE:
            raise CoordinatorMoved(f"FindCoordinator({group!r}): error {response.error_code}")
        node_id = int(response.coordinator_id)
        if node_id not in md.brokers:
            await self._refresh_metadata()
        self._coordinators[group] = node_id
        return node_id

    def _unevaluated(self, selected: Mapping[str, int]) -> dict[str, str]:
        """The selected groups of a type the rules do not judge (share, streams), by type;
        each is said once in the log, when first seen."""
        unevaluated = {
            group: group_type
            for group in selected
            if (group_type := self._group_types.get(group)) is not None
            and group_type not in EVALUATED_TYPES
        }
        for group in sorted(set(unevaluated) - self._told_unevaluated):
            if unevaluated[group] == SHARE:  # said by _share_groups when it cannot read them
                continue
            log.info("cluster %s: %s is a %s", self._cluster, group,
                     unevaluated_reason(unevaluated[group]))  # fmt: skip
        self._told_unevaluated = set(unevaluated)
        return unevaluated

    async def _describe(
        self, selected: Mapping[str, int]
    ) -> tuple[dict[str, Group], dict[str, str]]:
        """Describe classic groups with DescribeGroups and consumer-protocol groups with
        ConsumerGroupDescribe; a group one of them does not know is asked for with the other."""
        consumer = {g: n for g, n in selected.items() if self._group_types.get(g) == CONSUMER}
        classic = {g: n for g, n in selected.items() if g not in consumer}
        raw, _ = await self._describe_groups(classic, DescribeGroups)
        consumer_raw, unsupported = await self._describe_groups(consumer, ConsumerGroupDescribe)

        # A group DescribeGroups does not know may be a consumer-protocol group (a listing
        # without types, or a group converted since it was listed).
        not_classic = {g: classic[g] for g, e in raw.items() if e[0] == GROUP_ID_NOT_FOUND}
        if not_classic:
            found, _ = await self._describe_groups(not_classic, ConsumerGroupDescribe)
            for group, entry in found.items():
                if entry[0] != GROUP_ID_NOT_FOUND:
                    consumer_raw[group] = entry
                    del raw[group]
        # A consumer-protocol group that went back to classic, or whose coordinator has no
        # ConsumerGroupDescribe: DescribeGroups has the last word.
        back = {g: consumer[g] for g, e in consumer_raw.items() if e[0] == GROUP_ID_NOT_FOUND}
        back.update({g: consumer[g] for g in unsupported})
        if back:
            described, _ = await self._describe_groups(back, DescribeGroups)
            for group, entry in described.items():
                consumer_raw.pop(group, None)
                raw[group] = entry

        groups: dict[str, Group] = {}
        skipped: dict[str, str] = {}
        for name in sorted(consumer_raw):
            entry = consumer_raw[name]
            error_code, message = entry[0], entry[1]
            if error_code == GROUP_AUTHORIZATION_FAILED:
                skipped[name] = "GROUP_AUTHORIZATION_FAILED"
            elif error_code != NONE:
                raise ScanError(
                    f"ConsumerGroupDescribe({name!r}) failed with error code {error_code}"
                    + (f": {message}" if message else "")
                )
            else:
                groups[name] = parse_consumer_group(entry)
        for name in sorted(raw):
            error_code, _, state, protocol_type, _protocol, members = raw[name][:6]
            if error_code == GROUP_ID_NOT_FOUND:  # deleted since it was listed
                listed_type = self._group_types.get(name) or CLASSIC
                groups[name] = Group(name, "Dead", protocol_type or "", [], set(), set(),
                                     group_type=listed_type)  # fmt: skip
                continue
            if error_code == GROUP_AUTHORIZATION_FAILED:
                skipped[name] = "GROUP_AUTHORIZATION_FAILED"
                continue
            if error_code != NONE:
                raise ScanError(f"DescribeGroups({name!r}) failed with error code {error_code}")
            assigned: set[TopicPartition] = set()
            subscribed: set[str] = set()
            member_ids: list[str] = []
            owners: dict[TopicPartition, GroupMember] = {}
            for member in members:
                member_id, client_id, host, metadata, assignment = member[:5]
                member_ids.append(member_id)
                parts, topics = decode_member(protocol_type or "", metadata, assignment)
                assigned |= parts
                subscribed |= topics
                owner = group_member(member_id, client_id, host)
                owners.update(dict.fromkeys(parts, owner))
            groups[name] = Group(
                name, state or "Unknown", protocol_type or "", member_ids, assigned, subscribed,
                owners=owners,
            )  # fmt: skip
        return groups, skipped

    async def _share_groups(
        self, selected: Mapping[str, int]
    ) -> tuple[dict[str, Group], dict[str, ShareOffsets], dict[str, str]]:
        """Share groups (see :mod:`~notifier.collect.sharegroups`) described and their
        share-partition start offsets, from each one's coordinator, and those left out this
        scan and why; a coordinator without ShareGroupDescribe or DescribeShareGroupOffsets
        leaves its groups listed and not evaluated."""
        groups: dict[str, Group] = {}
        offsets: dict[str, ShareOffsets] = {}
        skipped: dict[str, str] = {}

        async def on_node(node_id: int, names: list[str]) -> None:
            try:
                described = await self._send_to_node(node_id, ShareGroupDescribe(names))
                answered = await self._send_to_node(node_id, DescribeShareGroupOffsets(names))
            except (IncompatibleBrokerVersion, NotImplementedError):
                if node_id not in self._told_no_share_apis:
                    self._told_no_share_apis.add(node_id)
                    log.info("cluster %s: broker %d has no ShareGroupDescribe v1 and "
                             "DescribeShareGroupOffsets: its share groups are listed, not "
                             "evaluated", self._cluster, node_id)  # fmt: skip
                return
            found, errors = parse_share_offsets(answered)
            for entry in described.groups:
                name, error_code = entry[2], entry[0] or errors.get(entry[2], (0, ""))[0]
                if error_code == GROUP_AUTHORIZATION_FAILED:
                    skipped[name] = "GROUP_AUTHORIZATION_FAILED"
                elif error_code:  # moved or gone since it was listed: the next scan sees
                    skipped[name] = f"share group (KIP-932): not read (error {error_code})"
                else:
                    groups[name] = parse_share_group(entry)
                    offsets[name] = found.get(name, ShareOffsets())

        by_node: defaultdict[int, list[str]] = defaultdict(list)
        for group, node_id in selected.items():
            by_node[self._coordinators.get(group, node_id)].append(group)
        await _run_all(on_node(node, sorted(names)) for node, names in by_node.items())
        return groups, offsets, skipped

    async def _describe_groups(
        self, selected: Mapping[str, int], api: type[DescribeGroups | ConsumerGroupDescribe]
    ) -> tuple[dict[str, tuple[Any, ...]], list[str]]:
        """Each group's entry in the answers of ``api`` (DescribeGroups or
        ConsumerGroupDescribe) from its coordinator, and the groups whose coordinator does not
        have that API (negotiated from ApiVersions: nothing was sent for them)."""
        raw: dict[str, tuple[Any, ...]] = {}
        unsupported: list[str] = []

        async def on_node(node_id: int, names: list[str]) -> None:
            try:
                await self._describe_on(node_id, names, raw, api)
            except (IncompatibleBrokerVersion, NotImplementedError) as exc:
                # Raised while encoding, before sending: no version both sides know.
                if api is DescribeGroups:
                    raise ScanError(
                        f"broker {node_id} has no DescribeGroups version this collector speaks"
                    ) from exc
                unsupported.extend(names)
                if node_id not in self._told_no_consumer_describe:
                    self._told_no_consumer_describe.add(node_id)
                    log.info(
                        "cluster %s: broker %d has no %s; its groups are described with "
                        "DescribeGroups",
                        self._cluster,
                        node_id,
                        API_NAMES[api.API_KEY],
                    )

        by_node: defaultdict[int, list[str]] = defaultdict(list)
        for group, node_id in selected.items():
            by_node[self._coordinators.get(group, node_id)].append(group)
        await _run_all(on_node(node, sorted(names)) for node, names in by_node.items())

        # Groups whose coordinator moved between ListGroups and the describe: ask again once.
        moved = sorted(g for g, entry in raw.items() if entry[0] in COORDINATOR_ERRORS)
        if moved:
            await asyncio.sleep(_RETRY_BACKOFF_S)
            by_node = defaultdict(list)
            for group in moved:
                by_node[await self._find_coordinator(group)].append(group)
            await _run_all(on_node(n, names) for n, names in by_node.items())
        return raw, unsupported

    async def _describe_on(
        self,
        node_id: int,
        names: list[str],
        out: dict[str, tuple[Any, ...]],
        api: type[DescribeGroups | ConsumerGroupDescribe],
    ) -> None:
        """Describe ``names`` on one coordinator in batches of the learned size.

        The first batch goes alone, so a broker that drops oversized batches is found out (and
        the size learned) before anything else is in flight on that connection. The rest go
        concurrently; a batch that fails among them is retried alone with splitting, so a
        failure caused by a sibling's dropped connection does not shrink the size.
        """
        if not names:
            return
        size = _spread(len(names), self._describe_batch, self._concurrency)
        first = names[:size]
        await self._describe_split(node_id, first, out, api)
        rest = _chunks(names[len(first) :], min(size, self._describe_batch))
        failed: list[list[str]] = []
        gate = asyncio.Semaphore(self._concurrency)

        async def one(batch: list[str]) -> None:
            async with gate:
                try:
                    await self._describe_batch_once(node_id, batch, out, api)
                except _TransportError:
                    failed.append(batch)

        await _run_all(one(batch) for batch in rest)
        for batch in failed:
            await self._describe_split(node_id, batch, out, api)

    async def _describe_split(
        self,
        node_id: int,
        batch: list[str],
        out: dict[str, tuple[Any, ...]],
        api: type[DescribeGroups | ConsumerGroupDescribe],
    ) -> None:
        name = API_NAMES[api.API_KEY]
        try:
            await self._describe_batch_once(node_id, batch, out, api)
            return
        except _TransportError as exc:
            if len(batch) == 1:
                raise ScanError(f"{name}({batch[0]!r}) failed: {exc}") from exc
            log.info(
                "cluster %s: %s of %d groups failed (%s); splitting",
                self._cluster,
                name,
                len(batch),
                exc,
            )
        half = (len(batch) + 1) // 2
        await self._describe_split(node_id, batch[:half], out, api)
        await self._describe_split(node_id, batch[half:], out, api)
        if half < self._describe_batch:
            log.warning(
                "cluster %s: %s batch size lowered from %d to %d",
                self._cluster,
                name,
                self._describe_batch,
                half,
            )
            self._describe_batch = half

    async def _describe_batch_once(
        self,
        node_id: int,
        batch: list[str],
        out: dict[str, tuple[Any, ...]],
        api: type[DescribeGroups | ConsumerGroupDescribe],
    ) -> None:
        response = await self._send_to_node(node_id, api(batch), probing=len(batch) > 1)
        # The group id follows the error code in DescribeGroups, and the error message in
        # ConsumerGroupDescribe.
        at = 1 if api is DescribeGroups else 2
        answered = {entry[at]: tuple(entry) for entry in response.groups}
        missing = [g for g in batch if g not in answered]
        if missing:
            raise ScanError(
                f"{API_NAMES[api.API_KEY]} on broker {node_id} did not answer for {missing}"
            )
        for group in batch:
            out[group] = answered[group]

    # ----------------------------------------------------------------------------------------
    # Committed offsets

    async def _fetch_commits(
        self, groups: Mapping[str, Group], *, rediscover: bool
    ) -> dict[str, dict[TopicPartition, int]]:
        commits: dict[str, dict[TopicPartition, int]] = {}
        pending = [groups[name] for name in sorted(groups)]
        if self._fetch_all is None and pending:
            # Learn alone whether "all partitions" works: a broker that cannot answer it may
            # drop the connection, which would fail every other request in flight on it.
            probed = await self._probe_fetch_all(pending[0])
            if probed is not None:
                commits[pending.pop(0).name] = probed
        # A group not seen before may commit to topics created after the metadata was read;
        # when partitions must be named, only fresh metadata can show them.
        new_group = any(group.name not in self._seen_groups for group in pending)
        if self._fetch_all is False and not rediscover and new_group:
            await self._refresh_metadata()
        wanted: dict[str, OffsetFetchWanted] = {}
        for group in pending:
            named = None if self._fetch_all else self._named_partitions(group, rediscover)
            if named == []:
                commits[group.name] = {}  # nothing the group could have committed to
            else:
                wanted[group.name] = named
        asking = sorted(wanted)
        for attempt in range(2):
            by_node: defaultdict[int, list[str]] = defaultdict(list)
            for name in asking:
                node_id = self._coordinators.get(name)
                if node_id is None:
                    node_id = await self._find_coordinator(name)
                by_node[node_id].append(name)
            moved: list[str] = []
            await _run_all(
                self._fetch_on(node_id, names, wanted, commits, moved)
                for node_id, names in by_node.items()
            )
            if not moved:
                break
            for name in moved:
                self._coordinators.pop(name, None)
            if attempt:
                raise ScanError(f"OffsetFetch({moved[0]!r}): its coordinator keeps moving")
            await asyncio.sleep(_RETRY_BACKOFF_S)
            asking = sorted(moved)
        for name, found in commits.items():
            self._group_topics[name] = {topic for topic, _ in found}
        self._seen_groups = set(groups)
        return commits

    async def _probe_fetch_all(self, group: Group) -> dict[TopicPartition, int] | None:
        """One OffsetFetch for every partition of ``group``: its commits, or ``None`` when the
        broker cannot answer that (learned once; partitions are named from then on)."""
        for attempt in range(2):
            node_id = self._coordinators.get(group.name)
            try:
                if node_id is None:
                    node_id = await self._find_coordinator(group.name)
                response = await self._send_to_node(
                    node_id, OffsetFetch([(group.name, None)]), probing=True
                )
                found = parse_offset_fetch(group.name, response)
            except (_TransportError, IncompatibleBrokerVersion) as exc:
                # Expected of some brokers (the embedded one): nothing for anyone to fix.
                log.info(
                    "cluster %s: the broker does not answer OffsetFetch for all partitions of "
                    "a group; naming the partitions instead",
                    self._cluster,
                )
                log.debug("cluster %s: the all-partitions OffsetFetch failed: %s", self._cluster,
                          exc)  # fmt: skip
                self._fetch_all = False
                return None
            except CoordinatorMoved as exc:
                self._coordinators.pop(group.name, None)
                if attempt:
                    raise ScanError(f"OffsetFetch({group.name!r}): {exc}") from exc
                await asyncio.sleep(_RETRY_BACKOFF_S)
                continue
            self._fetch_all = True
            return found
        raise AssertionError("unreachable")

    async def _fetch_on(
        self,
        node_id: int,
        names: list[str],
        wanted: Mapping[str, OffsetFetchWanted],
        out: dict[str, dict[TopicPartition, int]],
        moved: list[str],
    ) -> None:
        """The commits of ``names`` from their coordinator: many groups per request where it
        has OffsetFetch v8 (in batches of the learned size, found out and split as
        :meth:`_describe_on` does), one request per group where it has not."""
        batches: list[list[str]] = []
        if node_id not in self._one_group_fetch and self._fetch_batch > 1 and len(names) > 1:
            size = _spread(len(names), self._fetch_batch, self._concurrency)
            first = names[:size]
            try:
                await self._fetch_split(node_id, first, wanted, out, moved)
                batches = _chunks(names[len(first) :], min(size, self._fetch_batch))
            except IncompatibleBrokerVersion:
                # Raised while encoding, before sending: the broker has no v8.
                self._one_group_fetch.add(node_id)
                log.info(
                    "cluster %s: broker %d has no OffsetFetch v8 (KIP-709): one request per group",
                    self._cluster,
                    node_id,
                )
        if not batches:
            done = set(out) | set(moved)
            batches = [[name] for name in names if name not in done]
        failed: list[list[str]] = []
        gate = asyncio.Semaphore(self._concurrency)

        async def one(batch: list[str]) -> None:
            async with gate:
                try:
                    await self._fetch_batch_once(node_id, batch, wanted, out, moved)
                except _TransportError:
                    if len(batch) == 1:
                        raise
                    failed.append(batch)

        await _run_all(one(batch) for batch in batches)
        for batch in failed:
            await self._fetch_split(node_id, batch, wanted, out, moved)

    async def _fetch_split(
        self,
        node_id: int,
        batch: list[str],
        wanted: Mapping[str, OffsetFetchWanted],
        out: dict[str, dict[TopicPartition, int]],
        moved: list[str],
    ) -> None:
        try:
            await self._fetch_batch_once(node_id, batch, wanted, out, moved)
            return
        except _TransportError as exc:
            if len(batch) == 1:
                raise ScanError(f"OffsetFetch({batch[0]!r}) failed: {exc}") from exc
            log.info(
                "cluster %s: OffsetFetch of %d groups failed (%s); splitting",
                self._cluster,
                len(batch),
                exc,
            )
        half = (len(batch) + 1) // 2
        await self._fetch_split(node_id, batch[:half], wanted, out, moved)
        await self._fetch_split(node_id, batch[half:], wanted, out, moved)
        if half < self._fetch_batch:
            log.warning(
                "cluster %s: OffsetFetch batch size lowered from %d to %d",
                self._cluster,
                self._fetch_batch,
                half,
            )
            self._fetch_batch = half

    async def _fetch_batch_once(
        self,
        node_id: int,
        batch: list[str],
        wanted: Mapping[str, OffsetFetchWanted],
        out: dict[str, dict[TopicPartition, int]],
        moved: list[str],
    ) -> None:
        request = OffsetFetch([(name, wanted[name]) for name in batch])
        response = await self._send_to_node(node_id, request, probing=len(batch) > 1)
        if response.API_VERSION < 8:
            (name,) = batch
            try:
                out[name] = parse_offset_fetch(name, response)
            except CoordinatorMoved:
                moved.append(name)
            return
        answers = parse_offset_fetch_groups(response)
        missing = [name for name in batch if name not in answers]
        if missing:
            raise ScanError(f"OffsetFetch on broker {node_id} did not answer for {missing}")
        for name in batch:
            answer = answers[name]
            if isinstance(answer, CoordinatorMoved):
                moved.append(name)
            else:
                out[name] = answer

    def _named_partitions(self, group: Group, rediscover: bool) -> list[tuple[str, list[int]]]:
        """Every partition a group may have committed to, for brokers without "all partitions".

        Topics the group is assigned or subscribed to and topics it committed to before, each
        with every partition the metadata knows; all topics when none of those is known or the
        metadata was just refreshed (how commits to a topic new to the group are found).
        """
        md = self._metadata
        assert md is not None
        topics = group.topics_of_interest | self._group_topics.get(group.name, set())
        if rediscover or not topics:
            topics |= set(md.user_topics())
        wanted: defaultdict[str, set[int]] = defaultdict(set)
        for topic in topics:
            wanted[topic].update(md.partitions(topic))
        for topic, partition in group.assigned:
            wanted[topic].add(partition)
        return [(topic, sorted(parts)) for topic, parts in sorted(wanted.items()) if parts]

    # ----------------------------------------------------------------------------------------
    # Log offsets

    async def _list_offsets(
        self, wanted: set[TopicPartition]
    ) -> tuple[
        tuple[int, float],
        dict[TopicPartition, int],
        dict[TopicPartition, int | None],
        set[TopicPartition],
    ]:
        md = self._metadata
        assert md is not None
        leaderless = any(md.leader(tp) not in md.brokers for tp in wanted)
        if leaderless and time.monotonic() - md.fetched_at >= self._leader_refresh_min_s:
            # New topics or moved leaders; rate-limited so that a commit left on a deleted
            # topic does not cost a metadata request every scan.
            md = await self._refresh_metadata()
        ts, elapsed_at = _now_ms(), elapsed_clock()
        log_end: dict[TopicPartition, int] = {}
        log_start: dict[TopicPartition, int | None] = {}
        failed = await self._list_offsets_round(md, wanted, log_end, log_start)
        if failed:
            # NOT_LEADER and friends: a leader moved since the metadata was read.
            md = await self._refresh_metadata()
            await self._list_offsets_round(md, failed, log_end, log_start)
        unavailable = {tp for tp in wanted if tp not in log_end}
        if unavailable:
            log.warning(
                "cluster %s: no log-end offset for %d partitions (e.g. %s)",
                self._cluster,
                len(unavailable),
                min(unavailable),
            )
        return (ts, elapsed_at), log_end, log_start, unavailable

    async def _list_offsets_round(
        self,
        md: Metadata,
        wanted: Iterable[TopicPartition],
        log_end: dict[TopicPartition, int],
        log_start: dict[TopicPartition, int | None],
    ) -> set[TopicPartition]:
        """One ListOffsets per leader and timestamp for the partitions with a known leader.

        Returns the partitions a leader refused as not (or no longer) its own.
        """
        by_leader: defaultdict[int, list[TopicPartition]] = defaultdict(list)
        retry: set[TopicPartition] = set()
        for tp in wanted:
            leader = md.leader(tp)
            if leader in md.brokers:
                by_leader[leader].append(tp)

        async def one(leader: int, tps: list[TopicPartition], timestamp: int) -> None:
            by_topic: defaultdict[str, list[tuple[int, int]]] = defaultdict(list)
            for topic, partition in sorted(tps):
                by_topic[topic].append((partition, timestamp))
            request = OffsetRequest(-1, READ_UNCOMMITTED, sorted(by_topic.items()))
            response = await self._send_to_node(leader, request)
            target = log_end if timestamp == LATEST else log_start
            for topic, partitions in response.topics:
                for entry in partitions:
                    partition, error_code = entry[0], entry[1]
                    tp = (topic, partition)
                    if error_code == NONE:
                        offset = entry[2][0] if response.API_VERSION == 0 else entry[3]
                        target[tp] = int(offset)
                    elif error_code in LEADER_ERRORS:
                        retry.add(tp)
                    elif timestamp == LATEST:
                        raise ScanError(
                            f"ListOffsets({topic}/{partition}) failed with error code {error_code}"
                        )

        await _run_all(
            one(leader, tps, timestamp)
            for leader, tps in by_leader.items()
            for timestamp in (LATEST, EARLIEST)
        )
        return retry


def _parse_address(server: str) -> tuple[str, int]:
    server = server.strip()
    host, sep, port = server.rpartition(":")
    if not sep or not port.isdigit():
        return server.strip("[]"), 9092
    return host.strip("[]"), int(port)
