"""Peers that misbehave, and a wall clock that jumps: what operators meet, with real parts.

* Brokers: one that accepts connections and never answers (a scan times out, bounded by
  ``request_timeout``/``scan_timeout``, into a gap: the cluster goes down, no group alerts),
  and one restarted in the middle of a scan (one gap, then business as usual).
* Receivers: one that answers after 30 s (its channel times out and retries while other
  channels and other incidents go out at once), a 429 with ``Retry-After`` (the next attempt
  waits that long, and not much longer), and Slack's ``200 {"ok": false}`` (a failure: final
  with Slack's error code, retried when Slack says try again).
* The wall clock stepped back 3 min and forward 5 min between scans: no STOP, STALL or
  REWIND, no alert at all that an unstepped clock would not give, and scan times that only
  ever increase.

Brokers are the embedded Tansu behind :class:`~tests.test_collect.FaultyProxy`; receivers are
the loopback servers of :mod:`notifier.demo`; the clock tests drive the coordinator with scripted
scans carrying the two clock readings a real scan carries.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

from notifier import resources
from notifier.collect import ClusterCollector, ScanError, ScanResult
from notifier.collect.results import elapsed_clock
from notifier.config import parse_service_config
from notifier.embedded import EmbeddedBroker
from notifier.history import HistoryWriter, read_history
from notifier.rules import load_rules
from notifier.service import Coordinator, make_collector
from notifier.service.scanclock import SLEW_RATE, ScanClock
from notifier.types import Sample, samples_to_table

from .notify_helpers import ERR, OK, config, eventually, move, now_ms
from .scripted import RecordingSink, ScriptedCollector
from .test_collect import FaultyProxy, _commit, _name, _produce

OFFSET_FETCH = 9  # the Kafka API key the restart test catches a scan in
SLACK_ONCALL = "/services/T0/B0/oncall"

DEFAULT_RULES = load_rules(resources.default_rules())


# --------------------------------------------------------------------------------------------
# Brokers


@pytest.fixture
async def behind_proxy(
    broker_factory: Callable[..., EmbeddedBroker],
) -> AsyncIterator[Callable[[], Awaitable[tuple[FaultyProxy, EmbeddedBroker]]]]:
    """A private broker whose every connection goes through a FaultyProxy."""
    proxies: list[FaultyProxy] = []

    async def make() -> tuple[FaultyProxy, EmbeddedBroker]:
        proxy = FaultyProxy()
        proxies.append(proxy)
        broker = broker_factory(advertised_port=await proxy.start())
        proxy.upstream_port = broker.port
        return proxy, broker

    yield make
    for proxy in proxies:
        proxy.release.set()
        await proxy.close()


@pytest.fixture
async def live_coordinator(
    tmp_path: Path,
) -> AsyncIterator[Callable[..., tuple[Coordinator, RecordingSink]]]:
    """Coordinators with a real collector for one cluster ``c``, scanned by ``scan_now``."""
    made: list[Coordinator] = []

    def make(bootstrap: str, **cluster: Any) -> tuple[Coordinator, RecordingSink]:
        settings = {"name": "c", "bootstrap_servers": bootstrap, "scan_interval": 10, **cluster}
        service_config = parse_service_config(
            {"clusters": [settings], "history": {"enabled": False}}, "test"
        )
        sink = RecordingSink()
        coord = Coordinator(service_config, DEFAULT_RULES, tmp_path, sink)
        state = coord.clusters["c"]
        state.collector = make_collector(state.config)
        made.append(coord)
        return coord, sink

    yield make
    for coord in made:
        await coord.clusters["c"].collector.close()


async def write_group(bootstrap: str, topic: str, group: str) -> None:
    """Two partitions of four records each; ``group`` committed at 2 and 3 (no members)."""
    await _produce(bootstrap, topic, [4, 4])
    await _commit(bootstrap, group, {(topic, 0): 2, (topic, 1): 3})


async def scan_now(coord: Coordinator) -> list:
    """One scan of ``c`` now, whatever the back-off after failures says."""
    coord.clusters["c"].retry_at = 0
    return await coord.scan_once("c")


async def test_a_broker_that_accepts_and_never_answers_fails_the_scan_in_bounded_time():
    silent_clients: list[asyncio.StreamWriter] = []

    async def swallow(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        silent_clients.append(writer)
        while await reader.read(65536):
            pass

    server = await asyncio.start_server(swallow, "127.0.0.1", 0)
    address = f"127.0.0.1:{server.sockets[0].getsockname()[1]}"
    try:
        async with (
            ClusterCollector(address, request_timeout_ms=500) as by_request,
            ClusterCollector(address, request_timeout_ms=30_000, scan_timeout_ms=800) as by_scan,
        ):
            started = time.monotonic()
            with pytest.raises(ScanError, match=r"cannot connect to .*: no answer within 0\.5s"):
                await by_request.scan()
            assert time.monotonic() - started < 1.5
            started = time.monotonic()
            with pytest.raises(ScanError, match=r"timed out after 0\.8s"):
                await by_scan.scan()
            assert time.monotonic() - started < 1.8
        assert silent_clients, "the collector did connect: the broker accepted and kept quiet"
    finally:
        for writer in silent_clients:
            writer.close()
        server.close()
        await server.wait_closed()


@pytest.mark.broker
async def test_a_broker_gone_silent_is_gaps_then_cluster_down_never_a_group_alert(
    behind_proxy, live_coordinator
):
    proxy, broker = await behind_proxy()
    group = _name("silent")
    await write_group(broker.bootstrap_servers, _name("silent"), group)
    coord, sink = live_coordinator(
        broker.bootstrap_servers, request_timeout="500ms", scan_timeout="5s", down_after_failures=2
    )
    state = coord.clusters["c"]
    for _ in range(3):
        assert await scan_now(coord) == []
    rows = state.store.alive_rows()
    samples_before = state.store.s_count[rows].tolist()

    proxy.blackhole = True  # connections are accepted, requests never answered
    for failure in (1, 2, 3):
        started = time.monotonic()
        assert await scan_now(coord) == []
        assert time.monotonic() - started < 1.5  # one request timeout, not the scan's
        assert state.metrics.consecutive_failures == failure
    expected = f"cannot connect to 127.0.0.1:{proxy.port}: no answer within 0.5s"
    assert expected in (state.metrics.last_error or "")
    # Gaps: nothing ingested, nothing invented; the only alert is the cluster's.
    assert state.store.s_count[rows].tolist() == samples_before
    assert sink.events == [("down", "c")]

    proxy.blackhole = False
    assert await scan_now(coord) == []
    assert sink.events == [("down", "c"), ("up", "c")]
    assert sink.transitions == []
    assert state.groups == {group: "Empty"}


@pytest.mark.broker
async def test_a_broker_restarted_mid_scan_costs_one_gap_and_raises_no_alert(
    behind_proxy, live_coordinator
):
    proxy, broker = await behind_proxy()
    topic, group = _name("restart"), _name("restart")
    await write_group(broker.bootstrap_servers, topic, group)
    coord, sink = live_coordinator(broker.bootstrap_servers, request_timeout="2s")
    state = coord.clusters["c"]
    for _ in range(3):
        await scan_now(coord)
    # A scan reads the wall clock and the elapsed clock together: how a step is told apart.
    before = elapsed_clock()
    result = await state.collector.scan()
    assert before <= (result.elapsed_at or 0) <= elapsed_clock()
    proxy.hold_api = OFFSET_FETCH
    scan = asyncio.create_task(scan_now(coord))
    await asyncio.wait_for(proxy.held.wait(), 10)  # groups listed and described
    started = time.monotonic()
    await broker.astop()
    assert await asyncio.wait_for(scan, 5) == []
    assert time.monotonic() - started < 2  # the broken connection, not a timeout
    assert (state.metrics.failures, state.metrics.down) == (1, False)

    proxy.hold_api = None
    proxy.release.set()
    await broker.astart()
    # Tansu keeps everything in memory; a real broker keeps its log over a restart.
    await write_group(broker.bootstrap_servers, topic, group)
    assert await scan_now(coord) == []
    assert state.metrics.consecutive_failures == 0
    [row] = [r for r in state.store.alive_rows() if state.store.row_key[r][2:] == (topic, 1)]
    assert [s["committed_offset"] for s in state.store.samples(int(row))] == [3, 3, 3, 3]
    assert (sink.transitions, sink.events) == ([], [])


# --------------------------------------------------------------------------------------------
# Receivers


async def test_a_receiver_answering_after_30_s_holds_up_no_other_channel_or_incident(
    http, tmp_path, notifiers, caplog
):
    caplog.set_level(logging.INFO, logger="notifier.notify")
    http.reply("/slow", 200, json_body={"status": "ok"}, hang=30, times=1)
    receivers = {
        "oncall": [
            {"webhook": {"url": http.url_for("/slow"), "timeout": "3s"}},
            {"slack_webhook": {"url": http.url_for(SLACK_ONCALL)}},
        ],
        "dba": {"webhook": {"url": http.url_for("/dba")}},
    }
    route = {
        "group_by": ["group"],
        "routes": [{"receiver": "dba", "matchers": ['group="payments"']}],
    }
    notifier = await notifiers(config(receivers, route), tmp_path / "n.sqlite")
    t = now_ms()
    notifier.handle([move("orders", OK, ERR, t)])
    notifier.flush_due()
    # The same notification reaches the receiver's Slack channel while the webhook hangs.
    await eventually(lambda: len(http.to("/slow")) == len(http.to(SLACK_ONCALL)) == 1, 2.5)
    started = time.monotonic()
    notifier.handle([move("billing", OK, ERR, t + 1), move("payments", OK, ERR, t + 1)])
    notifier.flush_due()

    # Other incidents go out while the slow request is still waiting for its answer (its 3 s
    # timeout has not passed): on another route, and on the very channel that hangs (each
    # incident is its own lane). The waits leave room for a busy machine, not for the timeout.
    await eventually(lambda: len(http.to("/dba")) == len(http.to("/slow")) - 1 == 1, 2.5)
    assert [r.json["alerts"][0]["incident"]["group"] for r in http.to("/slow")] == [
        "orders",
        "billing",
    ]
    # Slack's about one message a second is the only wait there.
    await eventually(lambda: len(http.to(SLACK_ONCALL)) == 2, 2.5)
    assert time.monotonic() - started < 2.9

    # The slow attempt times out after the channel's 3 s and is tried again.
    assert await notifier.wait_delivered(10)
    metrics = notifier.metrics()
    assert metrics["retried"] == {"oncall/webhook": 1}
    assert metrics["sent"] == {"oncall/webhook": 2, "oncall/slack_webhook": 2, "dba/webhook": 1}
    [retry] = [r for r in caplog.records if getattr(r, "event", None) == "notification_retry"]
    assert (retry.channel, retry.error) == ("oncall/webhook", "timed out after 3 s (ReadTimeout)")
    first, _billing, again = http.to("/slow")
    assert again.json["alerts"][0]["incident"]["group"] == "orders"
    assert again.received_at_ms - first.received_at_ms >= 3000
    await notifier.stop()


@pytest.mark.parametrize("channel", ["slack_webhook", "webhook"])
async def test_429_retry_after_is_waited_for_and_not_much_longer(
    channel, http, tmp_path, notifiers
):
    path = "/services/T0/B0/lag" if channel == "slack_webhook" else "/hook"
    http.reply(path, 429, text="rate_limited", headers={"Retry-After": "1"}, times=1)
    receivers = {"oncall": {channel: {"url": http.url_for(path)}}}
    notifier = await notifiers(config(receivers), tmp_path / "n.sqlite")
    notifier.handle([move("orders", OK, ERR, now_ms())])
    notifier.flush_due()
    assert await notifier.wait_delivered(5)

    refused, accepted = http.to(path)
    waited = accepted.received_at_ms - refused.received_at_ms
    assert 1000 <= waited < 1400
    assert notifier.metrics()["retried"] == {f"oncall/{channel}": 1}
    await notifier.stop()


@pytest.mark.parametrize("channel", ["slack_webhook", "webhook"])
async def test_a_429_holds_back_what_the_limit_covers(channel, http, tmp_path, notifiers):
    path = "/services/T0/B0/lag" if channel == "slack_webhook" else "/hook"
    http.reply(path, 429, text="rate_limited", headers={"Retry-After": "1"}, times=1)
    receivers = {"oncall": {channel: {"url": http.url_for(path)}}}
    notifier = await notifiers(config(receivers, {"group_by": ["group"]}), tmp_path / "n.sqlite")
    notifier.handle([move("orders", OK, ERR, now_ms())])
    notifier.flush_due()
    await eventually(lambda: len(http.to(path)) == 1)
    notifier.handle([move("payments", OK, ERR, now_ms())])  # another incident, another lane
    notifier.flush_due()
    assert await notifier.wait_delivered(5)

    refused, *later = http.to(path)
    delays = sorted(r.received_at_ms - refused.received_at_ms for r in later)
    if channel == "slack_webhook":
        # Slack's limit is the channel's: its other message waits out the Retry-After too,
        # then the two go at Slack's one a second.
        assert 1000 <= delays[0] < 1400 and delays[1] < 2400
    else:
        # A webhook has no shared limit: only the refused message waits.
        assert delays[0] < 400 and 1000 <= delays[1] < 1400
    await notifier.stop()


async def test_slack_ok_false_with_a_200_is_a_failure_final_or_retried_as_slack_says(
    http, tmp_path, notifiers
):
    http.reply(
        "/services/T0/B0/bad", 200, json_body={"ok": False, "error": "invalid_blocks"}, times=1
    )
    http.reply(
        "/services/T0/B0/busy", 200, json_body={"ok": False, "error": "internal_error"}, times=1
    )
    http.reply("/api/chat.postMessage", 200, json_body={"ok": False, "error": "invalid_blocks"})
    bot = {"token": "xoxb-t0k3n", "channel": "#lag", "api_url": http.url_for("/api")}
    receivers = {
        "oncall": [
            {"slack_webhook": {"url": http.url_for("/services/T0/B0/bad")}},
            {"slack_bot": bot},
        ],
        "busy": {"slack_webhook": {"url": http.url_for("/services/T0/B0/busy")}},
    }
    route = {"routes": [{"receiver": "busy", "matchers": ['group="payments"']}]}
    notifier = await notifiers(config(receivers, route), tmp_path / "n.sqlite")
    t = now_ms()
    notifier.handle([move("orders", OK, ERR, t), move("payments", OK, ERR, t)])
    notifier.flush_due()
    assert await notifier.wait_delivered(5)

    metrics = notifier.metrics()
    assert metrics["failed"] == {"oncall/slack_webhook": 1, "oncall/slack_bot": 1}
    assert metrics["sent"] == {"busy/slack_webhook": 1}
    assert metrics["retried"] == {"busy/slack_webhook": 1}
    assert len(http.to("/services/T0/B0/bad")) == len(http.to("/api/chat.postMessage")) == 1
    failed = {row["channel"]: row["last_error"] for row in notifier.store.outbox_rows("failed")}
    assert failed == {
        "oncall/slack_webhook": "webhook: invalid_blocks",
        "oncall/slack_bot": "chat.postMessage: invalid_blocks",
    }
    await notifier.stop()


# --------------------------------------------------------------------------------------------
# Clock steps

T0 = 1_800_000_000_000
SCAN_S = 10
WARM_UP_S = 3600
BACK_AT_S = WARM_UP_S + 1800  # the wall clock goes back 3 min here, and 500 s later ...
FORWARD_AT_S = BACK_AT_S + 500  # ... forward 5 min, in a batch pause and a 4-min wait
END_S = FORWARD_AT_S + 3600
SETTLED_S = WARM_UP_S + 900  # by then the fleet's habits are learned


def fleet(t: int) -> dict[str, tuple[int, int, int]]:
    """What each group shows at ``t`` seconds of real time: (committed, log end, members).
    Each topic gets 10 records a second."""
    produced = 10 * t
    batch_phase = t % 600
    return {
        "every-scan": (produced - 5, produced, 2),
        "every-30s": (10 * (t - t % 30), produced, 2),
        "every-4min": (10 * (t - t % 240), produced, 1),
        # Up for 7 minutes, then no members for 3 while records arrive (a nightly-style batch).
        "batch": (produced, produced, 1)
        if batch_phase < 420
        else (10 * (t - batch_phase + 420), produced, 0),
        "25min-behind": (10 * (t - 1500), produced, 3),
        "idle": (1000, 1000, 1),
    }


def wall_ms(t: int, stepped: bool) -> int:
    wall = T0 + t * 1000
    if stepped and t >= BACK_AT_S:
        wall -= 180_000
    if stepped and t >= FORWARD_AT_S:
        wall += 300_000
    return wall


def fleet_scan(t: int, stepped: bool) -> ScanResult:
    """The scan at ``t`` s of real time as the collector reports it: the wall clock's time and
    the elapsed clock's, read together."""
    ts = wall_ms(t, stepped)
    samples = [
        Sample(ts=ts, cluster="c", group=g, topic=f"t-{g}", partition=0, committed_offset=c,
               log_end_offset=leo, log_start_offset=0, group_state="Stable" if m else "Empty",
               members=m, member_hash=m)
        for g, (c, leo, m) in fleet(t).items()
    ]  # fmt: skip
    return ScanResult(
        cluster="c", ts=ts, samples=samples_to_table(samples), requests={"ListGroups": 1},
        group_states={g: "Stable" for g in fleet(t)}, elapsed_at=float(t),
    )  # fmt: skip


