"""Real loopback servers that stand in for Slack, PagerDuty, webhook receivers and SMTP.

The tests deliver to them, and ``notifier demo --local-receivers`` shows notifications arriving
at them without any account anywhere.

:class:`HttpReceiver` is a small HTTP/1.1 server on ``127.0.0.1`` (a free port) built on
``asyncio.start_server``: channels talk to it over a real socket, exactly as they would to the
real service. It records every request and answers like the services do by default:

* ``/services/...`` (a Slack incoming webhook): ``200 ok``
* ``/api/chat.postMessage``: ``{"ok": true, "channel": "C0NOTIFY", "ts": "<new ts>"}``
* ``/api/chat.update``: ``{"ok": true, "channel": ..., "ts": <the ts it was given>}``
* ``/v2/enqueue`` (PagerDuty Events v2): ``202 {"status": "success", "dedup_key": ...}``
* anything else (a generic webhook): ``200 {"status": "ok"}``

Tests override a path with :meth:`HttpReceiver.reply` — a status, body, headers (e.g.
``Retry-After``), or ``hang`` seconds before answering, optionally only for the next
``times`` requests.

:class:`SmtpReceiver` runs ``aiosmtpd`` on a free port and keeps every message it accepts; it
can be told to refuse with a given SMTP reply, or to require a login.
"""

from __future__ import annotations

import asyncio
import email
import email.policy
import itertools
import json
import ssl
import time
from dataclasses import dataclass, field
from email.message import EmailMessage
from typing import Any
from urllib.parse import parse_qs, urlsplit

from aiosmtpd.controller import Controller
from aiosmtpd.smtp import AuthResult, LoginPassword

from notifier.netutil import free_port

SLACK_CHANNEL_ID = "C0NOTIFY"

_REASONS = {
    200: "OK",
    202: "Accepted",
    400: "Bad Request",
    401: "Unauthorized",
    403: "Forbidden",
    404: "Not Found",
    408: "Request Timeout",
    429: "Too Many Requests",
    500: "Internal Server Error",
    502: "Bad Gateway",
    503: "Service Unavailable",
}


@dataclass(slots=True)
class Request:
    """One request as the server saw it (header names lower-cased)."""

    method: str
    path: str
    query: dict[str, list[str]]
    headers: dict[str, str]
    body: bytes
    received_at_ms: int = field(default_factory=lambda: int(time.time() * 1000))

    @property
    def text(self) -> str:
        return self.body.decode("utf-8")

    @property
    def json(self) -> Any:
        return json.loads(self.body)


@dataclass(slots=True)
class Reply:
    """A canned answer for one path; ``times`` = how many requests it serves (None: all)."""

    status: int = 200
    body: bytes = b""
    headers: dict[str, str] = field(default_factory=dict)
    hang: float | None = None
    times: int | None = None


