"""`notifier` as a client of a running service, as its users run it.

`notifier run` is started for real (a subprocess, its API on loopback, scanning consumer groups
on the embedded broker: one behind by 19 records, in ERR, one behind by 8, in WARN, and one
caught up), and the client commands ask it over HTTP: what they print for people, their JSON
for scripts and their exit codes, the deploy gate (`status --fail-on err`) included. `notifier
notify test` sends through real loopback HTTP and SMTP receivers.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest
from click.testing import CliRunner, Result

from notifier.cli import main
from notifier.client import find_target
from notifier.demo import HttpReceiver, SmtpReceiver
from notifier.embedded import EmbeddedBroker
from notifier.netutil import free_port
from tests.test_collect import _commit, _produce

pytestmark = pytest.mark.broker

ROOT = Path(__file__).resolve().parents[1]
TOKEN = "cli-test-token-0123"
RULES = """\
window: {intervals: 3}
burrow: {enabled: false}
rules:
  - {name: lag-warn, kind: lag, threshold: 5, severity: warn}
  - {name: lag-err, kind: lag, threshold: 15, severity: err}
"""


@dataclass
class Live:
    """A running `notifier run` and what it watches."""

    url: str
    config: Path
    prefix: str
    behind: str
    slightly: str
    fine: str


def _start_service(directory: Path, config_text: str) -> tuple[subprocess.Popen, Path]:
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "rules.yaml").write_text(RULES)
    config = directory / "service.yaml"
    config.write_text(config_text)
    env = {k: v for k, v in os.environ.items() if not k.startswith("NOTIFIER_")}
    env["NOTIFIER_API_TOKEN"] = TOKEN
    log = (directory / "service.log").open("w")
    process = subprocess.Popen(
        [sys.executable, "-m", "notifier.cli", "run", "--config", str(config)],
        cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT,
    )  # fmt: skip
    return process, config


def _stop(process: subprocess.Popen) -> None:
    process.terminate()
    try:
        process.wait(timeout=30)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


def _wait_for_statuses(url: str, wanted: dict[str, str], log: Path) -> None:
    """Until every group in ``wanted`` has its status from a complete window."""
    deadline = time.monotonic() + 60
    seen: dict[str, tuple[str, bool]] = {}
    while time.monotonic() < deadline:
        try:
            groups = httpx.get(f"{url}/api/groups", timeout=5).json()["groups"]
        except httpx.HTTPError:
            groups = []
        seen = {g["group"]: (g["status"], g["partial"]) for g in groups}
        if all(seen.get(group) == (status, False) for group, status in wanted.items()):
            return
        time.sleep(0.2)
    raise AssertionError(f"the service never judged {wanted}: {seen}\n{log.read_text()[-3000:]}")


def _cluster(bootstrap: str, prefix: str) -> str:
    return (
        f"clusters: [{{name: it, bootstrap_servers: '{bootstrap}', scan_interval: 0.5s,"
        f" request_timeout: 2s, scan_timeout: 4s, group_allow: ['^{prefix}']}}]\n"
        "rules: rules.yaml\ndata_dir: data\nhistory: {enabled: false}\n"
    )


@pytest.fixture(scope="module")
def live(kafka_broker: EmbeddedBroker, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Live]:
    bootstrap = kafka_broker.bootstrap_servers
    prefix = f"cli-{uuid.uuid4().hex[:8]}"
    topic = f"{prefix}-orders"
    behind, slightly, fine = f"{prefix}-behind", f"{prefix}-slightly", f"{prefix}-fine"

    async def groups() -> None:
        await _produce(bootstrap, topic, [20])
        for group, committed in ((behind, 1), (slightly, 12), (fine, 20)):
            await _commit(bootstrap, group, {(topic, 0): committed})

    asyncio.run(groups())
    port = free_port()
    directory = tmp_path_factory.mktemp("client")
    process, config = _start_service(
        directory,
        _cluster(bootstrap, prefix)
        + f"api: {{host: 127.0.0.1, port: {port}, token: '${{NOTIFIER_API_TOKEN}}'}}\n"
        # Deliveries fail (nothing listens on port 9) and are retried: incidents open anyway.
        + "notify: {receivers: {ops: {webhook: {url: 'http://127.0.0.1:9/hook'}}},"
        " route: {receiver: ops, group_wait: 0s}}\n",
    )
    url = f"http://127.0.0.1:{port}"
    try:
        _wait_for_statuses(
            url, {behind: "ERR", slightly: "WARN", fine: "OK"}, directory / "service.log"
        )
        yield Live(url, config, prefix, behind, slightly, fine)
    finally:
        _stop(process)


@pytest.fixture(scope="module")
def unnotified(kafka_broker: EmbeddedBroker, live: Live, tmp_path_factory) -> Iterator[str]:
    """The same groups watched by a service without a notify: section; its URL."""
    port = free_port()
    directory = tmp_path_factory.mktemp("unnotified")
    process, _ = _start_service(
        directory,
        _cluster(kafka_broker.bootstrap_servers, live.prefix)
        + f"api: {{host: 127.0.0.1, port: {port}}}\n",
    )
    url = f"http://127.0.0.1:{port}"
    try:
        _wait_for_statuses(url, {live.behind: "ERR"}, directory / "service.log")
        yield url
    finally:
        _stop(process)


def cli(*args: str, token: str | None = TOKEN, **env: str) -> Result:
    """The command as a user types it, with $NOTIFIER_API_TOKEN set (or not)."""
    environ: dict[str, str | None] = {"NOTIFIER_API_TOKEN": token, "NOTIFIER_URL": None, **env}
    return CliRunner().invoke(main, list(args), env=environ)


def rows(output: str) -> list[list[str]]:
    """A table's lines split into cells (two or more spaces apart)."""
    return [re.split(r"\s{2,}", line.strip()) for line in output.splitlines()]


