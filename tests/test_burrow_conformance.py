"""Burrow's own test vectors (tests/conformance_vectors, a copy of ../shared/conformance),
reproduced by the built-in `burrow` set.

The partition vectors call the vectorized kernel exactly as Burrow's tests call
``calculatePartitionStatus``; the group vectors go through the store and the evaluator; the
storage vectors through the store's commit ring.
"""

from __future__ import annotations

import numpy as np
import pytest

from notifier.config import WindowSettings
from notifier.rules import (
    Evaluator,
    RulesConfig,
    ScanColumns,
    WindowStore,
    group_without_partitions,
    not_found,
)
from notifier.rules import kernels as kernels
from notifier.types import PARTITION_STATUS_CODES, GroupStatus, Sample

from .conformance import SHARED_DIR, VECTORS_DIR, load_vectors

EVALUATOR = load_vectors("burrow_evaluator_vectors.json")
STORAGE = load_vectors("burrow_storage_vectors.json")
PARTITION_CASES = [v for v in EVALUATOR if v["kind"] == "partition_rules"]
GROUP_CASES = [v for v in EVALUATOR if v["kind"] == "group_evaluation"]


def test_the_copy_still_equals_the_shared_vectors():
    """The vectors are maintained in ../shared/conformance; the copy here must not drift."""
    if not SHARED_DIR.is_dir():
        pytest.skip(f"{SHARED_DIR} does not exist here: nothing to compare the copy in "
                    f"{VECTORS_DIR} with (CI has it beside the checkout)")  # fmt: skip
    shared = sorted(p.name for p in SHARED_DIR.glob("*.json"))
    assert shared == sorted(p.name for p in VECTORS_DIR.glob("*.json"))
    for name in shared:
        assert (VECTORS_DIR / name).read_bytes() == (SHARED_DIR / name).read_bytes(), (
            f"{VECTORS_DIR / name} differs from {SHARED_DIR / name}: copy it again"
        )


def run_kernel(offsets, broker_offsets, current_lag, now_ms, allowed_lag):
    ring = np.array([[c["offset"] for c in offsets]], dtype=np.int64)
    ts = np.array([[c["timestamp_ms"] for c in offsets]], dtype=np.int64)
    lag = np.array([[-1 if c["lag"] is None else c["lag"] for c in offsets]], dtype=np.int64)
    brokers = np.array([broker_offsets], dtype=np.int64)
    return kernels.burrow_status(
        ring,
        ts,
        lag,
        np.array([len(offsets)], dtype=np.int16),
        brokers,
        np.ones_like(brokers, dtype=bool),
        np.array([current_lag]),
        now_ms,
        allowed_lag,
    )


@pytest.mark.parametrize("case", PARTITION_CASES, ids=[c["name"] for c in PARTITION_CASES])
def test_partition_status_and_every_intermediate_rule_match_burrow(case):
    out = run_kernel(
        case["offsets"],
        case["broker_offsets_history"],
        case["current_lag"],
        case["time_now_s"] * 1000,
        case["allowed_lag"],
    )
    assert PARTITION_STATUS_CODES[out.status[0]].value == case["expected_status"]
    assert {
        "isLagAlwaysNotZero": bool(out.lag_always_not_zero[0]),
        "checkIfOffsetsRewind": int(out.rewind_index[0]),
        "checkIfOffsetsStopped": bool(out.stopped[0]),
        "checkIfOffsetsStalled": bool(out.stalled[0]),
        "checkIfLagNotDecreasing": bool(out.lag_not_decreasing[0]),
        "checkIfRecentLagZero": bool(out.recent_lag_zero[0]),
    } == case["expected_rules"]


def _group_store(case) -> tuple[WindowStore, Evaluator]:
    """Commits fed as scans at the commit times; Burrow's minimum-complete is 0 here."""
    config = case["config"]
    rules = RulesConfig.model_validate(
        {
            "window": {"intervals": case["ring_size"], "min_distance": config["min-distance"]},
            "burrow": {
                "allowed_lag": config["allowed-lag"],
                "minimum_complete": config["minimum-complete"],
            },
        }
    )
    store = WindowStore(rules.window, scan_interval_s=10)
    for commit in case["offsets"]:
        sample = Sample(
            ts=commit["timestamp_ms"],
            cluster="local",
            group="testgroup",
            topic="testtopic",
            partition=0,
            committed_offset=commit["offset"],
            log_end_offset=case["broker_offset"],
            group_state="Empty",
            members=0,
        )
        store.ingest_scan(ScanColumns.from_samples([sample]))
    return store, Evaluator(rules, store)


