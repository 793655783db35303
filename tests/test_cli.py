"""The `notifier` command as a user runs it: check, test-rules, replay."""

from __future__ import annotations

import json
import shutil
import socket
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from click.testing import CliRunner

from notifier.cli import main

ROOT = Path(__file__).resolve().parents[1]


def run(*args: str):
    return CliRunner().invoke(main, list(args))


def test_check_accepts_the_default_rules():
    result = run("check", str(ROOT / "rules.yaml"))
    assert result.exit_code == 0, result.output
    assert "OK" in result.output


def test_check_rejects_a_broken_file_with_file_and_field(tmp_path):
    bad = tmp_path / "rules.yaml"
    bad.write_text("burrow: {allowed_lag: -1}\n")
    result = run("check", str(bad))
    assert result.exit_code == 1
    assert str(bad) in result.output and "burrow.allowed_lag" in result.output


def test_test_rules_passes_on_the_examples():
    result = run("test-rules", str(ROOT / "examples" / "rules.test.yaml"))
    assert result.exit_code == 0, result.output
    assert "0 failed" in result.output


def test_test_rules_fails_with_a_readable_diff(tmp_path):
    shutil.copy(ROOT / "rules.yaml", tmp_path / "rules.yaml")
    (tmp_path / "t.yaml").write_text(
        """
rules: rules.yaml
tests:
  - name: wrong expectation
    interval: 60s
    input:
      - {group: billing, topic: orders, committed: "10x9", log_end: "11+1x9"}
    expect:
      - at: 540s
        group: billing
        status: ERR
        partitions: {orders/0: OK}
        findings: [{rule: burrow, status: WARN}]
"""
    )
    result = run("test-rules", str(tmp_path / "t.yaml"))
    assert result.exit_code == 1
    out = result.output
    assert "FAIL" in out and "wrong expectation" in out
    assert "status: expected ERR, got OK" in out
    assert "partition orders/0: expected OK, got STALL" in out
    assert "finding missing: {rule: burrow, status: WARN}" in out
    assert "1 failed" in out


def test_test_rules_reports_a_bad_series(tmp_path):
    (tmp_path / "t.yaml").write_text(
        "tests: [{name: x, input: [{group: g, topic: t, committed: '1 2', log_end: '1 2 3'}],"
        " expect: [{at: 0, group: g, status: OK}]}]"
    )
    result = run("test-rules", str(tmp_path / "t.yaml"))
    assert result.exit_code == 1
    assert "committed: has 2 samples but log_end has 3" in result.output


def test_replay_prints_transitions_and_a_final_table():
    result = run(
        "replay",
        "--history",
        str(ROOT / "examples" / "sample-history.csv"),
        "--rules",
        str(ROOT / "rules.yaml"),
    )
    assert result.exit_code == 0, result.output
    assert "-> ERR" in result.output
    assert "demo/stalled" in result.output


def test_replay_says_when_a_rule_joins_a_group_at_its_status(tmp_path):
    # Offsets reset the usual way: the consumers stopped (the stop pages), then rewound.
    committed = [10 * i for i in range(13)] + [120] * 6 + [50] * 3
    log_end = [5 + 10 * i for i in range(13)] + [125 + 10 * i for i in range(9)]
    lines = ["ts,cluster,group,topic,partition,committed_offset,log_end_offset,"
             "log_start_offset,group_state,members,member_hash"]  # fmt: skip
    for i, (c, e) in enumerate(zip(committed, log_end, strict=True)):
        state, members = ("Stable", 1) if i < 13 else ("Empty", 0)
        lines.append(f"{i * 60_000},c,g,t,0,{c},{e},0,{state},{members},{members}")
    (tmp_path / "h.csv").write_text("\n".join(lines) + "\n")
    (tmp_path / "rules.yaml").write_text(
        "burrow: {enabled: false}\n"
        "rules:\n  - {name: rewound, kind: rewind}\n"
        "  - {name: stalled-or-stopped, kind: progress}\n"
    )
    result = run("replay", "--history", str(tmp_path / "h.csv"), "--rules",
                 str(tmp_path / "rules.yaml"), "--interval", "60s")  # fmt: skip
    assert result.exit_code == 0, result.output
    assert "c/g: OK -> ERR  stalled-or-stopped" in result.output
    assert "c/g: ERR, now also rewound  rewound" in result.output


def test_check_renders_every_template_and_names_a_broken_one(tmp_path):
    (tmp_path / "tpl" / "slack").mkdir(parents=True)
    (tmp_path / "tpl" / "slack" / "open.json.j2").write_text(
        '{"text": "ok"}\n{{ notification.no_such_field }}\n'
    )
    shutil.copy(ROOT / "rules.yaml", tmp_path / "rules.yaml")
    (tmp_path / "service.yaml").write_text(
        "clusters: [{name: a, bootstrap_servers: '127.0.0.1:9092'}]\n"
        "notify:\n"
        "  receivers: {team: {slack_webhook: {url: '${SLACK_URL}'}}}\n"
        "  route: {receiver: team}\n"
        f"  templates: {tmp_path / 'tpl'}\n"
    )
    result = CliRunner().invoke(
        main,
        ["check", "--config", str(tmp_path / "service.yaml")],
        env={"SLACK_URL": "https://hooks.slack.example/services/T0/B0/x"},
    )
    assert result.exit_code == 1
    assert "slack/open.json.j2:2" in result.output and "no_such_field" in result.output
    assert run("check", str(ROOT / "rules.yaml")).output.startswith("templates: OK")


