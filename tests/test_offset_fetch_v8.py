"""OffsetFetch v8 (KIP-709): the collector's own decoder of its answers agrees with the
message's schema walked by aiokafka's generic decoder, which is the plain reference."""

from __future__ import annotations

from io import BytesIO

import numpy as np
from aiokafka.protocol.types import UnsignedVarInt32
from hypothesis import given, settings
from hypothesis import strategies as st

from notifier.collect.protocol import (
    OffsetFetch,
    OffsetFetchRequest_v8,
    OffsetFetchResponse_v8,
    parse_offset_fetch_groups,
)

partition = st.tuples(
    st.integers(0, 2**31 - 1),  # partition
    st.one_of(st.just(-1), st.integers(0, 2**63 - 1)),  # committed offset
    st.integers(-1, 2**31 - 1),  # leader epoch
    st.one_of(st.none(), st.just(""), st.text(max_size=200)),  # metadata
    st.sampled_from([0, 0, 0, 3]),  # error code (UNKNOWN_TOPIC_OR_PARTITION is no error)
)
topic = st.tuples(st.text(min_size=1, max_size=20), st.lists(partition, max_size=40))
group = st.tuples(st.text(min_size=1, max_size=20), st.lists(topic, max_size=4))


def _encoded(groups: list) -> bytes:
    return OffsetFetchResponse_v8.SCHEMA.encode(
        [
            7,
            [
                (gid, [(name, [(*p, {}) for p in parts], {}) for name, parts in topics], 0, {})
                for gid, topics in groups
            ],
            {},
        ]
    )


@settings(max_examples=150, deadline=None)
@given(st.lists(group, max_size=6, unique_by=lambda g: g[0]))
def test_the_fast_decoder_reads_what_the_schema_reads(groups):
    data = _encoded(groups) + b"trailing"
    reference = OffsetFetchResponse_v8.SCHEMA.decode(BytesIO(data))
    stream = BytesIO(data)
    ours = OffsetFetchResponse_v8.decode(stream)

    assert stream.read() == b"trailing"  # it read exactly the answer
    assert ours.throttle_time_ms == reference[0] == 7
    assert [g[0] for g in ours.groups] == [g[0] for g in reference[1]]
    for (_gid, topics, error), (_, ref_topics, ref_error, _) in zip(ours.groups, reference[1]):
        assert error == ref_error
        assert [t.name for t in topics] == [t[0] for t in ref_topics]
        for got, (_, parts, _) in zip(topics, ref_topics):
            assert got.partition.tolist() == [p[0] for p in parts]
            assert got.offset.tolist() == [p[1] for p in parts]
            assert got.error.tolist() == [p[4] for p in parts]
    expected = {}
    for gid, topics in groups:
        expected[gid] = {}
        for name, parts in topics:
            expected[gid].update({(name, p): o for p, o, _, _, e in parts if e == 0 and o >= 0})
    assert parse_offset_fetch_groups(ours) == expected


def test_tagged_fields_the_decoder_does_not_know_are_skipped():
    # aiokafka's encoder cannot write tagged fields (it leaves out their sizes): built here.
    def uvarint(value: int) -> bytes:
        return UnsignedVarInt32.encode(value)

    def string(text: str) -> bytes:
        return uvarint(len(text) + 1) + text.encode()

    tag = uvarint(1) + uvarint(0) + uvarint(3) + b"abc"  # one field: tag 0, three bytes
    entry = (
        (5).to_bytes(4, "big") + (42).to_bytes(8, "big") + (3).to_bytes(4, "big")
        + uvarint(0) + (0).to_bytes(2, "big")
    )  # fmt: skip
    partitions = (
        uvarint(3)
        + entry
        + uvarint(0)
        + entry.replace(b"\x00\x00\x00\x05", b"\x00\x00\x00\x06", 1)
        + tag
    )
    body = (
        (0).to_bytes(4, "big") + uvarint(2) + string("g") + uvarint(2) + string("t") + partitions
        + tag + (0).to_bytes(2, "big") + tag + tag
    )  # fmt: skip
    answer = OffsetFetchResponse_v8.decode(BytesIO(body))
    (gid, (only,), error) = answer.groups[0]
    assert (gid, only.name, error) == ("g", "t", 0)
    assert only.partition.tolist() == [5, 6] and only.offset.tolist() == [42, 42]
    assert parse_offset_fetch_groups(answer) == {"g": {("t", 5): 42, ("t", 6): 42}}


def test_a_request_for_many_groups_needs_v8():
    request = OffsetFetch([("a", None), ("b", [("t", [0, 1])])])
    built = request.prepare({9: (1, 9)})
    assert isinstance(built, OffsetFetchRequest_v8)
    assert built.groups == [("a", None, {}), ("b", [("t", [0, 1], {})], {})]
    try:
        request.prepare({9: (1, 7)})
    except Exception as exc:
        assert "need v8" in str(exc)
    else:
        raise AssertionError("a broker without v8 must not be sent many groups")
    assert np.asarray(OffsetFetch([("a", None)]).prepare({9: (2, 3)}).topics is None)
