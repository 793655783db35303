"""The HTTP transport under the channels: HTTP/1.1 keep-alive connections on asyncio streams.

A notifier's requests are all alike: a small JSON body to a handful of receivers, answered in a
few bytes. At a few thousand deliveries a second the general-purpose machinery around each one
cost more CPU than the rest of the notifier together: ``httpx.AsyncClient``'s auth, redirect and
cookie flows, httpcore's pool bookkeeping with an anyio lock and cancel scope around every
socket operation, h11's event state machine. :class:`AsyncioTransport` is an
``httpx.AsyncBaseTransport`` (``httpx.Request`` in, ``httpx.Response`` out, httpx's exceptions
for failures) that speaks the part of HTTP/1.1 a notifier needs itself, on
``asyncio.open_connection``: each request is written in one piece, its answer read whole (a
``Content-Length`` body, a chunked one, or one that ends when the server closes), and the
connection kept for the next request unless the server said ``Connection: close``.

What a notifier needs from a client is kept: TLS verified against certifi's bundle or
``SSL_CERT_FILE``/``SSL_CERT_DIR`` (``httpx.create_ssl_context``); an HTTP proxy (absolute-form
requests for http, a ``CONNECT`` tunnel for https, ``Proxy-Authorization`` from
``http://user:pw@host:port``); keep-alive connections up to ``max_connections``, idle ones
closed after ``keepalive_expiry`` or when the server has closed them; timeouts from the
request's ``timeout`` extension (``connect``; ``write``; ``read``, for the whole answer;
``pool``, for a free connection); content decoding (httpx does it on ``aread``). Anything the
server sends that is not HTTP/1.1 as RFC 9112 has it is a ``RemoteProtocolError``, and a
header the caller gives with a line break in it a ``LocalProtocolError``: neither can smuggle
a second message onto the connection.
"""

from __future__ import annotations

import asyncio
import base64
import socket
import ssl
from collections import deque
from collections.abc import Mapping, Sequence
from typing import Any

import httpx

__all__ = ["AsyncioTransport"]

_READ_LIMIT = 64 * 1024
"""The stream's buffer limit: also the longest response head and chunk-size line accepted."""
_WRITE_HIGH_WATER = 64 * 1024
_MAX_BODY = 16 * 1024 * 1024
"""The largest answer read (receivers answer in a few bytes; this bounds a broken one)."""
_DEFAULT_PORTS = {"http": 80, "https": 443}
_FORBIDDEN_IN_HEADERS = (b"\r", b"\n", b"\0")
_NO_BODY_STATUS = frozenset({204, 304})


class _Connection:
    """One kept-alive HTTP/1.1 connection."""

    __slots__ = ("idle_since", "reader", "writer")

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader = reader
        self.writer = writer
        self.idle_since = 0.0

    def usable(self) -> bool:
        """Whether it can take the next request: the server has not closed it, and has sent
        nothing unasked (which would be read as the next answer)."""
        reader = self.reader
        buffered = getattr(reader, "_buffer", None)  # StreamReader keeps no public count
        return not (reader.at_eof() or buffered or self.writer.is_closing())

    def close(self) -> None:
        self.writer.close()


class _Response:
    """A response as read off the wire."""

    __slots__ = ("body", "headers", "keep_alive", "reason", "status")

    def __init__(
        self,
        status: int,
        reason: bytes,
        headers: list[tuple[bytes, bytes]],
        body: bytes,
        keep_alive: bool,
    ) -> None:
        self.status = status
        self.reason = reason
        self.headers = headers
        self.body = body
        self.keep_alive = keep_alive


def _protocol_error(message: str) -> httpx.RemoteProtocolError:
    return httpx.RemoteProtocolError(message)


def _header(headers: list[tuple[bytes, bytes]], name: bytes) -> bytes | None:
    """The value of header ``name`` (lowercase), the fields joined as RFC 9110 joins them."""
    values = [value for key, value in headers if key.lower() == name]
    return b", ".join(values) if values else None


