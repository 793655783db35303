"""The channels' HTTP transport (HTTP/1.1 keep-alive connections on asyncio streams) against
real servers: HTTPS verified against the CA the environment names, keep-alive, compressed
answers, and failures as the retryable or final deliveries the outbox acts on."""

from __future__ import annotations

import asyncio
import contextlib
import gzip
import ssl

import httpx
import pytest
import trustme

from notifier.demo import HttpReceiver
from notifier.notify.channels import AsyncioTransport
from notifier.notify.channels.webhook import Webhook

from .channel_helpers import make_notification


@pytest.fixture(scope="module")
def ca() -> trustme.CA:
    return trustme.CA()


@pytest.fixture
def https_server_context(ca: trustme.CA) -> ssl.SSLContext:
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ca.issue_cert("localhost").configure_cert(context)
    return context


async def test_https_delivery_trusts_the_ca_named_by_ssl_cert_file(
    ca, https_server_context, tmp_path, monkeypatch
):
    bundle = tmp_path / "ca.pem"
    ca.cert_pem.write_to_path(str(bundle))
    monkeypatch.setenv("SSL_CERT_FILE", str(bundle))
    async with HttpReceiver(tls=https_server_context) as https:
        hook = Webhook(https.url_for("/hook"))
        async with hook:
            first = await hook.send(make_notification())
            second = await hook.send(make_notification())

    assert first.ok and second.ok
    assert len(https.to("/hook")) == 2


async def test_an_untrusted_certificate_is_a_failed_delivery_naming_the_cause(
    https_server_context, monkeypatch
):
    monkeypatch.delenv("SSL_CERT_FILE", raising=False)
    monkeypatch.delenv("SSL_CERT_DIR", raising=False)
    async with HttpReceiver(tls=https_server_context) as https:
        hook = Webhook(https.url_for("/hook"))
        async with hook:
            delivery = await hook.send(make_notification())

    assert not delivery.ok
    assert "CERTIFICATE_VERIFY_FAILED" in (delivery.error or "")
    assert https.requests == []


async def test_connections_are_kept_alive_between_requests(http):
    async with AsyncioTransport() as transport:
        for _ in range(3):
            request = httpx.Request("POST", http.url_for("/hook"), content=b"{}")
            response = await transport.handle_async_request(request)
            assert response.status_code == 200
        assert transport.open_connections == 1


async def test_a_compressed_answer_is_decoded(http):
    http.reply(
        "/hook",
        500,
        content=gzip.compress(b"receiver overloaded"),
        headers={"Content-Encoding": "gzip"},
    )
    async with Webhook(http.url_for("/hook")) as hook:
        delivery = await hook.send(make_notification())

    assert (delivery.ok, delivery.retryable) == (False, True)
    assert delivery.error == "HTTP 500: receiver overloaded"


async def test_a_silent_server_is_a_read_timeout_and_retryable(http):
    http.reply("/hook", hang=5)
    async with Webhook(http.url_for("/hook"), timeout=0.2) as hook:
        delivery = await asyncio.wait_for(hook.send(make_notification()), 5)

    assert (delivery.ok, delivery.retryable) == (False, True)
    assert delivery.error == "timed out after 0.2 s (ReadTimeout)"


async def test_transport_failures_come_back_as_httpx_exceptions():
    async with AsyncioTransport() as transport:
        with pytest.raises(httpx.ConnectError):
            await transport.handle_async_request(httpx.Request("GET", "http://127.0.0.1:9/"))
        with pytest.raises(httpx.UnsupportedProtocol):
            await transport.handle_async_request(httpx.Request("GET", "ftp://127.0.0.1/"))


# --------------------------------------------------------------------------------------------
# HTTP/1.1 as servers really answer: a server that sends exactly the bytes a test gives


class ThenClose(bytes):
    """An answer after which the server closes the connection."""