# --------------------------------------------------------------------------------------------
# status


def test_status_lists_every_group_worst_first_with_its_lag(live):
    result = cli("status", "--url", live.url)
    assert result.exit_code == 0, result.output
    header, *table, summary = rows(result.stdout)
    assert header == ["cluster", "group", "status", "lag", "behind", "partitions", "complete",
                      "rules", "incident"]  # fmt: skip
    by_group = {row[1]: row for row in table}
    assert [row[1] for row in table] == [live.behind, live.slightly, live.fine]
    assert by_group[live.behind][2:4] == ["ERR", "19"]
    assert by_group[live.behind][5:9] == ["1", "100%", "lag-err, lag-warn", "open"]
    assert by_group[live.slightly][2:4] == ["WARN", "8"]
    assert by_group[live.fine][2:4] == ["OK", "0"] and by_group[live.fine][-1] == "-"
    assert summary == ["3 group(s): 1 ERR, 1 WARN, 1 OK"]


def test_status_fail_on_err_gates_a_deploy_on_a_group_in_err(live):
    gate = [sys.executable, "-m", "notifier.cli", "status", "--url", live.url, "--fail-on", "err"]
    env = {k: v for k, v in os.environ.items() if not k.startswith("NOTIFIER_")}
    blocked = subprocess.run(
        [*gate, "--group", live.behind], env=env, capture_output=True, text=True, timeout=60
    )
    assert blocked.returncode == 1, blocked.stderr
    assert blocked.stderr == f"FAIL: 1 group(s) at ERR or worse: it/{live.behind} (ERR)\n"
    passed = subprocess.run(
        [*gate, "--group", live.fine], env=env, capture_output=True, text=True, timeout=60
    )
    assert passed.returncode == 0, passed.stderr
    assert passed.stderr == ""


