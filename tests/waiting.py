"""Waiting on the event itself: poll until a condition holds, and fail naming what was awaited
when it does not within the time given (never a sleep that guesses at progress)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import TypeVar

T = TypeVar("T")


async def until_true(
    condition: Callable[[], object],
    timeout: float,
    what: str = "the condition",
    every: float = 0.05,
) -> None:
    """Poll ``condition()`` until it is truthy; fail naming ``what`` after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"not within {timeout:g}s: {what}"
        await asyncio.sleep(every)


async def until_value(
    check: Callable[[], Awaitable[T | None]],
    timeout: float,
    what: str,
    every: float = 0.2,
) -> T:
    """Await ``check()`` until it returns something truthy, and return that; fail naming
    ``what`` after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        value = await check()
        if value:
            return value
        assert time.monotonic() < deadline, f"not within {timeout:g}s: {what}"
        await asyncio.sleep(every)
