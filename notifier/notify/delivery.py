"""Delivery: outbox rows out through their channels, every outcome recorded.

Workers keep one lane per (channel, receiver, group key): rows in a lane go out strictly in
order (a retry blocks the lane behind it, so a resolve never overtakes its open), while lanes
run concurrently up to the channel's ``concurrency`` and share the channel's token bucket
(Slack about 1/s per channel, PagerDuty 120/min per routing key). Retryable failures back off
as :mod:`~notifier.notify.policy` says; final failures are marked ``failed``, logged as one
JSON line and counted — never dropped silently.
"""

from __future__ import annotations

import asyncio
import logging
import math
import random
import time
from collections import Counter, OrderedDict, deque
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from notifier.notify.channels import Channel, Delivery
from notifier.notify.outbox import NotifyStore, OutboxRow
from notifier.notify.policy import (
    ChannelPolicy,
    RetryPolicy,
    TokenBucket,
    backoff_delay,
    default_policy,
    request_cost,
)

log = logging.getLogger("notifier.notify")


def wall_ms() -> int:
    """The default clock: epoch milliseconds."""
    return int(time.time() * 1000)


def log_event(level: int, event: str, **fields: Any) -> None:
    """One structured log line: ``event`` and ``fields`` as top-level fields of the service's
    JSON (or key=value) log line, so failures can be counted and searched; the message is the
    event in words."""
    if log.isEnabledFor(level):
        log.log(level, event.replace("_", " "), extra={"event": event, **fields})


@dataclass(slots=True)
class DeliveryMetrics:
    """Counters for the API to export (prometheus_client later): per channel ``sent``,
    ``failed`` (final failures, including gave-up), ``retried`` (retryable failures)."""

    sent: Counter[str] = field(default_factory=Counter)
    failed: Counter[str] = field(default_factory=Counter)
    retried: Counter[str] = field(default_factory=Counter)
    pending: OrderedDict[int, tuple[str, int]] = field(default_factory=OrderedDict)
    """Pending row id → (channel, created_at ms), oldest first."""

    @property
    def outbox_depth(self) -> int:
        return len(self.pending)

    def depth_by_channel(self) -> dict[str, int]:
        return dict(Counter(channel for channel, _ in self.pending.values()))

    def oldest_pending_age(self, now_ms: int) -> float:
        """Seconds the oldest pending row has waited (0 when the outbox is empty)."""
        if not self.pending:
            return 0.0
        created = min(created for _, created in self.pending.values())
        return max(0.0, (now_ms - created) / 1000)

    def snapshot(self, now_ms: int) -> dict[str, Any]:
        return {
            "sent": dict(self.sent),
            "failed": dict(self.failed),
            "retried": dict(self.retried),
            "outbox_depth": self.outbox_depth,
            "outbox_depth_by_channel": self.depth_by_channel(),
            "oldest_pending_age_seconds": self.oldest_pending_age(now_ms),
        }


DeliveredHook = Callable[[Channel, OutboxRow, Delivery], None]


