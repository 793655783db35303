"""The API server as an HTTP client on a keep-alive connection sees it."""

from __future__ import annotations

import asyncio
import statistics
import time

from fastapi import FastAPI

from notifier.api import ApiServer

NAGLE_STALL_MS = 40
"""What a delayed ACK costs an answer written in two pieces without ``TCP_NODELAY``."""


async def _answer_ms(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> float:
    """Milliseconds from sending one request to having read its whole answer."""
    started = time.perf_counter()
    writer.write(b"GET /ping HTTP/1.1\r\nHost: notifier\r\n\r\n")
    head = await reader.readuntil(b"\r\n\r\n")
    headers = dict(line.split(b":", 1) for line in head.split(b"\r\n")[1:] if b":" in line)
    assert head.startswith(b"HTTP/1.1 200"), head
    body = await reader.readexactly(int(headers[b"content-length"]))
    assert body == b'{"ok":true}'
    return (time.perf_counter() - started) * 1000


async def test_every_request_on_a_keep_alive_connection_answers_without_a_nagle_stall():
    app = FastAPI()

    @app.get("/ping")
    async def ping() -> dict:
        return {"ok": True}

    server = ApiServer(app, "127.0.0.1", 0)
    await server.start()
    try:
        reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
        first = await _answer_ms(reader, writer)
        following = [await _answer_ms(reader, writer) for _ in range(9)]
        writer.close()
    finally:
        await server.stop()
    # The first answer never stalls (the client ACKs at once at the start of a connection);
    # without TCP_NODELAY every following one waited for the client's delayed ACK.
    assert statistics.median(following) < NAGLE_STALL_MS / 2, (first, following)
