"""The status page in a real headless Chromium, clicked through as an on-call engineer would.

A real service runs behind it: the coordinator scans (scripted collectors) four hours of a
``prod`` cluster whose groups stall, stop, rewind and fall behind, writes the Parquet history
as it always does, and hands its transitions to a real notifier whose three channels deliver,
keep failing with 503 (pending, retried) and are refused with 400 (failed) by a loopback
receiver; a ``staging`` cluster has never answered. The browser (Python Playwright driving
Debian's Chromium) opens the page, reads what a person reads and clicks what a person clicks.
Screenshots are saved in the test's temporary directory and their paths printed.
"""

from __future__ import annotations

import asyncio
import os
import re
import shutil
import subprocess
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from notifier.api import ApiServer, create_app
from notifier.collect import ScanError
from notifier.config import parse_service_config
from notifier.demo import HttpReceiver
from notifier.history import HistoryWriter
from notifier.notify import Notifier
from notifier.notify.config import parse_notify
from notifier.rules import load_rules
from notifier.service import Coordinator
from notifier.types import GroupStatus, Sample, Transition

from .scripted import ScriptedCollector, drive, replayed_service, scan_result

playwright_api = pytest.importorskip("playwright.async_api")

ROOT = Path(__file__).resolve().parents[1]
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
]  # fmt: skip
MINUTE = 60_000
SCANS = 240  # four hours, one scan a minute
RATE = 600  # records per partition per scan
DOWN_REASON = "connection refused: broker-1.staging:9092"
TOKEN = "s3cret-page-token"


def chromium() -> str:
    """Debian's Chromium (``make test`` installs it: tests/setup-system.sh); installed here on
    first use as root when pytest runs alone."""
    if not os.path.exists(CHROMIUM) and os.geteuid() == 0 and shutil.which("apt-get"):
        env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
        install = ["apt-get", "install", "-y", "-qq", "--no-install-recommends", "chromium"]
        for command in (["apt-get", "update", "-qq"], install):
            subprocess.run(command, env=env, capture_output=True, timeout=900, check=False)
    if not os.path.exists(CHROMIUM):
        pytest.skip("Chromium is not installed at /usr/bin/chromium (apt-get install chromium)")
    return CHROMIUM


# ---------------------------------------------------------------------------------------------
# The scenario: what the prod cluster's groups do over four hours


