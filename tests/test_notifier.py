"""The Notifier service's other duties: silences through the service, secrets kept out of
logs, errors and metrics, template checks, the incident views, and config errors.
"""

from __future__ import annotations

import json
import logging

import pytest

from notifier.config import ConfigError
from notifier.notify import Notifier, NotifyStore, SilenceError
from notifier.service.logs import JsonFormatter

from .notify_helpers import ERR, OK, WARN, alerts_of, config, eventually, move, now_ms, webhook


async def test_silences_through_the_service_validate_persist_and_delete(http, tmp_path, notifiers):
    db = tmp_path / "n.sqlite"
    cfg = config(
        webhook(http.url_for("/hook")),
        silences=[
            {
                "matchers": ['group="batch"'],
                "ends_at": "2100-01-01T00:00:00Z",
                "author": "ops",
                "comment": "by design",
            }
        ],
    )
    first = await notifiers(cfg, db)
    with pytest.raises(SilenceError) as exc:
        first.add_silence(['group=~"("'], ends_at=now_ms() - 1, author="", comment="x")
    assert set(dict(exc.value.problems)) == {"matchers[0]", "ends_at", "author"}

    silence = first.add_silence(
        ["cluster=prod"], ends_at=now_ms() + 3_600_000, author="me", comment="deploy"
    )
    first.handle([move("orders", OK, ERR, now_ms())])
    assert first.flush_due() == []
    assert first.incidents()[0].silenced
    await first.stop()

    second = await notifiers(cfg, db)
    assert sorted(s.source for s in second.list_silences()) == ["api", "config"]
    config_silence = next(s for s in second.list_silences() if s.source == "config")
    with pytest.raises(SilenceError, match="config"):
        second.expire_silence(config_silence.id)
    second.expire_silence(silence.id)
    await eventually(lambda: len(http.to("/hook")) == 1)
    assert [e for _n, e, g in alerts_of(http.to("/hook"))] == ["open"]
    assert {s.id: s.state(now_ms()) for s in second.list_silences()}[silence.id] == "expired"
    await second.stop()

    third = await notifiers(cfg, db)  # the expired silence is kept across a restart
    assert {s.id: s.state(now_ms()) for s in third.list_silences()}[silence.id] == "expired"
    with pytest.raises(SilenceError, match="already expired"):
        third.expire_silence(silence.id)
    await third.stop()


async def test_secrets_never_reach_logs_errors_or_metrics(http, tmp_path, notifiers, caplog):
    caplog.set_level(logging.DEBUG)
    url = http.url_for("/hook?token=SuperS3cretQuery")
    http.reply("/hook", 500, text="failed for /hook?token=SuperS3cretQuery", times=2)
    http.reply("/hook", 401, text="bad token SuperS3cretQuery", times=1)
    notifier = await notifiers(
        config(webhook(url, bearer_token="B34rer-T0ken-xyz")), tmp_path / "n.sqlite"
    )
    notifier.handle([move("orders", OK, ERR, now_ms())])
    notifier.flush_due()
    assert await notifier.wait_delivered(5)

    shown = "\n".join(JsonFormatter().format(r) for r in caplog.records)  # the lines as logged
    shown += json.dumps(notifier.metrics()) + repr(notifier.config) + repr(notifier.channels)
    shown += json.dumps(notifier.store.outbox_rows())
    assert "notification_failed" in shown and "notification_retry" in shown
    for secret in ("SuperS3cretQuery", "B34rer-T0ken-xyz"):
        assert secret not in shown
    await notifier.stop()


async def test_check_renders_every_template_and_names_broken_ones(tmp_path, notifiers):
    ok = Notifier(config(webhook("http://127.0.0.1:9/")), tmp_path / "a.sqlite")
    assert ok.check() == []
    await ok.stop()

    (tmp_path / "t" / "slack").mkdir(parents=True)
    (tmp_path / "t" / "slack" / "open.json.j2").write_text('{"text":\n {{ oops( }}}')
    broken = Notifier(
        config(
            webhook("http://127.0.0.1:9/", body_template="webhook/missing.json.j2"),
            templates=str(tmp_path / "t"),
        ),
        tmp_path / "b.sqlite",
    )
    problems = {p.template: p for p in broken.check()}
    assert problems["slack/open.json.j2"].line == 2
    assert problems["webhook/missing.json.j2"].message == "template not found"
    await broken.stop()


async def test_incidents_show_open_ones_and_history(http, tmp_path, notifiers):
    notifier = await notifiers(config(webhook(http.url_for("/hook"))), tmp_path / "n.sqlite")
    t = now_ms()
    notifier.handle([move("a", OK, ERR, t), move("b", OK, WARN, t)])
    notifier.handle([move("a", ERR, OK, t + 1)])
    assert [i.group for i in notifier.incidents()] == ["b"]
    history = {i.group: i for i in notifier.incidents(open_only=False)}
    assert history["a"].close_reason == "recovered" and history["b"].open
    notifier.cluster_down("prod", t + 2, "timeout")
    assert notifier.metrics()["clusters_down"] == ["prod"]
    await notifier.stop()


def test_a_config_error_from_the_service_names_the_field():
    with pytest.raises(ConfigError) as exc:
        config({"hook": {"webhook": {"url": "http://x", "concurrency": 0}}})
    assert "receivers.hook[0].webhook.concurrency" in dict(exc.value.problems)


async def test_a_stored_silence_that_the_limits_now_refuse_is_dropped_not_a_crash(tmp_path, caplog):
    # Written by a version without regex limits: the notifier must still start.
    db = tmp_path / "n.sqlite"
    store = NotifyStore(db)
    store.save_silence("old", {"id": "old", "matchers": ['group=~"(a+)+$"'], "starts_at": 0,
                               "ends_at": 4_102_444_800_000, "author": "ops", "comment": "x",
                               "created_at": 0, "source": "api"})  # fmt: skip
    store.close()
    caplog.set_level(logging.ERROR, logger="notifier.notify")
    notifier = Notifier(config(webhook("http://127.0.0.1:9/")), db)
    assert notifier.list_silences() == []
    (line,) = [r for r in caplog.records if getattr(r, "event", "") == "silence_dropped"]
    assert line.silence == "old" and "nested quantifier" in line.error
    await notifier.stop()
