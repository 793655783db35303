"""The notify config: receivers, secrets from the environment and files, the route tree,
errors that name the field, and the channels and delivery policies built from it.
"""

from __future__ import annotations

import math

import pytest

from notifier.config import ConfigError, NotifyConfig, Rate, parse_matchers
from notifier.notify import Dispatcher, build_channels, channel_policies
from notifier.notify.channels.email import Email
from notifier.notify.channels.pagerduty import PagerDuty
from notifier.notify.channels.slack import SlackBot, SlackWebhook
from notifier.notify.channels.webhook import Webhook
from notifier.notify.config import parse_notify
from notifier.types import Severity

from .notify_helpers import H, M, S

FULL_CONFIG = """
receivers:
  oncall:
    - pagerduty:
        routing_key: ${PD_KEY}
        severity_map: {WARN: warning, ERR: critical}
    - slack_bot: {token: {file: TOKEN_FILE}, channel: C0NOTIFY, followup: both}
  data-team:
    slack_webhook: {url: "${SLACK_URL}"}
    email:
      host: smtp.example.com
      port: 587
      sender: notifier@example.com
      recipients: [data@example.com, lead@example.com]
      username: notifier
      password: ${SMTP_PASSWORD}
    webhook:
      url: https://hooks.example.com/lag
      headers: {X-Team: data}
      bearer_token: ${HOOK_TOKEN}
      rate: 10/s
      concurrency: 4
route:
  receiver: oncall
  threshold: err
  group_by: [cluster]
  group_wait: 30s
  group_interval: 5m
  repeat_interval: 4h
  routes:
    - matchers: ['group=~"data-.*"', 'severity="warn"']
      receiver: data-team
      threshold: warn
      continue: true
    - matchers: {cluster: staging}
      receiver: data-team
      send_resolved: false
      repeat_interval: never
      group_by: [...]
silences:
  - matchers: ['group="batch-nightly"']
    ends_at: 2030-01-01T00:00:00Z
    author: ops
    comment: nightly batch lags by design
status_page_url: https://notifier.example/status
inhibit_cluster_down: true
"""


ENV = {
    "PD_KEY": "pd-R0UT1NG-K3Y-000000",
    "SLACK_URL": "https://hooks.slack.com/services/T0/B0/s3cr3tW3bh00k",
    "SMTP_PASSWORD": "smtp-pa55w0rd-xyz",
    "HOOK_TOKEN": "hook-t0k3n-abcdef",
}


def load_full(tmp_path, env=ENV) -> NotifyConfig:
    import yaml

    token = tmp_path / "slack-token"
    token.write_text("xoxb-file-s3cr3t-t0k3n\n")
    text = FULL_CONFIG.replace("TOKEN_FILE", str(token))
    return parse_notify(yaml.safe_load(text), "notify.yaml", env=env)


def test_full_config_parses_with_env_and_file_secrets(tmp_path):
    config = load_full(tmp_path)

    oncall = config.receivers["oncall"]
    assert [entry.kind for entry in oncall] == ["pagerduty", "slack_bot"]
    assert oncall[0].config.routing_key.reveal() == "pd-R0UT1NG-K3Y-000000"
    assert oncall[1].config.token.reveal() == "xoxb-file-s3cr3t-t0k3n"
    team = config.receivers["data-team"]
    assert [entry.kind for entry in team] == ["slack_webhook", "email", "webhook"]
    assert team[2].config.rate == Rate(10, 1)

    root = Dispatcher.from_config(config).root
    assert (root.threshold, root.group_by, root.group_wait, root.repeat_interval) == (
        Severity.ERR,
        ("cluster",),
        30 * S,
        4 * H,
    )
    data, staging = root.children
    # Children inherit what they do not set.
    assert (data.receiver, data.threshold, data.group_by, data.continue_) == (
        "data-team",
        Severity.WARN,
        ("cluster",),
        True,
    )
    assert (data.group_interval, data.repeat_interval) == (5 * M, 4 * H)
    assert (staging.send_resolved, staging.repeat_interval, staging.group_by) == (
        False,
        math.inf,
        None,
    )
    assert staging.threshold is Severity.ERR


def test_secrets_never_show_in_repr_or_dumps(tmp_path):
    config = load_full(tmp_path)
    shown = repr(config) + str(config.model_dump()) + config.model_dump_json()
    channels = build_channels(config)
    shown += repr(channels)
    for secret in [*ENV.values(), "xoxb-file-s3cr3t-t0k3n", "s3cr3tW3bh00k"]:
        assert secret not in shown


def test_build_channels_names_them_per_receiver_and_kind(tmp_path):
    config = load_full(tmp_path)
    channels = build_channels(config)

    assert {name: [type(c) for c in chs] for name, chs in channels.items()} == {
        "oncall": [PagerDuty, SlackBot],
        "data-team": [SlackWebhook, Email, Webhook],
    }
    assert [c.name for c in channels["data-team"]] == [
        "data-team/slack_webhook",
        "data-team/email",
        "data-team/webhook",
    ]
    policies = channel_policies(config, channels)
    assert policies["oncall/pagerduty"].rate == Rate(120, 60)
    assert policies["oncall/slack_bot"].rate == Rate(1, 1)
    assert (policies["data-team/webhook"].rate, policies["data-team/webhook"].concurrency) == (
        Rate(10, 1),
        4,
    )
    assert policies["data-team/email"].rate is None