async def run_fleet(tmp_path: Path, stepped: bool) -> tuple[list, set, list[int], Coordinator]:
    """Scan the fleet every 10 s for 100 minutes; returns every transition (scan s, group,
    status), the Burrow partition statuses other than OK and WARN once settled, and the scan
    times."""
    times = range(WARM_UP_S, END_S, SCAN_S)
    script = [fleet_scan(t, stepped) for t in times]
    service_config = parse_service_config(
        {"clusters": [{"name": "c", "bootstrap_servers": "127.0.0.1:1", "scan_interval": SCAN_S}],
         "history": {"enabled": False}},
        "test",
    )  # fmt: skip
    sink = RecordingSink()
    coord = Coordinator(service_config, DEFAULT_RULES, tmp_path, sink)
    state = coord.clusters["c"]
    state.collector = ScriptedCollector(script)
    coord.history = HistoryWriter(tmp_path / "history")
    transitions: list[tuple[int, str, str]] = []
    burrow: set[tuple[str, str]] = set()
    scan_times: list[int] = []
    for t in times:
        for transition in await coord.scan_once("c"):
            transitions.append((t, transition.group, transition.current.value))
        assert state.evaluation is not None
        scan_times.append(state.evaluation.now)
        if t < SETTLED_S:
            continue
        for result in state.evaluation.results():
            burrow |= {
                (result.group, p.status.value)
                for p in result.partitions
                if p.status.value not in ("OK", "WARN")
            }
    coord.history.close()
    return transitions, burrow, scan_times, coord


