"""Which groups a cluster has, of what type, and what each one is: ListGroups once per broker,
then DescribeGroups, ConsumerGroupDescribe or, for share groups, ShareGroupDescribe and
DescribeShareGroupOffsets, from each group's coordinator.

* ``ListGroups`` once per broker, v5 where the broker has it, so each group comes with its
  type: classic, consumer (KIP-848), share, streams;
* ``DescribeGroups`` for classic groups and ``ConsumerGroupDescribe`` for consumer-protocol
  groups, in batches per group coordinator (:class:`~notifier.collect.batching.LearnedBatch`:
  the batch size shrinks, and stays shrunk, when a broker drops or times out a batch); streams
  groups are listed as what they are and not described or evaluated; share groups are
  described and their offsets read (:mod:`notifier.collect.sharegroups`) where the coordinator
  has both APIs.

Brokers that lack parts of the protocol are handled by behaviour, never by name: a broker
without ListGroups v5 lists groups without their type, and every group is described with
DescribeGroups; a group DescribeGroups does not know (``GROUP_ID_NOT_FOUND``: it may be a
consumer-protocol group, or have become one since it was listed) is asked for with
ConsumerGroupDescribe where the coordinator has it, and a consumer-protocol group
ConsumerGroupDescribe does not know (it went back to classic) with DescribeGroups; a
coordinator without ConsumerGroupDescribe describes its groups with DescribeGroups.
"""

from __future__ import annotations

import asyncio
import logging
from collections import defaultdict
from collections.abc import Mapping, Sequence
from typing import Any

from aiokafka.errors import IncompatibleBrokerVersion

from notifier.collect.batching import LearnedBatch
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
    GROUP_AUTHORIZATION_FAILED,
    GROUP_ID_NOT_FOUND,
    NONE,
    DescribeGroups,
    Group,
    Metadata,
    parse_classic_group,
)
from notifier.collect.results import ScanError
from notifier.collect.session import RETRY_BACKOFF_S, ClusterSession, run_all
from notifier.collect.sharegroups import (
    DescribeShareGroupOffsets,
    ShareGroupDescribe,
    ShareOffsets,
    parse_share_group,
    parse_share_offsets,
)

log = logging.getLogger("notifier.collect")  # the name it logged under before the split

DescribeApi = type[DescribeGroups | ConsumerGroupDescribe]