def _parse_head(head: bytes) -> tuple[int, bytes, bytes, list[tuple[bytes, bytes]]]:
    """Status code, reason, version and header fields of a response head (without the
    blank line that ends it)."""
    lines = head.split(b"\r\n")
    version, _, rest = lines[0].partition(b" ")
    code, _, reason = rest.partition(b" ")
    if not version.startswith(b"HTTP/1.") or len(code) != 3 or not code.isdigit():
        raise _protocol_error(f"not an HTTP/1.1 status line: {lines[0][:80]!r}")
    headers: list[tuple[bytes, bytes]] = []
    for line in lines[1:]:
        if line[:1] in (b" ", b"\t"):  # obsolete line folding: part of the previous value
            if not headers:
                raise _protocol_error("a response head starts with a continuation line")
            name, value = headers[-1]
            headers[-1] = (name, value + b" " + line.strip(b" \t"))
            continue
        name, colon, value = line.partition(b":")
        if not colon or not name or name != name.strip(b" \t"):
            raise _protocol_error(f"not a header field: {line[:80]!r}")
        headers.append((name, value.strip(b" \t")))
    return int(code), reason, version, headers


async def _read_chunked(reader: asyncio.StreamReader) -> bytes:
    chunks: list[bytes] = []
    total = 0
    while True:
        line = await reader.readuntil(b"\r\n")
        size_text = line[:-2].split(b";", 1)[0].strip(b" \t")
        try:
            size = int(size_text, 16)
        except ValueError:
            raise _protocol_error(f"not a chunk size: {line[:40]!r}") from None
        if size < 0:
            raise _protocol_error(f"not a chunk size: {line[:40]!r}")
        if size == 0:
            break
        total += size
        if total > _MAX_BODY:
            raise _protocol_error(f"the answer is over {_MAX_BODY} bytes")
        chunks.append(await reader.readexactly(size))
        if await reader.readexactly(2) != b"\r\n":
            raise _protocol_error("a chunk does not end with CRLF")
    while await reader.readuntil(b"\r\n") != b"\r\n":  # trailer fields, unused
        pass
    return b"".join(chunks)


async def _read_to_close(reader: asyncio.StreamReader) -> bytes:
    chunks: list[bytes] = []
    total = 0
    while chunk := await reader.read(_READ_LIMIT):
        total += len(chunk)
        if total > _MAX_BODY:
            raise _protocol_error(f"the answer is over {_MAX_BODY} bytes")
        chunks.append(chunk)
    return b"".join(chunks)


async def _read_response(reader: asyncio.StreamReader, method: bytes) -> _Response:
    """Read one answer whole (informational 1xx answers skipped)."""
    while True:
        head = await reader.readuntil(b"\r\n\r\n")
        status, reason, version, headers = _parse_head(head[:-4])
        if status >= 200:
            break
    connection = (_header(headers, b"connection") or b"").lower()
    keep_alive = version == b"HTTP/1.1" and b"close" not in connection
    encoding = _header(headers, b"transfer-encoding")
    length = _header(headers, b"content-length")
    if method == b"HEAD" or status in _NO_BODY_STATUS or (method == b"CONNECT" and status < 300):
        body = b""  # a CONNECT's 2xx: what follows is the tunnel
    elif encoding is not None:
        if encoding.lower().rsplit(b",", 1)[-1].strip() == b"chunked":
            body = await _read_chunked(reader)
        else:
            body, keep_alive = await _read_to_close(reader), False
    elif length is not None:
        values = {value.strip() for value in length.split(b",")}
        size_text = values.pop() if len(values) == 1 else b""
        if not size_text.isdigit():
            raise _protocol_error(f"not a Content-Length: {length[:40]!r}")
        size = int(size_text)
        if size > _MAX_BODY:
            raise _protocol_error(f"the answer is over {_MAX_BODY} bytes")
        body = await reader.readexactly(size)
    else:
        body, keep_alive = await _read_to_close(reader), False
    return _Response(status, reason, headers, body, keep_alive)


