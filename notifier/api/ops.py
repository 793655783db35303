"""The probes: ``/healthz`` (the process answers) and ``/readyz`` (every cluster was scanned
within its last 3 intervals; 503 with the same body otherwise). ``POST /-/reload`` is
:mod:`~notifier.api.reload`, and Burrow's own health paths are in
:mod:`~notifier.api.burrow_admin`."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter
from fastapi.responses import JSONResponse
from pydantic import BaseModel, Field

from notifier.api.burrow import json_answer
from notifier.api.context import Api
from notifier.api.groups import ClusterSummary
from notifier.api.views import cluster_summaries, history_summary, state_summaries

router = APIRouter(tags=["ops"])


class Health(BaseModel):
    status: str = Field(description="ok")


class HistoryHealth(BaseModel):
    writing: bool = Field(description="false while history writes fail")
    failing_since: int | None = Field(description="epoch ms")
    error: str | None
    errors: int
    queued_rows: int
    dropped_rows: int


class StateHealth(BaseModel):
    what: str = Field(description="notification store, checkpoint or transitions file")
    path: str
    writing: bool = Field(description="false while the disk refuses its writes")
    failing_since: int | None = Field(description="epoch ms")
    error: str | None
    errors: int = Field(description="writes refused since the start (every retry counts)")
    unwritten: int = Field(description="changes kept in memory until the disk takes them")


class Readiness(BaseModel):
    ready: bool
    clusters: list[ClusterSummary]
    history: HistoryHealth | None = Field(description="null: the service keeps no history")
    state: list[StateHealth] = Field(
        description="the notification store, and any other state file the disk refused "
        "lately: a disk that refuses writes keeps the service ready (what was decided is kept "
        "in memory and delivered), but it is said here"
    )
    fleet: dict[str, Any] | None = Field(
        default=None,
        description="in a fleet: the shards this instance watches, and whether the "
        "coordination cluster answers (an unreachable one keeps the instance ready)",
    )


@router.get("/healthz", response_model=Health)
def healthz() -> JSONResponse:
    return json_answer({"status": "ok"})


@router.get(
    "/readyz",
    response_model=Readiness,
    responses={
        200: {"description": "every cluster was scanned within its last 3 intervals"},
        503: {
            "description": "not ready: some cluster's data is stale (the same body)",
            "content": {"application/json": {}},
        },
    },
)
def readyz(api: Api) -> JSONResponse:
    coordinator = api.coordinator
    now = api.clock()
    ready = not any(state.stale(now) for state in coordinator.clusters.values())
    body = {
        "ready": ready,
        "clusters": cluster_summaries(coordinator, now),
        "history": history_summary(coordinator),
        "state": state_summaries(coordinator, api.notifier),
    }
    fleet = getattr(coordinator, "fleet", None)
    if fleet is not None:
        # Which shards this instance watches; an unreachable coordination cluster is said
        # here but keeps the instance ready: it keeps its shards and keeps watching.
        body["fleet"] = fleet.readiness()
    return JSONResponse(body, status_code=200 if ready else 503)
