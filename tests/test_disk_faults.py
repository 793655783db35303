"""A data dir that refuses writes, on a real file system: while the service runs (a small tmpfs
filled up, the directory removed) nothing already decided is lost and deliveries go on; at
start (read-only, full, a file in the path, a parent that cannot be made) ``notifier run`` says
one line naming the path and exits 2, and ``notifier check`` says the same.

Tests run as root, where permissions stop no write: a full disk is a tmpfs the test mounts and
fills, a read-only one a tmpfs remounted read-only (skipped where mounting is not allowed). A
file system cannot be made read-only under files open for writing (the kernel says "busy"), so
read-only while running is injected at the store's connection (a read-only handle of the same
file: SQLite itself refuses the writes).
"""

from __future__ import annotations

import contextlib
import json
import logging
import shutil
import sqlite3
import subprocess
import sys
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import pytest

from notifier.api import create_app
from notifier.config import parse_service_config
from notifier.demo import HttpReceiver
from notifier.diskfaults import data_dir_problem
from notifier.embedded import EmbeddedBroker
from notifier.notify import Notifier, NotifyStore
from notifier.service import Coordinator, LogSink
from tests.notify_helpers import ERR, OK, eventually, move, now_ms, webhook
from tests.notify_helpers import config as notify_config
from tests.test_collect import _produce
from tests.test_faults import CLUSTER, RECORDS, Groups, _fill, _lag_rules, _now_ms
from tests.waiting import until_true

ROOT = Path(__file__).resolve().parents[1]


def _mount(where: Path, size: str, *options: str) -> None:
    where.mkdir(parents=True, exist_ok=True)
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", ",".join([f"size={size}", *options]), "tmpfs", str(where)],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here ({done.stderr.strip()}): needs root")


@pytest.fixture
def disk(tmp_path: Path) -> Iterator[Path]:
    """A 8 MiB tmpfs of the test's own, unmounted afterwards."""
    where = tmp_path / "disk"
    _mount(where, "8m")
    try:
        yield where
    finally:
        subprocess.run(["umount", "-l", str(where)], check=False)


def _break(kind: str, disk: Path, data: Path) -> Callable[[], None]:
    """Make ``data`` (on ``disk``) refuse writes as ``kind`` says; returns the repair."""
    if kind == "disk full":
        return _fill(disk).unlink
    shutil.rmtree(data)  # "removed": the service makes it again itself
    return lambda: None


RUNNING_FAULTS = {
    "disk full": "database or disk is full",
    "removed": "removed while open",
}


def _state_metric(text: str, family: str, path: Path) -> float:
    prefix = f'{family}{{path="{path}"}} '
    return next(float(line.split()[-1]) for line in text.splitlines() if line.startswith(prefix))