class _ChannelWorker:
    """One channel: its lanes (FIFO per lane key), a ready queue of lanes, N worker tasks."""

    def __init__(
        self,
        deliverer: Deliverer,
        channel: Channel,
        policy: ChannelPolicy,
        bucket: TokenBucket | None,
    ) -> None:
        self.deliverer = deliverer
        self.channel = channel
        self.policy = policy
        self.bucket = bucket
        self.lanes: dict[str, deque[OutboxRow]] = {}
        self.scheduled: set[str] = set()
        self.ready: asyncio.Queue[str] = asyncio.Queue()
        self.tasks: list[asyncio.Task[None]] = []
        self.sending: set[asyncio.Task[None]] = set()
        self.timers: set[asyncio.TimerHandle] = set()

    def start(self) -> None:
        if self.tasks:
            return
        for index in range(max(1, self.policy.concurrency)):
            self.tasks.append(
                asyncio.create_task(self._run(), name=f"deliver:{self.channel.name}:{index}")
            )

    def submit(self, row: OutboxRow) -> None:
        self.lanes.setdefault(row.lane, deque()).append(row)
        if row.lane not in self.scheduled:
            self.scheduled.add(row.lane)
            self.ready.put_nowait(row.lane)

    def _requeue_later(self, lane: str, delay: float) -> None:
        loop = asyncio.get_running_loop()

        def fire() -> None:
            self.timers.discard(handle)
            self.ready.put_nowait(lane)

        handle = loop.call_later(max(0.0, delay), fire)
        self.timers.add(handle)

    async def _run(self) -> None:
        deliverer = self.deliverer
        while not deliverer.closing:
            lane = await self.ready.get()
            if deliverer.closing:
                break
            queue = self.lanes.get(lane)
            if not queue:
                self.scheduled.discard(lane)
                self.lanes.pop(lane, None)
                continue
            row = queue[0]
            wait = (row.next_attempt_at - deliverer.clock()) / 1000
            if wait > 0:
                self._requeue_later(lane, wait)
                continue
            notification = row.notification
            if self.bucket is not None:
                await self.bucket.acquire(request_cost(self.channel, notification))
            if deliverer.closing:
                break
            task = asyncio.current_task()
            assert task is not None
            self.sending.add(task)
            try:
                try:
                    delivery = await self.channel.send(notification)
                except Exception as exc:  # a channel bug must not lose the row: retry it
                    delivery = Delivery.failure(
                        f"channel raised {type(exc).__name__}: {exc}", retryable=True
                    )
                done = deliverer.outcome(self, row, delivery)
            finally:
                self.sending.discard(task)
            if done:
                queue.popleft()
                if queue:
                    self.ready.put_nowait(lane)
                else:
                    del self.lanes[lane]
                    self.scheduled.discard(lane)


