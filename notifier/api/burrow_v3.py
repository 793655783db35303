"""Burrow's v3 reads of clusters, consumer groups and topics (``/v3/kafka/...``), in Burrow's
envelope: ``error``, ``message``, the answer's own member, ``request``. The rest of Burrow's API
(topic consumers, forgetting a group, log level, config, its health paths) is
:mod:`~notifier.api.burrow_admin`.

Each answer is built from the cluster's last scan once, and encoded once
(:class:`~notifier.api.cache.ScanCache`); what changes with the clock (the data's age) is added
per request. In a fleet, a group another instance owns is answered from the fleet's view, or
asked of its owner when only the owner has it (the commit rings).
"""

from __future__ import annotations

from typing import Any
from urllib.parse import quote

import orjson
from fastapi import APIRouter, HTTPException, Request
from pydantic import BaseModel, ConfigDict, Field

from notifier.api.burrow import (
    BurrowBody,
    burrow_body,
    burrow_point,
    burrow_status,
    request_info,
)
from notifier.api.cache import JSONBytes, encode, with_members
from notifier.api.context import Api, ApiContext
from notifier.api.errors import NOT_FOUND
from notifier.api.owner import ask_owner, not_in_view
from notifier.api.views import as_of, freshness, group_result
from notifier.rules import not_found
from notifier.types import GroupStatus

router = APIRouter(tags=["burrow"])


class ClusterList(BurrowBody):
    clusters: list[str]


class ConsumerList(BurrowBody):
    consumers: list[str]


class CommitPoint(BaseModel):
    offset: int
    timestamp: int = Field(description="epoch ms")
    lag: int | None


class PartitionOffsets(BaseModel):
    model_config = ConfigDict(populate_by_name=True)

    offsets: list[CommitPoint | None] = Field(
        description="the commit ring, oldest first, padded with null at its start"
    )
    owner: str
    client_id: str
    current_lag: int = Field(alias="current-lag")


class ConsumerDetail(BurrowBody):
    topics: dict[str, list[PartitionOffsets]]
    instance: str | None = Field(
        default=None, description="in a fleet, when another instance owns the group: it"
    )


class PartitionStatus(BaseModel):
    topic: str
    partition: int
    owner: str
    client_id: str
    status: str
    start: CommitPoint | None
    end: CommitPoint | None
    current_lag: int
    complete: float


class ConsumerStatus(BaseModel):
    """Burrow's consumer status, then how old its data is, and in a fleet who answered."""

    cluster: str
    group: str
    status: str = Field(description="NOTFOUND, OK, WARN, ERR, STOP or STALL")
    complete: float
    partitions: list[PartitionStatus] = Field(description="/status: those not OK; /lag: all")
    partition_count: int
    maxlag: PartitionStatus | None
    totallag: int
    last_scan: int | None = Field(default=None, description="epoch ms; null: never scanned")
    data_age_seconds: float | None = None
    stale: bool | None = None
    instance: str | None = None


class GroupStatusBody(BurrowBody):
    status: ConsumerStatus


class TopicList(BurrowBody):
    topics: list[str]


class TopicOffsets(BurrowBody):
    offsets: list[int] = Field(description="each partition's log-end offset")


@router.get("/v3/kafka", response_model=ClusterList)
async def burrow_clusters(request: Request, api: Api) -> JSONBytes:
    clusters = sorted(api.coordinator.clusters)
    return JSONBytes(burrow_body(request, "cluster list returned", clusters=clusters))


# GET /v3/kafka/{cluster} is /v3/config/cluster/{cluster}'s handler (burrow_admin), as in
# Burrow's route table.


@router.get("/v3/kafka/{cluster}/consumer", response_model=ConsumerList, responses=NOT_FOUND)
async def burrow_consumers(cluster: str, request: Request, api: Api) -> JSONBytes:
    state = api.cluster(cluster)
    fleet = api.fleet

    def consumers() -> orjson.Fragment:
        groups = set(state.groups) | {g for _, g in state.store.groups(cluster)}
        return orjson.Fragment(encode(sorted(groups)))

    if fleet is not None:  # ours and the others', as the view has them
        local = set(state.groups) | {g for _, g in state.store.groups(cluster)}
        groups = {g for g in local if fleet.owns(cluster, g)}
        groups.update(r.group for r in fleet.remote_groups(cluster, api.clock()))
        listed = orjson.Fragment(encode(sorted(groups)))
    else:
        listed = api.scans.get(cluster, state, "consumers", consumers)
    return JSONBytes(burrow_body(request, "consumer list returned", consumers=listed))