async def test_wall_clock_steps_between_scans_raise_no_stop_stall_or_rewind(tmp_path):
    steady, steady_burrow, _, _ = await run_fleet(tmp_path / "steady", stepped=False)
    stepped, stepped_burrow, scan_times, coord = await run_fleet(tmp_path / "stepped", True)

    # The fleet is healthy: after its first batch run (whose restart time it had to learn, and
    # whose incident ends 5 minutes after it reads again), nothing alerts, with or without the
    # steps, and the steps change nothing at all.
    assert all(t < SETTLED_S or status == "OK" for t, _, status in steady)
    assert stepped == steady
    # Burrow's own statuses (the /v3 API's): the same, and no REWIND or STALL.
    assert stepped_burrow == steady_burrow == {("batch", "STOP")}  # its pauses, as Burrow sees

    # One timeline: scan times increase by the real 10 s, within the slew, and rejoin the
    # wall clock (by the end they equal it).
    steps = {b - a for a, b in itertools.pairwise(scan_times)}
    assert min(steps) >= SCAN_S * 1000 * (1 - SLEW_RATE)
    assert max(steps) <= SCAN_S * 1000 * (1 + SLEW_RATE)
    assert scan_times[-1] == wall_ms(END_S - SCAN_S, stepped=True)
    # The history holds what the windows saw, so a replay or a backtest sees the same.
    history = read_history(tmp_path / "stepped" / "history", groups="idle")
    assert history.column("ts").cast("int64").to_pylist() == scan_times
    store = coord.clusters["c"].store
    assert store.last_scan_ts["c"] == scan_times[-1]


