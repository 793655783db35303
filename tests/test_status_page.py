"""The status page in a real headless Chromium: the table lists every group in its colour, and
the group page shows the evidence. Screenshots are kept in artifacts/ as test artifacts."""

from __future__ import annotations

import asyncio
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from notifier.api import ApiServer, create_app
from notifier.config import load_rules

from .scripted import drive, replayed_service

ROOT = Path(__file__).resolve().parents[1]
ARTIFACTS = ROOT / "artifacts"
FLAGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
    "--disable-component-update", "--no-first-run", "--disable-sync", "--disable-quic",
    "--hide-scrollbars",
]  # fmt: skip


def chromium() -> str:
    """Debian's Chromium, installed on first use where the machine allows it."""
    found = shutil.which("chromium") or shutil.which("chromium-browser")
    if found:
        return found
    if os.geteuid() == 0 and shutil.which("apt-get"):
        env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
        install = ["apt-get", "install", "-y", "-qq", "--no-install-recommends", "chromium"]
        for command in (["apt-get", "update", "-qq"], install):
            subprocess.run(command, env=env, capture_output=True, timeout=900, check=False)
        found = shutil.which("chromium")
        if found:
            return found
    pytest.skip("Chromium is not installed and could not be installed (needs root and apt-get)")


async def browse(binary: str, url: str, profile: Path, *extra: str) -> str:
    process = await asyncio.create_subprocess_exec(
        binary, *FLAGS, f"--user-data-dir={profile}", "--virtual-time-budget=5000", *extra, url,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.DEVNULL,
    )  # fmt: skip
    out, _ = await asyncio.wait_for(process.communicate(), timeout=120)
    return out.decode()


async def serve(tmp_path: Path, seconds_after_last_scan: float):
    """The sample history replayed, its status page served as seen that long after its last
    scan."""
    coord, script = replayed_service(tmp_path, ROOT / "examples" / "sample-history.csv",
                                     load_rules(ROOT / "rules.yaml"))  # fmt: skip
    await drive(coord, len(script), "demo")
    now = coord.clusters["demo"].metrics.last_success_ms + int(seconds_after_last_scan * 1000)
    server = ApiServer(create_app(coord, clock=lambda: now), "127.0.0.1", 0)
    await server.start()
    return server


@pytest.fixture
async def status_page(tmp_path):
    server = await serve(tmp_path, 2)
    yield f"http://127.0.0.1:{server.port}"
    await server.stop()


@pytest.fixture
async def stale_status_page(tmp_path):
    server = await serve(tmp_path, 600)  # ten minutes without a successful scan
    yield f"http://127.0.0.1:{server.port}"
    await server.stop()


async def test_the_table_shows_every_group_in_its_colour(status_page, tmp_path):
    binary = chromium()
    dom = await browse(binary, status_page + "/", tmp_path / "profile", "--dump-dom")
    rows = dict(re.findall(r'<tr class="status-\w+" data-group="([^"]+)" data-status="(\w+)"', dom))
    assert rows == {
        "healthy": "OK", "lagging": "WARN", "stalled": "ERR", "stopped": "ERR",
        "rebalancing": "ERR", "rewound": "ERR", "retention": "ERR",
    }  # fmt: skip
    assert 'class="badge ERR"' in dom and 'class="badge WARN"' in dom and 'class="badge OK"' in dom
    assert "<polyline" in dom  # the lag sparklines were drawn
    ARTIFACTS.mkdir(exist_ok=True)
    shot = ARTIFACTS / "status-page.png"
    await browse(binary, status_page + "/", tmp_path / "profile2", f"--screenshot={shot}",
                 "--window-size=1400,700")  # fmt: skip
    assert shot.exists() and shot.stat().st_size > 10_000


async def test_the_group_page_shows_the_evidence(status_page, tmp_path):
    binary = chromium()
    dom = await browse(binary, status_page + "/groups/demo/stalled", tmp_path / "profile",
                       "--dump-dom")  # fmt: skip
    assert 'data-rule="stalled-or-stopped"' in dom
    assert "members present but offset" in dom
    assert "evidence" in dom and "usual_wait_s" in dom and '<table class="evidence">' in dom
    assert 'href="/"' in dom  # the link back
    ARTIFACTS.mkdir(exist_ok=True)
    shot = ARTIFACTS / "group-page.png"
    await browse(binary, status_page + "/groups/demo/stalled", tmp_path / "profile2",
                 f"--screenshot={shot}", "--window-size=1400,900")  # fmt: skip
    assert shot.exists()


async def test_stale_data_is_marked_with_its_age_on_both_pages(stale_status_page, tmp_path):
    binary = chromium()
    index = await browse(binary, stale_status_page + "/", tmp_path / "profile", "--dump-dom")
    assert re.search(r'<span id="clusters" class="stale">stale — demo: data 10 min old', index)
    rows = re.findall(r'<tr class="status-\w+" data-group="[^"]+".*?</tr>', index)
    assert rows and all('class="mark stale">stale: 10 min old' in row for row in rows)
    group = await browse(binary, stale_status_page + "/groups/demo/stalled",
                         tmp_path / "profile2", "--dump-dom")  # fmt: skip
    assert "data age" in group and "10 min — stale" in group
    assert '<section id="overview" class="cards stale">' in group


async def test_fresh_data_carries_no_stale_mark(status_page, tmp_path):
    dom = await browse(chromium(), status_page + "/", tmp_path / "profile", "--dump-dom")
    assert "stale" not in dom.replace("mark.stale", "")
