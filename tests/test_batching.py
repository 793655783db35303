"""LearnedBatch, the one batching of DescribeGroups, ConsumerGroupDescribe and OffsetFetch v8:
what a broker that drops large batches sees, without a broker (tests/test_collect.py drives the
same through a proxy in front of a real one)."""

from __future__ import annotations

import logging

import pytest

from notifier.collect.batching import LearnedBatch, chunks, spread
from notifier.collect.results import ScanError
from notifier.collect.session import TransportError


class Broker:
    """Answers batches of at most ``largest`` groups; drops larger ones (and any with a group
    in ``broken``)."""

    def __init__(self, largest: int, broken: frozenset[str] = frozenset()) -> None:
        self.largest = largest
        self.broken = broken
        self.sent: list[list[str]] = []
        self.answered: list[str] = []

    async def send_once(self, batch: list[str]) -> None:
        self.sent.append(list(batch))
        if len(batch) > self.largest or self.broken & set(batch):
            raise TransportError(f"dropped a batch of {len(batch)}")
        self.answered.extend(batch)


def _groups(count: int) -> list[str]:
    return [f"g{i:03d}" for i in range(count)]


async def test_a_dropped_batch_is_split_in_halves_and_the_size_is_learned(caplog):
    broker = Broker(largest=20)
    batch = LearnedBatch(100, cluster="c", concurrency=4)
    with caplog.at_level(logging.INFO, logger="notifier.collect"):
        await batch.send(_groups(100), broker.send_once, "DescribeGroups")
    assert sorted(broker.answered) == _groups(100)
    # The first batch goes alone (64: enough for 4 in flight, never fewer than 64 groups), and
    # its halves until they go through; the other 36 groups go in batches of the learned size.
    assert [len(b) for b in broker.sent] == [64, 32, 16, 16, 32, 16, 16, 16, 16, 4]
    assert batch.size == 16
    said = [r.getMessage() for r in caplog.records]
    assert (
        "cluster c: DescribeGroups of 64 groups failed (dropped a batch of 64); splitting" in said
    )
    assert "cluster c: DescribeGroups batch size lowered from 100 to 16" in said


async def test_later_scans_send_the_learned_size_and_keep_requests_in_flight():
    batch = LearnedBatch(25, cluster="c", concurrency=4)
    broker = Broker(largest=25)
    await batch.send(_groups(100), broker.send_once, "OffsetFetch", retry_alone=False)
    assert [len(b) for b in broker.sent] == [25, 25, 25, 25]
    assert batch.size == 25


async def test_a_group_that_fails_alone_fails_the_scan_naming_it():
    broker = Broker(largest=10, broken=frozenset({"g003"}))
    batch = LearnedBatch(4, cluster="c", concurrency=2)
    with pytest.raises(ScanError, match=r"DescribeGroups\('g003'\) failed: dropped a batch of 1"):
        await batch.split(_groups(4), broker.send_once, "DescribeGroups")


async def test_one_group_batches_fail_at_once_unless_retried_alone():
    broker = Broker(largest=10, broken=frozenset({"g001"}))
    batch = LearnedBatch(1, cluster="c", concurrency=2)
    singles = [[g] for g in _groups(3)]
    with pytest.raises(TransportError):
        await batch.send_concurrently(singles, broker.send_once, "OffsetFetch", retry_alone=False)
    broker.sent.clear()
    with pytest.raises(ScanError):
        await batch.send_concurrently(singles, broker.send_once, "DescribeGroups")
    assert broker.sent.count(["g001"]) == 2  # among the others, then alone


def test_spread_keeps_requests_in_flight_down_to_the_minimum_batch():
    assert spread(1000, 500, 16) == 64
    assert spread(10_000, 500, 16) == 500
    assert spread(3000, 500, 16) == 188
    assert spread(10, 4, 16) == 4
    assert chunks(_groups(5), 2) == [["g000", "g001"], ["g002", "g003"], ["g004"]]
