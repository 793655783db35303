"""Many groups per request, in batches whose size is learned from the broker.

DescribeGroups, ConsumerGroupDescribe and OffsetFetch v8 (KIP-709) name many groups in one
request. Some brokers drop the connection on, or time out, a batch they find too large; a
:class:`LearnedBatch` finds that out and splits the batch in halves until the halves go
through, and the smaller size then stays for the collector's lifetime.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Sequence

from notifier.collect.results import ScanError
from notifier.collect.session import TransportError, run_all

log = logging.getLogger("notifier.collect")  # the name it logged under before the split

SPREAD_MIN_BATCH = 64
"""The smallest batch :func:`spread` cuts for the sake of concurrency."""

SendOnce = Callable[[list[str]], Awaitable[None]]
"""Sends one batch of group ids and stores its answers; raises TransportError when the
broker dropped or timed out the request."""


def spread(count: int, largest: int, ways: int) -> int:
    """A batch size for ``count`` groups: at most ``largest`` (what the broker takes), and small
    enough that the batches keep ``ways`` requests in flight, down to
    :data:`SPREAD_MIN_BATCH` groups (below that, fewer requests matter more): a broker that
    answers each request on one thread, as the embedded one does, answers sooner."""
    return max(1, min(largest, max(SPREAD_MIN_BATCH, -(-count // ways))))


def chunks(items: Sequence[str], size: int) -> list[list[str]]:
    return [list(items[i : i + size]) for i in range(0, len(items), size)]


class LearnedBatch:
    """The number of groups one request may name, lowered when a broker rejects a batch.

    ``size`` starts at the configured size; ``concurrency`` is how many requests may be in
    flight to one broker.
    """

    def __init__(self, size: int, *, cluster: str, concurrency: int) -> None:
        self.size = size
        self._cluster = cluster
        self._concurrency = concurrency

    async def send(
        self, names: Sequence[str], send_once: SendOnce, api: str, *, retry_alone: bool = True
    ) -> None:
        """Send ``names`` to one broker in batches of the learned size.

        The first batch goes alone, so a broker that drops oversized batches is found out (and
        the size learned) before anything else is in flight on that connection. The rest go
        concurrently (:meth:`send_concurrently`).
        """
        if not names:
            return
        size = spread(len(names), self.size, self._concurrency)
        first = list(names[:size])
        await self.split(first, send_once, api)
        rest = chunks(names[len(first) :], min(size, self.size))
        await self.send_concurrently(rest, send_once, api, retry_alone=retry_alone)

    async def send_concurrently(
        self,
        batches: Sequence[list[str]],
        send_once: SendOnce,
        api: str,
        *,
        retry_alone: bool = True,
    ) -> None:
        """Send ``batches`` with at most ``concurrency`` in flight. A batch that fails among
        them is retried alone, with splitting, so a failure caused by a sibling's dropped
        connection does not shrink the size; a batch of one group is retried alone only when
        ``retry_alone`` (otherwise its failure fails the call)."""
        failed: list[list[str]] = []
        gate = asyncio.Semaphore(self._concurrency)

        async def one(batch: list[str]) -> None:
            async with gate:
                try:
                    await send_once(batch)
                except TransportError:
                    if len(batch) == 1 and not retry_alone:
                        raise
                    failed.append(batch)

        await run_all(one(batch) for batch in batches)
        for batch in failed:
            await self.split(batch, send_once, api)

    async def split(self, batch: list[str], send_once: SendOnce, api: str) -> None:
        """Send ``batch``; when the broker drops or times it out, its halves, recursively; the
        learned size becomes the largest half that had to be tried. A single group that still
        fails fails the scan."""
        try:
            await send_once(batch)
            return
        except TransportError as exc:
            if len(batch) == 1:
                raise ScanError(f"{api}({batch[0]!r}) failed: {exc}") from exc
            log.info(
                "cluster %s: %s of %d groups failed (%s); splitting",
                self._cluster,
                api,
                len(batch),
                exc,
            )
        half = (len(batch) + 1) // 2
        await self.split(batch[:half], send_once, api)
        await self.split(batch[half:], send_once, api)
        if half < self.size:
            log.warning(
                "cluster %s: %s batch size lowered from %d to %d",
                self._cluster,
                api,
                self.size,
                half,
            )
            self.size = half
