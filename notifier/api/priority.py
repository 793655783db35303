"""Scans first: the API gives way to the coordinator's scans on the event loop they share.

A request is an uninterrupted run of Python on the loop (and the loop has one CPU: the GIL).
With 200 clients' requests ready at once, every step of a scan waited behind all of them: a
1,000-group scan's cycle went from 1 s to over 10 s. :class:`ScanPriority` admits requests one
at a time, each in a loop turn of its own, so whatever became ready meanwhile (a scan's next
step) runs in between; while a scan is under way it also spaces them out so that requests take
at most ``share`` of the loop's time, which keeps a scan's cycle within about that much of its
unloaded time. Requests wait in arrival order, and between scans they go through as fast as
they come. The probes (``/healthz``, ``/readyz``) never wait: an orchestrator must not restart
a service for being popular.
"""

from __future__ import annotations

import asyncio
import time
from collections import deque
from collections.abc import Callable

from starlette.types import ASGIApp, Receive, Scope, Send

UNGATED = frozenset({"/healthz", "/readyz"})


class ScanPriority:
    """ASGI middleware: requests one at a time, at most ``share`` of the time during scans
    (``scanning()`` says whether one is under way)."""

    def __init__(self, app: ASGIApp, scanning: Callable[[], bool], share: float = 0.1) -> None:
        if not 0 < share <= 1:
            raise ValueError(f"share must be in (0, 1], not {share}")
        self.app = app
        self.scanning = scanning
        self.share = share
        self._busy = False
        self._waiting: deque[asyncio.Future[None]] = deque()
        self._next_at = 0.0
        self._handover: asyncio.TimerHandle | asyncio.Handle | None = None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["path"] in UNGATED:
            await self.app(scope, receive, send)
            return
        await self._admitted()
        started = time.perf_counter()
        try:
            await self.app(scope, receive, send)
        finally:
            self._done(time.perf_counter() - started)

    async def _admitted(self) -> None:
        idle = not self._busy and not self._waiting and self._handover is None
        if idle and (not self.scanning() or time.perf_counter() >= self._next_at):
            self._busy = True
            return
        turn = asyncio.get_running_loop().create_future()
        self._waiting.append(turn)
        self._schedule()
        try:
            await turn
        except asyncio.CancelledError:
            if turn.done() and not turn.cancelled():
                self._done(0.0)  # handed the turn as it was cancelled: pass it on
            raise

    def _done(self, took: float) -> None:
        """A request finished after ``took`` seconds: during a scan, the next one waits long
        enough for the API to stay within its share."""
        self._busy = False
        if self.scanning():
            self._next_at = time.perf_counter() + took * (1 / self.share - 1)
        self._schedule()

    def _schedule(self) -> None:
        if self._busy or self._handover is not None or not self._waiting:
            return
        loop = asyncio.get_running_loop()
        delay = self._next_at - time.perf_counter() if self.scanning() else 0.0
        if delay > 0:
            self._handover = loop.call_later(delay, self._hand_over)
        else:
            self._handover = loop.call_soon(self._hand_over)

    def _hand_over(self) -> None:
        self._handover = None
        if self._busy:
            return
        while self._waiting:
            turn = self._waiting.popleft()
            if not turn.done():
                self._busy = True
                turn.set_result(None)
                return
