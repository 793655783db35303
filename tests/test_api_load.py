"""The API under load, as its users see it: answers worked out once per scan stay right (the
data's age as of each request, a new scan's verdict as soon as it lands, open incidents and
silences at once), and requests give way to the scans they share the event loop with
(benchmarks/api.py measures how much)."""

from __future__ import annotations

import asyncio
import dataclasses
import itertools
import re
import time
from pathlib import Path

import httpx
import orjson

from notifier.api import create_app
from notifier.api.cache import encode
from notifier.api.priority import ScanPriority
from notifier.api.views import group_detail, groups_overview, status_members
from notifier.client.tables import groups_table, status_notes
from notifier.notify import Notifier
from notifier.notify.config import parse_notify
from notifier.rules import load_rules
from notifier.types import Finding, GroupStatus, Incident, Sample, Severity, Transition

from .scripted import drive, scan_result, service

ROOT = Path(__file__).resolve().parents[1]
T0 = 1_714_560_000_000


def commits(scan: int, moving: bool) -> list[Sample]:
    """Group "orders": commits 10 behind the log end while ``moving``, stuck at 100 after."""
    return [
        Sample(ts=T0 + scan * 10_000, cluster="c", group="orders", topic="t", partition=0,
               committed_offset=100 + 10 * scan if moving else 100,
               log_end_offset=110 + 10 * scan, group_state="Stable", members=1)
    ]  # fmt: skip


async def scripted_service(tmp_path: Path, scans: int, stuck_from: int):
    script = [
        scan_result(commits(i, moving=i < stuck_from), "c", T0 + i * 10_000) for i in range(scans)
    ]
    coord, _ = service(tmp_path, script, load_rules(ROOT / "rules.yaml"))
    return coord


def webhook_notifier(tmp_path: Path, clock) -> Notifier:
    """A notifier routing everything to one webhook (never reached: only its incidents and
    silences are read)."""
    config = {"receivers": {"r": {"webhook": {"url": "http://127.0.0.1:9/"}}},
              "route": {"receiver": "r"}}  # fmt: skip
    return Notifier(parse_notify(config), tmp_path / "notify.sqlite", clock=clock)


def client(coord, clock, notifier=None) -> httpx.AsyncClient:
    app = create_app(coord, notifier, clock=clock)
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://notifier")


async def test_a_cached_answer_still_says_how_old_its_data_is_at_each_request(tmp_path):
    coord = await scripted_service(tmp_path, 12, stuck_from=99)
    await drive(coord, 12)
    last = coord.clusters["c"].metrics.last_success_ms
    now = [last + 1_000]
    async with client(coord, lambda: now[0]) as http:
        first = (await http.get("/v3/kafka/c/consumer/orders/status")).json()["status"]
        now[0] = last + 7_500
        second = (await http.get("/v3/kafka/c/consumer/orders/status")).json()["status"]
        groups = (await http.get("/api/groups")).json()["groups"]
        detail = (await http.get("/api/groups/c/orders")).json()

    assert (first["data_age_seconds"], second["data_age_seconds"]) == (1.0, 7.5)
    assert {k: v for k, v in first.items() if k != "data_age_seconds"} == {
        k: v for k, v in second.items() if k != "data_age_seconds"
    }
    assert groups[0]["data_age_seconds"] == detail["data_age_seconds"] == 7.5
    assert not detail["stale"] and detail["partitions"][0]["window"]


