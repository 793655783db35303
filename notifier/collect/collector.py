"""The collector: one scan of a Kafka cluster turned into a table of samples.

A scan reads, for every consumer group the allow/deny regexes let through, its state and
members, its committed offsets, and the log-end and log-start offsets of the partitions it
commits to or is assigned. Tools that send a request per partition or per group-partition fall
over at a few thousand groups (docs/architecture.md, "What a scan reads"), so the request pattern
is fixed, one module per kind of request:

* :mod:`~notifier.collect.groups`: ``ListGroups`` once per broker, then ``DescribeGroups``,
  ``ConsumerGroupDescribe`` (and for share groups ``ShareGroupDescribe`` and
  ``DescribeShareGroupOffsets``) in batches per group coordinator;
* :mod:`~notifier.collect.commits`: ``OffsetFetch``, many groups at once where the coordinator
  has v8 (KIP-709), once per group where it has not;
* :mod:`~notifier.collect.logoffsets`: ``ListOffsets`` twice per partition leader (latest and
  earliest), whatever the number of partitions;
* :mod:`~notifier.collect.batching`: the batches of many groups, split in halves when a broker
  drops or times one out, and the size learned;
* :mod:`~notifier.collect.session`: the pooled connections, ``Metadata`` (only when the cached
  copy is old, a request failed or a reader asks), the group coordinators, and the count of
  what a scan sent.

:attr:`ScanResult.requests` counts what a scan sent, by API name, so tests and the metrics can
check that the number of requests does not grow with partitions; the process's running count
(:mod:`notifier.collect.requestcount`) adds them up, with each new connection's handshake.
Brokers that lack parts of the protocol are handled by behaviour, never by name (each module
says how).

The requests, error codes and answer parsers are in :mod:`notifier.collect.protocol` (with
the DescribeGroups request that works around an aiokafka decoding bug) and, for group types,
in :mod:`notifier.collect.grouptypes` and :mod:`notifier.collect.sharegroups`.
"""

from __future__ import annotations

import asyncio
import re
import ssl
import time
from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from itertools import repeat

import numpy as np
from aiokafka.abc import AbstractTokenProvider
from aiokafka.helpers import create_ssl_context

from notifier.collect.batching import LearnedBatch
from notifier.collect.commits import CommitReader
from notifier.collect.groups import GroupReader
from notifier.collect.grouptypes import SHARE, unevaluated_reason
from notifier.collect.logoffsets import LogOffsetReader
from notifier.collect.protocol import CommittedOffsets, Group
from notifier.collect.readonly import ReadOnly
from notifier.collect.requestcount import KAFKA_REQUESTS, KafkaRequests
from notifier.collect.results import (
    ClusterUnreachableError,
    ScanError,
    ScanResult,
    TopicPartition,
)
from notifier.collect.samples import build_samples, normalize_group_state
from notifier.collect.security import describe_login, sasl_settings
from notifier.collect.session import ClusterSession, parse_address
from notifier.collect.sharegroups import ShareOffsets

SECURITY_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")


def _partitions_wanted(
    groups: Mapping[str, Group], commits: Mapping[str, CommittedOffsets]
) -> set[TopicPartition]:
    """Every partition a group committed to or is assigned: each once, gathered a topic at a
    time (a million group-partitions are often a few hundred partitions)."""
    by_topic: defaultdict[str, list[np.ndarray]] = defaultdict(list)
    wanted: set[TopicPartition] = set()
    for name, group in groups.items():
        found = commits.get(name)
        if found is not None:
            for topic, (partitions, _) in found.by_topic.items():
                by_topic[topic].append(partitions)
        wanted.update(group.assigned)
    for topic, chunks in by_topic.items():
        wanted.update(zip(repeat(topic), np.unique(np.concatenate(chunks)).tolist()))
    return wanted