def committed_offsets(group: str, leo: np.ndarray) -> np.ndarray:
    """Each scan's committed offset of one partition, given its log-end offsets."""
    scans = np.arange(leo.size)
    if group == "payments":  # healthy: a few records behind, never more
        return leo - (scans * 7 + leo // RATE) % 4
    committed = leo - 50
    reading = {
        # Falls behind (reads 30 %) for an hour, catches up, and from scan 185 reads 20 %.
        "orders-etl": [(60, 0.3), (120, 2.5), (185, 0.2)],
        # Reads half of what arrives for the last quarter of an hour.
        "reports": [(225, 0.5)],
    }.get(group)
    if reading:
        share = np.ones(leo.size)
        for since, fraction in reading:
            share[since:] = fraction
        position = int(committed[0])
        for i in range(1, leo.size):
            position = min(position + int(share[i] * RATE), int(committed[i]))
            committed[i] = position
        return committed
    if group == "billing":  # stalls: members present, the offset stops at scan 226
        committed[226:] = committed[225]
    elif group == "audit":  # stops: the group empties at scan 228
        committed[228:] = committed[227]
    elif group == "search-indexer":  # rewinds 30,000 records at scan 232, then re-reads
        back = np.arange(leo.size) >= 232
        committed[back] = np.minimum(committed[back] - 30_000 + 900 * (scans[back] - 232),
                                     committed[back])  # fmt: skip
    return committed


GROUPS = ("payments", "orders-etl", "reports", "billing", "audit", "search-indexer")


def prod_script(end_ms: int) -> list[Any]:
    """The prod cluster's scans, one a minute, the last at ``end_ms``."""
    times = end_ms - (SCANS - 1 - np.arange(SCANS)) * MINUTE
    per_scan: list[list[Sample]] = [[] for _ in range(SCANS)]
    states: list[dict[str, str]] = [{} for _ in range(SCANS)]
    for g, group in enumerate(GROUPS):
        for partition in (0, 1):
            leo = 5_000_000 * (g + 1) + partition * 1000 + RATE * np.arange(SCANS)
            committed = committed_offsets(group, leo)
            for i in range(SCANS):
                empty = group == "audit" and i >= 228
                per_scan[i].append(Sample(
                    ts=int(times[i]), cluster="prod", group=group, topic=f"{group}-events",
                    partition=partition, committed_offset=int(committed[i]),
                    log_end_offset=int(leo[i]), log_start_offset=0,
                    group_state="Empty" if empty else "Stable", members=0 if empty else 2,
                    member_hash=0 if empty else 4242,
                ))  # fmt: skip
                states[i][group] = "Empty" if empty else "Stable"
    return [scan_result(per_scan[i], "prod", int(times[i]), states[i]) for i in range(SCANS)]


@dataclass
class Service:
    url: str
    coordinator: Coordinator
    notifier: Notifier | None
    receiver: HttpReceiver
    shots: Path


def service_config(data_dir: Path, clusters: list[str]) -> Any:
    return parse_service_config(
        {"clusters": [{"name": name, "bootstrap_servers": "127.0.0.1:1", "scan_interval": 60,
                       "down_after_failures": 2} for name in clusters],
         "data_dir": str(data_dir), "history": {"enabled": True, "roll_interval": 3600}},
        "test",
    )  # fmt: skip


def notify_config(receiver: HttpReceiver) -> Any:
    return parse_notify(
        {
            "receivers": {"oncall": [
                {"slack_webhook": {"url": receiver.url_for("/services/T0/B0/page"),
                                   "rate": "off"}},
                {"webhook": {"url": receiver.url_for("/hook")}},
                {"pagerduty": {"routing_key": "R0UT1NGKEY", "url": receiver.url_for("/pd")}},
            ]},
            "route": {"receiver": "oncall", "group_by": ["cluster", "group"], "group_wait": 0,
                      "group_interval": 0},
            "delivery": {"retry_initial": "2s", "retry_max": "5s", "stop_timeout": "1s"},
        },
        env={},
    )  # fmt: skip


async def start_service(
    tmp_path: Path, receiver: HttpReceiver, token: str | None, clusters: tuple[str, ...]
) -> AsyncIterator[Service]:
    """``prod`` (four hours) and ``staging`` (never answered) through the real coordinator,
    history writer and notifier; the API on a loopback port."""
    now = int(time.time() * 1000)
    receiver.reply("/hook", 503, text="upstream unavailable")
    receiver.reply(
        "/pd",
        400,
        json_body={
            "status": "invalid event",
            "message": "Event object is invalid",
            "errors": ["'routing_key' is invalid"],
        },
    )
    data_dir = tmp_path / "data"
    notifier = Notifier(notify_config(receiver), data_dir / "notify.sqlite")
    await notifier.start()
    scripts = {"prod": prod_script(now), "staging": [ScanError(DOWN_REASON)] * 10}
    coordinator = Coordinator(
        service_config(data_dir, list(clusters)), load_rules(ROOT / "rules.yaml"), data_dir,
        notifier, collector_factory=lambda cluster: ScriptedCollector(scripts[cluster.name]),
    )  # fmt: skip
    for name, state in coordinator.clusters.items():
        state.collector = ScriptedCollector(scripts[name])
    coordinator.history = HistoryWriter(data_dir / "history", roll_interval_s=3600)
    for i in range(SCANS):
        if "prod" in clusters:
            await drive(coordinator, 1, "prod")
        if "staging" in clusters and i % 30 == 0:
            await drive(coordinator, 1, "staging")
        if i == 200:  # the first 200 scans go to Parquet files, the rest stay in the journal
            await asyncio.to_thread(coordinator.history.flush)
        await asyncio.sleep(0)  # let the notifier plan and send as it would between scans
    server = ApiServer(create_app(coordinator, notifier, token), "127.0.0.1", 0)
    await server.start()
    shots = tmp_path / "screenshots"
    shots.mkdir()
    try:
        yield Service(f"http://127.0.0.1:{server.port}", coordinator, notifier, receiver, shots)
    finally:
        await server.stop()
        await notifier.stop()
        await asyncio.to_thread(coordinator.history.close)


@pytest.fixture
async def prod(tmp_path: Path, http: HttpReceiver) -> AsyncIterator[Service]:
    async for service in start_service(tmp_path, http, None, ("prod", "staging")):
        yield service


@pytest.fixture
async def prod_with_token(tmp_path: Path, http: HttpReceiver) -> AsyncIterator[Service]:
    async for service in start_service(tmp_path, http, TOKEN, ("prod",)):
        yield service


@pytest.fixture
async def browser() -> AsyncIterator[Any]:
    async with playwright_api.async_playwright() as p:
        launched = await p.chromium.launch(executable_path=chromium(), args=CHROMIUM_ARGS)
        try:
            yield launched
        finally:
            await launched.close()


async def open_page(browser: Any, url: str, width: int = 1500, height: int = 1000) -> Any:
    page = await browser.new_page(viewport={"width": width, "height": height})
    page.set_default_timeout(15_000)
    await page.goto(url)
    return page


async def screenshot(page: Any, service: Service, name: str) -> Path:
    path = service.shots / f"{name}.png"
    await page.screenshot(path=str(path), full_page=True)
    print(f"screenshot: {path}")
    return path


# ---------------------------------------------------------------------------------------------
# The groups page


async def test_the_page_leads_with_a_down_cluster_and_names_each_fault(prod, browser):
    page = await open_page(browser, prod.url + "/")
    banner = page.locator('.banner.down[data-cluster="staging"]')
    await banner.wait_for()
    text = await banner.inner_text()
    assert "Cluster staging is DOWN" in text and DOWN_REASON in text
    assert "never been scanned" in text
    # The most prominent thing: above the table, in the first screenful.
    table_top = (await page.locator("#groups").bounding_box())["y"]
    assert (await banner.bounding_box())["y"] < table_top
    await page.locator('tr[data-group="payments"]').wait_for()
    rows = page.locator("#groups tbody tr")
    words = {await r.get_attribute("data-group"): await r.get_attribute("data-word")
             for r in await rows.all()}  # fmt: skip
    assert words == {"billing": "STALL", "audit": "STOP", "search-indexer": "REWIND",
                     "orders-etl": "ERR", "reports": "WARN", "payments": "OK"}  # fmt: skip
    # Worst first: the named faults, then the other ERR, WARN, OK.
    order = [await r.get_attribute("data-group") for r in await rows.all()]
    assert set(order[:3]) == {"billing", "audit", "search-indexer"}
    assert order[3:] == ["orders-etl", "reports", "payments"]
    billing = page.locator('tr[data-group="billing"]')
    assert "members present but offset" in await billing.locator("td.why").inner_text()
    assert "burrow" not in (await page.locator("#groups").inner_text()).lower()
    # Each sparkline says the range it is drawn over, and the trend is spelled out.
    spark = page.locator('tr[data-group="orders-etl"] .spark-range')
    assert re.fullmatch(r"\d+(\.\d)? k–\d+(\.\d)? k", await spark.inner_text())
    assert await page.locator('tr[data-group="orders-etl"] [data-trend]').get_attribute(
        "data-trend") == "rising"  # fmt: skip
    assert await page.locator('tr[data-group="payments"] [data-trend]').get_attribute(
        "data-trend") == "steady"  # fmt: skip
    # The incident chip is a link with its start, its age and what its notifications did.
    chip = billing.locator("a.chip.incident")
    assert (await chip.get_attribute("href")).startswith("/incidents/")
    await chip.locator('[data-delivery="failed"]').wait_for()
    chip_text = await chip.inner_text()
    assert re.search(r"since \d\d:\d\d:\d\d UTC · \d+ min", chip_text), chip_text
    assert "failed" in chip_text  # PagerDuty refused it (the worst channel shows)
    assert "UTC" in await page.locator("#updated").inner_text()
    await screenshot(page, prod, "groups")


async def test_a_group_with_an_open_incident_shows_its_status_or_says_why_not(prod, browser):
    """Every row with an open incident shows the incident's status (what the pager said); where
    the evaluation says otherwise (payments: evaluated OK while an incident says ERR), the row
    shows the evaluation's beside it and why, never OK alone."""
    payments = prod.coordinator.clusters["prod"].evaluation.result("prod", "payments")
    at = int(time.time() * 1000)
    prod.notifier.handle([Transition("prod", "payments", GroupStatus.OK, GroupStatus.ERR, at,
                                     payments)])  # fmt: skip
    page = await open_page(browser, prod.url + "/")
    row = page.locator('tr[data-group="payments"]')
    await row.locator("a.chip.incident").wait_for()
    assert await row.get_attribute("data-status") == "ERR"
    status = row.locator("td.status")
    assert await status.locator("[data-evaluated]").get_attribute("data-evaluated") == "OK"
    assert await status.locator(".status-reason").get_attribute("data-reason") == "earlier_scan"
    assert "evaluated OK at an earlier scan" in await status.inner_text()
    await screenshot(page, prod, "groups-status-reason")
    for each in await page.locator("#groups tbody tr").all():
        chip = each.locator("a.chip.incident")
        if not await chip.count():
            continue
        incident_status = (await chip.get_attribute("class")).split()[-1]
        shown = await each.get_attribute("data-status")
        reason = each.locator(".status-reason")
        assert shown == incident_status or await reason.count(), await each.inner_text()
        assert shown != "OK", await each.inner_text()


async def test_a_cluster_that_never_answered_is_not_waiting_for_its_first_scan(
    tmp_path, http, browser
):
    async for service in start_service(tmp_path, http, None, ("staging",)):
        page = await open_page(browser, service.url + "/", height=600)
        banner = page.locator(".banner.down")
        await banner.wait_for()
        assert DOWN_REASON in await banner.inner_text()
        empty = page.locator("#empty")
        await empty.wait_for()
        assert await empty.inner_text() == "No groups to show: every cluster is down (see above)."
        assert "1 cluster down" in await page.locator("#summary").inner_text()
        await screenshot(page, service, "only-a-down-cluster")


# ---------------------------------------------------------------------------------------------
# One group: its last hours


async def test_a_group_shows_its_last_hours_with_thresholds_and_incidents(prod, browser):
    page = await open_page(browser, prod.url + "/")
    await page.get_by_role("link", name="orders-etl", exact=True).click()
    await page.wait_for_url("**/groups/prod/orders-etl")
    seconds = page.locator('svg.chart[data-metric="lag_seconds"]')
    await seconds.wait_for()
    threshold = seconds.locator('line.threshold[data-rule="lag-seconds-critical"]')
    assert await threshold.count() == 2  # fires above 30 min, clears below 20 min
    assert "lag-seconds-critical 30 min" in await seconds.text_content()
    # Both incidents shaded: the one that recovered hours ago and the one still open.
    shaded = seconds.locator("rect.incident")
    assert await shaded.count() == 2
    assert "incident ERR (open)" in await seconds.text_content()
    # The line runs over the four hours of history, and its axis says which zone it is in.
    points = await seconds.locator("polyline.line").first.get_attribute("points")
    assert len(points.split()) > 200
    assert "UTC" in await seconds.locator("text.zone").text_content()
    assert await page.locator('svg.chart[data-metric="lag"] polyline.line').count() >= 1
    listed = page.locator("#group-incidents li")
    assert await listed.count() == 2
    assert "still open" in await listed.first.inner_text()
    assert "recovered" in await listed.nth(1).inner_text()
    # Evidence times carry their zone, and "complete" says what it means.
    await page.locator("#findings .finding").first.wait_for()
    evidence = await page.locator("#findings").inner_text()
    assert re.search(r"timestamps\s+(\d\d:\d\d:\d\d\s+){10}\(UTC\)", evidence), evidence
    assert (await page.locator("#findings .finding").first.get_attribute("data-rule")) == (
        "lag-seconds-critical"
    )  # worst first
    cards = await page.locator("#overview").inner_text()
    assert "share of partitions whose last 10 scans are unbroken" in cards
    assert "Burrow's figure" in cards
    await screenshot(page, prod, "group-orders-etl")
    # A shorter range redraws the chart from the history.
    await page.select_option("#hours", "1")
    await page.wait_for_function(
        "document.querySelector('#charts p.muted.small')?.textContent.startsWith('60 scans')"
    )


async def test_the_history_endpoint_reads_parquet_and_the_journal_bounded(prod):
    import httpx

    async with httpx.AsyncClient(base_url=prod.url) as client:
        body = (await client.get("/api/groups/prod/orders-etl/history?hours=6")).json()
        fitted = (await client.get("/api/groups/prod/orders-etl/history")).json()
        too_far = await client.get("/api/groups/prod/orders-etl/history?hours=100")
        unknown = await client.get("/api/groups/prod/nope/history")
        openapi = (await client.get("/openapi.json")).json()
    # 200 scans from Parquet files and the last 40 from the roll's journal: all 240, once each.
    assert body["scans"] == SCANS and len(body["points"]) == SCANS
    ts = [p["ts"] for p in body["points"]]
    assert ts == sorted(ts) and len(set(ts)) == SCANS
    peak = max(p["max_lag_seconds"] or 0 for p in body["points"])
    assert 40 * 60 < peak < 46 * 60  # 44 minutes behind by now
    assert too_far.status_code == 422 and unknown.status_code == 404
    # Without hours: the span the history covers (four hours here), not six.
    first = fitted["points"][0]["ts"]
    assert fitted["scans"] == SCANS and body["start"] < fitted["start"] < first
    assert first - fitted["start"] <= (fitted["end"] - first) / 30 + 1
    assert 4 < fitted["hours"] < 4.2
    assert "/api/groups/{cluster}/{group}/history" in openapi["paths"]
    assert "/api/incidents/{incident_id}" in openapi["paths"]


# ---------------------------------------------------------------------------------------------
# Incidents: what each channel was sent, and whether it arrived


async def test_an_incident_shows_what_each_channel_was_sent_and_whether_it_arrived(prod, browser):
    page = await open_page(browser, prod.url + "/groups/prod/billing")
    chip = page.locator('[data-card="incident"] a.chip.incident')
    await chip.click()
    await page.wait_for_url("**/incidents/*")
    # Slack took it, the webhook keeps answering 503 (retried), PagerDuty refused it with 400;
    # the page refreshes itself until the outcomes are in.
    for channel, state in (("slack_webhook", "delivered"), ("pagerduty", "failed")):
        await page.locator(f'#channels [data-channel="oncall/{channel}"][data-state="{state}"]'
                           ).wait_for()  # fmt: skip
    channels = page.locator("#channels [data-channel]")
    states = {await c.get_attribute("data-channel"): await c.get_attribute("data-state")
              for c in await channels.all()}  # fmt: skip
    assert states == {"oncall/slack_webhook": "delivered", "oncall/webhook": "pending",
                      "oncall/pagerduty": "failed"}  # fmt: skip
    failed = await page.locator('#channels [data-channel="oncall/pagerduty"]').inner_text()
    assert "routing_key' is invalid" in failed
    pending = await page.locator('#deliveries tr[data-channel="oncall/webhook"]').inner_text()
    assert "HTTP 503" in pending and "next try" in pending
    timeline = await page.locator("#timeline").inner_text()
    assert "opened for prod/billing" in timeline and "notified as opened (ERR)" in timeline
    assert "members present but offset" in await page.locator("#findings").inner_text()
    await screenshot(page, prod, "incident-billing")

    await page.get_by_role("link", name="Incidents", exact=True).click()
    await page.wait_for_url("**/incidents")
    rows = page.locator("#incidents tbody tr")
    await rows.first.wait_for()
    text = await page.locator("#incidents").inner_text()
    assert "staging (cluster down)" in text and "recovered" in text
    # Open ones first, the cluster that is down first of all.
    assert "staging (cluster down)" in await rows.first.inner_text()
    closed = page.locator("#incidents tbody tr.closed")
    assert await closed.count() == 1
    assert "was ERR" in await closed.inner_text()
    await screenshot(page, prod, "incidents")


# ---------------------------------------------------------------------------------------------
# Silences from the page


async def silence_from_the_group_page(page: Any, service: Service, group: str) -> None:
    await page.goto(f"{service.url}/groups/prod/{group}")
    await page.get_by_role("link", name="Silence this group…").click()
    await page.wait_for_url("**/silences?*")
    matchers = await page.locator("#matchers").input_value()
    assert matchers == f'cluster="prod"\ngroup="{group}"'
    await page.select_option("select[name=duration]", "4h")
    await page.fill("input[name=author]", "alice")
    await page.fill("input[name=comment]", "deploying the fix for the stuck consumer")
    await page.get_by_role("button", name="Create silence").click()


async def group_marks(page: Any, service: Service, group: str) -> str:
    await page.goto(service.url + "/")
    row = page.locator(f'tr[data-group="{group}"]')
    await row.wait_for()
    return await row.locator("td.marks").inner_text()


async def test_a_silence_is_created_and_expired_from_the_page(prod, browser):
    page = await open_page(browser, prod.url + "/")
    await silence_from_the_group_page(page, prod, "billing")
    message = page.locator("#form-message.ok")
    await message.wait_for()
    assert "Silence created" in await message.inner_text()
    assert not await page.locator("#token-row").is_visible()  # no token configured, none asked
    row = page.locator("#silences tr.silence.active")
    await row.wait_for()
    assert "alice" in await row.inner_text()
    await screenshot(page, prod, "silences")

    marks = await group_marks(page, prod, "billing")
    # A 4 h silence made in the evening ends tomorrow: the page then names the day too.
    assert re.search(r"silenced until ([A-Z][a-z]{2} \d{1,2} )?\d\d:\d\d:\d\d UTC", marks), marks
    assert "silenced" not in await group_marks(page, prod, "audit")
    await screenshot(page, prod, "groups-with-a-silence")

    await page.get_by_role("link", name="Silences", exact=True).click()
    await page.get_by_role("button", name="Expire now").click()
    await page.locator("#form-message.ok").wait_for()
    assert "expired" in await page.locator("#form-message").inner_text()
    await page.locator("#none").wait_for()
    expired = page.locator("#silences tr.silence.expired")  # kept, as Alertmanager keeps it
    await expired.wait_for()
    assert "alice" in await expired.inner_text() and "Expire now" not in await expired.inner_text()
    assert "silenced" not in await group_marks(page, prod, "billing")


async def test_with_a_token_the_page_asks_for_it_and_sends_it(prod_with_token, browser):
    service = prod_with_token
    page = await open_page(browser, service.url + "/")
    await silence_from_the_group_page(page, service, "audit")
    error = page.locator("#form-message.error")
    await error.wait_for()
    assert "requires the API token" in await error.inner_text()
    assert await page.locator("#token-row").is_visible()
    await page.fill("input[name=token]", "not the token")
    await page.get_by_role("button", name="Create silence").click()
    await page.wait_for_function("document.querySelector('#form-message').textContent.includes("
                                 "'requires the API token')")  # fmt: skip
    await page.fill("input[name=token]", TOKEN)
    await page.get_by_role("button", name="Create silence").click()
    await page.locator("#form-message.ok").wait_for()
    await page.locator("#silences tr.silence.active").wait_for()
    await screenshot(page, service, "silence-with-token")
    assert "silenced until" in await group_marks(page, service, "audit")
    # The token is kept for the tab: expiring needs no second prompt.
    await page.get_by_role("link", name="Silences", exact=True).click()
    await page.get_by_role("button", name="Expire now").click()
    await page.locator("#form-message.ok").wait_for()
    assert "silenced" not in await group_marks(page, service, "audit")
    requests = [r for r in service.receiver.requests if "authorization" in r.headers]
    assert TOKEN not in str(requests)  # the token goes to the API only, never to a receiver


# ---------------------------------------------------------------------------------------------
# Stale data (the sample history, looked at ten minutes after its last scan)


async def test_stale_data_is_marked_with_its_age_on_both_pages(tmp_path, browser):
    coord, script = replayed_service(tmp_path, ROOT / "examples" / "sample-history.csv",
                                     load_rules(ROOT / "rules.yaml"))  # fmt: skip
    await drive(coord, len(script), "demo")
    now = coord.clusters["demo"].metrics.last_success_ms + 600_000
    server = ApiServer(create_app(coord, clock=lambda: now), "127.0.0.1", 0)
    await server.start()
    try:
        url = f"http://127.0.0.1:{server.port}"
        page = await open_page(browser, url + "/")
        banner = page.locator('.banner.stale[data-cluster="demo"]')
        await banner.wait_for()
        assert "stale — demo: data 10 min old" in await banner.inner_text()
        await page.locator("#groups tbody tr").first.wait_for()
        for row in await page.locator("#groups tbody tr").all():
            assert "stale: 10 min old" in await row.inner_text()
        await page.goto(url + "/groups/demo/stalled")
        await page.locator("#overview .card").first.wait_for()
        assert "10 min — stale" in await page.locator("#overview").inner_text()
        assert "stale" in (await page.locator("#overview").get_attribute("class"))
        assert "no history" in (await page.locator("#charts").inner_text()).lower()
    finally:
        await server.stop()