@pytest.mark.parametrize("case", [c for c in GROUP_CASES if c["offsets"]], ids=lambda c: c["name"])
def test_group_status_complete_and_lag_match_burrow(case):
    _, evaluator = _group_store(case)
    result = evaluator.evaluate(case["now_ms"]).result("local", "testgroup")
    assert result.status.value == case["expected_status"]
    assert result.burrow_complete == case["expected_complete"]
    assert result.partition_count == case["expected_partition_count"]
    assert result.total_lag == case["expected_total_lag"]
    (partition,) = result.partitions
    assert partition.status.value == case["expected_partition_status"]
    assert partition.burrow_complete == case["expected_partition_complete"]
    if "expected_maxlag_start_offset" in case:
        assert result.max_lag.start.offset == case["expected_maxlag_start_offset"]
        assert result.max_lag.end.offset == case["expected_maxlag_end_offset"]


def test_unknown_group_is_notfound_with_complete_one():
    (case,) = [c for c in GROUP_CASES if c["expected_status"] == "NOTFOUND"]
    store = WindowStore()
    result = Evaluator(RulesConfig(), store).evaluate(0).result("local", "nosuchgroup")
    assert result == not_found("local", "nosuchgroup", 0)
    assert result.status.value == case["expected_status"]
    assert result.complete == case["expected_complete"]
    assert result.partitions == [] and result.total_lag == 0


def test_group_without_partitions_is_ok_with_complete_zero():
    (case,) = [c for c in GROUP_CASES if c["offsets"] == [] and c["expected_status"] == "OK"]
    result = group_without_partitions("local", "testgroup", 0)
    assert result.status == GroupStatus(case["expected_status"])
    assert result.complete == case["expected_complete"]
    assert result.partitions == []


@pytest.mark.parametrize("case", STORAGE, ids=[c["name"] for c in STORAGE])
def test_commit_ring_insertion_and_min_distance_match_burrow(case):
    store = WindowStore(
        WindowSettings(intervals=case["ring_size"], min_distance=case["min_distance_s"])
    )
    row = store._new_row(("local", "group", "topic", 0))
    for commit in case["inputs"]:
        store.add_commits(
            np.array([row]),
            np.array([commit["offset"]]),
            np.array([commit["order"]]),
            np.array([commit["timestamp_ms_rel"]]),
            np.array([case["broker_offset"]]),
        )
    ring = [
        {"offset": c.offset, "order": order, "timestamp_ms_rel": c.timestamp, "lag": c.lag}
        for c, order in zip(store.ring(row), store.ring_orders(row))
    ]
    assert ring == case["expected_ring_oldest_first"]


# docs/architecture.md, "Burrow's rules": the four windows of the well-known walkthrough (samples
# 60 s apart).
WALKTHROUGH = [
    ("zero lag in the window", list(range(10, 101, 10)), [0, 0, 0, 0, 0, 0, 1, 3, 5, 5], 540, "OK"),
    ("committing, not moving", [10] * 10, [1, 1, 1, 1, 1, 2, 2, 2, 3, 3], 540, "STALL"),
    (
        "moving, lag never decreases",
        list(range(10, 101, 10)),
        [1, 1, 1, 1, 1, 2, 2, 2, 3, 3],
        540,
        "WARN",
    ),
    (
        "quiet longer than the window",
        list(range(10, 101, 10)),
        [5, 3, 5, 2, 1, 1, 2, 1, 4, 6],
        1200,
        "STOP",
    ),
]


@pytest.mark.parametrize(
    "name,offsets,lags,now_s,expected", WALKTHROUGH, ids=[w[0] for w in WALKTHROUGH]
)
def test_walkthrough_windows(name, offsets, lags, now_s, expected):
    commits = [
        {"offset": o, "timestamp_ms": i * 60_000, "lag": lag}
        for i, (o, lag) in enumerate(zip(offsets, lags))
    ]
    latest_leo = offsets[-1] + lags[-1]  # Burrow keeps recent broker offsets, not each commit's
    out = run_kernel(commits, [latest_leo], lags[-1], now_s * 1000, 0)
    status = PARTITION_STATUS_CODES[out.status[0]]
    assert status.value == expected
    assert status.group_status == (
        GroupStatus.OK
        if expected == "OK"
        else GroupStatus.WARN
        if expected == "WARN"
        else GroupStatus.ERR
    )