class GroupReader:
    """Lists and describes the groups of one cluster; remembers each group's listed type and
    the describe batch size it learned (:attr:`batch`)."""

    def __init__(self, session: ClusterSession, batch: LearnedBatch, *, cluster: str) -> None:
        self._session = session
        self.batch = batch
        """The DescribeGroups and ConsumerGroupDescribe batch size in use."""
        self._cluster = cluster
        self._group_types: dict[str, str | None] = {}
        self._told_unevaluated: set[str] = set()
        self._told_no_consumer_describe: set[int] = set()
        self._told_no_share_apis: set[int] = set()

    # ----------------------------------------------------------------------------------------
    # ListGroups

    async def list_groups(self, md: Metadata) -> dict[str, int]:
        """Every group id, mapped to the broker that listed it (its coordinator); each group's
        type (None where the broker's ListGroups has none) is kept for :meth:`describe`."""
        listed: dict[str, int] = {}
        types: dict[str, str | None] = {}

        async def one(node_id: int) -> None:
            for attempt in range(2):
                response = await self._session.send_to_node(node_id, ListGroups())
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
                await asyncio.sleep(RETRY_BACKOFF_S)

        await run_all(one(node) for node in sorted(md.brokers))
        self._group_types = types
        coordinators = self._session.coordinators
        coordinators.update(listed)
        for gone in set(coordinators) - set(listed):
            del coordinators[gone]
        return listed

    def unevaluated(self, selected: Mapping[str, int]) -> dict[str, str]:
        """The selected groups of a type the rules do not judge (share, streams), by type;
        each is said once in the log, when first seen."""
        unevaluated = {
            group: group_type
            for group in selected
            if (group_type := self._group_types.get(group)) is not None
            and group_type not in EVALUATED_TYPES
        }
        for group in sorted(set(unevaluated) - self._told_unevaluated):
            if unevaluated[group] == SHARE:  # said by share_groups when it cannot read them
                continue
            log.info("cluster %s: %s is a %s", self._cluster, group,
                     unevaluated_reason(unevaluated[group]))  # fmt: skip
        self._told_unevaluated = set(unevaluated)
        return unevaluated

    # ----------------------------------------------------------------------------------------
    # DescribeGroups and ConsumerGroupDescribe

    async def describe(
        self, selected: Mapping[str, int]
    ) -> tuple[dict[str, Group], dict[str, str]]:
        """Describe classic groups with DescribeGroups and consumer-protocol groups with
        ConsumerGroupDescribe; a group one of them does not know is asked for with the other.
        Returns the groups, and those left out and why."""
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
            entry = raw[name]
            error_code = entry[0]
            if error_code == GROUP_ID_NOT_FOUND:  # deleted since it was listed
                listed_type = self._group_types.get(name) or CLASSIC
                groups[name] = Group(name, "Dead", entry[3] or "", [], set(), set(),
                                     group_type=listed_type)  # fmt: skip
            elif error_code == GROUP_AUTHORIZATION_FAILED:
                skipped[name] = "GROUP_AUTHORIZATION_FAILED"
            elif error_code != NONE:
                raise ScanError(f"DescribeGroups({name!r}) failed with error code {error_code}")
            else:
                groups[name] = parse_classic_group(entry)
        return groups, skipped

    async def _describe_groups(
        self, selected: Mapping[str, int], api: DescribeApi
    ) -> tuple[dict[str, tuple[Any, ...]], list[str]]:
        """Each group's entry in the answers of ``api`` (DescribeGroups or
        ConsumerGroupDescribe) from its coordinator, and the groups whose coordinator does not
        have that API (negotiated from ApiVersions: nothing was sent for them)."""
        raw: dict[str, tuple[Any, ...]] = {}
        unsupported: list[str] = []
        name = API_NAMES[api.API_KEY]

        async def on_node(node_id: int, names: list[str]) -> None:
            async def send_once(batch: list[str]) -> None:
                await self._describe_batch_once(node_id, batch, raw, api)

            try:
                await self.batch.send(names, send_once, name)
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
                        name,
                    )

        await run_all(
            on_node(node, names) for node, names in self._by_coordinator(selected).items()
        )

        # Groups whose coordinator moved between ListGroups and the describe: ask again once.
        moved = sorted(g for g, entry in raw.items() if entry[0] in COORDINATOR_ERRORS)
        if moved:
            await asyncio.sleep(RETRY_BACKOFF_S)
            by_node: defaultdict[int, list[str]] = defaultdict(list)
            for group in moved:
                by_node[await self._session.find_coordinator(group)].append(group)
            await run_all(on_node(n, names) for n, names in by_node.items())
        return raw, unsupported

    async def _describe_batch_once(
        self,
        node_id: int,
        batch: list[str],
        out: dict[str, tuple[Any, ...]],
        api: DescribeApi,
    ) -> None:
        response = await self._session.send_to_node(node_id, api(batch), probing=len(batch) > 1)
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

    def _by_coordinator(self, selected: Mapping[str, int]) -> dict[int, list[str]]:
        """The selected groups by the node to ask, each list sorted."""
        by_node: defaultdict[int, list[str]] = defaultdict(list)
        for group, node_id in selected.items():
            by_node[self._session.coordinator_of(group, node_id)].append(group)
        return {node: sorted(names) for node, names in by_node.items()}

    # ----------------------------------------------------------------------------------------
    # Share groups

    async def share_groups(
        self, selected: Mapping[str, int]
    ) -> tuple[dict[str, Group], dict[str, ShareOffsets], dict[str, str]]:
        """Share groups (see :mod:`~notifier.collect.sharegroups`) described and their
        share-partition start offsets, from each one's coordinator, and those left out this
        scan and why; a coordinator without ShareGroupDescribe or DescribeShareGroupOffsets
        leaves its groups listed and not evaluated."""
        groups: dict[str, Group] = {}
        offsets: dict[str, ShareOffsets] = {}
        skipped: dict[str, str] = {}
        send_to_node = self._session.send_to_node

        async def on_node(node_id: int, names: Sequence[str]) -> None:
            try:
                described = await send_to_node(node_id, ShareGroupDescribe(names))
                answered = await send_to_node(node_id, DescribeShareGroupOffsets(names))
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

        await run_all(
            on_node(node, names) for node, names in self._by_coordinator(selected).items()
        )
        return groups, offsets, skipped
