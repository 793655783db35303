"""Serving the app: uvicorn inside the service's own event loop, next to the scans.

The listening socket is taken by :meth:`ApiServer.bind` (which ``notifier run`` calls before
anything starts), so an address in use is one clear error rather than uvicorn exiting from
inside a task.
"""

from __future__ import annotations

import asyncio
import errno
import socket

from fastapi import FastAPI


class ApiServerError(Exception):
    """The API cannot listen where the config says (the message names host and port)."""


class ApiServer:
    """uvicorn inside the service's event loop."""

    def __init__(self, app: FastAPI, host: str, port: int):
        import uvicorn

        self.config = uvicorn.Config(app, host=host, port=port, log_config=None, lifespan="off",
                                     access_log=False)  # fmt: skip
        self.server = uvicorn.Server(self.config)
        self.task: asyncio.Task | None = None
        self._socket: socket.socket | None = None

    @property
    def port(self) -> int:
        if self._socket is not None:
            return self._socket.getsockname()[1]
        return self.config.port

    def bind(self) -> None:
        """Take the listening socket now; raises :class:`ApiServerError` when it cannot."""
        if self._socket is not None:
            return
        host, port = self.config.host, self.config.port
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        try:
            self._socket = socket.create_server(
                (host, port), family=family, backlog=self.config.backlog
            )
        except OSError as exc:
            reason = (
                "the address is already in use"
                if exc.errno == errno.EADDRINUSE
                else exc.strerror or str(exc)
            )
            raise ApiServerError(f"cannot listen on {host}:{port}: {reason}") from None

    async def start(self) -> None:
        self.bind()
        assert self._socket is not None
        self.task = asyncio.create_task(self.server.serve(sockets=[self._socket]))
        while not self.server.started:
            if self.task.done():
                error = self.task.exception()
                raise ApiServerError(f"the API server stopped while starting: {error!r}")
            await asyncio.sleep(0.02)

    async def stop(self) -> None:
        self.server.should_exit = True
        if self.task is not None:
            await self.task
