"""A toy endpoint, written as the README's "How to add an endpoint" says, from the tests folder
alone: one router with its response model, reaching the service through ``api: Api``."""

from __future__ import annotations

from fastapi import APIRouter, Request
from pydantic import BaseModel, Field

from notifier.api import Api
from notifier.api.errors import NOT_FOUND, errors

router = APIRouter(tags=["toy"])


class GroupCount(BaseModel):
    cluster: str
    groups: int = Field(description="the groups the cluster's last scan listed")
    scanned_at: int | None = Field(description="epoch ms of its last successful scan")


class Noted(BaseModel):
    noted: str


@router.get("/api/toy/{cluster}", response_model=GroupCount, responses=NOT_FOUND)
async def group_count(cluster: str, api: Api) -> GroupCount:
    state = api.cluster(cluster)  # 404 in the API's error shape for an unknown cluster
    return GroupCount(
        cluster=cluster, groups=len(state.groups), scanned_at=state.metrics.last_success_ms
    )


@router.post("/api/toy/notes", response_model=Noted, responses=errors(e401="no token"))
async def note(request: Request) -> Noted:
    return Noted(noted=(await request.body()).decode())