def problems_of(exc: pytest.ExceptionInfo[ConfigError]) -> dict[str, str]:
    return dict(exc.value.problems)


def test_an_unset_environment_variable_names_the_field(tmp_path):
    env = {k: v for k, v in ENV.items() if k != "PD_KEY"}
    with pytest.raises(ConfigError) as exc:
        load_full(tmp_path, env)

    assert problems_of(exc) == {
        "receivers.oncall[0].pagerduty.routing_key": "environment variable PD_KEY is not set"
    }
    assert str(exc.value).startswith("notify.yaml: 1 problem(s)")


def test_non_strict_env_leaves_placeholders_for_offline_checks():
    config = parse_notify(
        {
            "receivers": {"r": {"webhook": {"url": "${NOT_SET_ANYWHERE}"}}},
            "route": {"receiver": "r"},
        },
        env={},
        strict_env=False,
    )
    assert config.receivers["r"][0].config.url.reveal() == "${NOT_SET_ANYWHERE}"


def test_dollar_dollar_escapes_substitution():
    config = parse_notify(
        {
            "receivers": {"r": {"webhook": {"url": "http://x/$${literal}", "headers": {}}}},
            "route": {"receiver": "r"},
        },
        env={},
    )
    assert config.receivers["r"][0].config.url.reveal() == "http://x/${literal}"


@pytest.mark.parametrize(
    ("change", "field", "message"),
    [
        ({"route": {"receiver": "nobody"}}, "route.receiver", "unknown receiver 'nobody'"),
        (
            {"route": {"receiver": "r", "routes": [{"receiver": "ghost"}]}},
            "route.routes[0].receiver",
            "unknown receiver 'ghost'",
        ),
        (
            {"route": {"receiver": "r", "routes": [{"matchers": ['group=~"(unclosed"']}]}},
            "route.routes[0].matchers[0]",
            "invalid regular expression",
        ),
        (
            {"route": {"receiver": "r", "routes": [{"matchers": ['group=~"(a+)+$"']}]}},
            "route.routes[0].matchers[0]",
            "nested quantifier",
        ),
        (
            {"route": {"receiver": "r", "routes": [{"matchers": ["1colour=red"]}]}},
            "route.routes[0].matchers",
            "label name '1colour'",
        ),
        ({"route": {"receiver": "r", "threshold": "ok"}}, "route.threshold", "Input should be"),
        ({"route": {"receiver": "r", "group_by": ["topic"]}}, "route.group_by", "cannot group"),
        ({"route": {"receiver": "r", "group_wait": "soon"}}, "route.group_wait", "duration"),
        ({"route": {"receiver": "r", "matchers": ["cluster=prod"]}}, "route.matchers", "root"),
        ({"route": {"receiver": "r"}, "colour": 1}, "colour", "unknown field"),
        (
            {"receivers": {"r": {"telegram": {"url": "x"}}}, "route": {"receiver": "r"}},
            "receivers.r[0]",
            "unknown channel kind 'telegram'",
        ),
        (
            {
                "receivers": {
                    "r": {"pagerduty": {"routing_key": "k", "severity_map": {"ERR": "p1"}}}
                }
            },
            "receivers.r[0].pagerduty.severity_map",
            "PagerDuty severities",
        ),
        (
            {"receivers": {"r": {"email": {"host": "h", "sender": "a@b", "recipients": []}}}},
            "receivers.r[0].email.recipients",
            "at least 1",
        ),
        (
            {
                "route": {
                    "receiver": "r",
                    "routes": [{"name": "team", "receiver": "r"}, {"name": "team"}],
                }
            },
            "route.routes[1].name",
            "used twice",
        ),
        (
            {"receivers": {"r": {"webhook": {"url": "u", "rate": "fast"}}}},
            "receivers.r[0].webhook.rate",
            "expected a rate",
        ),
    ],
)
def test_config_errors_name_the_field(change, field, message):
    data = {"receivers": {"r": {"webhook": {"url": "http://127.0.0.1:9/"}}}, **change}
    with pytest.raises(ConfigError) as exc:
        parse_notify(data, "notify.yaml")

    problems = problems_of(exc)
    assert field in problems, problems
    assert message in problems[field]


def test_a_missing_secret_file_names_the_field(tmp_path):
    data = {
        "receivers": {
            "r": {"slack_bot": {"token": {"file": str(tmp_path / "nope")}, "channel": "C"}}
        },
        "route": {"receiver": "r"},
    }
    with pytest.raises(ConfigError) as exc:
        parse_notify(data)
    [(field, message)] = exc.value.problems
    assert field == "receivers.r[0].slack_bot.token"
    assert "cannot read secret file" in message


def test_matchers_as_strings_or_a_mapping():
    listed = parse_matchers(['cluster="prod"', "group=~orders-.*", 'topic!="x y"', "rule!~lag.*"])
    mapped = parse_matchers({"cluster": "prod", "group": "=~orders-.*", "rule": "!~lag.*"})

    assert listed == [
        {"label": "cluster", "op": "=", "value": "prod"},
        {"label": "group", "op": "=~", "value": "orders-.*"},
        {"label": "topic", "op": "!=", "value": "x y"},
        {"label": "rule", "op": "!~", "value": "lag.*"},
    ]
    assert mapped == [listed[0], listed[1], listed[3]]