async def test_a_new_scan_is_answered_as_soon_as_it_lands(tmp_path):
    """Burrow's endpoints answer from a new scan at once; /api/groups, whose rows are worked
    out beside the requests, shows the previous scan until then, saying how old it is."""
    coord = await scripted_service(tmp_path, 24, stuck_from=12)
    await drive(coord, 12)
    state = coord.clusters["c"]
    async with client(coord, lambda: state.metrics.last_success_ms) as http:
        before = (await http.get("/v3/kafka/c/consumer/orders/lag")).json()["status"]
        overview_before = (await http.get("/api/groups")).json()["groups"][0]
        await drive(coord, 12)
        after = (await http.get("/v3/kafka/c/consumer/orders/lag")).json()["status"]
        meanwhile = (await http.get("/api/groups")).json()["groups"][0]
        for _ in range(100):
            await asyncio.sleep(0.01)
            overview_after = (await http.get("/api/groups")).json()["groups"][0]
            if overview_after["data_age_seconds"] == 0:
                break

    assert before["status"] == overview_before["status"] == "OK"
    assert after["status"] == overview_after["status"] == "ERR"
    assert after["partitions"][0]["end"]["offset"] == 100
    # The rows last worked out: twelve scans (120 s) before the one that just landed.
    assert (meanwhile["status"], meanwhile["data_age_seconds"]) == ("OK", 120.0)
    assert overview_after["data_age_seconds"] == 0.0


async def test_the_rows_of_a_scan_are_worked_out_when_it_lands_not_at_the_next_request(
    tmp_path,
):
    """A status page polling every few seconds: each request must show the latest scan, its
    rows as old as the cluster's data, not those of the scan before the previous request
    (they lagged by as many intervals as passed between two requests)."""
    coord = await scripted_service(tmp_path, 24, stuck_from=12)
    await drive(coord, 12)
    state = coord.clusters["c"]
    async with client(coord, lambda: state.metrics.last_success_ms + 4_000) as http:
        await http.get("/api/groups")
        for _ in range(3):
            await drive(coord, 4)  # the scans between two requests
            working = [t for t in asyncio.all_tasks() if t.get_name() == "api-overview-c"]
            assert working, "nothing started working out the scan's rows"
            await asyncio.wait(working)
            body = (await http.get("/api/groups")).json()
            ((row,), (cluster,)) = body["groups"], body["clusters"]
            assert row["data_age_seconds"] == cluster["data_age_seconds"] == 4.0
            assert row["stale"] is cluster["stale"] is False
    assert row["status"] == "ERR"  # the last scan's verdict: stuck since scan 12


async def test_open_incidents_and_silences_show_at_once(tmp_path):
    coord = await scripted_service(tmp_path, 12, stuck_from=99)
    await drive(coord, 12)
    state = coord.clusters["c"]
    notifier = webhook_notifier(tmp_path, lambda: state.metrics.last_success_ms)
    result = state.evaluation.result("c", "orders")
    async with client(coord, lambda: state.metrics.last_success_ms, notifier) as http:
        quiet = (await http.get("/api/groups")).json()["groups"][0]
        notifier.handle([Transition("c", "orders", GroupStatus.OK, GroupStatus.ERR, T0, result)])
        opened = (await http.get("/api/groups")).json()["groups"][0]
        silence = notifier.add_silence(
            {"group": "orders"}, ends_at=T0 + 86_400_000, author="ops", comment="deploying"
        )
        silenced = (await http.get("/api/groups/c/orders")).json()
    notifier.store.close()

    assert quiet["incident_id"] is None
    assert opened["incident_id"] is not None and not opened["silenced"]
    assert silenced["incident_id"] == opened["incident_id"] and silenced["silenced"]
    assert silence.id in {s.id for s in notifier.list_silences()}


async def test_the_notifier_hands_out_one_mapping_of_open_incidents_until_they_change(tmp_path):
    coord = await scripted_service(tmp_path, 12, stuck_from=99)
    await drive(coord, 12)
    now = [T0 + 200_000]
    notifier = webhook_notifier(tmp_path, lambda: now[0])
    result = coord.clusters["c"].evaluation.result("c", "orders")
    notifier.handle([Transition("c", "orders", GroupStatus.OK, GroupStatus.ERR, T0, result)])
    first = notifier.open_incidents()
    assert notifier.open_incidents() is first
    notifier.add_silence(
        {"group": "orders"}, starts_at=now[0] + 60_000, ends_at=now[0] + 120_000,
        author="ops", comment="maintenance window",
    )  # fmt: skip
    pending = notifier.open_incidents()
    silenced_before = pending[("c", "orders")].silenced
    now[0] += 60_000  # the silence starts: nothing else happened
    started = notifier.open_incidents()
    notifier.store.close()

    assert pending is not first and not silenced_before
    assert started is not pending and started[("c", "orders")].silenced