class HttpReceiver:
    """``async with HttpReceiver() as rx:`` — a recording HTTP server at ``rx.url``."""

    def __init__(self, *, tls: ssl.SSLContext | None = None) -> None:
        self.tls = tls
        """A server-side TLS context: serve HTTPS (at ``https://localhost:port``)."""
        self.requests: list[Request] = []
        self._replies: dict[str, list[Reply]] = {}
        self._server: asyncio.Server | None = None
        self._handlers: set[asyncio.Task[None]] = set()
        self._ts = itertools.count(1)
        self.port = 0

    # ---- lifecycle

    async def __aenter__(self) -> HttpReceiver:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0, ssl=self.tls)
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        assert self._server is not None
        self._server.close()
        # A hanging handler must not keep the test waiting: cancel what is still running.
        for task in list(self._handlers):
            task.cancel()
        await asyncio.gather(*self._handlers, return_exceptions=True)
        await self._server.wait_closed()

    @property
    def url(self) -> str:
        # A certificate names a host, not an address: HTTPS is served as localhost.
        if self.tls is not None:
            return f"https://localhost:{self.port}"
        return f"http://127.0.0.1:{self.port}"

    def url_for(self, path: str) -> str:
        return self.url + path

    # ---- configuration and inspection

    def reply(
        self,
        path: str,
        status: int = 200,
        *,
        json_body: Any = None,
        text: str | None = None,
        content: bytes | None = None,
        headers: dict[str, str] | None = None,
        hang: float | None = None,
        times: int | None = None,
    ) -> None:
        """Answer requests to ``path`` with this reply (queued after earlier ones): a JSON
        body, a text, or raw ``content`` bytes (e.g. gzip-encoded, with its header)."""
        if json_body is not None:
            body = json.dumps(json_body).encode()
            headers = {"Content-Type": "application/json", **(headers or {})}
        elif content is not None:
            body = content
        else:
            body = (text or "").encode()
        self._replies.setdefault(path, []).append(
            Reply(status, body, dict(headers or {}), hang, times)
        )

    def to(self, path: str) -> list[Request]:
        """The requests that went to ``path``, oldest first."""
        return [r for r in self.requests if r.path == path]

    # ---- the server

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._handlers.add(task)
        try:
            while True:  # keep-alive: httpx reuses connections
                request = await self._read_request(reader)
                if request is None:
                    break
                self.requests.append(request)
                status, headers, body, hang = self._answer(request)
                if hang:
                    await asyncio.sleep(hang)
                head = [f"HTTP/1.1 {status} {_REASONS.get(status, 'Status')}"]
                head += [f"{k}: {v}" for k, v in headers.items()]
                head += [f"Content-Length: {len(body)}", "Connection: keep-alive", "", ""]
                writer.write("\r\n".join(head).encode("latin-1") + body)
                await writer.drain()
        except (ConnectionError, ssl.SSLError, asyncio.IncompleteReadError, asyncio.CancelledError):
            # The client went away, or the test ended while this handler hung on purpose.
            pass
        finally:
            self._handlers.discard(task)
            writer.close()

    @staticmethod
    async def _read_request(reader: asyncio.StreamReader) -> Request | None:
        line = await reader.readline()
        if not line.strip():
            return None
        method, target, _version = line.decode("latin-1").split(" ", 2)
        headers: dict[str, str] = {}
        while True:
            raw = (await reader.readline()).decode("latin-1").rstrip("\r\n")
            if not raw:
                break
            name, _, value = raw.partition(":")
            headers[name.strip().lower()] = value.strip()
        if headers.get("transfer-encoding", "").lower() == "chunked":
            chunks = []
            while True:
                size = int((await reader.readline()).split(b";")[0], 16)
                chunk = await reader.readexactly(size + 2)
                if size == 0:
                    break
                chunks.append(chunk[:-2])
            body = b"".join(chunks)
        else:
            body = await reader.readexactly(int(headers.get("content-length", "0")))
        parts = urlsplit(target)
        return Request(method, parts.path, parse_qs(parts.query), headers, body)

    def _answer(self, request: Request) -> tuple[int, dict[str, str], bytes, float | None]:
        queue = self._replies.get(request.path)
        if queue:
            reply = queue[0]
            if reply.times is not None:
                reply.times -= 1
                if reply.times <= 0:
                    queue.pop(0)
            return reply.status, reply.headers, reply.body, reply.hang
        status, payload = self._default(request)
        if isinstance(payload, str):
            return status, {"Content-Type": "text/plain"}, payload.encode(), None
        return status, {"Content-Type": "application/json"}, json.dumps(payload).encode(), None

    def _default(self, request: Request) -> tuple[int, Any]:
        """How the real services answer a good request."""
        if request.path.startswith("/services/"):
            return 200, "ok"
        if request.path == "/api/chat.postMessage":
            ts = f"1714560000.{next(self._ts):06d}"
            return 200, {"ok": True, "channel": SLACK_CHANNEL_ID, "ts": ts, "message": {}}
        if request.path == "/api/chat.update":
            body = request.json
            return 200, {"ok": True, "channel": body.get("channel"), "ts": body.get("ts")}
        if request.path == "/v2/enqueue":
            dedup_key = request.json.get("dedup_key")
            return 202, {"status": "success", "message": "Event processed", "dedup_key": dedup_key}
        return 200, {"status": "ok"}


# --------------------------------------------------------------------------------------------
# SMTP


class _RecordingHandler:
    def __init__(self, receiver: SmtpReceiver) -> None:
        self.receiver = receiver

    async def handle_RCPT(self, server, session, envelope, address, rcpt_options):
        if self.receiver.refuse_rcpt:
            return self.receiver.refuse_rcpt
        envelope.rcpt_tos.append(address)
        return "250 OK"

    async def handle_DATA(self, server, session, envelope):
        if self.receiver.refuse_data:
            return self.receiver.refuse_data
        message = email.message_from_bytes(envelope.content, policy=email.policy.default)
        self.receiver.messages.append(
            Envelope(envelope.mail_from, list(envelope.rcpt_tos), message)
        )
        return "250 Message accepted"


@dataclass(slots=True)
class Envelope:
    sender: str
    recipients: list[str]
    message: EmailMessage


class SmtpReceiver:
    """``async with SmtpReceiver() as smtp:`` — an aiosmtpd server keeping what it accepts.

    ``refuse_rcpt`` / ``refuse_data``: an SMTP reply (``"451 4.3.0 try later"``) to give
    instead of accepting. ``login``: a ``(user, password)`` the server demands (AUTH over a
    plain connection is allowed here, since the test server has no certificate).
    """

    def __init__(self, *, login: tuple[str, str] | None = None) -> None:
        self.messages: list[Envelope] = []
        self.refuse_rcpt: str | None = None
        self.refuse_data: str | None = None
        self.login = login
        # aiosmtpd's Controller probes its own port after starting, so it needs a concrete one.
        self.port = free_port()
        kwargs: dict[str, Any] = {}
        if login is not None:
            kwargs.update(
                authenticator=self._authenticate, auth_required=True, auth_require_tls=False
            )
        self._controller = Controller(
            _RecordingHandler(self), hostname="127.0.0.1", port=self.port, **kwargs
        )

    def _authenticate(self, server, session, envelope, mechanism, auth_data) -> AuthResult:
        ok = (
            isinstance(auth_data, LoginPassword)
            and self.login is not None
            and (auth_data.login.decode(), auth_data.password.decode()) == self.login
        )
        # handled=False: let aiosmtpd send the standard 535 reply itself.
        return AuthResult(success=ok, handled=False)

    async def __aenter__(self) -> SmtpReceiver:
        await asyncio.to_thread(self._controller.start)
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await asyncio.to_thread(self._controller.stop)