@router.get(
    "/v3/kafka/{cluster}/consumer/{group}", response_model=ConsumerDetail, responses=NOT_FOUND
)
async def burrow_consumer(cluster: str, group: str, request: Request, api: Api) -> JSONBytes:
    state = api.cluster(cluster)
    fleet = api.fleet
    if fleet is not None and not fleet.owns(cluster, group):
        # The offsets' rings are the owner's alone: it is asked (bounded, 503 naming it).
        path = f"/v3/kafka/{quote(cluster, safe='')}/consumer/{quote(group, safe='')}"
        answer = await ask_owner(fleet, cluster, group, path, request)
        owner = fleet.owner_api(cluster, group)
        return JSONBytes(
            {**answer, "instance": owner[0] if owner else None, "request": request_info(request)}
        )

    def offsets() -> orjson.Fragment:
        result = api.result_of(state, cluster, group)
        if result.status is GroupStatus.NOTFOUND:
            raise HTTPException(404, "cluster or consumer not found")
        topics: dict[str, list[dict[str, Any]]] = {}
        for p in result.partitions:
            row = state.store.row(cluster, group, p.topic, p.partition)
            commits = state.store.ring(row) if row is not None else []
            points = [burrow_point(c) for c in commits]
            padded = [None] * (state.store.ring_size - len(commits)) + points
            entries = topics.setdefault(p.topic, [])
            while len(entries) <= p.partition:
                entries.append({"offsets": [], "owner": "", "client_id": "", "current-lag": 0})
            entries[p.partition] = {
                "offsets": padded, "owner": p.owner, "client_id": p.client_id,
                "current-lag": p.current_lag or 0,
            }  # fmt: skip
        return orjson.Fragment(encode(topics))

    topics = api.scans.get(cluster, state, ("consumer", group), offsets)
    return JSONBytes(burrow_body(request, "consumer detail returned", topics=topics))


@router.get(
    "/v3/kafka/{cluster}/consumer/{group}/status",
    response_model=GroupStatusBody,
    responses=NOT_FOUND,
)
async def burrow_group_status(cluster: str, group: str, request: Request, api: Api) -> JSONBytes:
    """The group's status with the partitions that are not OK (Burrow's ``/status``)."""
    return _status(api, cluster, group, request, show_all=False)


@router.get(
    "/v3/kafka/{cluster}/consumer/{group}/lag", response_model=GroupStatusBody, responses=NOT_FOUND
)
async def burrow_group_lag(cluster: str, group: str, request: Request, api: Api) -> JSONBytes:
    """The group's status with every partition (Burrow's ``/lag``)."""
    return _status(api, cluster, group, request, show_all=True)


@router.get("/v3/kafka/{cluster}/topic", response_model=TopicList, responses=NOT_FOUND)
async def burrow_topics(cluster: str, request: Request, api: Api) -> JSONBytes:
    state = api.cluster(cluster)

    def topics() -> orjson.Fragment:
        names = state.store.topics(cluster)
        return orjson.Fragment(encode(names))

    listed = api.scans.get(cluster, state, "topics", topics)
    return JSONBytes(burrow_body(request, "topic list returned", topics=listed))


@router.get("/v3/kafka/{cluster}/topic/{topic}", response_model=TopicOffsets, responses=NOT_FOUND)
async def burrow_topic(cluster: str, topic: str, request: Request, api: Api) -> JSONBytes:
    state = api.cluster(cluster)

    def offsets() -> orjson.Fragment:
        store = state.store
        partitions = store.topic_tables(cluster, topic)
        if not partitions:
            raise HTTPException(404, "cluster or topic not found")
        leos = []
        for p in range(max(partitions) + 1):
            table = partitions.get(p)
            count = int(store.t_count[table]) if table is not None else 0
            leos.append(int(store.t_leo[table, -1]) if count else 0)
        return orjson.Fragment(encode(leos))

    leos = api.scans.get(cluster, state, ("topic", topic), offsets)
    return JSONBytes(burrow_body(request, "topic offsets returned", offsets=leos))


def _status(
    api: ApiContext, cluster: str, group: str, request: Request, show_all: bool
) -> JSONBytes:
    state = api.cluster(cluster)
    if api.fleet is not None and not api.fleet.owns(cluster, group):
        return _remote_status(api, cluster, group, request, show_all)
    fresh = freshness(state, api.clock())
    if fresh.stale:  # as of now: the windows shrink with every scan missed
        result = as_of(group_result(state, cluster, group), fresh)
        found = result.status is not GroupStatus.NOTFOUND
        status = orjson.Fragment(
            encode(burrow_status(result, show_all, {**fresh.fields(), **api.mine}))
        )
    else:

        def encoded() -> tuple[bool, bytes]:
            result = api.result_of(state, cluster, group)
            body = burrow_status(result, show_all)
            return result.status is not GroupStatus.NOTFOUND, encode(body)

        found, cached = api.scans.get(cluster, state, ("status", group, show_all), encoded)
        status = orjson.Fragment(with_members(cached, {**fresh.fields(), **api.mine}))
    body = burrow_body(request, "consumer status returned", status=status)
    if not found:
        body["error"] = True
        body["message"] = "cluster or consumer not found"
        return JSONBytes(body, status_code=404)
    return JSONBytes(body)


def _remote_status(
    api: ApiContext, cluster: str, group: str, request: Request, show_all: bool
) -> JSONBytes:
    fleet = api.fleet
    assert fleet is not None
    remote = fleet.remote_group(cluster, group, api.clock())
    if remote is None and not fleet.available:
        raise not_in_view(fleet, "cluster or consumer")
    if remote is None:
        missing = burrow_status(not_found(cluster, group, api.clock()), show_all)
        body = burrow_body(request, "cluster or consumer not found", status=missing)
        body["error"] = True
        return JSONBytes(body, status_code=404)
    return JSONBytes(
        burrow_body(request, "consumer status returned", status=remote.burrow_status(show_all))
    )