BROKEN_BODY_TEMPLATES = {
    "syntax error": ('{"text": {{ alert.incident.group|tojson }\n', ":1: "),
    "unknown filter": ('{"text": {{ alert.incident.group|shout|tojson }}}\n', "shout"),
    "missing file": (None, "template not found"),
}


def webhook_service(tmp_path: Path, body_template: Path) -> Path:
    shutil.copy(ROOT / "rules.yaml", tmp_path / "rules.yaml")
    config = tmp_path / "service.yaml"
    config.write_text(
        "clusters: [{name: a, bootstrap_servers: '127.0.0.1:1'}]\n"
        f"data_dir: {tmp_path / 'data'}\n"
        "api: {enabled: false}\n"
        "notify:\n"
        "  receivers:\n"
        "    team:\n"
        f"      webhook: {{url: 'http://127.0.0.1:9/hook', body_template: '{body_template}'}}\n"
        "  route: {receiver: team}\n"
    )
    return config


@pytest.mark.parametrize("broken", sorted(BROKEN_BODY_TEMPLATES))
def test_check_config_renders_each_webhook_body_template(tmp_path, broken):
    source, problem = BROKEN_BODY_TEMPLATES[broken]
    template = tmp_path / "body.json.j2"
    if source is not None:
        template.write_text(source)
    result = run("check", "--config", str(webhook_service(tmp_path, template)))
    assert result.exit_code == 1, result.output
    assert f"template {template}" in result.output and problem in result.output


def test_check_config_accepts_a_body_template_that_uses_the_payload(tmp_path):
    template = tmp_path / "body.json.j2"
    template.write_text('{"alerts": {{ payload.alerts|length }}, "by": {{ receiver|tojson }}}')
    result = run("check", "--config", str(webhook_service(tmp_path, template)))
    assert result.exit_code == 0, result.output


def test_run_refuses_to_start_with_a_broken_body_template(tmp_path):
    template = tmp_path / "body.json.j2"
    template.write_text(BROKEN_BODY_TEMPLATES["unknown filter"][0])
    config = webhook_service(tmp_path, template)
    done = subprocess.run(
        [sys.executable, "-m", "notifier.cli", "run", "--config", str(config)],
        cwd=ROOT, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert done.returncode == 2, done.stderr
    assert f"template {template}" in done.stderr and "shout" in done.stderr
    assert "Traceback" not in done.stderr


def test_run_with_the_api_port_in_use_says_so_in_one_line(tmp_path):
    shutil.copy(ROOT / "rules.yaml", tmp_path / "rules.yaml")
    with socket.create_server(("127.0.0.1", 0)) as taken:
        port = taken.getsockname()[1]
        config = tmp_path / "service.yaml"
        config.write_text(
            "clusters: [{name: a, bootstrap_servers: '127.0.0.1:1'}]\n"
            f"data_dir: {tmp_path / 'data'}\n"
            f"api: {{enabled: true, host: 127.0.0.1, port: {port}}}\n"
        )
        done = subprocess.run(
            [sys.executable, "-m", "notifier.cli", "run", "--config", str(config)],
            cwd=ROOT, capture_output=True, text=True, timeout=60,
        )  # fmt: skip
    assert done.returncode == 2, done.stderr
    assert done.stderr.splitlines() == [
        f"{config}: api: cannot listen on 127.0.0.1:{port}: the address is already in use"
    ]


def _run_briefly(config: Path, until_event: str = "cluster_starting") -> str:
    """`notifier run` until it logs ``until_event`` (it has read its config and started
    watching), then SIGTERM; its stderr (the JSON log lines). Waiting for the line rather than
    a fixed time keeps a slow, shared machine from stopping it before it handles signals."""
    process = subprocess.Popen(
        [sys.executable, "-m", "notifier.cli", "run", "--config", str(config)],
        cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    assert process.stderr is not None
    lines: list[str] = []
    started = threading.Event()

    def read() -> None:
        for line in process.stderr:  # type: ignore[union-attr]
            lines.append(line)
            if f'"{until_event}"' in line:
                started.set()

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    started.wait(timeout=120)
    process.terminate()
    process.wait(timeout=60)
    reader.join(timeout=10)
    stderr = "".join(lines)
    assert started.is_set(), stderr
    assert process.returncode == 0, stderr
    return stderr


def test_run_without_a_receiver_warns_that_nobody_will_be_notified(tmp_path):
    shutil.copy(ROOT / "rules.yaml", tmp_path / "rules.yaml")
    config = tmp_path / "service.yaml"
    base = (
        "clusters: [{name: a, bootstrap_servers: '127.0.0.1:1', request_timeout: 1s}]\n"
        f"data_dir: {tmp_path / 'data'}\napi: {{enabled: false}}\n"
    )
    config.write_text(base)
    lines = [json.loads(line) for line in _run_briefly(config).splitlines()]
    (warning,) = [line for line in lines if line.get("event") == "no_receivers"]
    assert warning["level"] == "warning"
    assert warning["msg"].startswith("NO RECEIVER CONFIGURED: nobody will be notified")
    assert f"notifier notify test --config {config}" in warning["msg"]

    config.write_text(base + "notify: {receivers: {ops: {webhook: {url: 'http://127.0.0.1:9/'}}},"
                      " route: {receiver: ops}}\n")  # fmt: skip
    assert "no_receivers" not in _run_briefly(config)