@pytest.mark.broker
@pytest.mark.parametrize("kind", sorted(RUNNING_FAULTS))
async def test_a_data_dir_that_refuses_writes_loses_no_notification(
    kafka_broker: EmbeddedBroker, http: HttpReceiver, disk: Path, tmp_path: Path,
    caplog: pytest.LogCaptureFixture, kind: str,
) -> None:  # fmt: skip
    """A group goes ERR and back to OK while the notification store cannot be written: the
    open and the resolve arrive at once, each exactly once; /readyz and /metrics name the
    store's path and the error meanwhile; once the disk takes writes everything is written
    (both rows sent, the incident closed), and a restart sends nothing again."""
    bootstrap = kafka_broker.bootstrap_servers
    prefix = f"disk-{uuid.uuid4().hex[:6]}"
    topic, group = f"{prefix}-t", f"{prefix}-g"
    await _produce(bootstrap, topic, [RECORDS])
    data = disk / "data"
    db = data / "notify.sqlite"
    config = parse_service_config(
        {"clusters": [{"name": CLUSTER, "bootstrap_servers": bootstrap, "scan_interval": 0.3,
                       "group_allow": [f"^{prefix}"]}],
         "data_dir": str(data), "checkpoint_interval": 0.5, "history": {"enabled": False}},
        "test",
    )  # fmt: skip
    notify = notify_config(webhook(http.url_for("/hook")))
    notifier = Notifier(notify, db)
    coord = Coordinator(config, _lag_rules(), data, notifier)
    app = create_app(coord, notifier, clock=_now_ms)
    api = httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://t")
    groups = Groups(bootstrap, topic, [group])
    caplog.set_level(logging.INFO)
    await notifier.start()
    await coord.start()
    try:
        await groups.start()
        state = coord.clusters[CLUSTER]
        await until_true(lambda: state.metrics.scans >= 2, 20)
        repair = _break(kind, disk, data)

        await groups.set(group, "ERR")
        await until_true(lambda: len(http.to("/hook")) >= 1, 20)
        assert http.to("/hook")[0].json["alerts"][0]["event"] == "open"
        # The open went out although the store could not take it; it is kept in memory.
        assert notifier.store.failing
        (store,) = [s for s in (await api.get("/readyz")).json()["state"] if s["path"] == str(db)]
        assert store["writing"] is False and RUNNING_FAULTS[kind] in store["error"]
        assert store["unwritten"] >= 1
        metrics = (await api.get("/metrics")).text
        assert _state_metric(metrics, "notifier_state_writing", db) == 0
        assert _state_metric(metrics, "notifier_state_unwritten_changes", db) >= 1
        failed = [r for r in caplog.records if getattr(r, "event", "") == "state_write_failed"
                  and getattr(r, "path", "") == str(db)]  # fmt: skip
        assert len(failed) == 1 and failed[0].levelno == logging.ERROR
        assert str(db) in failed[0].getMessage()

        # The group recovers while the disk still refuses: the resolve goes out too.
        await groups.set(group, "OK")
        await until_true(lambda: len(http.to("/hook")) >= 2, 20)
        assert http.to("/hook")[1].json["alerts"][0]["event"] == "resolve"
        assert state.metrics.consecutive_failures == 0  # scanning never stopped

        repair()
        await until_true(lambda: not notifier.store.failing, 15)
        assert [r for r in caplog.records if getattr(r, "event", "") == "state_write_recovered"]
        ready = (await api.get("/readyz")).json()["state"][0]
        assert ready["writing"] is True and ready["unwritten"] == 0
        assert _state_metric((await api.get("/metrics")).text, "notifier_state_writing", db) == 1
    finally:
        await groups.stop()
        await coord.stop()
        await notifier.stop()
        await api.aclose()

    received = [r.json for r in http.to("/hook")]
    assert [b["alerts"][0]["event"] for b in received] == ["open", "resolve"]
    assert len({b["notification_id"] for b in received}) == 2  # exactly once each
    written = sqlite3.connect(db)
    try:
        rows = written.execute("SELECT notification_id, state FROM outbox ORDER BY id").fetchall()
        closed = written.execute("SELECT closed_at IS NOT NULL FROM incidents").fetchall()
    finally:
        written.close()
    assert [(n, s) for n, s in rows] == [(b["notification_id"], "sent") for b in received]
    assert closed == [(1,)]
    # A restart on what was written sends nothing again.
    again = Notifier(notify, db)
    async with again:
        assert await again.wait_delivered(5)
    assert len(http.to("/hook")) == 2


# --------------------------------------------------------------------------------------------
# At start: one line naming the path, exit 2; `check` says the same


def _config(directory: Path, data_dir: Path) -> Path:
    (directory / "rules.yaml").write_text("rules: []\n")
    path = directory / "service.yaml"
    path.write_text(
        "clusters: [{name: c, bootstrap_servers: '127.0.0.1:1'}]\n"
        f"rules: rules.yaml\ndata_dir: {data_dir}\napi: {{enabled: false}}\n"
        "notify: {receivers: {r: {webhook: {url: 'http://127.0.0.1:1/'}}},"
        " route: {receiver: r}}\n"
    )
    return path


def _notifier(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "notifier.cli", *args], cwd=ROOT, capture_output=True,
        text=True, timeout=60, env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"},
    )  # fmt: skip


def _start_fault(kind: str, tmp_path: Path) -> tuple[Path, str]:
    """A data dir that cannot be used as ``kind`` says; (the data dir, what the line says)."""
    if kind == "a regular file in its path":
        (tmp_path / "file").write_text("not a directory")
        return tmp_path / "file" / "data", f"{tmp_path / 'file'} is a regular file"
    if kind == "it is a regular file":
        (tmp_path / "data").write_text("not a directory")
        return tmp_path / "data", "it is a regular file, not a directory"
    disk = tmp_path / "disk"
    if kind == "read-only":
        _mount(disk, "1m", "ro")
        return disk / "data", "Read-only file system"
    if kind == "parent on a read-only disk":
        _mount(disk, "1m", "ro")
        return disk / "missing" / "data", f"cannot be created under {disk}"
    _mount(disk, "1m")
    (disk / "data").mkdir()
    _fill(disk)
    return disk / "data", "No space left on device"


START_FAULTS = (
    "a regular file in its path",
    "it is a regular file",
    "read-only",
    "parent on a read-only disk",
    "full",
)