def test_fail_on_warn_also_stops_at_a_warn_and_a_regex_picks_the_groups(live):
    slightly = cli("status", "--url", live.url, "--group", live.slightly, "--fail-on", "err")
    assert slightly.exit_code == 0, slightly.output
    warned = cli("status", "--url", live.url, "--group", f"{live.prefix}-(slightly|fine)",
                 "--fail-on", "warn")  # fmt: skip
    assert warned.exit_code == 1
    assert [row[1] for row in rows(warned.stdout)[1:-1]] == [live.slightly, live.fine]
    assert warned.stderr == f"FAIL: 1 group(s) at WARN or worse: it/{live.slightly} (WARN)\n"


def test_a_gate_on_a_group_that_does_not_exist_does_not_pass(live):
    result = cli("status", "--url", live.url, "--group", "no-such-group", "--fail-on", "err")
    assert result.exit_code == 2
    assert result.stdout == "0 group(s)\n"
    assert result.stderr == "nothing to judge: no group matches\n"


def test_status_json_for_scripts_with_only_the_bad_groups(live):
    result = cli("status", "--url", live.url, "--cluster", "it", "--only-bad", "--json")
    assert result.exit_code == 0, result.output
    body = json.loads(result.stdout)
    statuses = {
        g["group"]: g["status"] for g in body["groups"] if g["group"].startswith(live.prefix)
    }
    assert statuses == {live.behind: "ERR", live.slightly: "WARN"}
    assert [c["cluster"] for c in body["clusters"]] == ["it"]
    assert body["clusters"][0]["stale"] is False


def test_an_unknown_cluster_is_named(live):
    result = cli("status", "--url", live.url, "--cluster", "prod")
    assert result.exit_code == 2
    assert result.stderr == f"{live.url} watches no cluster 'prod' (clusters: it)\n"


def test_the_service_is_found_from_its_config_file(live):
    result = cli("status", "--config", str(live.config), "--only-bad")
    assert result.exit_code == 0, result.output
    assert rows(result.stdout)[-1] == ["2 group(s): 1 ERR, 1 WARN"]


def test_a_service_that_notifies_nobody_is_called_out(unnotified, live):
    result = cli("status", "--url", unnotified, "--group", live.behind)
    assert result.exit_code == 0, result.output
    assert result.stdout.splitlines()[-1] == (
        "the service has no receiver configured: nobody is notified of these (add a notify: "
        "section to its config)"
    )
    silences = cli("silence", "list", "--url", unnotified)
    assert silences.exit_code == 2
    assert silences.stderr == (
        f"GET {unnotified}/api/silences: silences need notifications to be configured "
        "(notify: in the config)\n"
    )


def test_a_service_that_is_not_running_is_one_line_naming_the_url():
    url = f"http://127.0.0.1:{free_port()}"
    result = cli("status", "--url", url)
    assert result.exit_code == 2
    assert result.stdout == ""
    assert result.stderr == (
        f"cannot reach the notifier service at {url}: connection refused (is `notifier run` "
        "serving there? --url or --config say where it is)\n"
    )


# --------------------------------------------------------------------------------------------
# silences


def test_the_silence_list_follows_the_pages_to_the_last():
    from notifier.client.api import ServiceClient, Target
    from notifier.notify import make_silence, silences_page

    now = round(time.time() * 1000)
    silences = sorted(
        (make_silence([f"group=g{i}"], ends_at=now + 3_600_000, author="ops", comment="x",
                      now=now) for i in range(5)),
        key=lambda s: (s.starts_at, s.id),
    )  # fmt: skip
    asked: list[str | None] = []

    def serve(request: httpx.Request) -> httpx.Response:
        after = request.url.params.get("after")
        asked.append(after)
        page, following = silences_page(silences, 2, after)
        return httpx.Response(200, json={"silences": [s.to_dict(now) for s in page],
                                         "next": following})  # fmt: skip

    target = Target("http://notifier", None, None)
    with ServiceClient(target, transport=httpx.MockTransport(serve)) as client:
        listed = client.silences()
    assert [s["id"] for s in listed] == [s.id for s in silences]
    assert len(asked) == 3 and asked[0] is None