async def test_a_silence_a_reload_brings_shows_at_once(tmp_path):
    coord = await scripted_service(tmp_path, 12, stuck_from=6)
    await drive(coord, 12)
    state = coord.clusters["c"]
    notifier = webhook_notifier(tmp_path, lambda: state.metrics.last_success_ms)
    result = state.evaluation.result("c", "orders")
    notifier.handle([Transition("c", "orders", GroupStatus.OK, GroupStatus.ERR, T0, result)])
    async with client(coord, lambda: state.metrics.last_success_ms, notifier) as http:
        before = (await http.get("/api/groups")).json()["groups"][0]
        await notifier.reconfigure(
            parse_notify({
                "receivers": {"r": {"webhook": {"url": "http://127.0.0.1:9/"}}},
                "route": {"receiver": "r"},
                "silences": [{"matchers": ["group=orders"], "ends_at": "2099-01-01T00:00:00Z",
                              "author": "ops", "comment": "moving it"}],
            })
        )  # fmt: skip
        after = (await http.get("/api/groups")).json()["groups"][0]
    await notifier.stop()

    assert not before["silenced"]
    assert after["silenced"] and after["incident"]["silenced"]


async def test_cached_answers_are_the_ones_worked_out_afresh_as_time_goes_by(tmp_path):
    """An incident's age, silences starting and ending, the data going stale: at each moment,
    /api/groups and a group's detail from the cache equal what is worked out from scratch."""
    script = [
        scan_result(
            [
                dataclasses.replace(sample, group=group, committed_offset=110 + 10 * i)
                for group in ("audit", "payments")
                for sample in commits(i, moving=True)
            ]
            + commits(i, moving=i < 6),
            "c",
            T0 + i * 10_000,
        )
        for i in range(12)
    ]
    coord, _ = service(tmp_path, script, load_rules(ROOT / "rules.yaml"))
    await drive(coord, 12)
    state = coord.clusters["c"]
    now = [state.metrics.last_success_ms + 1_000]
    notifier = webhook_notifier(tmp_path, lambda: now[0])
    seen: list[tuple[dict, dict]] = []

    async def compare(http: httpx.AsyncClient) -> None:
        groups = (await http.get("/api/groups")).json()["groups"]
        detail = (await http.get("/api/groups/c/orders")).json()
        assert groups == orjson.loads(encode(groups_overview(state, "c", notifier, now[0])))
        assert detail == orjson.loads(encode(group_detail(state, "c", "orders", notifier, now[0])))
        seen.append(({g["group"]: g for g in groups}["orders"], detail))

    async with client(coord, lambda: now[0], notifier) as http:
        await compare(http)
        result = state.evaluation.result("c", "orders")
        opened = Transition("c", "orders", GroupStatus.OK, GroupStatus.ERR, now[0], result)
        notifier.handle([opened])
        await compare(http)
        now[0] += 4_300
        await compare(http)
        notifier.add_silence(
            {"group": "orders"}, starts_at=now[0] + 2_000, ends_at=now[0] + 9_000,
            author="ops", comment="maintenance window",
        )  # fmt: skip
        notifier.add_silence(
            {"group": "audit"}, ends_at=now[0] + 60_000, author="ops", comment="being moved"
        )
        await compare(http)
        now[0] += 2_000  # the silence starts
        await compare(http)
        now[0] += 7_000  # it ends
        await compare(http)
        now[0] += 60_000  # the data is stale now
        await compare(http)
    notifier.store.close()

    durations = [row["incident"] and row["incident"]["duration_seconds"] for row, _ in seen]
    assert durations[:3] == [None, 0.0, 4.3]
    assert [row["silenced"] for row, _ in seen] == [False, False, False, False, True, False, False]
    assert [detail["silenced"] for _, detail in seen][3:5] == [False, True]
    assert seen[-1][0]["stale"] and seen[-1][1]["stale"]


