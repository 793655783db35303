"""What ``POST /-/reload`` says, without a broker: which sections wait for a restart (the API,
logging, metrics, the data directory, history, adding or removing ``notify:``) instead of a bare
``reloaded: true``, and a refusal in the envelope every endpoint uses (``error: true`` and a
message naming the file and the field). tests/test_reload.py reloads a real process."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest
import yaml

from notifier.api import create_app
from notifier.notify import config as notify_config
from notifier.notify.config import load_service_config
from notifier.rules import load_rules
from notifier.service import Coordinator
from notifier.service.reload import Reloader

from .scripted import RecordingSink, ScriptedCollector

RULES = "rules:\n  - {name: lag, kind: lag, threshold: 10, severity: warn}\n"
BASE = {
    "clusters": [{"name": "c", "bootstrap_servers": "127.0.0.1:1", "scan_interval": 10}],
    "rules": "rules.yaml",
    "history": {"enabled": False},
}


def _write(path: Path, config: dict) -> None:
    path.write_text(yaml.safe_dump(config))


@pytest.fixture
def reloading(tmp_path):
    (tmp_path / "rules.yaml").write_text(RULES)
    path = tmp_path / "service.yaml"
    _write(path, BASE)
    config = load_service_config(path)
    rules = load_rules(tmp_path / "rules.yaml")
    coord = Coordinator(config, rules, tmp_path, RecordingSink(),
                        collector_factory=lambda _: ScriptedCollector([]))  # fmt: skip
    app = create_app(coord, reloader=Reloader(path, coord, None, config, notify_config))
    http = httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://n")
    return path, http


async def test_a_reload_that_changes_only_live_settings_is_reloaded(reloading):
    path, http = reloading
    _write(path, BASE | {"clusters": [BASE["clusters"][0] | {"scan_interval": 20}]})
    body = (await http.post("/-/reload")).json()
    assert body["error"] is False and body["message"] == "reloaded"
    assert (body["reloaded"], body["applied"]) == (True, True)
    assert body["changed"] == ["cluster c changed"] and body["restart_needed"] == []


async def test_restart_only_sections_are_named_and_the_reload_is_not_called_complete(reloading):
    path, http = reloading
    changed = BASE | {
        "api": {"port": 8999},
        "logging": {"level": "DEBUG"},
        "metrics": {"families": ["burrow"]},
        "data_dir": str(path.parent / "elsewhere"),
        "history": {"enabled": False, "retention_days": 2},
        "notify": {"receivers": {"hooks": {"webhook": {"url": "http://127.0.0.1:9/h"}}},
                   "route": {"receiver": "hooks"}},
        "clusters": [BASE["clusters"][0] | {"scan_interval": 20}],
    }  # fmt: skip
    _write(path, changed)
    answer = await http.post("/-/reload")
    assert answer.status_code == 200, answer.text
    body = answer.json()
    assert body["restart_needed"] == ["data_dir", "history", "api", "logging", "metrics", "notify"]
    assert (body["reloaded"], body["applied"], body["error"]) == (False, True, False)
    assert body["message"].startswith("reloaded, except data_dir, history, api, logging, metrics,"
                                      " notify: ")  # fmt: skip
    assert "restarts" in body["message"]
    assert body["changed"] == ["cluster c changed"]  # what could change live did

    # Still not running after a second reload of the same file: the process started without.
    again = (await http.post("/-/reload")).json()
    assert again["restart_needed"] == body["restart_needed"] and again["reloaded"] is False

    # Back to what the process started with: complete again.
    _write(path, BASE)
    back = (await http.post("/-/reload")).json()
    assert (back["reloaded"], back["restart_needed"]) == (True, [])


async def test_a_refused_reload_answers_in_the_envelope(reloading):
    path, http = reloading
    _write(path, BASE | {"clusters": [{"name": "c"}]})
    answer = await http.post("/-/reload")
    assert answer.status_code == 422
    body = answer.json()
    assert body["error"] is True
    assert (
        str(path) in body["message"]
        and "clusters.c.bootstrap_servers: Field required" in body["message"]
    )
    assert (body["reloaded"], body["applied"]) == (False, False)
    assert set(body["request"]) == {"url", "host"}
