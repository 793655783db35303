"""The coordinator's pipeline: scans in, transitions out, gaps, cluster down, gone groups, warm
restarts and rule reloads.

The collector is replaced by a scripted one that returns the ScanResults a real scan would
(the real collector is tested against the embedded broker in test_collect.py and
test_integration.py); this keeps these tests exact about time.
"""

from __future__ import annotations

import asyncio
import logging
import time
from pathlib import Path

import pytest

from notifier.collect import ClusterUnreachableError, ScanError, ScanResult
from notifier.config import parse_service_config
from notifier.rules import load_rules, parse_rules
from notifier.types import GroupStatus, Sample, samples_to_table

from .scripted import drive, service

ROOT = Path(__file__).resolve().parents[1]
T0 = 1_800_000_000_000
INTERVAL_S = 10


def scan(i: int, groups: dict[str, tuple[int, int, int]]) -> ScanResult:
    """Scan number i: group → (committed, log_end, members) for partition 0 of topic t."""
    ts = T0 + i * INTERVAL_S * 1000
    samples = [
        Sample(ts=ts, cluster="c", group=g, topic="t", partition=0, committed_offset=c,
               log_end_offset=leo, log_start_offset=0, group_state="Stable" if m else "Empty",
               members=m, member_hash=m)
        for g, (c, leo, m) in groups.items()
    ]  # fmt: skip
    return ScanResult(
        cluster="c", ts=ts, samples=samples_to_table(samples),
        requests={"ListGroups": 1}, group_states={g: "Stable" for g in groups},
    )  # fmt: skip


def coordinator(tmp_path: Path, script: list, rules=None):
    return service(tmp_path, script, rules or parse_rules({"burrow": {"minimum_complete": 1.0}}))


async def run_scans(coord, count: int) -> None:
    await drive(coord, count)


def stalled(i: int) -> dict:
    return {"stuck": (100, 110 + i, 1), "fine": (200 + 10 * i, 200 + 10 * i, 1)}


async def test_a_stalled_group_transitions_once_its_window_is_complete(tmp_path):
    coord, sink = coordinator(tmp_path, [scan(i, stalled(i)) for i in range(12)])
    await run_scans(coord, 12)
    assert [(t.group, t.previous, t.current, t.at) for t in sink.transitions] == [
        ("stuck", GroupStatus.OK, GroupStatus.ERR, T0 + 9 * INTERVAL_S * 1000)
    ]
    result = coord.clusters["c"].evaluation.result("c", "stuck")
    assert result.partitions[0].status.value == "STALL"


async def test_a_failed_scan_is_a_gap_not_an_alert_and_the_cluster_goes_down(tmp_path):
    script = [scan(i, stalled(i)) for i in range(5)]
    script += [ScanError("timed out"), ScanError("timed out"), ScanError("timed out")]
    script += [scan(i, stalled(i)) for i in range(8, 12)]
    coord, sink = coordinator(tmp_path, script)
    await run_scans(coord, len(script))
    assert sink.events == [("down", "c"), ("up", "c")]
    assert sink.transitions == []  # the gap keeps every window partial
    state = coord.clusters["c"]
    assert state.metrics.failures == 3
    assert state.evaluation.result("c", "stuck").partial is True


async def test_failures_back_off(tmp_path):
    coord, _ = coordinator(tmp_path, [ScanError("x"), ScanError("x"), scan(1, stalled(1))])
    await coord.scan_once("c")  # the first retry is the next tick
    await coord.scan_once("c")  # the second failure backs off one more interval
    assert await coord.scan_once("c") == []
    assert len(coord.clusters["c"].collector.script) == 1  # the collector was not asked


async def test_the_back_off_stays_within_three_scan_intervals_however_long_the_outage(
    tmp_path, caplog
):
    # A 150 s outage at a 10 s interval: the broker must be noticed back within 30 s, not
    # after a back-off grown to minutes.
    caplog.set_level(logging.WARNING, logger="notifier.service")
    coord, _ = coordinator(tmp_path, [ScanError("connection refused")] * 15)
    await run_scans(coord, 15)
    waits = [r.next_try_s for r in caplog.records if getattr(r, "event", "") == "scan_failed"]
    assert waits[:3] == [10, 20, 30]
    assert max(waits) == 3 * INTERVAL_S
    state = coord.clusters["c"]
    assert state.retry_at - time.monotonic() <= 2 * INTERVAL_S  # skips two ticks at most


@pytest.mark.parametrize("interval_s", [2, 10])
async def test_a_cluster_that_does_not_answer_is_tried_at_every_tick(tmp_path, caplog, interval_s):
    # A 15-interval outage in which no broker answers: each try costs a connection attempt,
    # so none is skipped, and the first tick after the cluster answers again scans it.
    caplog.set_level(logging.WARNING, logger="notifier.service")
    outage = [ClusterUnreachableError("connection refused")] * 15
    coord, sink = service(
        tmp_path, [*outage, scan(15, stalled(15))], parse_rules({}), interval_s=interval_s
    )
    for _ in range(16):
        await coord.scan_once("c")  # one tick each, with no time between them
    assert coord.clusters["c"].collector.script == []  # every tick asked the cluster
    assert sink.events == [("down", "c"), ("up", "c")]
    waits = [r.next_try_s for r in caplog.records if getattr(r, "event", "") == "scan_failed"]
    assert waits == [interval_s] * 15


