"""The abstract :class:`Channel` and the HTTP plumbing the HTTP channels share.

A channel turns one :class:`~notifier.types.Notification` into one delivery attempt and reports
what happened as a :class:`~notifier.notify.channels.delivery.Delivery`. Channels never retry by
themselves: the caller owns the retry loop (backoff, the next group interval, at-least-once), so
a channel's job is to classify each failure honestly — ``retryable`` or not, and for how long
the receiver asked us to wait.

Secrets (webhook URLs, tokens, SMTP passwords, routing keys) are held in
:class:`~notifier.config.Secret` and are scrubbed from every error string a channel returns,
from ``repr()`` and from the request log.
"""

from __future__ import annotations

import abc
import base64
import hashlib
import logging
import urllib.request
from collections.abc import Callable, Collection, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import httpx

from notifier import __version__
from notifier.config import Rate, Scrubber, Secret, redact_url
from notifier.notify import jsonenc
from notifier.notify.channels.delivery import Delivery
from notifier.notify.channels.templates import TemplateError, TemplateProblem
from notifier.notify.channels.transport import AsyncioTransport
from notifier.types import Incident, Notification

_http_log = logging.getLogger("notifier.http")
"""One DEBUG line per channel request, its URL redacted (httpx's own request log is
``httpx.AsyncClient``'s, which the channels do not use)."""


@dataclass(slots=True, frozen=True)
class ChannelPolicy:
    """How one channel is driven: its rate (``None``: unlimited), lanes in flight at once, and
    the bucket it shares (channels that hit the same receiver limit share one bucket)."""

    rate: Rate | None
    concurrency: int
    bucket: str


def policy_key(*parts: str) -> str:
    """A bucket key from what identifies a receiver's limit (a URL, a token and a channel),
    hashed: the key shows in metrics, the parts may be secrets."""
    return hashlib.sha256("\x00".join(parts).encode()).hexdigest()[:16]


@dataclass(slots=True, frozen=True)
class MessageRef:
    """Where an earlier message lives on a receiver that can follow up on it: its
    conversation (a Slack channel *ID*, which chat.update needs) and its id there (a ts)."""

    channel: str
    ts: str


MessageLookup = Callable[[Incident], MessageRef | None]
"""Finds the message an incident was first posted in, from the notification store."""


class Channel(abc.ABC):
    """A place notifications go. ``send`` never raises for delivery problems: it reports them.

    Beyond ``send``, a channel says how it is driven (:meth:`policy`, :meth:`request_cost`),
    which templates it checks itself (:meth:`own_templates`, :meth:`check`), what it keeps
    of a delivery to follow up on later (:meth:`refs_to_keep`, :meth:`use_message_store`),
    and how ``notifier notify test`` reports it (:meth:`accepted_detail`,
    :attr:`resolve_after_test`); the defaults suit a channel that needs none of these.
    """

    name: str

    resolve_after_test: bool = False
    """Whether ``notifier notify test`` sends the resolve right after the test alert (for a
    receiver that would otherwise keep an incident open, as PagerDuty does)."""

    @abc.abstractmethod
    async def send(self, notification: Notification) -> Delivery:
        """Deliver ``notification`` once and classify the outcome."""

    async def aclose(self) -> None:  # noqa: B027 - channels without connections need nothing
        """Release connections."""

    def policy(self) -> ChannelPolicy:
        """The receiver's documented limits, unless the config sets ``rate``/``concurrency``:
        here unlimited, four lanes, a bucket of its own."""
        return ChannelPolicy(None, 4, "channel:" + self.name)

    def request_cost(self, notification: Notification) -> float:
        """Requests ``notification`` costs against the rate limit."""
        return 1.0

    def own_templates(self) -> Collection[str]:
        """Templates this channel renders with a context of its own: left out of the shared
        sample rendering, checked by :meth:`check` instead."""
        return ()

    def check(self) -> list[TemplateProblem]:
        """Render the channel's own templates with sample data, as at send time."""
        return []

    def refs_to_keep(self, delivery: Delivery) -> dict[str, MessageRef]:
        """Incident id → the message a delivery posted, for later follow-ups to find."""
        return {}

    def use_message_store(self, lookup: MessageLookup) -> None:  # noqa: B027 - most keep none
        """Find earlier messages with ``lookup`` (what :meth:`refs_to_keep` stored)."""

    def accepted_detail(self, delivery: Delivery) -> str:
        """How ``notifier notify test`` reports a delivery that worked."""
        return f"HTTP {delivery.status_code}"

    async def __aenter__(self) -> Channel:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    def __repr__(self) -> str:
        # Deliberately no fields: constructors hold secrets.
        return f"{type(self).__name__}(name={self.name!r})"


def no_alerts() -> Delivery:
    return Delivery.failure("notification has no alerts", retryable=False)


_DEFAULT_HEADERS = {
    "User-Agent": f"notifier/{__version__}",
    "Accept": "*/*",
    "Accept-Encoding": "gzip, deflate",
}


def basic_auth_header(username: str, password: str) -> str:
    """The ``Authorization`` value for HTTP basic auth (RFC 7617, UTF-8)."""
    token = base64.b64encode(f"{username}:{password}".encode()).decode("ascii")
    return f"Basic {token}"


