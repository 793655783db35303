"""The HTTP transport under the channels: httpcore's connection pool on plain asyncio streams.

httpx's own transport runs httpcore's pool on anyio, which wraps every socket read and write
in a cancel scope; at a thousand deliveries a second that wrapping cost more CPU than the
rest of the notifier together. :class:`AsyncioTransport` is an ``httpx.AsyncBaseTransport``
(requests in, ``httpx.Response`` out, httpx's exceptions for failures) whose pool talks to
the network through :class:`AsyncioBackend`, httpcore's documented extension point for
network backends, built on ``asyncio.open_connection`` with ``asyncio.timeout``.

What httpx's transport gives and a notifier needs is kept: TLS verified against certifi's
bundle or ``SSL_CERT_FILE``/``SSL_CERT_DIR`` (``httpx.create_ssl_context``), an HTTP proxy
(``CONNECT`` for https), keep-alive connections, per-request timeouts from the request's
``timeout`` extension. Responses are read whole before they are returned (notification
receivers answer in a few bytes), and decoded as httpx decodes them.
"""

from __future__ import annotations

import asyncio
import socket
import ssl
from collections.abc import Iterable
from typing import Any

import httpcore
import httpx

__all__ = ["AsyncioBackend", "AsyncioTransport"]

_READ_LIMIT = 64 * 1024
_WRITE_HIGH_WATER = 64 * 1024