async def test_the_cluster_is_called_ready_only_once_a_scan_has_succeeded(tmp_path, caplog):
    caplog.set_level(logging.INFO, logger="notifier.service")
    coord, _ = coordinator(tmp_path, [ScanError("connection refused"), scan(1, stalled(1))])
    await coord.start()  # schedules the first scan at once
    try:
        state = coord.clusters["c"]
        deadline = time.monotonic() + 5
        while state.metrics.failures == 0:
            assert time.monotonic() < deadline, "the first scan never ran"
            await asyncio.sleep(0.01)
        said = [r.getMessage() for r in caplog.records]
        assert "watching cluster" in said
        assert not any("ready" in line for line in said), said

        await run_scans(coord, 1)
        ready = [r for r in caplog.records if getattr(r, "event", "") == "cluster_ready"]
        assert [(r.getMessage(), r.cluster, r.groups) for r in ready] == [
            ("cluster ready: first scan succeeded", "c", 2)
        ]
    finally:
        await coord.stop()


async def test_a_vanished_group_resolves_as_gone(tmp_path):
    script = [scan(i, stalled(i)) for i in range(10)]
    script.append(scan(10, {"fine": (300, 305, 1)}))
    coord, sink = coordinator(tmp_path, script)
    await run_scans(coord, 11)
    opened, gone = sink.transitions
    assert (opened.group, opened.current) == ("stuck", GroupStatus.ERR)
    assert (gone.group, gone.gone, gone.current) == ("stuck", True, GroupStatus.NOTFOUND)
    assert coord.clusters["c"].store.groups("c") == [("c", "fine")]


async def test_warm_restart_keeps_windows_and_does_not_refire(tmp_path):
    coord, sink = coordinator(tmp_path, [scan(i, stalled(i)) for i in range(10)])
    await run_scans(coord, 10)
    assert len(sink.transitions) == 1
    coord.save_checkpoints()

    again, sink2 = coordinator(tmp_path, [scan(i, stalled(i)) for i in range(10, 13)])
    from notifier.service import checkpoint

    state = again.clusters["c"]
    assert checkpoint.load(again.checkpoint_path("c"), state.store, state.evaluator, state.tracker)
    await run_scans(again, 3)
    assert sink2.transitions == []  # still ERR: nothing re-fired
    result = state.evaluation.result("c", "stuck")
    assert result.partial is False and result.complete == 1.0  # full windows, no blind period
    assert result.status is GroupStatus.ERR


async def test_a_checkpoint_for_other_window_settings_is_not_loaded(tmp_path):
    coord, _ = coordinator(tmp_path, [scan(i, stalled(i)) for i in range(3)])
    await run_scans(coord, 3)
    coord.save_checkpoints()
    other, _ = coordinator(tmp_path, [], rules=parse_rules({"window": {"intervals": 5}}))
    from notifier.service import checkpoint

    state = other.clusters["c"]
    assert not checkpoint.load(
        other.checkpoint_path("c"), state.store, state.evaluator, state.tracker
    )
    assert state.store.rows_in_use == 0


async def test_a_bad_rules_file_does_not_replace_the_running_rules(tmp_path):
    rules_path = tmp_path / "rules.yaml"
    rules_path.write_text((ROOT / "rules.yaml").read_text())
    coord, _ = coordinator(tmp_path, [], rules=load_rules(rules_path))
    coord.rules_path = rules_path
    rules_path.write_text("burrow: {allowed_lag: -1}\n")
    assert coord.reload_rules() is False
    assert coord.clusters["c"].evaluator.config.burrow.allowed_lag == 0
    rules_path.write_text("burrow: {allowed_lag: 7}\n")
    assert coord.reload_rules() is True
    assert coord.clusters["c"].evaluator.config.burrow.allowed_lag == 7


@pytest.mark.parametrize(
    "config,problem",
    [
        ({"clusters": []}, "clusters"),
        (
            {"clusters": [{"name": "a", "bootstrap_servers": "nohost"}]},
            "clusters.a.bootstrap_servers",
        ),
        (
            {"clusters": [{"name": "a", "bootstrap_servers": "h:1", "group_allow": ["("]}]},
            "clusters.a.group_allow",
        ),
        (
            {"clusters": [{"name": "a", "bootstrap_servers": "h:1", "scan_interval": "0s"}]},
            "clusters.a.scan_interval",
        ),
    ],
)
def test_service_config_errors_name_the_field(config, problem):
    from notifier.config import ConfigError

    with pytest.raises(ConfigError) as caught:
        parse_service_config(config, "svc.yaml")
    assert "svc.yaml" in str(caught.value)
    assert problem in [where for where, _ in caught.value.problems]


def test_secrets_come_from_the_environment():
    config = parse_service_config(
        {"clusters": [{"name": "a", "bootstrap_servers": "${BOOT}",
                       "security": {"protocol": "SASL_SSL", "sasl_username": "u",
                                    "sasl_password": "${KAFKA_PASSWORD}"}}]},
        "svc.yaml", {"BOOT": "h:9092", "KAFKA_PASSWORD": "hunter2"},
    )  # fmt: skip
    cluster = config.clusters[0]
    assert cluster.bootstrap_servers == ["h:9092"]
    assert cluster.security.sasl_password is not None
    assert cluster.security.sasl_password.reveal() == "hunter2"
    assert "hunter2" not in repr(config)
