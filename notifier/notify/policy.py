"""How a channel is driven: its rate limit, the lanes it sends at once, and retry back-off.

The defaults follow the receivers' documented limits, which each channel states itself
(:meth:`Channel.policy <notifier.notify.channels.base.Channel.policy>`); channels that hit one
limit share one :class:`TokenBucket`. Failed sends back off exponentially with full
jitter, never sooner than the receiver's ``Retry-After`` (:func:`backoff_delay`).
"""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Callable
from dataclasses import dataclass

from notifier.config import Rate
from notifier.notify.channels.base import Channel, ChannelPolicy
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


def default_policy(channel: Channel) -> ChannelPolicy:
    """The receiver's documented limits, as the channel states them (Slack about 1 message/s
    per channel, PagerDuty 120 events/min per routing key; e-mail and generic webhooks
    unlimited)."""
    return channel.policy()


def request_cost(channel: Channel, notification: Notification) -> float:
    """Requests a notification costs (PagerDuty sends one event per alert)."""
    return channel.request_cost(notification)


__all__ = [
    "ChannelPolicy",
    "RetryPolicy",
    "TokenBucket",
    "backoff_delay",
    "default_policy",
    "request_cost",
]