# ---------------------------------------------------------------------------------------------
# Giving way to scans


class Recorder:
    """An ASGI app that takes ``seconds`` of CPU (or waits for ``release``) per request."""

    def __init__(self, seconds: float = 0.0) -> None:
        self.seconds = seconds
        self.spans: list[tuple[str, float, float]] = []
        self.release: asyncio.Event | None = None

    async def __call__(self, scope, receive, send) -> None:
        started = time.perf_counter()
        if self.release is not None and scope["path"] != "/healthz":
            await self.release.wait()
        while time.perf_counter() - started < self.seconds:
            pass
        self.spans.append((scope["path"], started, time.perf_counter()))
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"{}"})


async def call(app, path: str) -> None:
    async def receive():
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message):
        pass

    await app({"type": "http", "path": path, "method": "GET", "headers": []}, receive, send)


async def test_requests_are_served_one_at_a_time_in_the_order_they_came():
    recorder = Recorder(seconds=0.002)
    gate = ScanPriority(recorder, scanning=lambda: False)
    await asyncio.gather(*(call(gate, f"/v3/kafka/c/consumer/g{i}") for i in range(6)))

    assert [path for path, _s, _e in recorder.spans] == [
        f"/v3/kafka/c/consumer/g{i}" for i in range(6)
    ]
    for (_p, _s, end), (_q, start, _e) in zip(recorder.spans, recorder.spans[1:], strict=False):
        assert start >= end


async def test_during_a_scan_requests_take_at_most_their_share_of_the_time():
    recorder = Recorder(seconds=0.004)
    gate = ScanPriority(recorder, scanning=lambda: True, share=0.25)
    await asyncio.gather(*(call(gate, "/api/groups") for _ in range(6)))

    # A share of 1/4: each request is followed by a rest three times as long as it took. Judged
    # request by request, so that a busy machine stretching one request (the last, say) is
    # not mistaken for the gate letting the API take more than its share.
    spans = [(start, end) for _p, start, end in recorder.spans]
    assert len(spans) == 6
    for (start, end), (next_start, _) in itertools.pairwise(spans):
        assert next_start - end >= 3 * (end - start) * 0.999


async def test_health_probes_never_wait_behind_other_requests():
    recorder = Recorder()
    recorder.release = asyncio.Event()
    gate = ScanPriority(recorder, scanning=lambda: True)
    stuck = asyncio.create_task(call(gate, "/api/groups"))
    queued = asyncio.create_task(call(gate, "/api/groups"))
    await asyncio.sleep(0.01)
    await asyncio.wait_for(call(gate, "/healthz"), 1)
    queued.cancel()  # a client that gave up waiting does not hold the next one up
    recorder.release.set()
    await asyncio.wait_for(stuck, 1)
    await asyncio.wait_for(call(gate, "/api/groups"), 1)

    assert [path for path, _s, _e in recorder.spans] == ["/healthz", "/api/groups", "/api/groups"]


