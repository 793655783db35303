"""Serving the app: uvicorn inside the service's own event loop, next to the scans, over
HTTPS when the config gives a certificate (``api.tls``).

The listening socket is taken by :meth:`ApiServer.bind` (which ``notifier run`` calls before
anything starts), so an address in use is one clear error rather than uvicorn exiting from
inside a task. Once listening, the server logs where, and warns when writes are disabled
(:mod:`notifier.api.auth`).
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import logging
import socket
import ssl
from types import FrameType
from typing import cast

import uvicorn
from fastapi import FastAPI

from notifier.config import TlsConfig

log = logging.getLogger(__name__)


class ApiServerError(Exception):
    """The API cannot listen where the config says (the message names host and port)."""


TICK_S = 1.0
"""How often the idle server wakes: to refresh its ``Date`` header, which has a resolution of
a second anyway (uvicorn itself wakes ten times a second, mostly to see whether to stop)."""


class _Server(uvicorn.Server):
    """uvicorn's server, waking once a :data:`TICK_S` and at once when :meth:`stop` is called:
    an idle instance's every wake-up is CPU that each instance of a fleet spends again."""

    def __init__(self, config: uvicorn.Config) -> None:
        super().__init__(config)
        self._stopping = asyncio.Event()
        self._loop: asyncio.AbstractEventLoop | None = None

    def stop(self) -> None:
        self.should_exit = True
        self._stopping.set()

    def handle_exit(self, sig: int, frame: FrameType | None) -> None:
        super().handle_exit(sig, frame)
        # A signal handler may run between any two steps of the loop: wake it the safe way.
        if self._loop is not None:
            with contextlib.suppress(RuntimeError):  # the loop has closed: nothing waits
                self._loop.call_soon_threadsafe(self._stopping.set)

    async def main_loop(self) -> None:
        self._loop = asyncio.get_running_loop()
        ticks = 0
        while not await self.on_tick(ticks):
            # uvicorn counts tenths of a second: a multiple of ten refreshes the Date header.
            ticks = (ticks + 10) % 864_000
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(TICK_S):
                    await self._stopping.wait()


def _listen(host: str, port: int, family: socket.AddressFamily, backlog: int) -> socket.socket:
    """A listening TCP socket whose accepted connections send without Nagle's delay.

    asyncio sets ``TCP_NODELAY`` on an accepted connection only when the socket says its
    protocol is TCP, and ``socket.create_server`` makes one with protocol 0: every answer after
    the first on a keep-alive connection then waited ~40 ms for the client's delayed ACK
    (uvicorn writes the head and the body of an answer separately)."""
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    try:
        if family == socket.AF_INET6:
            sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        sock.bind((host, port))
        sock.listen(backlog)
    except BaseException:
        sock.close()
        raise
    return sock


class ApiServer:
    """uvicorn inside the service's event loop."""

    def __init__(self, app: FastAPI, host: str, port: int, tls: TlsConfig | None = None):
        """``tls``: serve HTTPS with these files (absolute paths, checked by
        :meth:`TlsConfig.problems` when the config was loaded); with ``client_ca_file``,
        clients must present a certificate that CA signed."""
        self.app = app
        self.tls = tls
        self.config = uvicorn.Config(
            app, host=host, port=port, log_config=None, lifespan="off", access_log=False,
            ssl_certfile=tls.cert_file if tls else None,
            ssl_keyfile=tls.key_file if tls else None,
            ssl_ca_certs=tls.client_ca_file if tls else None,
            ssl_cert_reqs=ssl.CERT_REQUIRED if tls and tls.client_ca_file else ssl.CERT_NONE,
        )  # fmt: skip
        self.server = _Server(self.config)
        self.task: asyncio.Task[None] | None = None
        self._socket: socket.socket | None = None

    @property
    def port(self) -> int:
        if self._socket is not None:
            # An AF_INET(6) address: (host, port, ...).
            return cast(int, self._socket.getsockname()[1])
        return self.config.port

    @property
    def url(self) -> str:
        """Where the API answers (``https://`` with TLS)."""
        host = self.config.host
        host = f"[{host}]" if ":" in host else host
        return f"{'https' if self.tls else 'http'}://{host}:{self.port}/"

    def bind(self) -> None:
        """Take the listening socket now; raises :class:`ApiServerError` when it cannot."""
        if self._socket is not None:
            return
        host, port = self.config.host, self.config.port
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        try:
            self._socket = _listen(host, port, family, self.config.backlog)
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
        # The routers' routes and the OpenAPI document (schemas of every response model:
        # a few hundred ms) are built once, when first asked for; built here, in a worker
        # thread before the first request, they never hold up the event loop the scans share.
        await asyncio.to_thread(self.app.openapi)
        self.task = asyncio.create_task(self.server.serve(sockets=[self._socket]))
        while not self.server.started:
            if self.task.done():
                error = self.task.exception()
                raise ApiServerError(f"the API server stopped while starting: {error!r}")
            await asyncio.sleep(0.02)
        log.info("API listening", extra={"event": "api_listening", "url": self.url})
        guard = getattr(self.app.state, "write_guard", None)  # set by create_app
        if guard is not None and guard.refusal is not None:
            log.warning(guard.refusal, extra={"event": "api_writes_disabled"})

    async def stop(self) -> None:
        self.server.stop()
        if self.task is not None:
            await self.task