def test_scan_clock_follows_the_wall_clock_until_it_is_stepped():
    clock = ScanClock("c", resume_gap_ms=10_000)
    # The wall clock slewed by NTP (a few ms) is followed as it is.
    assert clock.stamp(T0, 100.0, None) == T0
    assert clock.stamp(T0 + 10_004, 110.0, T0) == T0 + 10_004
    # Stepped back 3 min: the scan is stamped 10 s on, then rejoins at 5% of elapsed time.
    assert clock.stamp(T0 + 20_004 - 180_000, 120.0, T0 + 10_004) == T0 + 20_004 - 500
    assert clock.offset_ms == 179_500
    # Suspended for 10 minutes: both clocks moved, a real gap (which the slew goes on through).
    after = clock.stamp(T0 + 620_004 - 180_000, 720.0, T0 + 19_504)
    assert after == T0 + 620_004 - 180_000 + 149_500


def test_scan_clock_after_a_restart_never_goes_back_on_the_stored_timeline():
    # The wall clock is behind the last scan the checkpoint holds: carry on after it.
    clock = ScanClock("c", resume_gap_ms=10_000)
    assert clock.stamp(T0 - 60_000, 5.0, T0) == T0 + 10_000
    assert clock.stamp(T0 - 50_000, 15.0, T0 + 10_000) == T0 + 19_500
    # Ahead of it (the service was down a while): a gap, the wall clock as it is.
    assert ScanClock("c", 10_000).stamp(T0 + 600_000, 5.0, T0) == T0 + 600_000
    # Without an elapsed reading, only the order is kept.
    assert ScanClock("c", 10_000).stamp(T0 - 1, None, T0) == T0 + 1
