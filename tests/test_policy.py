"""Rates, exponential back-off with full jitter, and the token bucket."""

from __future__ import annotations

import random
import time

import pytest

from notifier.config import Rate, parse_rate
from notifier.notify import RetryPolicy, TokenBucket, backoff_delay


def test_parse_rate():
    assert parse_rate("1/s") == Rate(1, 1)
    assert parse_rate("120/m") == Rate(120, 60)
    assert parse_rate("10/5s") == Rate(10, 5)
    assert parse_rate("off") is None and parse_rate(None) is None
    with pytest.raises(ValueError, match="expected a rate"):
        parse_rate("quick")


def test_backoff_is_exponential_with_full_jitter_capped_and_honours_retry_after():
    policy = RetryPolicy(initial=1.0, cap=300.0)
    rng = random.Random(1)
    for attempt in range(1, 20):
        ceiling = min(300.0, 2.0 ** (attempt - 1))
        delays = [backoff_delay(attempt, policy, rng) for _ in range(200)]
        assert all(0 <= d <= ceiling for d in delays)
        assert max(delays) > ceiling * 0.8  # full jitter spans the range
    assert backoff_delay(1, policy, rng, retry_after=42.0) >= 42.0


async def test_the_token_bucket_spaces_requests_and_pauses_for_retry_after():
    bucket = TokenBucket(Rate(2, 0.1))  # 2 per 100 ms, burst 2
    start = time.monotonic()
    for _ in range(6):
        await bucket.acquire()
    assert time.monotonic() - start >= 0.19  # 2 free, then 4 at 20/s
    bucket.pause(0.1)
    start = time.monotonic()
    await bucket.acquire()
    assert time.monotonic() - start >= 0.09
