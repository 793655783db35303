"""Share groups (KIP-932) read as Kafka 4.4 answers: DescribeShareGroupOffsets v0 and v1 and
ShareGroupDescribe v1 decoded from their wire layout, and the offset the rules see for a share
partition. tests/test_apache_kafka.py reads a real share group on Apache Kafka 4.4."""

from __future__ import annotations

import uuid

from notifier.collect.sharegroups import (
    DescribeShareGroupOffsets,
    DescribeShareGroupOffsetsResponse_v0,
    DescribeShareGroupOffsetsResponse_v1,
    ShareGroupDescribe,
    ShareGroupDescribeResponse_v1,
    ShareOffsets,
    parse_share_group,
    parse_share_offsets,
)

TOPIC_ID = uuid.uuid4()


def _decode(response_class, value: tuple):
    return response_class.decode(response_class.SCHEMA.encode(value))


def test_the_requests_ask_for_every_partition_of_each_group():
    offsets = DescribeShareGroupOffsets(["g"]).prepare({90: (0, 1)})
    assert offsets.API_VERSION == 1
    # groups [ "g", topics null, tags ], tags: Kafka's compact encoding.
    assert offsets.encode() == bytes([2, 2, ord("g"), 0, 0, 0])
    assert DescribeShareGroupOffsets(["g"]).prepare({90: (0, 0)}).API_VERSION == 0
    describe = ShareGroupDescribe(["g"]).prepare({77: (1, 1)})
    assert describe.encode() == bytes([2, 2, ord("g"), 0, 0])


def test_v1_offsets_carry_the_lag_and_errors_leave_partitions_and_groups_out():
    answer = _decode(DescribeShareGroupOffsetsResponse_v1, (0, [
        ("work", [("t", TOPIC_ID, [(0, 0, 3, 5, 0, None, {}), (1, -1, 3, -1, 0, None, {}),
                                   (2, 7, 3, 1, 6, "not leader", {})], {})], 0, None, {}),
        ("gone", [], 69, "no such group", {}),
    ], {}))  # fmt: skip
    found, errors = parse_share_offsets(answer)
    assert found["work"] == ShareOffsets(starts={("t", 0): 0}, lags={("t", 0): 5})
    assert errors == {"gone": (69, "no such group")}


def test_v0_offsets_are_the_start_offsets_alone():
    answer = _decode(DescribeShareGroupOffsetsResponse_v0, (0, [
        ("work", [("t", TOPIC_ID, [(0, 4, 3, 0, None, {})], {})], 0, None, {}),
    ], {}))  # fmt: skip
    found, _ = parse_share_offsets(answer)
    assert found["work"] == ShareOffsets(starts={("t", 0): 4}, lags={})
    assert found["work"].offsets({("t", 0): 9}) == {("t", 0): 4}


def test_the_offset_is_the_end_minus_the_lag_never_below_the_start_nor_past_the_end():
    # 10 of 15 records acknowledged while the broker's start offset still says 0.
    offsets = ShareOffsets(starts={("t", 0): 0, ("t", 1): 8, ("t", 2): 3},
                           lags={("t", 0): 5, ("t", 1): 5, ("t", 2): -1})  # fmt: skip
    assert offsets.offsets({("t", 0): 15, ("t", 1): 10, ("t", 2): 9}) == {
        ("t", 0): 10,  # the records the group finished
        ("t", 1): 8,  # a lag that reaches below the start offset: the start offset stands
        ("t", 2): 3,  # lag unknown: the start offset
    }
    assert ShareOffsets(starts={("t", 0): 0}, lags={("t", 0): 0}).offsets({}) == {("t", 0): 0}


def test_a_described_share_group_has_its_members_and_their_partitions():
    assignment = ([(TOPIC_ID, "t", [0, 1], {})], {})
    answer = _decode(ShareGroupDescribeResponse_v1, (0, [
        (0, None, "work", "Stable", 4, 4, "simple", [
            ("m-1", None, 4, "app", "/10.0.0.7", ["t"], assignment, {}),
            ("m-2", None, 4, "app", "/10.0.0.8", ["t"], ([(TOPIC_ID, "t", [1], {})], {}), {}),
        ], -2147483648, {}),
    ], {}))  # fmt: skip
    (entry,) = answer.groups
    group = parse_share_group(entry)
    assert (group.name, group.state, group.group_type) == ("work", "Stable", "share")
    assert group.member_ids == ["m-1", "m-2"]
    assert group.assigned == {("t", 0), ("t", 1)}
    assert group.owners[("t", 0)].client_host == "10.0.0.7"
    assert group.owners[("t", 1)].member_id == "m-1"  # shared: the first member named
