"""The sample table a scan builds, column at a time, agrees with building it row by row."""

from __future__ import annotations

from typing import Any

import pyarrow as pa
from hypothesis import given, settings
from hypothesis import strategies as st

from notifier.collect.protocol import Group
from notifier.collect.samples import build_samples, member_hash, normalize_group_state
from notifier.types import SAMPLE_SCHEMA

TOPICS = ["a", "b", "c"]
tp = st.tuples(st.sampled_from(TOPICS), st.integers(0, 5))
group = st.fixed_dictionaries(
    {
        "state": st.sampled_from(["Stable", "Empty", "PreparingRebalance", "Odd", None]),
        "group_type": st.sampled_from(["classic", "consumer"]),
        "members": st.lists(st.text(min_size=1, max_size=4), max_size=3),
        "epoch": st.one_of(st.none(), st.integers(0, 9)),
        "assigned": st.sets(tp, max_size=6),
        "commits": st.dictionaries(tp, st.integers(0, 10**12), max_size=8),
    }
)


def rows_one_by_one(ts, cluster, groups, commits, log_end, log_start) -> pa.Table:
    """The plain reference: a row at a time, as the collector first built its table."""
    columns: dict[str, list[Any]] = {name: [] for name in SAMPLE_SCHEMA.names}
    for name in sorted(groups):
        g = groups[name]
        group_commits = commits.get(name, {})
        for key in sorted(set(group_commits) | g.assigned):
            if key not in log_end:
                continue
            row = {
                "ts": ts,
                "cluster": cluster,
                "group": name,
                "topic": key[0],
                "partition": key[1],
                "committed_offset": group_commits.get(key),
                "log_end_offset": log_end[key],
                "log_start_offset": log_start.get(key),
                "group_state": normalize_group_state(g.state, g.group_type),
                "members": len(g.member_ids),
                "member_hash": member_hash(g.member_ids, epoch=g.group_epoch),
                "available": True,
            }
            for field, value in row.items():
                columns[field].append(value)
    return pa.Table.from_pydict(columns, schema=SAMPLE_SCHEMA)


@settings(max_examples=150, deadline=None)
@given(
    st.dictionaries(st.text(min_size=1, max_size=5), group, max_size=6),
    st.dictionaries(tp, st.integers(0, 10**12), max_size=12),
    st.dictionaries(tp, st.one_of(st.none(), st.integers(0, 10**6)), max_size=12),
)
def test_column_at_a_time_equals_row_by_row(specs, log_end, log_start):
    groups = {
        name: Group(name, spec["state"], "consumer", spec["members"], spec["assigned"], set(),
                    group_type=spec["group_type"], group_epoch=spec["epoch"])
        for name, spec in specs.items()
    }  # fmt: skip
    commits = {name: spec["commits"] for name, spec in specs.items()}
    args = (1_800_000_000_123, "prod", groups, commits, log_end, log_start)
    expected = rows_one_by_one(*args)
    table = build_samples(
        ts=args[0], cluster=args[1], groups=groups, commits=commits, log_end=log_end,
        log_start=log_start,
    )  # fmt: skip
    assert table.schema == SAMPLE_SCHEMA
    assert table.to_pylist() == expected.to_pylist()
