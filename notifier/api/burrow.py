"""Burrow's v3 JSON bodies, so that Burrow's clients and dashboards read ours unchanged.

Every body carries ``error``, ``message`` and ``request`` (the path and this host's name); a
group's status lists its partitions with their first and last commit of the window.
"""

from __future__ import annotations

import socket
from typing import Any

from fastapi import Request
from fastapi.encoders import jsonable_encoder
from fastapi.responses import JSONResponse
from pydantic import BaseModel, Field

from notifier.types import CommitPoint, GroupResult, PartitionResult


class RequestInfo(BaseModel):
    url: str = Field(description="the path asked for")
    host: str = Field(description="the host that answered")


class BurrowBody(BaseModel):
    """Burrow's envelope: every answer has these, and its own member between them."""

    error: bool = Field(description="false, but on Burrow's /status and /lag 404")
    message: str
    request: RequestInfo


def request_info(request: Request) -> dict[str, str]:
    """The ``request`` member of every body, errors included."""
    return {"url": request.url.path, "host": socket.gethostname()}


def burrow_body(request: Request, message: str, **fields: Any) -> dict[str, Any]:
    return {"error": False, "message": message, **fields, "request": request_info(request)}


def json_answer(body: Any, status_code: int = 200) -> JSONResponse:
    """``body`` as FastAPI encodes what an endpoint returns (``jsonable_encoder``, then
    Starlette's JSON): for an endpoint whose ``response_model`` documents the body and must not
    reshape it (Burrow's member order, values as they are)."""
    return JSONResponse(jsonable_encoder(body), status_code=status_code)


def burrow_point(point: CommitPoint | None) -> dict[str, Any] | None:
    if point is None:
        return None
    return {"offset": point.offset, "timestamp": point.timestamp, "lag": point.lag}


def burrow_partition(p: PartitionResult) -> dict[str, Any]:
    return {
        "topic": p.topic,
        "partition": p.partition,
        "owner": p.owner,
        "client_id": p.client_id,
        "status": p.status.value,
        "start": burrow_point(p.start),
        "end": burrow_point(p.end),
        "current_lag": p.current_lag or 0,
        "complete": p.burrow_complete,
    }


def burrow_status(
    result: GroupResult, show_all: bool, freshness: dict[str, Any] | None = None
) -> dict[str, Any]:
    """Burrow's consumer status: ``/status`` lists only non-OK partitions, ``/lag`` all;
    ``freshness`` (the data's age: ``last_scan``, ``data_age_seconds``, ``stale``) is added
    after Burrow's own members, which clients that know only Burrow ignore."""
    partitions = [p for p in result.partitions if show_all or p.status.value != "OK"]
    return {
        "cluster": result.cluster,
        "group": result.group,
        "status": result.status.value,
        "complete": result.burrow_complete,
        "partitions": [burrow_partition(p) for p in partitions],
        "partition_count": result.partition_count,
        "maxlag": burrow_partition(result.max_lag) if result.max_lag else None,
        "totallag": result.total_lag,
        **(freshness or {}),
    }