async def test_a_group_whose_incident_is_open_shows_the_incidents_status_and_why(tmp_path):
    """The first request after a scan gets the rows worked out before it (above), while the
    scan's transitions have already opened an incident: the status column must still say what
    the pager said (the incident's ERR), with the evaluation's OK beside it and why, in
    /api/groups and in `notifier status`'s table, never OK alone."""
    script = [scan_result(commits(i, moving=i < 12), "c", T0 + i * 10_000) for i in range(24)]
    now = [T0]
    notifier = webhook_notifier(tmp_path, lambda: now[0])
    coord, _ = service(tmp_path, script, load_rules(ROOT / "rules.yaml"), sink=notifier)
    state = coord.clusters["c"]
    await drive(coord, 12)
    now[0] = state.metrics.last_success_ms
    async with client(coord, lambda: now[0], notifier) as http:
        [healthy] = (await http.get("/api/groups")).json()["groups"]
        await drive(coord, 12)  # stuck: the evaluation says ERR, the sink opens an incident
        now[0] = state.metrics.last_success_ms
        [meanwhile] = (await http.get("/api/groups")).json()["groups"]
        for _ in range(100):
            await asyncio.sleep(0.01)
            [caught_up] = (await http.get("/api/groups")).json()["groups"]
            if caught_up["data_age_seconds"] == 0:
                break
    notifier.store.close()

    assert (healthy["status"], healthy["evaluated_status"], healthy["status_reason"]) == (
        "OK", "OK", None)  # fmt: skip
    assert meanwhile["incident"]["status"] == "ERR" and meanwhile["data_age_seconds"] == 120.0
    assert (meanwhile["status"], meanwhile["evaluated_status"]) == ("ERR", "OK")
    assert meanwhile["status_reason"]["kind"] == "earlier_scan"
    assert meanwhile["status_reason"]["message"] == (
        "evaluated OK at an earlier scan than the one that made the incident ERR; the next rows "
        "agree"
    )
    header, row = (re.split(r"\s{2,}", line) for line in groups_table([meanwhile]))
    assert row[header.index("status")] == "ERR (evaluated OK: earlier_scan)"
    assert row[header.index("incident")] == "open"
    assert status_notes([meanwhile]) == [
        f"c/orders: ERR, earlier_scan: {meanwhile['status_reason']['message']}"
    ]
    assert (caught_up["status"], caught_up["evaluated_status"]) == ("ERR", "ERR")
    assert caught_up["status_reason"] is None and status_notes([caught_up]) == []
    for shown in (meanwhile, caught_up):  # the incident's status, or the reason it differs
        assert shown["status"] == shown["incident"]["status"]
        assert shown["evaluated_status"] == shown["status"] or shown["status_reason"]


def _incident(status: GroupStatus) -> Incident:
    return Incident(id="i1", cluster="c", group="orders", opened_at=T0, status=status,
                    peak_status=GroupStatus.ERR)  # fmt: skip


def test_why_a_groups_status_is_not_the_evaluations():
    kept = Finding(rule="lag-warn", kind="lag", severity=Severity.WARN, status="WARN",
                   message="condition cleared; keeps firing for 30s after it last held "
                   "(keep_firing_for)", evidence={"last_true": T0}, since=None)  # fmt: skip
    firing = dataclasses.replace(kept, message="lag 40 > 10", evidence={"lag": 40}, since=T0)
    err, warn = _incident(GroupStatus.ERR), _incident(GroupStatus.WARN)

    recovering = status_members("OK", True, 0.4, [], err)
    assert (recovering["status"], recovering["evaluated_status"]) == ("ERR", "OK")
    assert recovering["status_reason"] == {"kind": "recovering", "message": (
        "evaluated OK on a partial window (40% complete): the incident stays ERR until a "
        "complete window agrees")}  # fmt: skip
    assert status_members("ERR", True, 0.5, [], warn)["status_reason"]["kind"] == "hold"
    assert status_members("WARN", False, 1.0, [kept], warn)["status_reason"] == {
        "kind": "keep_firing_for",
        "message": "lag-warn: condition cleared; keeps firing for 30s after it last held "
        "(keep_firing_for)",
    }
    assert status_members("WARN", False, 1.0, [kept, firing], warn)["status_reason"] is None
    assert status_members("WARN", False, 1.0, [firing], None) == {
        "status": "WARN", "evaluated_status": "WARN", "status_reason": None}  # fmt: skip
    label = groups_table([{"cluster": "c", "group": "orders", **recovering, "partial": True,
                           "incident_id": "i1"}])[1]  # fmt: skip
    assert re.split(r"\s{2,}", label)[2] == "ERR (evaluated OK: recovering, partial)"
