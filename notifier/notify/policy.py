"""How a channel is driven: its rate limit, the lanes it sends at once, and retry back-off.

The defaults follow the receivers' documented limits (:func:`default_policy`); channels that
hit one limit share one :class:`TokenBucket`. Failed sends back off exponentially with full
jitter, never sooner than the receiver's ``Retry-After`` (:func:`backoff_delay`).
"""

from __future__ import annotations

import asyncio
import hashlib
import random
import time
from collections.abc import Callable
from dataclasses import dataclass

from notifier.config import Rate
from notifier.notify.channels import Channel, Email, PagerDuty, SlackBot, SlackWebhook, Webhook
from notifier.types import Notification


class TokenBucket:
    """An async token bucket: ``rate.count`` tokens, refilled at ``rate.per_second``.

    Waiters are served in arrival order. :meth:`pause` holds everyone back — what a 429 with
    ``Retry-After`` asks for, since the limit is the receiver's, not one lane's.
    """

    def __init__(self, rate: Rate, clock: Callable[[], float] = time.monotonic) -> None:
        self.rate = rate
        self.capacity = max(1.0, rate.count)
        self.tokens = self.capacity
        self.clock = clock
        self.updated = clock()
        self.paused_until = 0.0
        self._lock = asyncio.Lock()

    def _refill(self, now: float) -> None:
        self.tokens = min(self.capacity, self.tokens + (now - self.updated) * self.rate.per_second)
        self.updated = now

    async def acquire(self, cost: float = 1.0) -> None:
        cost = min(max(cost, 0.0), self.capacity)
        async with self._lock:
            while True:
                now = self.clock()
                if now < self.paused_until:
                    await asyncio.sleep(self.paused_until - now)
                    continue
                self._refill(now)
                if self.tokens >= cost:
                    self.tokens -= cost
                    return
                await asyncio.sleep((cost - self.tokens) / self.rate.per_second)

    def pause(self, seconds: float) -> None:
        self.paused_until = max(self.paused_until, self.clock() + seconds)


@dataclass(slots=True, frozen=True)
class RetryPolicy:
    """Exponential backoff with full jitter: attempt *n* waits uniform(0, min(cap, initial·2ⁿ⁻¹)),
    but never less than the receiver's ``Retry-After``; after ``give_up_after`` seconds
    of trying, a row is marked failed (and reported)."""

    initial: float = 1.0
    cap: float = 300.0
    give_up_after: float = 86400.0
    max_retry_after: float = 3600.0


def backoff_delay(
    attempt: int, policy: RetryPolicy, rng: random.Random, retry_after: float | None = None
) -> float:
    """Seconds to wait before attempt ``attempt + 1`` (``attempt`` ≥ 1 failures so far)."""
    ceiling = min(policy.cap, policy.initial * 2 ** min(attempt - 1, 62))
    delay = rng.uniform(0.0, ceiling)
    if retry_after is not None:
        delay = max(delay, min(retry_after, policy.max_retry_after))
    return delay


@dataclass(slots=True, frozen=True)
class ChannelPolicy:
    """How one channel is driven: its rate (``None``: unlimited), lanes in flight at once, and
    the bucket it shares (channels that hit the same receiver limit share one bucket)."""

    rate: Rate | None
    concurrency: int
    bucket: str


def _digest(*parts: str) -> str:
    return hashlib.sha256("\x00".join(parts).encode()).hexdigest()[:16]


def default_policy(channel: Channel) -> ChannelPolicy:
    """The receivers' documented limits: Slack about 1 message/s per channel (one bucket per
    webhook URL or bot channel), PagerDuty 120 events/min per routing key; e-mail and
    generic webhooks unlimited."""
    if isinstance(channel, SlackWebhook):
        return ChannelPolicy(Rate(1, 1), 1, "slack-webhook:" + _digest(channel.url.reveal()))
    if isinstance(channel, SlackBot):
        key = _digest(channel.api_url, channel.token.reveal(), channel.channel)
        return ChannelPolicy(Rate(1, 1), 1, "slack-bot:" + key)
    if isinstance(channel, PagerDuty):
        key = _digest(channel.url, channel.routing_key.reveal())
        return ChannelPolicy(Rate(120, 60), 4, "pagerduty:" + key)
    if isinstance(channel, Email):
        return ChannelPolicy(None, 4, "email:" + channel.name)
    if isinstance(channel, Webhook):
        # More lanes in flight do not raise throughput (benchmarks/notify.py), only the burst
        # a receiver gets at once.
        return ChannelPolicy(None, 4, "webhook:" + channel.name)
    return ChannelPolicy(None, 4, "channel:" + channel.name)


def request_cost(channel: Channel, notification: Notification) -> float:
    """Requests a notification costs: PagerDuty sends one event per alert."""
    return float(len(notification.alerts)) if isinstance(channel, PagerDuty) else 1.0
