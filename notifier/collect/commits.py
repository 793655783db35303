"""Committed offsets: OffsetFetch from each group's coordinator, many groups per request where
it has v8 (KIP-709).

Where the coordinator has OffsetFetch v8, groups go in batches of ``offset_fetch_batch_size``
(found out and split like DescribeGroups batches, :class:`~notifier.collect.batching.
LearnedBatch`); where it has not (negotiated from ApiVersions: nothing multi-group is sent to
such a broker), one request per group. All of a group's partitions go in one request, with
bounded concurrency.

A broker that drops the connection on ``OffsetFetch`` with no topic list ("all partitions of
the group", KIP-88) is asked once; from then on the partitions are named: those of the topics
the group is assigned or subscribed to, those it committed to in earlier scans, and every topic
in the metadata when none of those is known or the metadata was just refreshed (so a known
group's commits to a new topic are found within ``metadata_max_age_ms``; a group id not seen
before refreshes the metadata at once).
"""

from __future__ import annotations

import asyncio
import logging
from collections import defaultdict
from collections.abc import Iterable, Mapping

from aiokafka.errors import IncompatibleBrokerVersion

from notifier.collect.batching import LearnedBatch
from notifier.collect.protocol import (
    NO_COMMITS,
    CommittedOffsets,
    CoordinatorMoved,
    Group,
    OffsetFetch,
    OffsetFetchWanted,
    offset_fetch_answers,
    parse_offset_fetch,
)
from notifier.collect.results import ScanError
from notifier.collect.session import RETRY_BACKOFF_S, ClusterSession, TransportError, run_all

log = logging.getLogger("notifier.collect")  # the name it logged under before the split

Commits = dict[str, CommittedOffsets]
"""Committed offsets by group (each group's as arrays, by topic)."""


