"""``POST /-/reload``: re-read the service config and the rules in place, as SIGHUP does
(Prometheus and Alertmanager answer the same path). It writes, so the API's
:class:`~notifier.api.auth.WriteGuard` asks for the token like every other writing endpoint.

200 with what changed and which sections wait for a restart (``reloaded`` is true only when
none does); 422 when the files are wrong, ``error: true`` with a message naming the file, the
field and what was expected — the running configuration stays.
"""

from __future__ import annotations

from typing import Any, Protocol

from fastapi import APIRouter, HTTPException, Request
from fastapi.responses import JSONResponse
from pydantic import BaseModel, Field

from notifier.api.burrow import RequestInfo, request_info
from notifier.api.context import Api


class ReloadOutcome(Protocol):
    @property
    def ok(self) -> bool: ...

    def to_dict(self) -> dict[str, Any]: ...


class Reloadable(Protocol):
    """What the endpoint calls (:class:`notifier.service.Reloader`)."""

    async def reload(self, source: str = "api") -> ReloadOutcome: ...


class ReloadBody(BaseModel):
    """What a reload did, in the envelope every endpoint answers with."""

    error: bool = Field(description="true when the files are wrong and nothing changed")
    message: str = Field(description="reloaded; or which sections wait for a restart; or why "
                         "nothing changed (the file, the field)")  # fmt: skip
    reloaded: bool = Field(description="the whole file runs now (nothing waits for a restart)")
    applied: bool = Field(description="what can change live was changed")
    source: str = Field(description="api, sighup, ...: what asked for the reload")
    changed: list[str] = Field(description="what the reload changed in the running service")
    restart_needed: list[str] = Field(
        description="sections of the file the running process keeps until it restarts: api, "
        "logging, metrics, data_dir, history, notify (added or removed)"
    )
    request: RequestInfo


router = APIRouter(tags=["notifier"])
"""Included by :func:`~notifier.api.app.create_app` when it is given a ``reloader``."""


@router.post(
    "/-/reload",
    summary="Reload the service config and the rules file",
    response_model=ReloadBody,
    responses={
        401: {"description": "the API token is missing or wrong"},
        403: {"description": "writes are refused: no api.token on a non-loopback address"},
        422: {"model": ReloadBody, "description": "the files are wrong; nothing changed"},
    },
)
async def reload(request: Request, api: Api) -> JSONResponse:
    if api.reloader is None:  # the router is only included with a reloader
        raise HTTPException(404, "reloading is not available here")
    outcome = await api.reloader.reload("api")
    body = {**outcome.to_dict(), "request": request_info(request)}
    return JSONResponse(body, status_code=200 if outcome.ok else 422)
