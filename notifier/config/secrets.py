"""Secrets in config values: never shown in logs, API answers, outbox rows or notifications."""

from __future__ import annotations

import hmac
import logging
import re
from collections.abc import Iterable

import httpx

_REDACTED = "***"
_KNOWN_SECRETS: set[str] = set()
"""Every secret value ever wrapped, so the log filter below can scrub httpx's request lines."""


class Secret:
    """A credential that never shows itself: ``repr``/``str`` are masked, ``reveal()`` is explicit.

    Webhook URLs count as secrets (a Slack webhook URL *is* its credential).
    """

    __slots__ = ("_value",)

    def __init__(self, value: str | Secret) -> None:
        raw = value.reveal() if isinstance(value, Secret) else str(value)
        self._value = raw
        _KNOWN_SECRETS.update(secret_fragments(raw))

    def reveal(self) -> str:
        return self._value

    def __repr__(self) -> str:
        return f"Secret('{_REDACTED}')"

    __str__ = __repr__

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Secret):
            return NotImplemented
        return hmac.compare_digest(self._value.encode(), other._value.encode())

    def __hash__(self) -> int:
        return hash(("Secret", self._value))

    def __bool__(self) -> bool:
        return bool(self._value)


_MIN_FRAGMENT = 6
"""Shorter pieces ("a", "/x") are no credential and would make scrubbing mangle plain text."""


def secret_fragments(value: str) -> set[str]:
    """The strings that must never be shown for a secret ``value``.

    For a URL that is the URL itself and its credential-bearing parts — the path (a Slack
    webhook's token is its path), the query and each query value, the userinfo — because
    receivers and proxies echo parts of a URL back in error bodies.
    """
    fragments = {value}
    if "://" in value:
        try:
            url = httpx.URL(value)
        except (httpx.InvalidURL, TypeError):
            url = None
        if url is not None:
            raw_path = url.raw_path.decode("ascii", "replace")
            path, _, query = raw_path.partition("?")
            fragments |= {raw_path, path, query, url.path, url.password or ""}
            fragments |= {v for _k, v in url.params.multi_items()}
            fragments |= set(query.split("&"))
    return {f for f in fragments if len(f) >= _MIN_FRAGMENT and f != "/"}


def optional_secret(value: str | Secret | None) -> Secret | None:
    return None if value is None else Secret(value)


class Scrubber:
    """Replaces the channel's secret values (and URL credentials) in text meant for humans."""

    def __init__(self, secrets: Iterable[Secret | None]) -> None:
        values: set[str] = set()
        for secret in secrets:
            if secret:
                values |= secret_fragments(secret.reveal())
        # Longest first, so a URL is replaced whole before a token inside it.
        self._values = sorted(values, key=len, reverse=True)
        self._urls = {v: redact_url(v) for v in self._values if "://" in v}

    def __call__(self, text: str) -> str:
        for value in self._values:
            if value in text:
                text = text.replace(value, self._urls.get(value, _REDACTED))
        return _URL_USERINFO.sub(r"\1***@", text)


_URL_USERINFO = re.compile(r"(\b[a-zA-Z][a-zA-Z0-9+.-]*://)[^/\s@]+@")


def redact_url(url: str) -> str:
    """``https://hooks.slack.com/services/T/B/X`` → ``https://hooks.slack.com/***``."""
    try:
        parsed = httpx.URL(url)
    except (httpx.InvalidURL, TypeError):
        return _REDACTED
    host = parsed.host or "?"
    port = f":{parsed.port}" if parsed.port else ""
    return f"{parsed.scheme}://{host}{port}/{_REDACTED}"


class _SecretLogFilter(logging.Filter):
    """httpx logs every request URL at INFO; a Slack webhook URL there is a leaked credential."""

    def filter(self, record: logging.LogRecord) -> bool:
        if not _KNOWN_SECRETS:
            return True
        message = record.getMessage()
        scrubbed = message
        for value in sorted(_KNOWN_SECRETS, key=len, reverse=True):
            if value in scrubbed:
                scrubbed = scrubbed.replace(
                    value, redact_url(value) if "://" in value else _REDACTED
                )
        if scrubbed != message:
            record.msg, record.args = scrubbed, ()
        return True


_LOG_FILTER = _SecretLogFilter()
for _logger_name in ("httpx", "httpcore"):
    _logger = logging.getLogger(_logger_name)
    if _LOG_FILTER not in _logger.filters:
        _logger.addFilter(_LOG_FILTER)
