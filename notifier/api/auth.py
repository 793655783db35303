"""Who may change things through the API.

Reading is open: the status page, Burrow's endpoints, /metrics and the probes are what people
and scrapers look at. Every request with a writing method (POST, PUT, PATCH, DELETE: the
silences today, any writing endpoint added later) goes through :class:`WriteGuard`:

* a token is configured: the request must carry ``Authorization: Bearer <token>`` (401
  otherwise), compared in constant time;
* no token, and the API listens on loopback only: writes are open (only this machine can
  reach them);
* no token, and the API listens on anything else: every write is refused with 403, saying
  that a token must be configured (:func:`notifier.config.write_refusal`).
"""

from __future__ import annotations

import hmac

from fastapi import HTTPException, Request

from notifier.config import Secret, write_refusal

WRITING_METHODS = frozenset({"POST", "PUT", "PATCH", "DELETE"})


class WriteGuard:
    """The FastAPI dependency every route runs: lets reads through, checks writes."""

    def __init__(self, token: str | Secret | None, host: str) -> None:
        value = token.reveal() if isinstance(token, Secret) else token
        self._token = value.encode() if value else None
        self.refusal = write_refusal(host, self._token is not None)
        """Why every write is refused whatever it carries; None when writes can pass."""

    async def __call__(self, request: Request) -> None:
        # A coroutine, so that FastAPI runs it on the event loop: a plain function would cost
        # every request a trip to its thread pool and back.
        if request.method not in WRITING_METHODS:
            return
        if self.refusal is not None:
            raise HTTPException(403, self.refusal)
        if self._token is not None and not self._carries_token(request):
            raise HTTPException(
                401,
                "this endpoint changes the service's state: send 'Authorization: Bearer "
                "<api.token>'",
                headers={"WWW-Authenticate": 'Bearer realm="notifier"'},
            )

    def _carries_token(self, request: Request) -> bool:
        assert self._token is not None
        scheme, _, presented = request.headers.get("authorization", "").partition(" ")
        # compare_digest takes as long whatever the bytes, so timing tells nothing about how
        # much of a guess was right; the scheme is no secret. Header values arrive decoded as
        # latin-1: encoding them back gives the bytes the client sent.
        matches = hmac.compare_digest(presented.strip().encode("latin-1"), self._token)
        return scheme.lower() == "bearer" and matches
