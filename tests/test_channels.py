"""What every channel shares, against real loopback servers (notifier/demo/receivers.py).

The HTTP channel base: timeouts and refused connections are retryable and never leak the URL,
the environment's proxy is used unless ``NO_PROXY`` exempts the host, the request log redacts
URLs. And the helpers every channel uses: humanized values, ``Retry-After``, masked secrets.
The channels themselves are tested in test_slack.py, test_email.py, test_webhook.py and
test_pagerduty.py; the templates in test_templates.py.
"""

from __future__ import annotations

import logging

import pytest

from notifier.config import Secret
from notifier.demo import HttpReceiver
from notifier.notify.channels import (
    environment_proxy,
    humanize_lag,
    humanize_seconds,
    parse_retry_after,
)
from notifier.notify.channels.slack import SlackWebhook
from notifier.notify.channels.webhook import Webhook

from .channel_helpers import WEBHOOK_PATH, make_notification


async def test_a_receiver_that_hangs_times_out_as_retryable(http):
    http.reply(WEBHOOK_PATH, hang=5.0)
    async with SlackWebhook(http.url_for(WEBHOOK_PATH), timeout=0.3) as slack:
        delivery = await slack.send(make_notification())

    assert not delivery.ok
    assert delivery.retryable
    assert delivery.error.startswith("timed out after 0.3 s")


async def test_a_refused_connection_is_retryable_and_does_not_leak_the_url():
    async with HttpReceiver() as gone:
        url = gone.url_for(WEBHOOK_PATH)
    async with SlackWebhook(url) as slack:
        delivery = await slack.send(make_notification())

    assert (delivery.ok, delivery.retryable) == (False, True)
    assert "s3cr3t" not in delivery.error


async def test_http_channels_go_through_the_proxy_the_environment_names(http, monkeypatch):
    # The receiver plays a forward proxy: it gets the absolute-form request for the real host.
    monkeypatch.setenv("HTTP_PROXY", f"http://ops:s3cret@127.0.0.1:{http.port}")
    monkeypatch.delenv("http_proxy", raising=False)
    monkeypatch.delenv("NO_PROXY", raising=False)
    monkeypatch.delenv("no_proxy", raising=False)
    async with Webhook("http://alerts.example.invalid/hook") as hook:
        delivery = await hook.send(make_notification())

    assert delivery.ok
    [request] = http.to("/hook")
    assert request.headers["host"] == "alerts.example.invalid"
    assert request.headers["proxy-authorization"] == "Basic b3BzOnMzY3JldA=="  # ops:s3cret


def test_no_proxy_exempts_hosts_from_the_environment_proxy(monkeypatch):
    for name in ("http_proxy", "https_proxy", "all_proxy", "no_proxy"):
        monkeypatch.delenv(name, raising=False)
        monkeypatch.delenv(name.upper(), raising=False)
    monkeypatch.setenv("HTTPS_PROXY", "proxy.corp:3128")
    monkeypatch.setenv("NO_PROXY", "localhost,.internal")

    assert environment_proxy("https", "hooks.slack.com") == "http://proxy.corp:3128"
    assert environment_proxy("https", "alerts.internal") is None
    assert environment_proxy("https", "localhost") is None
    assert environment_proxy("http", "hooks.slack.com") is None


async def test_the_request_log_does_not_show_a_webhook_url(http, caplog):
    caplog.set_level(logging.DEBUG)
    async with SlackWebhook(http.url_for(WEBHOOK_PATH)) as slack:
        await slack.send(make_notification())

    logged = "\n".join(record.getMessage() for record in caplog.records)
    assert f"HTTP POST http://127.0.0.1:{http.port}/***: 200 (slack)" in logged
    assert "s3cr3tW3bh00kT0k3n" not in logged


@pytest.mark.parametrize(
    ("seconds", "text"),
    [(None, "unknown"), (0, "0 s"), (59, "59 s"), (2820, "47 min"), (7200, "2 h"),
     (5400, "1 h 30 min"), (90000, "1 d 1 h")],
)  # fmt: skip
def test_humanize_seconds(seconds, text):
    assert humanize_seconds(seconds) == text


@pytest.mark.parametrize(
    ("lag", "text"),
    [(None, "unknown"), (0, "0"), (999, "999"), (1234, "1.23k"), (48_000, "48k"),
     (999_999, "1M"), (1_234_567, "1.23M")],
)  # fmt: skip
def test_humanize_lag(lag, text):
    assert humanize_lag(lag) == text


def test_retry_after_accepts_seconds_and_http_dates():
    from datetime import UTC, datetime

    now = datetime(2024, 5, 1, 10, 0, 0, tzinfo=UTC)
    assert parse_retry_after("30") == 30.0
    assert parse_retry_after("Wed, 01 May 2024 10:00:45 GMT", now=now) == 45.0
    assert parse_retry_after("soon") is None
    assert parse_retry_after(None) is None


def test_secret_masks_itself():
    secret = Secret("hunter2-hunter2")
    assert repr(secret) == str(secret) == "Secret('***')"
    assert f"{secret}" == "Secret('***')"
    assert secret.reveal() == "hunter2-hunter2"
    assert secret == Secret("hunter2-hunter2")