@pytest.mark.parametrize("kind", START_FAULTS)
def test_a_data_dir_that_cannot_be_used_stops_the_start_with_one_line(
    tmp_path: Path, kind: str
) -> None:
    try:
        data_dir, says = _start_fault(kind, tmp_path)
        config = _config(tmp_path, data_dir)
        run = _notifier("run", "--config", str(config))
        check = _notifier("check", "--config", str(config))
    finally:
        with contextlib.suppress(Exception):
            subprocess.run(["umount", "-l", str(tmp_path / "disk")], check=False)
    assert run.returncode == 2, run.stderr
    (line,) = run.stderr.strip().splitlines()  # one line, no traceback
    assert line.startswith(f"{config}: data_dir {data_dir}: ") and says in line, line
    assert check.returncode == 1
    assert line in check.stderr.splitlines(), check.stderr
    assert f"{config}: OK" not in check.stdout
    assert not list(tmp_path.glob("**/*.corrupt-*"))  # nothing taken for damage


def test_a_missing_parent_is_made_at_start_and_accepted_by_check(tmp_path: Path) -> None:
    data_dir = tmp_path / "missing" / "parent" / "data"
    config = _config(tmp_path, data_dir)
    check = _notifier("check", "--config", str(config))
    assert check.returncode == 0, check.stderr
    assert "data_dir" not in check.stderr and not data_dir.exists()  # check changes nothing
    assert data_dir_problem(data_dir, create=True) is None  # what `run` does first
    assert data_dir.is_dir() and list(data_dir.iterdir()) == []  # the probe is gone


def test_transitions_the_disk_refuses_wait_in_memory_and_are_written_in_order(
    disk: Path,
) -> None:
    """Without receivers the transitions go to a JSON-lines file: a full disk no longer fails
    the scan that handed them over; they are written, in order, once the disk takes them."""
    path = disk / "data" / "transitions.jsonl"
    sink = LogSink(path)
    sink.cluster_down("a", 1, "first")
    filler = _fill(disk)
    sink.cluster_up("a", 2)  # no exception: the scan goes on
    sink.cluster_down("a", 3, "again " * 1000)  # more than the file's last block holds
    assert sink.health.failing and "No space left on device" in (sink.health.error or "")
    assert sink.health.unwritten >= 1
    filler.unlink()
    sink.cluster_up("a", 4)
    assert not sink.health.failing
    at = [json.loads(line)["at"] for line in path.read_text().splitlines()]
    assert at == [1, 2, 3, 4]


async def test_a_store_turned_read_only_keeps_silences_and_outcomes_and_writes_them_in_order(
    http: HttpReceiver, tmp_path: Path
) -> None:
    """A file system cannot be remounted read-only under open files, so the fault is injected
    at the store's connection: it is swapped for a read-only one of the same file, and SQLite
    itself refuses every write ("attempt to write a readonly database"). Notifications go out,
    a silence made meanwhile holds, and all of it is in the file once writes are allowed."""
    db = tmp_path / "notify.sqlite"
    notifier = Notifier(notify_config(webhook(http.url_for("/hook"))), db)
    async with notifier:
        store = notifier.store
        writable = store.db
        store.db = sqlite3.connect(f"file:{db}?mode=ro", uri=True, isolation_level=None)
        notifier.handle([move("orders", OK, ERR, now_ms())])
        await eventually(lambda: len(http.to("/hook")) == 1)
        silence = notifier.add_silence(
            ["group=payments"],
            ends_at=now_ms() + 3_600_000, author="t", comment="while read-only",
        )  # fmt: skip
        notifier.handle([move("orders", ERR, OK, now_ms())])
        await eventually(lambda: len(http.to("/hook")) == 2)
        assert store.failing and "readonly" in (store.health.error or "")
        assert notifier.metrics()["store"]["writing"] is False
        # The incident history (the API's) shows the incident only memory holds so far.
        assert [i.group for i in notifier.incidents(open_only=False)] == ["orders"]

        store.db.close()
        store.db = writable  # writes allowed again
        await eventually(lambda: not store.failing, 5)
    reopened = NotifyStore(db)
    try:
        rows = reopened.outbox_rows()
        assert [r["state"] for r in rows] == ["sent", "sent"]
        assert [r["notification_id"] for r in rows] == [
            r.json["notification_id"] for r in http.to("/hook")
        ]
        assert [s["id"] for s in reopened.load_silences()] == [silence.id]
        assert reopened.incidents(open_only=True) == []
        assert len(reopened.incidents()) == 1
    finally:
        reopened.close()
