"""What one delivery attempt came to, and how an HTTP answer is classified for the retry loop.

:class:`Delivery` is what every :meth:`Channel.send <notifier.notify.channels.base.Channel.send>`
returns: ok, or a failure that is ``retryable`` or final, with the wait the receiver asked for
(``Retry-After``, see :func:`parse_retry_after`). :func:`classify_http` maps a status code to
one; :func:`combine` folds the several requests of one notification into one.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime
from typing import Any

import httpx


@dataclass(slots=True)
class Delivery:
    """The outcome of one :meth:`Channel.send`.

    ``retry_after`` is the wait (seconds) the receiver asked for (HTTP 429/503 ``Retry-After``);
    ``meta`` carries what the caller must keep for later sends, e.g. Slack's ``channel``/``ts``
    so a resolve can update the original message. ``error`` never contains a secret.
    """

    ok: bool
    retryable: bool = False
    retry_after: float | None = None
    status_code: int | None = None
    error: str | None = None
    meta: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def success(cls, status_code: int | None = None, **meta: Any) -> Delivery:
        return cls(ok=True, status_code=status_code, meta=dict(meta))

    @classmethod
    def failure(
        cls,
        error: str,
        *,
        retryable: bool,
        status_code: int | None = None,
        retry_after: float | None = None,
        **meta: Any,
    ) -> Delivery:
        return cls(
            ok=False,
            retryable=retryable,
            retry_after=retry_after,
            status_code=status_code,
            error=error,
            meta=dict(meta),
        )


def parse_retry_after(value: str | None, *, now: datetime | None = None) -> float | None:
    """``Retry-After`` as seconds: either delta-seconds (``"30"``) or an HTTP date."""
    if value is None:
        return None
    value = value.strip()
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return max(0.0, (when - (now or datetime.now(UTC))).total_seconds())


def excerpt(text: str, limit: int = 300) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def classify_http(response: httpx.Response, scrub: Callable[[str], str]) -> Delivery:
    """2xx ok; 429 and 5xx (and 408) retryable, honouring ``Retry-After``; other codes final."""
    code = response.status_code
    if 200 <= code < 300:
        return Delivery.success(code)
    detail = scrub(excerpt(response.text))
    error = f"HTTP {code}" + (f": {detail}" if detail else "")
    retry_after = parse_retry_after(response.headers.get("retry-after"))
    if code == 429 or code == 408 or code >= 500:
        return Delivery.failure(error, retryable=True, status_code=code, retry_after=retry_after)
    return Delivery.failure(error, retryable=False, status_code=code)


def combine(deliveries: Sequence[Delivery], **meta: Any) -> Delivery:
    """Several requests for one notification (PagerDuty events, Slack thread + update)."""
    failures = [d for d in deliveries if not d.ok]
    if not failures:
        last = deliveries[-1] if deliveries else None
        return Delivery.success(last.status_code if last else None, **meta)
    retry_afters = [d.retry_after for d in failures if d.retry_after is not None]
    first = failures[0]
    meta = {**first.meta, **meta}
    return Delivery.failure(
        "; ".join(d.error or "failed" for d in failures),
        # A retry resends the whole notification, so one transient failure makes it worth it;
        # receivers dedupe (PagerDuty by dedup_key) or the duplicate beats a missed alert.
        retryable=any(d.retryable for d in failures),
        status_code=first.status_code,
        retry_after=max(retry_afters) if retry_afters else None,
        **meta,
    )