class Deliverer:
    """Sends outbox rows through their channels: ordered per lane, concurrent across lanes,
    rate-limited per receiver limit, retried with backoff, every outcome persisted.

    ``channels`` maps channel name → channel (the outbox row names its channel). ``on_result``
    is called after every attempt (e.g. to keep Slack message refs).
    """

    def __init__(
        self,
        store: NotifyStore,
        channels: Mapping[str, Channel],
        *,
        policies: Mapping[str, ChannelPolicy] | None = None,
        retry: RetryPolicy | None = None,
        clock: Callable[[], int] = wall_ms,
        rng: random.Random | None = None,
        on_result: DeliveredHook | None = None,
        flush_interval: float = 0.02,
    ) -> None:
        self.store = store
        self.channels = dict(channels)
        self.policies = {
            name: (policies or {}).get(name) or default_policy(channel)
            for name, channel in self.channels.items()
        }
        self.retry = retry or RetryPolicy()
        self.clock = clock
        self.rng = rng or random.Random()
        self.on_result = on_result
        self.flush_interval = flush_interval
        self.metrics = DeliveryMetrics()
        self.closing = False
        self._buckets: dict[str, TokenBucket] = {}
        self._workers: dict[str, _ChannelWorker] = {}
        self._flush_handle: asyncio.TimerHandle | None = None
        self._idle = asyncio.Event()
        self._idle.set()
        self._started = False

    def _worker(self, name: str) -> _ChannelWorker | None:
        worker = self._workers.get(name)
        if worker is None and name in self.channels:
            channel = self.channels[name]
            policy = self.policies[name]
            bucket = None
            if policy.rate is not None:
                bucket = self._buckets.get(policy.bucket)
                if bucket is None:
                    bucket = self._buckets[policy.bucket] = TokenBucket(policy.rate)
            worker = self._workers[name] = _ChannelWorker(self, channel, policy, bucket)
            if self._started:
                worker.start()
        return worker

    async def start(self, pending: Iterable[OutboxRow] = ()) -> None:
        """Start the workers and resume ``pending`` rows (e.g. from before a restart)."""
        self._started = True
        self.closing = False
        for name in self.channels:
            worker = self._worker(name)
            assert worker is not None
            worker.start()
        self.submit(pending)

    def submit(self, rows: Iterable[OutboxRow]) -> None:
        for row in rows:
            worker = self._worker(row.channel)
            if worker is None:
                # Its channel is no longer configured: final, reported, never silent.
                self._failed(
                    row, row.channel, self.clock(), row.attempts, "channel no longer configured"
                )
                self._schedule_flush()
                continue
            self.metrics.pending[row.id] = (row.channel, row.created_at)
            self._idle.clear()
            worker.submit(row)

    def outcome(self, worker: _ChannelWorker, row: OutboxRow, delivery: Delivery) -> bool:
        """Record one attempt; True when the row is finished (sent or failed for good)."""
        name = worker.channel.name
        now = self.clock()
        attempts = row.attempts + 1
        finished = True
        if delivery.ok:
            self.metrics.sent[name] += 1
            self.store.mark_sent(row.id, now, attempts)
        else:
            error = delivery.error or "failed"
            age = (now - row.created_at) / 1000
            if delivery.retryable and age < self.retry.give_up_after:
                finished = False
                delay = backoff_delay(attempts, self.retry, self.rng, delivery.retry_after)
                row.attempts = attempts
                row.next_attempt_at = now + math.ceil(delay * 1000)
                if delivery.retry_after and worker.bucket is not None:
                    worker.bucket.pause(min(delivery.retry_after, self.retry.max_retry_after))
                self.metrics.retried[name] += 1
                self.store.mark_retry(row.id, attempts, row.next_attempt_at, error)
                log_event(
                    logging.INFO,
                    "notification_retry",
                    channel=name,
                    notification=row.notification_id,
                    outbox_id=row.id,
                    attempts=attempts,
                    retry_in_seconds=round(delay, 3),
                    status_code=delivery.status_code,
                    error=error,
                )
                worker._requeue_later(row.lane, delay)
            else:
                if delivery.retryable:
                    error = f"gave up after {attempts} attempts over {age:.0f} s: {error}"
                self._failed(row, name, now, attempts, error, status_code=delivery.status_code)
        if self.on_result is not None:
            self.on_result(worker.channel, row, delivery)
        if finished:
            self.metrics.pending.pop(row.id, None)
            if not self.metrics.pending:
                self._idle.set()
        self._schedule_flush()
        return finished

    def _failed(
        self, row: OutboxRow, channel: str, now: int, attempts: int, error: str, **log_fields: Any
    ) -> None:
        """``row`` is finished undelivered: counted, persisted as failed, logged at ERROR."""
        self.metrics.failed[channel] += 1
        self.store.mark_failed(row.id, now, attempts, error)
        log_event(
            logging.ERROR,
            "notification_failed",
            channel=channel,
            notification=row.notification_id,
            outbox_id=row.id,
            attempts=attempts,
            **log_fields,
            error=error,
        )

    def _schedule_flush(self) -> None:
        if self.store.unflushed >= 512:
            self.store.flush()
            return
        if self._flush_handle is None:
            try:
                loop = asyncio.get_running_loop()
            except RuntimeError:
                self.store.flush()
                return
            self._flush_handle = loop.call_later(self.flush_interval, self._flush)

    def _flush(self) -> None:
        self._flush_handle = None
        self.store.flush()

    @property
    def idle(self) -> bool:
        """No row pending right now (the event below may have been set and cleared again
        between its ``set`` and a waiter resuming)."""
        return not self.metrics.pending

    async def wait_idle(self, timeout: float | None = None) -> bool:
        """Wait until no row is pending; False on timeout."""
        try:
            await asyncio.wait_for(self._idle.wait(), timeout)
        except TimeoutError:
            return False
        return True

    async def stop(self, timeout: float = 5.0) -> None:
        """Stop taking rows; let sends in flight finish (up to ``timeout``) so they are
        recorded; everything else stays pending in the outbox for the next start."""
        self.closing = True
        workers = list(self._workers.values())
        for worker in workers:
            for handle in worker.timers:
                handle.cancel()
            worker.timers.clear()
            for task in worker.tasks:
                if task not in worker.sending:
                    task.cancel()
        tasks = [task for worker in workers for task in worker.tasks]
        if tasks:
            _done, still = await asyncio.wait(tasks, timeout=timeout)
            for task in still:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
        for worker in workers:
            worker.tasks.clear()
        if self._flush_handle is not None:
            self._flush_handle.cancel()
            self._flush_handle = None
        self.store.flush()
        self._started = False