class CommitReader:
    """Reads the committed offsets of groups; learns, for as long as it lives, whether the
    cluster answers "all partitions", which coordinators have no v8, the batch size that goes
    through (:attr:`batch`) and the topics each group committed to."""

    def __init__(self, session: ClusterSession, batch: LearnedBatch, *, cluster: str) -> None:
        self._session = session
        self.batch = batch
        """Groups per OffsetFetch where the coordinator has v8."""
        self._cluster = cluster
        self.fetch_all: bool | None = None
        """Whether the cluster answers "all partitions" OffsetFetch (None: not tried yet)."""
        self._one_group_fetch: set[int] = set()
        self._group_topics: dict[str, set[str]] = {}
        self._seen_groups: set[str] = set()

    def forget_except(self, listed: Iterable[str]) -> None:
        """Forget what was learned of groups no longer listed."""
        for gone in set(self._group_topics) - set(listed):
            del self._group_topics[gone]

    async def fetch(self, groups: Mapping[str, Group], *, rediscover: bool) -> Commits:
        """The committed offsets of ``groups``; ``rediscover``: the metadata was just
        refreshed, so every topic is asked where partitions must be named."""
        commits: Commits = {}
        pending = [groups[name] for name in sorted(groups)]
        if self.fetch_all is None and pending:
            # Learn alone whether "all partitions" works: a broker that cannot answer it may
            # drop the connection, which would fail every other request in flight on it.
            probed = await self._probe_fetch_all(pending[0])
            if probed is not None:
                commits[pending.pop(0).name] = probed
        # A group not seen before may commit to topics created after the metadata was read;
        # when partitions must be named, only fresh metadata can show them.
        new_group = any(group.name not in self._seen_groups for group in pending)
        if self.fetch_all is False and not rediscover and new_group:
            await self._session.refresh_metadata()
        wanted: dict[str, OffsetFetchWanted] = {}
        for group in pending:
            named = None if self.fetch_all else self._named_partitions(group, rediscover)
            if named == []:
                commits[group.name] = NO_COMMITS  # nothing the group could have committed to
            else:
                wanted[group.name] = named
        asking = sorted(wanted)
        for attempt in range(2):
            by_node: defaultdict[int, list[str]] = defaultdict(list)
            for name in asking:
                node_id = self._session.coordinators.get(name)
                if node_id is None:
                    node_id = await self._session.find_coordinator(name)
                by_node[node_id].append(name)
            moved: list[str] = []
            await run_all(
                self._fetch_on(node_id, names, wanted, commits, moved)
                for node_id, names in by_node.items()
            )
            if not moved:
                break
            for name in moved:
                self._session.coordinators.pop(name, None)
            if attempt:
                raise ScanError(f"OffsetFetch({moved[0]!r}): its coordinator keeps moving")
            await asyncio.sleep(RETRY_BACKOFF_S)
            asking = sorted(moved)
        for name, found in commits.items():
            self._group_topics[name] = set(found.by_topic)
        self._seen_groups = set(groups)
        return commits

    async def _probe_fetch_all(self, group: Group) -> CommittedOffsets | None:
        """One OffsetFetch for every partition of ``group``: its commits, or ``None`` when the
        broker cannot answer that (learned once; partitions are named from then on)."""
        session = self._session
        for attempt in range(2):
            node_id = session.coordinators.get(group.name)
            try:
                if node_id is None:
                    node_id = await session.find_coordinator(group.name)
                response = await session.send_to_node(
                    node_id, OffsetFetch([(group.name, None)]), probing=True
                )
                found = parse_offset_fetch(group.name, response)
            except (TransportError, IncompatibleBrokerVersion) as exc:
                # Expected of some brokers (the embedded one): nothing for anyone to fix.
                log.info(
                    "cluster %s: the broker does not answer OffsetFetch for all partitions of "
                    "a group; naming the partitions instead",
                    self._cluster,
                )
                log.debug("cluster %s: the all-partitions OffsetFetch failed: %s", self._cluster,
                          exc)  # fmt: skip
                self.fetch_all = False
                return None
            except CoordinatorMoved as exc:
                session.coordinators.pop(group.name, None)
                if attempt:
                    raise ScanError(f"OffsetFetch({group.name!r}): {exc}") from exc
                await asyncio.sleep(RETRY_BACKOFF_S)
                continue
            self.fetch_all = True
            return CommittedOffsets.from_mapping(found)
        raise AssertionError("unreachable")

    async def _fetch_on(
        self,
        node_id: int,
        names: list[str],
        wanted: Mapping[str, OffsetFetchWanted],
        out: Commits,
        moved: list[str],
    ) -> None:
        """The commits of ``names`` from their coordinator: many groups per request where it
        has OffsetFetch v8 (in batches of the learned size), one request per group where it
        has not."""

        async def send_once(batch: list[str]) -> None:
            await self._fetch_batch_once(node_id, batch, wanted, out, moved)

        if node_id not in self._one_group_fetch and self.batch.size > 1 and len(names) > 1:
            try:
                await self.batch.send(names, send_once, "OffsetFetch", retry_alone=False)
                return
            except IncompatibleBrokerVersion:
                # Raised while encoding, before sending: the broker has no v8.
                self._one_group_fetch.add(node_id)
                log.info(
                    "cluster %s: broker %d has no OffsetFetch v8 (KIP-709): one request per group",
                    self._cluster,
                    node_id,
                )
        done = set(out) | set(moved)
        singles = [[name] for name in names if name not in done]
        await self.batch.send_concurrently(singles, send_once, "OffsetFetch", retry_alone=False)

    async def _fetch_batch_once(
        self,
        node_id: int,
        batch: list[str],
        wanted: Mapping[str, OffsetFetchWanted],
        out: Commits,
        moved: list[str],
    ) -> None:
        request = OffsetFetch([(name, wanted[name]) for name in batch])
        response = await self._session.send_to_node(node_id, request, probing=len(batch) > 1)
        if response.API_VERSION < 8:
            (name,) = batch
            try:
                out[name] = CommittedOffsets.from_mapping(parse_offset_fetch(name, response))
            except CoordinatorMoved:
                moved.append(name)
            return
        answers = offset_fetch_answers(response)
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
        md = self._session.metadata
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
