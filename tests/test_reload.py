"""Reloading a running `notifier run` without a restart, as an operator does it.

A real service (a subprocess, its API on loopback with a token) scans consumer groups on the
embedded broker and notifies a real loopback HTTP receiver (a webhook and PagerDuty's Events
API). The operator then edits its files and reloads, with `POST /-/reload` and with SIGHUP:

- a second cluster is added and watched at once; the first keeps its state (nothing it had
  already sent is sent again), the receiver's new URL takes the next notifications, and the
  one send that was in flight when the reload came finishes on the old URL, exactly once;
- files with mistakes change nothing and say why (file, field, what was expected), and the
  endpoint wants the token like every writing endpoint;
- removing a cluster stops watching it and resolves its groups' alerts as gone.

Along the way the notifications show the rules' labels and annotations (summary, runbook URL
in PagerDuty's `links`) and the built-in inhibition: a group's ERR mutes its WARN.
"""

from __future__ import annotations

import asyncio
import signal
import uuid
from pathlib import Path
from typing import Any

import httpx
import pytest

from notifier.demo import HttpReceiver
from notifier.embedded import EmbeddedBroker
from tests.service_process import ServiceProcess
from tests.test_collect import _commit, _produce

pytestmark = pytest.mark.broker

TOKEN = "reload-test-token-0123"

RULES = """\
window: {intervals: 3}
burrow: {enabled: false}
rules:
  - name: lag-warn
    kind: lag
    threshold: 5
    severity: warn
    labels: {team: data}
    annotations:
      summary: "{{ group }} on {{ cluster }} is {{ evidence.lag[-1] }} records behind"
      runbook_url: "https://runbooks.example.org/lag#warn"
  - name: lag-err
    kind: lag
    threshold: 15
    severity: err
    labels: {team: data}
    annotations:
      summary: "{{ group }} on {{ cluster }} is far behind on {{ topic }}"
      description: "Page the data team"
      runbook_url: "https://runbooks.example.org/lag#err"
"""


def cluster(name: str, bootstrap: str, prefix: str) -> str:
    return (
        f"  - {{name: {name}, bootstrap_servers: '{bootstrap}', scan_interval: 0.5s,"
        f" request_timeout: 2s, scan_timeout: 4s, group_allow: ['^{prefix}']}}\n"
    )


def service_yaml(clusters: str, hook: str, pagerduty: str, route_extra: str = "") -> str:
    return (
        "clusters:\n" + clusters + "rules: rules.yaml\ndata_dir: data\nhistory: {enabled: false}\n"
        "api: {host: 127.0.0.1, port: 0, token: '${NOTIFIER_API_TOKEN}'}\n"
        "notify:\n"
        "  receivers:\n"
        "    ops:\n"
        f"      - webhook: {{url: '{hook}'}}\n"
        f"      - pagerduty: {{routing_key: k, url: '{pagerduty}'}}\n"
        "  route: {receiver: ops, group_wait: 0s, group_interval: 1s, group_by: ['...']"
        + route_extra
        + "}\n"
        "  delivery: {retry_initial: 0.2s, retry_max: 1s}\n"
    )


def alerts(rx: HttpReceiver, path: str) -> list[dict[str, Any]]:
    """Every alert the webhook at ``path`` received, in order."""
    return [alert for request in rx.to(path) for alert in request.json["alerts"]]


def received(rx: HttpReceiver, path: str, group: str, event: str) -> list[dict[str, Any]]:
    return [a for a in alerts(rx, path) if a["incident"]["group"] == group and a["event"] == event]


async def eventually(check, what: str, service: ServiceProcess, timeout: float = 60) -> Any:
    deadline = asyncio.get_running_loop().time() + timeout
    while True:
        found = check()
        if found:
            return found
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError(f"never: {what}\n{service.log_path.read_text()[-4000:]}")
        await asyncio.sleep(0.1)


async def reload(url: str, token: str | None = TOKEN) -> httpx.Response:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    async with httpx.AsyncClient(timeout=30) as client:
        return await client.post(f"{url.rstrip('/')}/-/reload", headers=headers)


async def groups(url: str) -> dict[tuple[str, str], dict[str, Any]]:
    async with httpx.AsyncClient(timeout=10) as client:
        body = (await client.get(f"{url.rstrip('/')}/api/groups")).json()
    return {(g["cluster"], g["group"]): g for g in body["groups"]}