class _Stream(httpcore.AsyncNetworkStream):
    """One TCP (or TLS) connection as httpcore wants it."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._reader = reader
        self._writer = writer

    async def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        try:
            async with asyncio.timeout(timeout):
                return await self._reader.read(max_bytes)
        except TimeoutError as exc:
            raise httpcore.ReadTimeout(f"no answer within {timeout} s") from exc
        except (OSError, ssl.SSLError) as exc:
            raise httpcore.ReadError(str(exc) or type(exc).__name__) from exc

    async def write(self, buffer: bytes, timeout: float | None = None) -> None:
        if not buffer:
            return
        try:
            self._writer.write(buffer)
            # Waiting for the buffer to drain on every write costs a loop turn each time;
            # the kernel takes a request body at once unless the peer stops reading.
            if self._writer.transport.get_write_buffer_size() > _WRITE_HIGH_WATER:
                async with asyncio.timeout(timeout):
                    await self._writer.drain()
        except TimeoutError as exc:
            raise httpcore.WriteTimeout(f"could not send within {timeout} s") from exc
        except (OSError, ssl.SSLError) as exc:
            raise httpcore.WriteError(str(exc) or type(exc).__name__) from exc

    async def aclose(self) -> None:
        self._writer.close()

    async def start_tls(
        self,
        ssl_context: ssl.SSLContext,
        server_hostname: str | None = None,
        timeout: float | None = None,
    ) -> httpcore.AsyncNetworkStream:
        try:
            async with asyncio.timeout(timeout):
                await self._writer.start_tls(ssl_context, server_hostname=server_hostname)
        except TimeoutError as exc:
            raise httpcore.ConnectTimeout(f"TLS handshake took over {timeout} s") from exc
        except (OSError, ssl.SSLError) as exc:
            raise httpcore.ConnectError(str(exc) or type(exc).__name__) from exc
        return self

    def get_extra_info(self, info: str) -> Any:
        if info == "is_readable":
            # An idle keep-alive connection with something to read was closed by the server.
            return self._reader.at_eof() or bool(getattr(self._reader, "_buffer", b""))
        key = {"client_addr": "sockname", "server_addr": "peername"}.get(info, info)
        return self._writer.get_extra_info(key)


class AsyncioBackend(httpcore.AsyncNetworkBackend):
    """httpcore's network on asyncio streams, with ``TCP_NODELAY`` (small requests must not
    wait for Nagle)."""

    async def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Iterable[Any] | None = None,
    ) -> httpcore.AsyncNetworkStream:
        local = None if local_address is None else (local_address, 0)
        try:
            async with asyncio.timeout(timeout):
                reader, writer = await asyncio.open_connection(
                    host, port, limit=_READ_LIMIT, local_addr=local
                )
        except TimeoutError as exc:
            raise httpcore.ConnectTimeout(f"could not connect within {timeout} s") from exc
        except OSError as exc:
            raise httpcore.ConnectError(str(exc) or type(exc).__name__) from exc
        sock = writer.get_extra_info("socket")
        if sock is not None:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            for option in socket_options or ():
                sock.setsockopt(*option)
        return _Stream(reader, writer)

    async def connect_unix_socket(
        self,
        path: str,
        timeout: float | None = None,
        socket_options: Iterable[Any] | None = None,
    ) -> httpcore.AsyncNetworkStream:
        try:
            async with asyncio.timeout(timeout):
                reader, writer = await asyncio.open_unix_connection(path, limit=_READ_LIMIT)
        except TimeoutError as exc:
            raise httpcore.ConnectTimeout(f"could not connect within {timeout} s") from exc
        except OSError as exc:
            raise httpcore.ConnectError(str(exc) or type(exc).__name__) from exc
        return _Stream(reader, writer)

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(seconds)


# httpcore's exceptions → httpx's, most specific first (the order httpx itself uses).
_EXCEPTIONS: list[tuple[type[Exception], type[httpx.TransportError]]] = [
    (httpcore.ConnectTimeout, httpx.ConnectTimeout),
    (httpcore.ReadTimeout, httpx.ReadTimeout),
    (httpcore.WriteTimeout, httpx.WriteTimeout),
    (httpcore.PoolTimeout, httpx.PoolTimeout),
    (httpcore.TimeoutException, httpx.TimeoutException),
    (httpcore.ConnectError, httpx.ConnectError),
    (httpcore.ReadError, httpx.ReadError),
    (httpcore.WriteError, httpx.WriteError),
    (httpcore.NetworkError, httpx.NetworkError),
    (httpcore.ProxyError, httpx.ProxyError),
    (httpcore.UnsupportedProtocol, httpx.UnsupportedProtocol),
    (httpcore.RemoteProtocolError, httpx.RemoteProtocolError),
    (httpcore.LocalProtocolError, httpx.LocalProtocolError),
    (httpcore.ProtocolError, httpx.ProtocolError),
]


def _as_httpx(exc: Exception, request: httpx.Request) -> Exception:
    for core, mapped in _EXCEPTIONS:
        if isinstance(exc, core):
            return mapped(str(exc) or type(exc).__name__, request=request)
    return exc


class AsyncioTransport(httpx.AsyncBaseTransport):
    """An httpx transport: a keep-alive connection pool (``max_connections`` per transport)
    over :class:`AsyncioBackend`, through ``proxy`` when given (``http://user:pw@host:port``
    sends the credentials as ``Proxy-Authorization``)."""

    def __init__(
        self,
        *,
        proxy: str | None = None,
        verify: ssl.SSLContext | str | bool = True,
        max_connections: int = 20,
        keepalive_expiry: float = 30.0,
    ) -> None:
        ssl_context = httpx.create_ssl_context(verify=verify)
        core_proxy = None
        if proxy is not None:
            parsed = httpx.Proxy(proxy)  # takes the credentials out of http://user:pw@host
            core_proxy = httpcore.Proxy(
                str(parsed.url),
                auth=parsed.raw_auth,
                headers=parsed.headers.raw,
                ssl_context=parsed.ssl_context,
            )
        self._pool = httpcore.AsyncConnectionPool(
            ssl_context=ssl_context,
            proxy=core_proxy,
            max_connections=max_connections,
            keepalive_expiry=keepalive_expiry,
            network_backend=AsyncioBackend(),
        )

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        url = request.url
        core_request = httpcore.Request(
            method=request.method,
            url=httpcore.URL(
                scheme=url.raw_scheme, host=url.raw_host, port=url.port, target=url.raw_path
            ),
            headers=request.headers.raw,
            content=request.content,
            extensions=request.extensions,
        )
        try:
            response = await self._pool.handle_async_request(core_request)
            try:
                body = await response.aread()
            finally:
                await response.aclose()
        except Exception as exc:
            mapped = _as_httpx(exc, request)
            if mapped is exc:
                raise
            raise mapped from exc
        return httpx.Response(
            status_code=response.status,
            headers=response.headers,
            stream=httpx.ByteStream(body),
            extensions=response.extensions,
            request=request,
        )

    async def aclose(self) -> None:
        await self._pool.aclose()
