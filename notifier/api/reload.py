"""``POST /-/reload``: re-read the service config and the rules in place, as SIGHUP does
(Prometheus and Alertmanager answer the same path). It writes, so the API's
:class:`~notifier.api.auth.WriteGuard` asks for the token like every other writing endpoint.

200 with what changed and which sections wait for a restart (``reloaded`` is true only when
none does); 422 when the files are wrong, ``error: true`` with a message naming the file, the
field and what was expected — the running configuration stays.
"""

from __future__ import annotations

from typing import Any, Protocol

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse

from notifier.api.burrow import request_info


class ReloadOutcome(Protocol):
    @property
    def ok(self) -> bool: ...

    def to_dict(self) -> dict[str, Any]: ...


class Reloadable(Protocol):
    """What the endpoint calls (:class:`notifier.service.Reloader`)."""

    async def reload(self, source: str = "api") -> ReloadOutcome: ...


def add_reload_routes(app: FastAPI, reloader: Reloadable) -> None:
    """Register ``POST /-/reload`` on ``app``."""

    @app.post(
        "/-/reload",
        tags=["notifier"],
        summary="Reload the service config and the rules file",
        responses={
            401: {"description": "the API token is missing or wrong"},
            403: {"description": "writes are refused: no api.token on a non-loopback address"},
            422: {"description": "the files are wrong; nothing changed"},
        },
    )
    async def reload(request: Request) -> JSONResponse:
        outcome = await reloader.reload("api")
        body = {**outcome.to_dict(), "request": request_info(request)}
        return JSONResponse(body, status_code=200 if outcome.ok else 422)
