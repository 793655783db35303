"""Benchmark: the fault suite — what reaches the receiver when things break, as one table.

Each row is one fault against the real service, with a real HTTP receiver and consumer groups
on the embedded Kafka-protocol broker, counting what a user would: notifications **decided**
(committed to the outbox, or received), **delivered** (received at least once), **lost**
(decided and never received, or an expected open/resolve that never came), **duplicated**
with the same dedup key (one notification received more than once: harmless downstream) and
with another one (the same incident event in two notifications, or a group opened again while
its incident was open: that pages twice).

- *no fault* (the baseline, same run): groups go ERR, then OK; every open and resolve arrives.
- *kill -9 soak*: ``notifier run`` killed with SIGKILL at chosen moments (start-up, right after
  the outbox write, around a checkpoint, a delivery in flight, the next scan, at random) while
  groups move, restarted each time (the machinery of ``tests/test_faults.py``).
- *disk full*: the data dir is a small tmpfs, filled up before the groups go ERR and freed after
  they are OK again (mounting needs root: the row says "skipped" otherwise).
- *data dir removed*: the data dir is deleted while the groups go ERR and back.
- *hanging receiver*: the receiver's first requests hang past the webhook's timeout.
- *damaged header*: ``notify.sqlite`` holding pending notifications has its 100-byte header
  garbled before the start (the rows are read back through a rebuilt header).

    python benchmarks/faults.py          # 6 kills, 4 groups per row (about a minute and a half)
    python benchmarks/faults.py --full   # 22 kills, 20 groups per row

Target: 0 lost in every row (and no duplicate with another dedup key). Ends with one JSON line:
name, figures, baseline, targets, met.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import contextlib
import dataclasses
import json
import logging
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from notifier.config import parse_service_config  # noqa: E402
from notifier.demo import HttpReceiver  # noqa: E402
from notifier.embedded import EmbeddedBroker  # noqa: E402
from notifier.notify import Notifier, NotifyStore, OutboxEntry  # noqa: E402
from notifier.service import Coordinator  # noqa: E402
from notifier.types import Notification  # noqa: E402
from tests.notify_helpers import config as notify_config  # noqa: E402
from tests.notify_helpers import full_notification, webhook  # noqa: E402
from tests.test_collect import _produce  # noqa: E402
from tests.test_faults import (  # noqa: E402
    CLUSTER,
    KILL_MOMENTS,
    RECORDS,
    Groups,
    _fill,
    _lag_rules,
    _outbox_rows,
    kill_soak,
)


@dataclass
class Row:
    scenario: str
    decided: int = 0
    delivered: int = 0
    lost: int = 0
    duplicated_same_key: int = 0
    duplicated_other_key: int = 0
    requests: int = 0
    seconds: float = 0.0
    note: str = ""
    skipped: str | None = None


def _count(
    scenario: str,
    received: list[dict[str, Any]],
    outbox: list[dict[str, Any]],
    expected: set[tuple[str, str]] | None = None,
    missing_state: int = 0,
) -> Row:
    """The row for what the receiver got (``received``), what the outbox holds, and the
    (group, event) pairs that had to arrive."""
    copies = collections.Counter(body["notification_id"] for body in received)
    committed = {row["notification_id"] for row in outbox}
    decided = committed | set(copies)
    not_sent = [row for row in outbox if row["state"] != "sent"]
    lost = len(committed - set(copies)) + len(not_sent) + missing_state
    events: dict[tuple[str, str], set[str]] = collections.defaultdict(set)
    seen_pairs: set[tuple[str, str]] = set()
    open_incident: dict[str, str] = {}
    reopened = 0
    first_copies = {}
    for body in received:
        first_copies.setdefault(body["notification_id"], body)
    for notification_id, body in first_copies.items():
        for alert in body["alerts"]:
            incident, group, event = (
                alert["incident"]["id"],
                alert["incident"]["group"],
                alert["event"],
            )
            seen_pairs.add((group, event))
            if event != "repeat":
                events[(incident, event)].add(notification_id)
            if event == "open":
                if group in open_incident and open_incident[group] != incident:
                    reopened += 1
                open_incident[group] = incident
            elif event == "resolve":
                open_incident.pop(group, None)
    if expected is not None:
        lost += len(expected - seen_pairs)
    return Row(
        scenario=scenario,
        decided=len(decided),
        delivered=len(decided & set(copies)),
        lost=lost,
        duplicated_same_key=sum(n - 1 for n in copies.values()),
        duplicated_other_key=sum(len(ids) - 1 for ids in events.values()) + reopened,
        requests=len(received),
    )


# ---- one in-process service: groups go ERR and back to OK under a fault


@dataclass
class Fault:
    name: str
    begin: Callable[[Path, HttpReceiver, str], Callable[[], None]]
    """Break things (the data dir, on a disk of its own; the receiver and the path it is
    sent to); returns the repair."""
    needs_mount: bool = False
    webhook_timeout: float = 5.0


def _no_fault(_data: Path, _http: HttpReceiver, _path: str) -> Callable[[], None]:
    return lambda: None


def _disk_full(data: Path, _http: HttpReceiver, _path: str) -> Callable[[], None]:
    return _fill(data.parent).unlink


def _removed(data: Path, _http: HttpReceiver, _path: str) -> Callable[[], None]:
    shutil.rmtree(data)
    return lambda: None


def _hanging(_data: Path, http: HttpReceiver, path: str) -> Callable[[], None]:
    http.reply(path, hang=3.0, times=3)
    return lambda: None


FAULTS = [
    Fault("no fault", _no_fault),
    Fault("disk full", _disk_full, needs_mount=True),
    Fault("data dir removed", _removed),
    Fault("hanging receiver", _hanging, webhook_timeout=0.5),
]


def _mount(where: Path) -> str | None:
    where.mkdir(parents=True, exist_ok=True)
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=8m", "tmpfs", str(where)],
                          capture_output=True, text=True, check=False)  # fmt: skip
    return None if done.returncode == 0 else f"cannot mount a tmpfs ({done.stderr.strip()})"


async def _until(condition: Callable[[], bool], timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            return False
        await asyncio.sleep(0.05)
    return True


async def _service_row(
    fault: Fault, bootstrap: str, http: HttpReceiver, directory: Path, n_groups: int
) -> Row:
    started = time.monotonic()
    disk = directory / "disk"
    if fault.needs_mount:
        problem = _mount(disk)
        if problem is not None:
            return Row(fault.name, skipped=problem)
    else:
        disk.mkdir(parents=True)
    try:
        return await _service_run(fault, bootstrap, http, disk / "data", n_groups, started)
    finally:
        if disk.is_mount():
            subprocess.run(["umount", "-l", str(disk)], check=False)


async def _service_run(
    fault: Fault, bootstrap: str, http: HttpReceiver, data: Path, n_groups: int, started: float
) -> Row:
    prefix = f"faults-{uuid.uuid4().hex[:6]}"
    topic = f"{prefix}-t"
    names = [f"{prefix}-g{i}" for i in range(n_groups)]
    await _produce(bootstrap, topic, [RECORDS])
    config = parse_service_config(
        {"clusters": [{"name": CLUSTER, "bootstrap_servers": bootstrap, "scan_interval": 0.5,
                       "group_allow": [f"^{prefix}"]}],
         "data_dir": str(data), "checkpoint_interval": 1, "history": {"enabled": False}},
        "faults",
    )  # fmt: skip
    path = f"/hook/{prefix}"
    notify = notify_config(
        webhook(http.url_for(path), timeout=fault.webhook_timeout),
        route={"group_by": ["cluster", "group"]},  # one notification per group and event
    )
    notifier = Notifier(notify, data / "notify.sqlite")
    coordinator = Coordinator(config, _lag_rules(), data, notifier)
    groups = Groups(bootstrap, topic, names)
    note = ""
    await notifier.start()
    await coordinator.start()
    try:
        await groups.start()
        state = coordinator.clusters[CLUSTER]
        await _until(lambda: state.metrics.scans >= 2, 20)
        repair = fault.begin(data, http, path)

        def events(event: str) -> int:
            """Groups whose ``event`` arrived."""
            alerts = (alert for request in http.to(path) for alert in request.json["alerts"])
            return len({alert["incident"]["group"] for alert in alerts if alert["event"] == event})

        for name in names:
            await groups.set(name, "ERR")
        await _until(lambda: events("open") >= n_groups, 30)
        if notifier.store.failing:
            note = f"store refused writes: {notifier.store.health.error}"
        for name in names:
            await groups.set(name, "OK")
        await _until(lambda: events("resolve") >= n_groups, 30)
        repair()
        await _until(lambda: not notifier.store.failing, 15)
        await notifier.wait_delivered(15)
    finally:
        await groups.stop()
        await coordinator.stop()
        await notifier.stop()
    received = [r.json for r in http.to(path)]
    expected = {(name, event) for name in names for event in ("open", "resolve")}
    row = _count(fault.name, received, _outbox_rows(data / "notify.sqlite"), expected)
    row.seconds, row.note = round(time.monotonic() - started, 1), note
    return row


# ---- the kill -9 soak and the damaged header


async def _kill_row(bootstrap: str, http: HttpReceiver, directory: Path, full: bool) -> Row:
    started = time.monotonic()
    moments = None if full else list(KILL_MOMENTS)
    soak = await kill_soak(bootstrap, http, directory, seed=15, moments=moments)
    left_open = {name for name, status in soak.final.items() if status != "OK"}
    wrong = len(left_open ^ soak.open_now)  # an incident that should be open (or closed)
    row = _count("kill -9 soak", soak.received, soak.outbox, missing_state=wrong)
    row.seconds = round(time.monotonic() - started, 1)
    row.note = f"{sum(soak.kills.values())} kills, {soak.moves} group moves"
    return row


def _pending(i: int) -> Notification:
    """A notification of an incident of its own (as pending rows of as many groups are)."""
    sample = full_notification()
    alerts = [
        dataclasses.replace(a, incident=dataclasses.replace(a.incident, id=f"incident-{i:04d}"))
        for a in sample.alerts
    ]
    return dataclasses.replace(sample, id=f"pending-{i:04d}", alerts=alerts)


async def _damaged_header_row(http: HttpReceiver, directory: Path, n: int) -> Row:
    started = time.monotonic()
    db = directory / "notify.sqlite"
    store = NotifyStore(db)
    path = f"/hook/damaged-{uuid.uuid4().hex[:6]}"
    notifications = [_pending(i) for i in range(n)]
    store.save(outbox=[OutboxEntry(x, "hook/webhook", f"lane-{i}")
                       for i, x in enumerate(notifications)])  # fmt: skip
    store.close()
    with db.open("r+b") as handle:
        handle.write(bytes(range(100)))  # the header, garbled
    notifier = Notifier(notify_config(webhook(http.url_for(path))), db)
    note = "" if notifier.store.salvage is None else f"kept {notifier.store.salvage.pending}"
    async with notifier:
        await _until(lambda: len(http.to(path)) >= n, 20)
    received = [r.json for r in http.to(path)]
    outbox = [{"notification_id": x.id, "state": "sent"} for x in notifications]
    row = _count("damaged header", received, outbox)
    row.seconds, row.note = round(time.monotonic() - started, 1), note
    return row


# ---- the table


def _table(rows: list[Row]) -> str:
    head = ("scenario", "decided", "delivered", "lost", "dup same key", "dup other key",
            "requests", "s", "note")  # fmt: skip
    lines = [head]
    for r in rows:
        if r.skipped:
            lines.append((r.scenario, "-", "-", "-", "-", "-", "-", "-", f"skipped: {r.skipped}"))
            continue
        lines.append((r.scenario, str(r.decided), str(r.delivered), str(r.lost),
                      str(r.duplicated_same_key), str(r.duplicated_other_key), str(r.requests),
                      f"{r.seconds:.1f}", r.note))  # fmt: skip
    widths = [max(len(line[i]) for line in lines) for i in range(len(head) - 1)]
    return "\n".join(
        "  ".join(cell.ljust(w) for cell, w in zip(line[:-1], widths, strict=True))
        + "  "
        + line[-1]
        for line in lines
    )


async def main_async(args: argparse.Namespace) -> dict[str, Any]:
    n_groups = 20 if args.full else 4
    rows: list[Row] = []
    with tempfile.TemporaryDirectory(prefix="faults-") as tmp:
        work = Path(tmp)
        with EmbeddedBroker(log_dir=work / "tansu") as broker:
            async with HttpReceiver() as http:
                for fault in FAULTS:
                    rows.append(await _service_row(
                        fault, broker.bootstrap_servers, http, work / fault.name.replace(" ", "-"),
                        n_groups,
                    ))  # fmt: skip
                    print(_table(rows[-1:]).splitlines()[-1], file=sys.stderr, flush=True)
                (work / "damaged").mkdir()
                rows.append(await _damaged_header_row(http, work / "damaged", 25 * n_groups))
            async with HttpReceiver() as http:  # the soak counts every request it gets
                (work / "kill").mkdir()
                rows.append(await _kill_row(broker.bootstrap_servers, http, work / "kill",
                                            args.full))  # fmt: skip
    print(_table(rows))
    ran = [r for r in rows if not r.skipped]
    baseline = next(r for r in rows if r.scenario == "no fault")
    met = {
        "lost_0_in_every_row": all(r.lost == 0 for r in ran),
        "no_duplicate_with_another_key": all(r.duplicated_other_key == 0 for r in ran),
        "every_row_ran": len(ran) == len(rows),
    }
    return {
        "name": "faults",
        "figures": {
            r.scenario: {k: v for k, v in dataclasses.asdict(r).items() if k != "scenario"}
            for r in rows
        },
        "baseline": {"no fault": dataclasses.asdict(baseline)},
        "targets": {"lost": 0, "duplicated_other_key": 0},
        "met": met,
    }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--full", action="store_true", help="22 kills, 20 groups per row")
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    summary = asyncio.run(main_async(args))
    print(json.dumps(summary))


if __name__ == "__main__":
    with contextlib.suppress(KeyboardInterrupt):
        main()