def test_a_silence_is_added_listed_shown_on_its_group_and_expired(live):
    added = cli("silence", "add", f'group="{live.behind}"', "cluster=it", "--duration", "2h",
                "--comment", "replaying the orders topic", "--author", "alice",
                "--url", live.url)  # fmt: skip
    assert added.exit_code == 0, added.output
    match = re.fullmatch(
        rf'added silence ([0-9a-f]+): group="{live.behind}" cluster="it" until '
        r"\d{4}-\d\d-\d\d \d\d:\d\d UTC \(in (1 h 59 min|2 h)\), by alice\n",
        added.stdout,
    )
    assert match, added.stdout
    silence_id = match.group(1)

    listed = cli("silence", "list", "--url", live.url)
    assert listed.exit_code == 0, listed.output
    header, *table, count = rows(listed.stdout)
    assert header == ["id", "state", "matchers", "ends at", "author", "comment"]
    assert count == [f"{len(table)} silence(s)"]
    (row,) = [r for r in table if r[0] == silence_id]
    assert row[1:3] == ["active", f'group="{live.behind}" cluster="it"']
    assert row[4:] == ["alice", "replaying the orders topic"]
    assert silence_id in cli("silence", "list", "-q", "--url", live.url).stdout.split()
    as_json = json.loads(cli("silence", "list", "--json", "--url", live.url).stdout)
    assert {s["id"]: s["author"] for s in as_json["silences"]}[silence_id] == "alice"

    deadline = time.monotonic() + 15
    while True:  # the silence applies to the open incident from the next evaluation
        status = json.loads(cli("status", "--url", live.url, "--group", live.behind,
                                "--json").stdout)  # fmt: skip
        if status["groups"][0]["silenced"] or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    table = cli("status", "--url", live.url, "--group", live.behind).stdout
    assert rows(table)[1][-1] == "open, silenced"

    expired = cli("silence", "expire", silence_id, "--url", live.url)
    assert expired.exit_code == 0, expired.output
    assert expired.stdout == f"expired silence {silence_id}\n"
    assert silence_id not in cli("silence", "list", "-q", "--url", live.url).stdout.split()
    # The record stays, as Alertmanager keeps it: `--expired` lists it right away.
    with_expired = cli("silence", "list", "--expired", "--url", live.url)
    (row,) = [r for r in rows(with_expired.stdout)[1:-1] if r[0] == silence_id]
    assert row[1:3] == ["expired", f'group="{live.behind}" cluster="it"']
    assert row[4:] == ["alice", "replaying the orders topic"]
    again = cli("silence", "expire", silence_id, "--url", live.url)
    assert again.exit_code == 2
    assert again.stderr == (f"{silence_id}: DELETE {live.url}/api/silences/{silence_id}: "
                            f"silence {silence_id} has already expired\n")  # fmt: skip


def test_adding_a_silence_without_the_token_says_it_is_missing(live):
    args = ("silence", "add", "cluster=it", "--comment", "c", "--url", live.url)
    missing = cli(*args, token=None)
    assert missing.exit_code == 2
    assert missing.stderr == (
        f"{live.url} refused the request (401): it needs a bearer token; set NOTIFIER_API_TOKEN "
        "to the service's api.token\n"
    )
    wrong = cli(*args, token="not-the-token")
    assert wrong.exit_code == 2
    assert wrong.stderr == (
        f"{live.url} refused the token from $NOTIFIER_API_TOKEN (401): it is not the service's "
        "api.token\n"
    )


def test_a_dangerous_matcher_is_refused_with_the_services_reason(live):
    result = cli("silence", "add", 'group=~"(a+)+"', "--comment", "c", "--url", live.url)
    assert result.exit_code == 2
    assert result.stderr.startswith(
        f"POST {live.url}/api/silences: matchers[0]: regular expression '(a+)+' has a nested "
        "quantifier"
    )


def test_expiring_a_silence_that_does_not_exist_says_so(live):
    result = cli("silence", "expire", "0123abcd", "--url", live.url)
    assert result.exit_code == 2
    assert result.stderr == (
        f"0123abcd: DELETE {live.url}/api/silences/0123abcd: no such silence\n"
    )


