"""The channels' HTTP transport (httpcore's pool on asyncio streams) against real servers:
HTTPS verified against the CA the environment names, keep-alive, compressed answers, and
failures as the retryable or final deliveries the outbox acts on."""

from __future__ import annotations

import asyncio
import gzip
import ssl

import httpx
import pytest
import trustme

from notifier.demo import HttpReceiver
from notifier.notify.channels import AsyncioTransport, Webhook

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
        connections = transport._pool.connections
    assert len(connections) == 1


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