class ScriptedServer:
    """Reads each request (head and ``Content-Length`` body) and answers with the next of
    ``answers``: raw bytes, sent as they are (:class:`ThenClose`: then the connection is
    closed); ``None`` closes the connection without an answer."""

    def __init__(self, *answers: bytes | None) -> None:
        self.answers = list(answers)
        self.requests: list[bytes] = []
        self.connections = 0
        self._server: asyncio.Server | None = None
        self._writers: list[asyncio.StreamWriter] = []

    async def __aenter__(self) -> ScriptedServer:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        assert self._server is not None
        self._server.close()
        for writer in self._writers:
            writer.close()

    @property
    def url(self) -> str:
        assert self._server is not None
        return f"http://127.0.0.1:{self._server.sockets[0].getsockname()[1]}/hook"

    def close_idle_connections(self) -> None:
        for writer in self._writers:
            writer.close()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        self._writers.append(writer)
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                length = 0
                for line in head.split(b"\r\n"):
                    name, _, value = line.partition(b":")
                    if name.lower() == b"content-length":
                        length = int(value)
                self.requests.append(head + await reader.readexactly(length))
                answer = self.answers.pop(0)
                if answer is None:
                    break
                writer.write(answer)
                await writer.drain()
                if isinstance(answer, ThenClose):
                    break
        except (ConnectionError, asyncio.IncompleteReadError):
            pass
        finally:
            writer.close()


def ok(body: bytes = b"ok", *headers: bytes) -> bytes:
    head = b"".join(header + b"\r\n" for header in headers)
    return b"HTTP/1.1 200 OK\r\n" + head + b"Content-Length: %d\r\n\r\n" % len(body) + body


async def post(transport: AsyncioTransport, url: str, **kwargs) -> httpx.Response:
    timeout = {"timeout": httpx.Timeout(5.0).as_dict()}
    response = await transport.handle_async_request(
        httpx.Request("POST", url, content=b'{"alert": 1}', extensions=timeout, **kwargs)
    )
    await response.aread()
    return response


async def test_a_request_goes_out_as_one_http_1_1_message_with_its_length():
    async with ScriptedServer(ok()) as server, AsyncioTransport() as transport:
        await post(transport, server.url + "?team=ops", headers={"X-Team": "ops"})

    [request] = server.requests
    head, _, body = request.partition(b"\r\n\r\n")
    lines = head.split(b"\r\n")
    assert lines[0] == b"POST /hook?team=ops HTTP/1.1"
    assert b"X-Team: ops" in lines
    assert b"Content-Length: 12" in lines
    assert body == b'{"alert": 1}'


async def test_a_chunked_answer_is_read_whole_and_the_connection_kept():
    chunked = (
        b"HTTP/1.1 503 Service Unavailable\r\nTransfer-Encoding: chunked\r\n"
        b"Retry-After: 7\r\n\r\n5;ext=1\r\nslow \r\n5\r\ndown!\r\n0\r\nX-Trailer: 1\r\n\r\n"
    )
    async with ScriptedServer(chunked, ok()) as server, AsyncioTransport() as transport:
        first = await post(transport, server.url)
        second = await post(transport, server.url)

    assert (first.status_code, first.text, first.headers["retry-after"]) == (503, "slow down!", "7")
    assert second.status_code == 200
    assert server.connections == 1


async def test_an_answer_without_a_length_ends_when_the_server_closes():
    answers = ThenClose(b"HTTP/1.1 200 OK\r\n\r\nall of it"), ok()
    async with ScriptedServer(*answers) as server, AsyncioTransport() as transport:
        first = await post(transport, server.url)
        second = await post(transport, server.url)

    assert first.text == "all of it"
    assert second.status_code == 200
    assert server.connections == 2


async def test_connection_close_is_honoured_and_the_next_request_opens_a_new_one():
    answers = ThenClose(ok(b"bye", b"Connection: close")), ok()
    async with ScriptedServer(*answers) as server, AsyncioTransport() as transport:
        assert (await post(transport, server.url)).text == "bye"
        assert transport.open_connections == 0
        assert (await post(transport, server.url)).status_code == 200

    assert server.connections == 2


async def test_a_keep_alive_connection_the_server_closed_is_not_reused():
    async with ScriptedServer(ok(), ok()) as server, AsyncioTransport() as transport:
        await post(transport, server.url)
        server.close_idle_connections()
        await asyncio.sleep(0.05)  # the close reaches the client
        second = await post(transport, server.url)

    assert second.status_code == 200
    assert server.connections == 2


async def test_an_informational_answer_is_skipped():
    answer = b"HTTP/1.1 100 Continue\r\n\r\n" + ok(b"done")
    async with ScriptedServer(answer) as server, AsyncioTransport() as transport:
        response = await post(transport, server.url)

    assert (response.status_code, response.text) == (200, "done")