async def test_reload_adds_and_removes_clusters_and_swaps_receivers_live(
    kafka_broker: EmbeddedBroker, tmp_path: Path
) -> None:
    bootstrap = kafka_broker.bootstrap_servers
    prefix = f"rl-{uuid.uuid4().hex[:8]}"
    one, two = f"{prefix}-a", f"{prefix}-b"
    topic = f"{prefix}-orders"
    behind, slightly, other = f"{one}-behind", f"{one}-slightly", f"{two}-behind"
    await _produce(bootstrap, topic, [20])
    for group, committed in ((behind, 1), (slightly, 12), (other, 1)):
        await _commit(bootstrap, group, {(topic, 0): committed})

    (tmp_path / "rules.yaml").write_text(RULES)
    config = tmp_path / "service.yaml"
    async with HttpReceiver() as rx:
        # The first notification to the first URL takes 3 s to answer: the reload comes
        # while it is in flight.
        rx.reply("/first", hang=3.0, times=1)
        rx.reply("/pd", 202, json_body={"status": "success"})
        first, second, pd = rx.url_for("/first"), rx.url_for("/second"), rx.url_for("/pd")
        config.write_text(service_yaml(cluster("one", bootstrap, one), first, pd))
        env = {"NOTIFIER_API_TOKEN": TOKEN}
        async with ServiceProcess(config, tmp_path / "service.log", env) as service:
            await eventually(lambda: rx.to("/first"), "a notification to /first", service)

            # Reload while that send hangs: cluster two added, the webhook moved to /second.
            config.write_text(
                service_yaml(
                    cluster("one", bootstrap, one) + cluster("two", bootstrap, two), second, pd
                )
            )
            answer = await reload(service.url)
            assert answer.status_code == 200, answer.text
            assert answer.json()["changed"] == ["cluster two added", "notify"]
            await eventually(
                lambda: received(rx, "/second", other, "open"), "cluster two's open", service
            )
            await eventually(
                lambda: all(
                    received(rx, "/first", g, "open") or received(rx, "/second", g, "open")
                    for g in (behind, slightly)
                ),
                "cluster one's opens",
                service,
            )
            await asyncio.sleep(2)  # time for anything wrongly sent twice to arrive
            for group in (behind, slightly):
                both = received(rx, "/first", group, "open") + received(
                    rx, "/second", group, "open"
                )
                assert len(both) == 1, f"{group}: {len(both)} opens"
            assert len(rx.to("/first")) >= 1  # the hanging send finished there, once

            # What the notification says: annotations, labels, and the WARN its ERR mutes.
            (alert,) = received(rx, "/first", behind, "open") + received(
                rx, "/second", behind, "open"
            )
            assert [f["rule"] for f in alert["findings"]] == ["lag-err"]
            assert [f["rule"] for f in alert["muted_findings"]] == ["lag-warn"]
            finding = alert["findings"][0]
            assert finding["labels"] == {"team": "data"}
            assert finding["annotations"] == {
                "summary": f"{behind} on one is far behind on {topic}",
                "description": "Page the data team",
                "runbook_url": "https://runbooks.example.org/lag#err",
            }
            (warned,) = received(rx, "/first", slightly, "open") + received(
                rx, "/second", slightly, "open"
            )
            assert warned["findings"][0]["annotations"]["summary"] == (
                f"{slightly} on one is 8 records behind"
            )
            triggers = [r.json for r in rx.to("/pd") if r.json["event_action"] == "trigger"]
            paged = next(e for e in triggers if e["payload"]["component"] == behind)
            assert {k: v for k, v in paged["links"][0].items() if k == "href"} == {
                "href": "https://runbooks.example.org/lag#err"
            }

            # Mistakes change nothing and say why; the endpoint wants the token.
            good = config.read_text()
            config.write_text(good.replace("group_by: ['...']", "group_by: ['...'], "
                                           "routes: [{matchers: ['teem=\"data\"']}]"))  # fmt: skip
            assert (await reload(service.url, token=None)).status_code == 401
            refused = await reload(service.url)
            assert refused.status_code == 422
            message = refused.json()["message"]
            assert str(config) in message
            assert "notify.route.routes[0].matchers[0]" in message and "'teem'" in message
            config.write_text(good)
            rules = (tmp_path / "rules.yaml").read_text()
            (tmp_path / "rules.yaml").write_text(rules.replace("threshold: 15", "threshold: -1"))
            assert service.process is not None
            service.process.send_signal(signal.SIGHUP)
            failed = await service.wait_for_log(
                lambda line: line.get("event") == "reload_failed" and line.get("source") == "sighup"
            )
            assert "rules.yaml" in failed["error"] and "threshold" in failed["error"]
            (tmp_path / "rules.yaml").write_text(rules)
            assert {c for c, _ in await groups(service.url)} == {"one", "two"}

            # Remove cluster one: no longer watched, its alerts resolve as gone.
            config.write_text(service_yaml(cluster("two", bootstrap, two), second, pd))
            service.process.send_signal(signal.SIGHUP)
            await service.wait_for_log(
                lambda line: line.get("event") == "reloaded" and line.get("source") == "sighup"
            )
            resolved = await eventually(
                lambda: received(rx, "/second", behind, "resolve"), "cluster one resolved", service
            )
            assert resolved[0]["incident"]["close_reason"] == "gone"
            assert {c for c, _ in await groups(service.url)} == {"two"}
            await asyncio.sleep(1.5)
            assert len(received(rx, "/second", other, "open")) == 1  # cluster two kept its state
            assert await service.stop() == 0