def _compile(patterns: str | Sequence[str] | None) -> list[re.Pattern[str]]:
    if patterns is None:
        return []
    if isinstance(patterns, str):
        patterns = [patterns]
    return [re.compile(p) for p in patterns]


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
        bootstrap = [parse_address(s) for s in bootstrap_servers]
        if not bootstrap:
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
        token_provider = sasl.get("sasl_oauth_token_provider")
        self._session = ClusterSession(
            bootstrap,
            conn_settings={
                "client_id": client_id,
                "request_timeout_ms": request_timeout_ms,
                "ssl_context": ssl_context if security_protocol in ("SSL", "SASL_SSL") else None,
                "security_protocol": security_protocol,
                "max_idle_ms": connections_max_idle_ms,
                **sasl,
            },
            login=describe_login(
                security_protocol,
                sasl.get("sasl_mechanism"),
                username=sasl_username,
                token_provider=token_provider,
                client_certificate=ssl_certfile,
            ),
            token_provider=token_provider,
            request_timeout_s=request_timeout_ms / 1000,
            metadata_max_age_s=metadata_max_age_ms / 1000,
            requests=requests or KAFKA_REQUESTS,
        )
        concurrency = offset_fetch_concurrency
        self._groups = GroupReader(
            self._session,
            LearnedBatch(describe_batch_size, cluster=cluster, concurrency=concurrency),
            cluster=cluster,
        )
        self._commits = CommitReader(
            self._session,
            LearnedBatch(offset_fetch_batch_size, cluster=cluster, concurrency=concurrency),
            cluster=cluster,
        )
        self._log_offsets = LogOffsetReader(
            self._session, cluster=cluster, metadata_max_age_s=metadata_max_age_ms / 1000
        )
        self._scan_timeout_s = scan_timeout_ms / 1000
        self._allow = _compile(group_allow)
        self._deny = _compile(group_deny)
        self._scan_lock = asyncio.Lock()
        self.group_filter: Callable[[str], bool] | None = None
        """Set by a fleet instance: the groups it owns. The others are listed by ListGroups
        (one request per broker) and left alone: not described, no offsets fetched."""
        self._closed = False

    # ----------------------------------------------------------------------------------------
    # Public surface

    cluster = ReadOnly[str]("_cluster")

    @property
    def describe_batch_size(self) -> int:
        """The DescribeGroups and ConsumerGroupDescribe batch size in use (shrinks when a broker
        rejects a batch)."""
        return self._groups.batch.size

    @property
    def offset_fetch_batch_size(self) -> int:
        """Groups per OffsetFetch where the coordinator has v8 (shrinks when a broker rejects a
        batch)."""
        return self._commits.batch.size

    @property
    def offset_fetch_all_partitions(self) -> bool | None:
        """Whether the cluster answers "all partitions" OffsetFetch (None: not tried yet)."""
        return self._commits.fetch_all

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
            self._session.begin_scan()
            started = time.monotonic()
            deadline = asyncio.timeout(self._scan_timeout_s)
            try:
                async with deadline:
                    result = await self._scan(started)
            except Exception as exc:
                self._session.metadata_stale = True
                failure = ScanError if self._session.answered else ClusterUnreachableError
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
        await self._session.close()

    async def __aenter__(self) -> ClusterCollector:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()

    # ----------------------------------------------------------------------------------------
    # The scan

    async def _scan(self, started: float) -> ScanResult:
        session = self._session
        metadata, refreshed = await session.current_metadata()
        listed = await self._groups.list_groups(metadata)
        self._commits.forget_except(listed)
        owns = self.group_filter
        matching = [g for g in listed if self.matches(g)]
        selected = {g: listed[g] for g in matching if owns is None or owns(g)}
        unevaluated = self._groups.unevaluated(selected)
        groups, skipped = await self._groups.describe(
            {g: node for g, node in selected.items() if g not in unevaluated}
        )
        skipped.update({g: unevaluated_reason(t) for g, t in unevaluated.items()})
        commits = await self._commits.fetch(groups, rediscover=refreshed)
        shared = {g: selected[g] for g, kind in unevaluated.items() if kind == SHARE}
        share_offsets: dict[str, ShareOffsets] = {}
        if shared:
            share_groups, share_offsets, share_skipped = await self._groups.share_groups(shared)
            for name in share_groups:
                skipped.pop(name, None)
            skipped.update(share_skipped)
            groups.update(share_groups)
            commits.update(
                {name: CommittedOffsets.from_mapping(found.starts)
                 for name, found in share_offsets.items()}
            )  # fmt: skip

        offsets = await self._log_offsets.read(_partitions_wanted(groups, commits))
        for name, found in share_offsets.items():
            commits[name] = CommittedOffsets.from_mapping(found.offsets(offsets.log_end))

        samples = build_samples(
            ts=offsets.ts,
            cluster=self._cluster,
            groups=groups,
            commits=commits,
            log_end=offsets.log_end,
            log_start=offsets.log_start,
        )
        return ScanResult(
            cluster=self._cluster,
            ts=offsets.ts,
            samples=samples,
            requests=dict(session.requests),
            group_states={
                n: normalize_group_state(g.state, g.group_type) for n, g in sorted(groups.items())
            },
            group_members={n: len(g.member_ids) for n, g in groups.items()},
            group_types=dict(
                sorted({**{n: g.group_type for n, g in groups.items()}, **unevaluated}.items())
            ),
            skipped_groups=skipped,
            unavailable_partitions=tuple(sorted(offsets.unavailable)),
            connections_opened=session.connects,
            duration_s=time.monotonic() - started,
            elapsed_at=offsets.elapsed_at,
            owners={n: g.owners for n, g in sorted(groups.items()) if g.owners},
            layout=(session.metadata or metadata).layout,
            listed_groups=tuple(matching),
        )
