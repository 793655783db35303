"""The shared data types' hand-written serialisers agree with the dataclass they serialise."""

from __future__ import annotations

import dataclasses

from hypothesis import given
from hypothesis import strategies as st

from notifier.types import CommitPoint, PartitionResult, PartitionStatus

offsets = st.integers(min_value=0, max_value=2**62)
points = st.builds(CommitPoint, offsets, offsets, st.none() | offsets)
results = st.builds(
    PartitionResult,
    topic=st.text(max_size=20),
    partition=st.integers(min_value=0, max_value=10_000),
    status=st.sampled_from(PartitionStatus),
    complete=st.floats(0, 1),
    burrow_complete=st.floats(0, 1),
    committed_offset=st.none() | offsets,
    log_end_offset=offsets,
    log_start_offset=st.none() | offsets,
    current_lag=st.none() | offsets,
    lag_seconds=st.none() | st.floats(allow_nan=False),
    start=st.none() | points,
    end=st.none() | points,
    owner=st.text(max_size=20),
    client_id=st.text(max_size=20),
)


@given(results)
def test_a_partition_result_serialises_as_its_fields_say(result: PartitionResult) -> None:
    written = result.to_dict()
    assert written == dataclasses.asdict(result)
    assert list(written) == [f.name for f in dataclasses.fields(PartitionResult)]