def environment_proxy(scheme: str, host: str) -> str | None:
    """The proxy URL the environment sets for ``scheme://host`` (``HTTPS_PROXY``,
    ``HTTP_PROXY``, ``ALL_PROXY``, any case), or None when there is none or ``NO_PROXY``
    exempts the host: the rules curl and httpx follow."""
    proxies = urllib.request.getproxies_environment()
    proxy = proxies.get(scheme) or proxies.get("all")
    # typeshed leaves out proxy_bypass_environment (undocumented, but what urllib itself uses).
    bypass = urllib.request.proxy_bypass_environment  # type: ignore[attr-defined]
    if not proxy or bypass(host, proxies):
        return None
    return proxy if "://" in proxy else f"http://{proxy}"


class HttpChannel(Channel):
    """Shared HTTP plumbing: scrubbed and classified errors, straight on an httpx transport.

    Requests go to a :class:`~notifier.notify.channels.transport.AsyncioTransport` (HTTP/1.1
    keep-alive connections on asyncio streams) rather than through ``httpx.AsyncClient``: the
    client's per-request work (auth and redirect flows, cookies, URL merging, event hooks) is
    none of what a notifier needs, and at a thousand deliveries a second it cost as much as the
    request itself. What the client gave that we do need is kept: the proxy from
    ``HTTPS_PROXY``/``HTTP_PROXY``/``ALL_PROXY`` unless ``NO_PROXY`` exempts the host,
    ``SSL_CERT_FILE``/``SSL_CERT_DIR``, timeouts, and failures as ``httpx`` exceptions.
    Redirects are not followed (a webhook that redirects is misconfigured, and following one
    would resend the body elsewhere).
    """

    def __init__(
        self,
        *,
        name: str,
        timeout: float,
        secrets: Iterable[Secret | None],
        transport: httpx.AsyncBaseTransport | None,
    ) -> None:
        self.name = name
        self.timeout = timeout
        self._scrub = Scrubber(secrets)
        self._timeouts = httpx.Timeout(timeout).as_dict()
        self._fixed_transport = transport
        self._transports: dict[str | None, httpx.AsyncBaseTransport] = {}
        self._proxy_for_origin: dict[tuple[str, str], str | None] = {}
        self._urls: dict[str, httpx.URL] = {}  # parsing a URL costs more than sending on loopback

    def _transport(self, url: httpx.URL) -> httpx.AsyncBaseTransport:
        if self._fixed_transport is not None:
            return self._fixed_transport
        origin = (url.scheme, url.host)
        try:
            proxy = self._proxy_for_origin[origin]
        except KeyError:
            proxy = self._proxy_for_origin[origin] = environment_proxy(url.scheme, url.host)
        transport = self._transports.get(proxy)
        if transport is None:
            transport = self._transports[proxy] = AsyncioTransport(proxy=proxy)
        return transport

    async def aclose(self) -> None:
        transports, self._transports = list(self._transports.values()), {}
        for transport in transports:
            await transport.aclose()

    async def _request(
        self,
        method: str,
        url: str,
        *,
        body: Any = None,
        content: bytes | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> httpx.Response | Delivery:
        """Send one request and read its answer; a transport failure comes back as a retryable
        :class:`Delivery`, a URL that cannot work as a final one."""
        send_headers = {**_DEFAULT_HEADERS, **(headers or {})}
        if body is not None:
            content = jsonenc.dumps_bytes(body)
            send_headers.setdefault("Content-Type", "application/json; charset=utf-8")
        try:
            parsed = self._urls.get(url)
            if parsed is None:
                if len(self._urls) >= 1024:  # bounded: Slack API URLs are few, but be safe
                    self._urls.clear()
                parsed = self._urls[url] = httpx.URL(url)
            transport = self._transport(parsed)
            if isinstance(transport, AsyncioTransport):
                response = await transport.send(
                    method, parsed, send_headers, content or b"", self._timeouts
                )
            else:
                request = httpx.Request(
                    method,
                    parsed,
                    content=content,
                    headers=send_headers,
                    extensions={"timeout": self._timeouts},
                )
                response = await transport.handle_async_request(request)
            try:
                await response.aread()
            finally:
                await response.aclose()
            if _http_log.isEnabledFor(logging.DEBUG):
                _http_log.debug(
                    "HTTP %s %s: %d (%s)",
                    method,
                    redact_url(url),
                    response.status_code,
                    self.name,
                )
            return response
        except httpx.TimeoutException as exc:
            return Delivery.failure(
                f"timed out after {self.timeout:g} s ({type(exc).__name__})", retryable=True
            )
        except (httpx.UnsupportedProtocol, httpx.InvalidURL) as exc:
            return Delivery.failure(
                self._scrub(f"request failed ({type(exc).__name__}): {exc}"), retryable=False
            )
        except httpx.TransportError as exc:
            return Delivery.failure(
                self._scrub(f"connection failed ({type(exc).__name__}): {exc}"), retryable=True
            )
        except httpx.HTTPError as exc:
            return Delivery.failure(
                self._scrub(f"request failed ({type(exc).__name__}): {exc}"), retryable=False
            )

    def _template_failure(self, exc: TemplateError) -> Delivery:
        return Delivery.failure(self._scrub(str(exc)), retryable=False, template=exc.template)
