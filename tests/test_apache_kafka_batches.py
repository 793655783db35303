"""A scan's requests on Apache Kafka: many groups per OffsetFetch (v8, KIP-709) and per
DescribeGroups, whatever the number of groups (docs/architecture.md, "What a scan reads")."""

from __future__ import annotations

import uuid

import pytest

from notifier.collect import ClusterCollector
from notifier.embedded.apache_kafka import ApacheKafkaBroker
from notifier.types import table_to_samples
from tests.test_apache_kafka import _commit, _topic_with_records

pytestmark = pytest.mark.kafka


async def test_many_groups_are_read_in_a_few_requests(any_apache_kafka: ApacheKafkaBroker) -> None:
    bootstrap = any_apache_kafka.bootstrap_servers
    prefix = f"batch-{uuid.uuid4().hex[:8]}"
    topic = f"{prefix}-t"
    await _topic_with_records(bootstrap, topic, [9, 4, 6])
    groups = [f"{prefix}-g{i:02d}" for i in range(12)]
    committed = {g: {(topic, i % 3): i % 4, (topic, (i + 1) % 3): 1} for i, g in enumerate(groups)}
    for group in groups:
        await _commit(bootstrap, group, committed[group])

    async with ClusterCollector(
        bootstrap,
        cluster="apache",
        group_allow=[f"^{prefix}-"],
        describe_batch_size=5,
        offset_fetch_batch_size=5,
    ) as collector:
        await collector.scan()
        result = await collector.scan()
        # Apache Kafka answers "every partition of the group" (no topic list): nothing named.
        assert collector.offset_fetch_all_partitions is True
        assert collector.offset_fetch_batch_size == 5

    assert result.requests["OffsetFetch"] == 3  # 12 groups, 5 per request
    assert result.requests["DescribeGroups"] == 3
    seen: dict[str, dict[tuple[str, int], int | None]] = {g: {} for g in groups}
    for sample in table_to_samples(result.samples):
        seen[sample.group][(sample.topic, sample.partition)] = sample.committed_offset
    assert seen == committed
    assert set(result.group_states.values()) == {"Empty"}