@pytest.mark.parametrize(
    ("answer", "error"),
    [
        (b"SMTP ready\r\n\r\n", "not an HTTP/1.1 status line"),
        (b"HTTP/1.1 200 OK\r\nno colon here\r\n\r\n", "not a header field"),
        (b"HTTP/1.1 200 OK\r\nContent-Length: ten\r\n\r\n", "not a Content-Length"),
        (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n", "not a chunk size"),
        (ThenClose(b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nshort"), "closed the"),
        (None, "closed the connection"),
    ],
)
async def test_an_answer_that_is_not_http_is_a_retryable_delivery_naming_the_fault(answer, error):
    async with ScriptedServer(answer) as server, Webhook(server.url) as hook:
        delivery = await hook.send(make_notification())

    assert (delivery.ok, delivery.retryable) == (False, True)
    assert "RemoteProtocolError" in (delivery.error or "")
    assert error in (delivery.error or "")


async def test_a_header_with_a_line_break_is_refused_before_anything_is_sent():
    smuggled = {"X-Team": "ops\r\nX-Admin: yes"}
    async with ScriptedServer(ok()) as server, Webhook(server.url, headers=smuggled) as hook:
        delivery = await hook.send(make_notification())

    assert not delivery.ok
    assert "line break" in (delivery.error or "")
    assert server.requests == []


async def test_requests_beyond_the_connection_limit_wait_for_a_free_connection():
    async with (
        ScriptedServer(ok(b"1"), ok(b"2"), ok(b"3")) as server,
        AsyncioTransport(max_connections=1) as transport,
    ):
        answers = await asyncio.gather(*(post(transport, server.url) for _ in range(3)))

    assert sorted(a.text for a in answers) == ["1", "2", "3"]
    assert server.connections == 1


async def test_https_goes_through_the_proxy_in_a_connect_tunnel(
    ca, https_server_context, tmp_path, monkeypatch
):
    bundle = tmp_path / "ca.pem"
    ca.cert_pem.write_to_path(str(bundle))
    monkeypatch.setenv("SSL_CERT_FILE", str(bundle))
    connects: list[bytes] = []

    async def tunnel(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        connect = await reader.readuntil(b"\r\n\r\n")
        connects.append(connect)
        host, port = connect.split(b" ")[1].split(b":")
        upstream_reader, upstream_writer = await asyncio.open_connection(host.decode(), int(port))
        writer.write(b"HTTP/1.1 200 Connection established\r\n\r\n")

        async def pipe(src: asyncio.StreamReader, dst: asyncio.StreamWriter) -> None:
            with contextlib.suppress(ConnectionError):
                while data := await src.read(65536):
                    dst.write(data)
                    await dst.drain()
            dst.close()

        await asyncio.gather(pipe(reader, upstream_writer), pipe(upstream_reader, writer))

    proxy = await asyncio.start_server(tunnel, "127.0.0.1", 0)
    proxy_port = proxy.sockets[0].getsockname()[1]
    try:
        async with (
            HttpReceiver(tls=https_server_context) as https,
            AsyncioTransport(proxy=f"http://ops:s3cret@127.0.0.1:{proxy_port}") as transport,
        ):
            response = await post(transport, https.url_for("/hook"))
    finally:
        proxy.close()

    assert response.status_code == 200
    [connect] = connects
    assert connect.startswith(f"CONNECT localhost:{https.port} HTTP/1.1\r\n".encode())
    assert b"Proxy-Authorization: Basic b3BzOnMzY3JldA==" in connect  # ops:s3cret
    [request] = https.to("/hook")
    assert "proxy-authorization" not in request.headers  # the tunnel's, not the receiver's


async def test_a_proxy_that_refuses_the_tunnel_is_a_retryable_delivery_saying_so(monkeypatch):
    refusal = b"HTTP/1.1 407 Proxy Authentication Required\r\nContent-Length: 0\r\n\r\n"
    async with ScriptedServer(refusal) as proxy:
        monkeypatch.setenv("HTTPS_PROXY", proxy.url.removesuffix("/hook"))
        monkeypatch.delenv("https_proxy", raising=False)
        monkeypatch.delenv("NO_PROXY", raising=False)
        monkeypatch.delenv("no_proxy", raising=False)
        async with Webhook("https://alerts.example.invalid/hook") as hook:
            delivery = await hook.send(make_notification())

    assert (delivery.ok, delivery.retryable) == (False, True)
    assert "ProxyError" in (delivery.error or "")
    assert "407 Proxy Authentication Required" in (delivery.error or "")
    [connect] = proxy.requests
    assert connect.startswith(b"CONNECT alerts.example.invalid:443 HTTP/1.1\r\n")
