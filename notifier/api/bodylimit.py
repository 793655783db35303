"""A request body over :data:`MAX_BODY_BYTES` is refused with 413 before anything parses it."""

from __future__ import annotations

from fastapi import Request
from fastapi.responses import JSONResponse
from starlette.datastructures import Headers
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from notifier.api.burrow import request_info

MAX_BODY_BYTES = 65_536
"""The largest request body accepted: a silence is a few hundred bytes; anything near this is a
mistake or an attack, refused with 413 before it is parsed."""


class BodyLimit:
    """ASGI middleware: a request body over ``max_bytes`` (declared in Content-Length, or
    counted as it streams in) gets a 413 with the usual JSON error body, and the app never sees
    it. Bodies within the limit are buffered and handed on unchanged."""

    def __init__(self, app: ASGIApp, max_bytes: int = MAX_BODY_BYTES) -> None:
        self.app = app
        self.max_bytes = max_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = Headers(scope=scope).get("content-length", "")
        if declared.isdigit() and int(declared) > self.max_bytes:
            await self._refuse(scope, receive, send)
            return
        body = bytearray()
        while True:
            message = await receive()
            if message["type"] != "http.request":
                break  # the client went away; the app will see the disconnect
            body += message.get("body", b"")
            if len(body) > self.max_bytes:
                await self._refuse(scope, receive, send)
                return
            if not message.get("more_body", False):
                break
        replayed = False

        async def replay() -> Message:
            nonlocal replayed
            if replayed:
                return await receive()
            replayed = True
            return {"type": "http.request", "body": bytes(body), "more_body": False}

        await self.app(scope, replay, send)

    async def _refuse(self, scope: Scope, receive: Receive, send: Send) -> None:
        request = Request(scope)
        message = f"request body larger than {self.max_bytes} bytes"
        body = {"error": True, "message": message, "request": request_info(request)}
        await JSONResponse(body, status_code=413)(scope, receive, send)
