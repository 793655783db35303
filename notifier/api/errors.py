"""Every error the API answers, in Burrow's shape: ``{"error": true, "message": ...,
"request": {"url", "host"}}``, a 422 listing its ``problems`` by field. The handlers
(:func:`add_error_handlers`) turn FastAPI's and Starlette's errors into it; :func:`errors` is
how an endpoint documents its error codes in ``/openapi.json``."""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict
from starlette.exceptions import HTTPException as StarletteHTTPException

from notifier.api.burrow import RequestInfo, request_info


class Problem(BaseModel):
    field: str
    problem: str


class ErrorBody(BaseModel):
    """Every error answer, in Burrow's shape. A 422 lists ``problems`` by field; Burrow's
    ``/status`` and ``/lag`` 404 also carry Burrow's NOTFOUND ``status`` object."""

    model_config = ConfigDict(extra="allow")

    error: bool = True
    message: str
    request: RequestInfo
    problems: list[Problem] | None = None


def errors(**codes: str) -> dict[int | str, dict[str, Any]]:
    """OpenAPI ``responses`` for error codes (``e404="why"``), each with :class:`ErrorBody`."""
    return {int(code[1:]): {"model": ErrorBody, "description": why} for code, why in codes.items()}


INVALID = "a parameter or the body is invalid: `problems` (or the message) names each field"
NOT_FOUND = errors(e404="no such cluster (or group, or topic)", e422=INVALID)
"""The error answers of an endpoint that reads one cluster (or group, or topic)."""
WRITE = {
    "e401": "a bearer token is configured and the request does not carry it",
    "e403": "writes are disabled: the API listens beyond loopback and no token is configured",
    "e404": "notifications are not configured, so there are no silences",
}
"""Why a write is refused, for :func:`errors` (``errors(**WRITE)``)."""


async def http_error(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, StarletteHTTPException)
    body = {"error": True, "message": str(exc.detail), "request": request_info(request)}
    return JSONResponse(body, status_code=exc.status_code, headers=getattr(exc, "headers", None))


async def bad_request(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, RequestValidationError)
    problems = [
        {"field": ".".join(str(p) for p in e["loc"]), "problem": e["msg"]} for e in exc.errors()
    ]
    body = {"error": True, "message": "invalid request", "problems": problems,
            "request": request_info(request)}  # fmt: skip
    return JSONResponse(body, status_code=422)


def add_error_handlers(app: FastAPI) -> None:
    """Answer every HTTP and validation error of ``app`` with :class:`ErrorBody`."""
    app.add_exception_handler(StarletteHTTPException, http_error)
    app.add_exception_handler(RequestValidationError, bad_request)