def _request_head(method: bytes, target: bytes, headers: Sequence[tuple[bytes, bytes]]) -> bytes:
    """The request line and header fields, each line ending in CRLF, without the length (that
    of the body actually sent is added by :func:`_request_data`)."""
    lines = [method + b" " + target + b" HTTP/1.1"]
    for name, value in headers:
        lowered = name.lower()
        if lowered in (b"content-length", b"transfer-encoding"):
            continue
        for forbidden in _FORBIDDEN_IN_HEADERS:
            if forbidden in name or forbidden in value:
                raise httpx.LocalProtocolError(f"header {name!r} contains a line break or NUL")
        lines.append(name + b": " + value)
    lines.append(b"")
    return b"\r\n".join(lines)


def _request_data(method: bytes, head: bytes, body: bytes) -> bytes:
    """The whole request: ``head``, the body's length, the blank line, the body."""
    if body or method not in (b"GET", b"HEAD", b"DELETE", b"OPTIONS", b"CONNECT"):
        return head + b"Content-Length: " + str(len(body)).encode() + b"\r\n\r\n" + body
    return head + b"\r\n" + body


Origin = tuple[str, bytes, int]
"""(scheme, host, port) of a server the pool keeps connections to."""


class AsyncioTransport(httpx.AsyncBaseTransport):
    """An httpx transport: keep-alive HTTP/1.1 connections (at most ``max_connections``
    requests in flight; idle ones kept up to ``keepalive_expiry`` seconds) to the servers it
    is asked for, through ``proxy`` when given (``http://user:pw@host:port`` sends the
    credentials as ``Proxy-Authorization``)."""

    def __init__(
        self,
        *,
        proxy: str | None = None,
        verify: ssl.SSLContext | str | bool = True,
        max_connections: int = 20,
        keepalive_expiry: float = 30.0,
    ) -> None:
        self._ssl_context = httpx.create_ssl_context(verify=verify)
        self._proxy: httpx.Proxy | None = None if proxy is None else httpx.Proxy(proxy)
        self._proxy_headers: list[tuple[bytes, bytes]] = []
        if self._proxy is not None:
            self._proxy_headers = list(self._proxy.headers.raw)
            if self._proxy.raw_auth is not None:
                user, password = self._proxy.raw_auth
                token = base64.b64encode(user + b":" + password)
                self._proxy_headers.append((b"Proxy-Authorization", b"Basic " + token))
        self._max_connections = max_connections
        self._keepalive_expiry = keepalive_expiry
        self._idle: dict[Origin, deque[_Connection]] = {}
        self._active: set[_Connection] = set()
        self._heads: dict[tuple[Any, ...], bytes] = {}
        self._slots = asyncio.Semaphore(max_connections)
        self._closed = False

    @property
    def open_connections(self) -> int:
        """Connections open now: sending a request, or idle and kept for the next one."""
        return len(self._active) + sum(len(idle) for idle in self._idle.values())

    # ---- connections

    def _checkout(self, origin: Origin, now: float) -> _Connection | None:
        """An idle connection to ``origin`` that can still be used (stale ones are closed)."""
        idle = self._idle.get(origin)
        while idle:
            connection = idle.pop()  # the most recently used: the least likely to be stale
            if connection.usable() and now - connection.idle_since < self._keepalive_expiry:
                return connection
            connection.close()
        return None

    def _checkin(self, origin: Origin, connection: _Connection, now: float) -> None:
        if self._closed:
            connection.close()
            return
        idle = self._idle.setdefault(origin, deque())
        connection.idle_since = now
        idle.append(connection)
        while len(idle) > self._max_connections:
            idle.popleft().close()

    async def _connect(self, origin: Origin, timeout: float | None) -> _Connection:
        scheme, host, port = origin
        proxy = self._proxy
        writer: asyncio.StreamWriter | None = None
        try:
            async with asyncio.timeout(timeout):
                if proxy is None:
                    reader, writer = await self._open(
                        host, port, self._ssl_context if scheme == "https" else None
                    )
                else:
                    proxy_url = proxy.url
                    proxy_tls = None
                    if proxy_url.scheme == "https":
                        proxy_tls = proxy.ssl_context or self._ssl_context
                    reader, writer = await self._open(
                        proxy_url.raw_host,
                        proxy_url.port or _DEFAULT_PORTS[proxy_url.scheme],
                        proxy_tls,
                    )
                    if scheme == "https":
                        await self._tunnel(reader, writer, host, port)
                        await writer.start_tls(self._ssl_context, server_hostname=host.decode())
        except BaseException as exc:
            if writer is not None:
                writer.close()
            if isinstance(exc, TimeoutError):
                raise httpx.ConnectTimeout(f"could not connect within {timeout} s") from exc
            if isinstance(exc, OSError | asyncio.IncompleteReadError):  # ssl.SSLError too
                raise httpx.ConnectError(str(exc) or type(exc).__name__) from exc
            raise
        return _Connection(reader, writer)

    @staticmethod
    async def _open(
        host: bytes, port: int, tls: ssl.SSLContext | None
    ) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        name = host.decode("ascii")
        reader, writer = await asyncio.open_connection(
            name,
            port,
            ssl=tls,
            server_hostname=name if tls is not None else None,
            limit=_READ_LIMIT,
        )
        sock = writer.get_extra_info("socket")
        if sock is not None and sock.family in (socket.AF_INET, socket.AF_INET6):
            # Small requests must not wait for Nagle.
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        return reader, writer

    async def _tunnel(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, host: bytes, port: int
    ) -> None:
        """Ask the proxy for a tunnel to ``host:port`` (``CONNECT``)."""
        authority = _authority(host, port)
        head = _request_head(b"CONNECT", authority, [(b"Host", authority), *self._proxy_headers])
        writer.write(_request_data(b"CONNECT", head, b""))
        try:
            answer = await _read_response(reader, b"CONNECT")
        except (httpx.RemoteProtocolError, asyncio.LimitOverrunError) as exc:
            raise httpx.ProxyError(f"the proxy's answer to CONNECT is not HTTP: {exc}") from exc
        if not 200 <= answer.status < 300:
            reason = answer.reason.decode("latin-1")
            raise httpx.ProxyError(f"the proxy refused a tunnel: {answer.status} {reason}")

    # ---- requests

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        timeouts = request.extensions.get("timeout", {})
        body = await request.aread()
        method = request.method.encode("ascii")
        try:
            head = self._head(method, request.url, request.headers.raw)
            return await self._send(method, request.url, head, body, timeouts)
        except httpx.RequestError as exc:
            exc.request = request
            raise

    async def send(
        self,
        method: str,
        url: httpx.URL,
        headers: Mapping[str, str],
        content: bytes,
        timeouts: Mapping[str, float | None],
    ) -> httpx.Response:
        """One request from its parts, without an ``httpx.Request`` (building one costs about
        as much as sending it on loopback): what the channels call. ``headers`` as httpx
        would send them (``Host`` and ``Content-Length`` are added); the answer is read whole,
        and its ``request`` is not set."""
        raw_method = method.encode("ascii")
        # A channel sends the same head every time: it is encoded (and checked) once.
        key = (raw_method, url.raw_host, url.port, url.raw_path, tuple(headers.items()))
        head = self._heads.get(key)
        if head is None:
            raw = [(b"Host", _authority(url.raw_host, url.port))]
            raw += [
                (name.encode("ascii"), value.encode("ascii")) for name, value in headers.items()
            ]
            head = self._head(raw_method, url, raw)
            if len(self._heads) >= 256:
                self._heads.clear()
            self._heads[key] = head
        return await self._send(raw_method, url, head, content, timeouts)

    def _head(self, method: bytes, url: httpx.URL, headers: Sequence[tuple[bytes, bytes]]) -> bytes:
        """The request line and headers for ``url`` (absolute-form, with the proxy's
        credentials, when an http URL goes through the proxy)."""
        target = url.raw_path
        if self._proxy is not None and url.scheme == "http":
            target = b"http://" + _authority(url.raw_host, url.port) + target
            headers = [*headers, *self._proxy_headers]
        return _request_head(method, target, headers)

    async def _send(
        self,
        method: bytes,
        url: httpx.URL,
        head: bytes,
        body: bytes,
        timeouts: Mapping[str, float | None],
    ) -> httpx.Response:
        scheme = url.scheme
        if scheme not in _DEFAULT_PORTS:
            raise httpx.UnsupportedProtocol(
                f"the URL's scheme must be http or https, not {scheme!r}"
            )
        if self._closed:
            raise httpx.ConnectError("the transport is closed")
        host = url.raw_host
        port = url.port or _DEFAULT_PORTS[scheme]
        origin: Origin = (scheme, host, port)
        data = _request_data(method, head, body)

        slots = self._slots
        try:
            if slots.locked():
                async with asyncio.timeout(timeouts.get("pool")):
                    await slots.acquire()
            else:
                await slots.acquire()
        except TimeoutError as exc:
            raise httpx.PoolTimeout("no free connection in time") from exc
        try:
            loop = asyncio.get_running_loop()
            connection = self._checkout(origin, loop.time())
            if connection is None:
                connection = await self._connect(origin, timeouts.get("connect"))
            self._active.add(connection)
            try:
                answer = await self._exchange(connection, data, method, timeouts)
            except BaseException:
                connection.close()
                raise
            finally:
                self._active.discard(connection)
            if answer.keep_alive:
                self._checkin(origin, connection, loop.time())
            else:
                connection.close()
        finally:
            slots.release()
        response = httpx.Response(
            status_code=answer.status,
            headers=answer.headers,
            stream=httpx.ByteStream(answer.body),
            extensions={"http_version": b"HTTP/1.1", "reason_phrase": answer.reason},
        )
        # Decoded now, synchronously: httpx's async read goes through a chain of async
        # generators that costs twice as much, for a body that is already here.
        response.read()
        return response

    @staticmethod
    async def _exchange(
        connection: _Connection,
        data: bytes,
        method: bytes,
        timeouts: Mapping[str, float | None],
    ) -> _Response:
        """Send one request in one write and read its answer."""
        writer = connection.writer
        try:
            writer.write(data)
            # Waiting for the buffer to drain costs a loop turn; the kernel takes a request
            # at once unless the peer stops reading.
            if writer.transport.get_write_buffer_size() > _WRITE_HIGH_WATER:
                timeout = timeouts.get("write")
                try:
                    async with asyncio.timeout(timeout):
                        await writer.drain()
                except TimeoutError as exc:
                    raise httpx.WriteTimeout(f"could not send within {timeout} s") from exc
        except (OSError, ssl.SSLError) as exc:
            raise httpx.WriteError(str(exc) or type(exc).__name__) from exc
        timeout = timeouts.get("read")
        try:
            async with asyncio.timeout(timeout):
                return await _read_response(connection.reader, method)
        except TimeoutError as exc:
            raise httpx.ReadTimeout(f"no answer within {timeout} s") from exc
        except asyncio.IncompleteReadError as exc:
            raise httpx.RemoteProtocolError(
                "the server closed the connection before it answered in full"
            ) from exc
        except asyncio.LimitOverrunError as exc:
            raise httpx.RemoteProtocolError(
                f"a response line or head is over {_READ_LIMIT} bytes"
            ) from exc
        except (OSError, ssl.SSLError) as exc:
            raise httpx.ReadError(str(exc) or type(exc).__name__) from exc

    async def aclose(self) -> None:
        self._closed = True
        for idle in self._idle.values():
            for connection in idle:
                connection.close()
        self._idle.clear()
        for connection in list(self._active):
            connection.close()


def _authority(host: bytes, port: int | None) -> bytes:
    """``host:port`` as a request target or ``Host`` names it (the port left out if None)."""
    if b":" in host:  # an IPv6 address
        host = b"[" + host + b"]"
    return host if port is None else host + b":" + str(port).encode()