def test_a_silence_needs_a_comment_and_a_duration_that_is_one(live):
    no_comment = cli("silence", "add", "cluster=it", "--url", live.url)
    assert no_comment.exit_code == 2 and "Missing option '--comment'" in no_comment.stderr
    zero = cli("silence", "add", "cluster=it", "--comment", "c", "--duration", "0s")
    assert zero.exit_code == 2 and "--duration: must be greater than 0" in zero.stderr


# --------------------------------------------------------------------------------------------
# incidents


def test_incidents_lists_what_is_open_newest_first(live):
    result = cli("incidents", "--url", live.url, "--group", f"{live.prefix}-.*", "--open")
    assert result.exit_code == 0, result.output
    header, *table, count = rows(result.stdout)
    assert header == ["id", "cluster", "group", "status", "peak", "opened", "closed", "silenced",
                      "why"]  # fmt: skip
    by_group = {row[2]: row for row in table}
    assert set(by_group) == {live.behind, live.slightly}
    assert by_group[live.behind][3:5] == ["ERR", "ERR"]
    assert by_group[live.behind][5].endswith(" ago") and by_group[live.behind][6] == "-"
    assert by_group[live.behind][8] == "lag 19 > 15"  # the ERR's reason, not the WARN's
    assert count == ["2 incident(s), 2 open"]

    body = json.loads(
        cli("incidents", "--url", live.url, "--group", live.slightly, "--json").stdout
    )
    (incident,) = body["incidents"]
    assert (incident["status"], incident["closed_at"]) == ("WARN", None)
    assert incident["id"].startswith(by_group[live.slightly][0])


# --------------------------------------------------------------------------------------------
# notify test


async def _notify_test(config: Path, *args: str) -> tuple[int, str, str]:
    """`notifier notify test --config FILE` in a process of its own, while this test's event
    loop serves the receivers."""
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "notifier.cli", "notify", "test", "--config", str(config), *args,
        cwd=ROOT, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    out, err = await asyncio.wait_for(process.communicate(), 60)
    assert process.returncode is not None
    return process.returncode, out.decode(), err.decode()


def _notify_config(tmp_path: Path, receivers: str) -> Path:
    config = tmp_path / "service.yaml"
    (tmp_path / "rules.yaml").write_text(RULES)
    config.write_text(
        "clusters: [{name: prod, bootstrap_servers: '127.0.0.1:9092'}]\n"
        f"notify:\n  receivers:\n{receivers}  route: {{receiver: team}}\n"
    )
    return config


async def test_notify_test_sends_a_marked_test_through_every_channel(tmp_path):
    async with HttpReceiver() as http, SmtpReceiver() as smtp:
        config = _notify_config(
            tmp_path,
            f"    team:\n"
            f"      - slack_webhook: {{url: '{http.url_for('/services/T0/B0/s3cretT0ken')}'}}\n"
            f"      - webhook: {{url: '{http.url_for('/hooks/lag')}'}}\n"
            f"    oncall:\n"
            f"      - pagerduty: {{routing_key: rk-0123456789,"
            f" url: '{http.url_for('/v2/enqueue')}'}}\n"
            f"      - email: {{host: 127.0.0.1, port: {smtp.port}, sender: notifier@example.com,"
            f" recipients: [oncall@example.com], tls: none}}\n",
        )
        code, out, err = await _notify_test(config)

    assert code == 0, err
    assert out.splitlines() == [
        f"sending a test notification through 4 channel(s) of 2 receiver(s) in {config}:",
        "  team/slack_webhook  worked: HTTP 200",
        "  team/webhook        worked: HTTP 200",
        "  oncall/pagerduty    worked: HTTP 202; resolved again at once",
        "  oncall/email        worked: accepted by the SMTP server 127.0.0.1",
        "every channel worked: look for the TEST notification at each receiver",
    ]
    (slack,) = http.to("/services/T0/B0/s3cretT0ken")
    assert "TEST notification sent by `notifier notify test`" in slack.text
    (hook,) = http.to("/hooks/lag")
    assert "TEST-notification" in hook.text and "notifier-test" in hook.text
    trigger, resolve = (r.json for r in http.to("/v2/enqueue"))
    assert (trigger["event_action"], resolve["event_action"]) == ("trigger", "resolve")
    assert trigger["dedup_key"] == resolve["dedup_key"]
    assert "TEST-notification" in trigger["payload"]["summary"]
    (mail,) = smtp.messages
    assert "TEST-notification" in mail.message["Subject"]
    assert "TEST notification" in mail.message.get_body(("plain",)).get_content()


