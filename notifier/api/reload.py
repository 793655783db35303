"""``POST /-/reload``: re-read the service config and the rules in place, as SIGHUP does
(Prometheus and Alertmanager answer the same path). It writes, so the API's
:class:`~notifier.api.auth.WriteGuard` asks for the token like every other writing endpoint.

200 with what changed (and what waits for a restart); 422 when the files are wrong, with the
error naming the file, the field and what was expected — the running configuration stays.
"""

from __future__ import annotations

from typing import Any, Protocol

from fastapi import APIRouter, HTTPException, Request
from fastapi.responses import JSONResponse
from pydantic import BaseModel, Field

from notifier.api.burrow import request_info
from notifier.api.context import Api


class ReloadOutcome(Protocol):
    @property
    def ok(self) -> bool: ...

    def to_dict(self) -> dict[str, Any]: ...


class Reloadable(Protocol):
    """What the endpoint calls (:class:`notifier.service.Reloader`)."""

    async def reload(self, source: str = "api") -> ReloadOutcome: ...


class ReloadBody(BaseModel):
    """What a reload changed; on a 422, also Burrow's ``error``, ``message`` and ``request``."""

    reloaded: bool
    source: str = Field(description="api, sighup, ...: what asked for the reload")
    changed: list[str] = Field(description="what the reload changed in the running service")
    restart_needed: list[str] = Field(description="what changed but waits for a restart")
    error: Any = Field(description="null, or why nothing changed (the file, the field)")


router = APIRouter(tags=["notifier"])
"""Included by :func:`~notifier.api.app.create_app` when it is given a ``reloader``."""


@router.post(
    "/-/reload",
    summary="Reload the service config and the rules file",
    response_model=ReloadBody,
    responses={
        401: {"description": "the API token is missing or wrong"},
        403: {"description": "writes are refused: no api.token on a non-loopback address"},
        422: {"description": "the files are wrong; nothing changed"},
    },
)
async def reload(request: Request, api: Api) -> JSONResponse:
    if api.reloader is None:  # the router is only included with a reloader
        raise HTTPException(404, "reloading is not available here")
    outcome = await api.reloader.reload("api")
    body = outcome.to_dict()
    if outcome.ok:
        return JSONResponse(body)
    return JSONResponse(
        {"error": True, "message": body.get("error"), **body, "request": request_info(request)},
        status_code=422,
    )