async def test_notify_test_says_which_channel_failed_and_why(tmp_path):
    async with HttpReceiver() as http, SmtpReceiver() as smtp:
        http.reply("/hooks/lag", 404, text="no such hook")
        smtp.refuse_rcpt = "550 5.1.1 no such mailbox"
        config = _notify_config(
            tmp_path,
            f"    team:\n"
            f"      - webhook: {{url: '{http.url_for('/hooks/lag')}'}}\n"
            f"      - slack_webhook: {{url: '{http.url_for('/services/T0/B0/s3cretT0ken')}'}}\n"
            f"    oncall:\n"
            f"      email: {{host: 127.0.0.1, port: {smtp.port}, sender: notifier@example.com,"
            f" recipients: [nobody@example.com], tls: none}}\n",
        )
        code, out, err = await _notify_test(config)
        only_oncall = await _notify_test(config, "--receiver", "oncall")

    assert code == 1
    lines = out.splitlines()
    assert lines[1].startswith("  team/webhook        FAILED: HTTP 404")
    assert lines[2] == "  team/slack_webhook  worked: HTTP 200"
    assert lines[3].startswith("  oncall/email        FAILED: all recipients refused")
    assert "550" in lines[3]
    assert err == "2 of 3 channel(s) failed\n"
    assert "s3cretT0ken" not in out + err
    assert only_oncall[0] == 1 and only_oncall[1].splitlines()[0].endswith(
        "through 1 channel(s) of 1 receiver(s) in " + str(config) + ":"
    )


async def test_notify_test_on_a_config_without_receivers_says_nobody_would_be_told(tmp_path):
    config = tmp_path / "service.yaml"
    config.write_text("clusters: [{name: prod, bootstrap_servers: '127.0.0.1:9092'}]\n")
    code, out, err = await _notify_test(config)
    assert (code, out) == (2, "")
    assert err == f"{config}: no notify: section, so no receiver to try: nobody would be notified\n"


def test_a_config_that_listens_everywhere_is_asked_on_loopback_with_its_token(tmp_path):
    config = tmp_path / "service.yaml"
    config.write_text(
        "clusters: [{name: a, bootstrap_servers: '${KAFKA_BOOTSTRAP}'}]\n"
        "api: {host: 0.0.0.0, port: 8123, token: '${SERVICE_TOKEN}'}\n"
    )
    # The rest of the file (an unset KAFKA_BOOTSTRAP) does not matter to a client.
    target = find_target(None, config, {"SERVICE_TOKEN": "from-the-config"})
    assert (target.url, target.token) == ("http://127.0.0.1:8123", "from-the-config")
    assert target.token_source == f"api.token of {config}"
    env = {"SERVICE_TOKEN": "from-the-config", "NOTIFIER_API_TOKEN": "from-the-environment"}
    assert find_target(None, config, env).token == "from-the-environment"
    assert find_target(None, config, {}).token is None  # an unset ${VARIABLE} is no token

    config.write_text("api: {port: 8123, public_url: 'https://notifier.example.com/'}\n")
    assert find_target(None, config, {}).url == "https://notifier.example.com"
    assert find_target("http://other:9000/", config, {}).url == "http://other:9000"
    assert find_target(None, None, {}).url == "http://127.0.0.1:8000"
