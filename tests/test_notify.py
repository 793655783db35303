"""The notification core and its config: pure, synchronous, simulated time.

Everything here drives :class:`~notifier.notify.notifier.Dispatcher` with explicit ``now`` values
(ms),
as the backtest will: incidents (open, escalate, resolve, gone), routing (first match,
``continue``, finding matchers), thresholds, ``repeat_interval``, ``send_resolved``, grouping
storms, silences, cluster-down inhibition, restore — and Burrow's notifier vectors where our
semantics match, with the deliberate differences tested as such. Delivery over real sockets
is in ``test_outbox.py``.
"""

from __future__ import annotations

import math
from typing import Any

import pytest

from notifier.config import ConfigError, NotifyConfig, Rate, parse_matchers, parse_notify
from notifier.notify import (
    CLUSTER_GROUP,
    Dispatcher,
    build_channels,
    channel_policies,
    make_silence,
)
from notifier.notify.channels import Email, PagerDuty, SlackBot, SlackWebhook, Webhook
from notifier.types import (
    Event,
    Finding,
    GroupResult,
    GroupStatus,
    Notification,
    Severity,
    Transition,
)

from .conformance import load_vectors

OK, WARN, ERR, GONE = GroupStatus.OK, GroupStatus.WARN, GroupStatus.ERR, GroupStatus.NOTFOUND
T0 = 1_714_560_000_000
S = 1000  # one second in ms
M = 60 * S
H = 60 * M


# --------------------------------------------------------------------------------------------
# Building inputs


def finding(
    status: GroupStatus, *, rule: str = "burrow", topic: str | None = "orders", partition: int = 0
) -> Finding:
    return Finding(
        rule=rule,
        kind="stall" if status is ERR else "lag_growing",
        severity=Severity.ERR if status is ERR else Severity.WARN,
        status="STALL" if status is ERR else "WARN",
        topic=topic,
        partition=partition,
        message="committed offset stopped moving",
        evidence={"lag_end": 48_000},
    )


def result(
    cluster: str, group: str, status: GroupStatus, at: int, findings: list[Finding] | None = None
) -> GroupResult:
    if findings is None:
        findings = [finding(status)] if status.rank > 0 else []
    return GroupResult(
        cluster=cluster,
        group=group,
        status=status,
        complete=1.0,
        burrow_complete=1.0,
        partial=False,
        evaluated_at=at,
        findings=findings,
        total_lag=48_000 if status.rank > 0 else 0,
    )


def move(
    group: str,
    previous: GroupStatus,
    current: GroupStatus,
    at: int,
    *,
    cluster: str = "prod",
    findings: list[Finding] | None = None,
) -> Transition:
    """A gated transition of ``cluster/group``; NOTFOUND means the group is gone."""
    if current is GONE:
        return Transition(cluster, group, previous, current, at, None, gone=True)
    return Transition(
        cluster, group, previous, current, at, result(cluster, group, current, at, findings)
    )


def notify_config(route: dict[str, Any] | None = None, **top: Any) -> NotifyConfig:
    base_route = {"receiver": "oncall", "group_wait": 0, "group_interval": 0}
    data: dict[str, Any] = {
        "receivers": {
            "oncall": {"webhook": {"url": "http://127.0.0.1:9/oncall"}},
            "team": {"webhook": {"url": "http://127.0.0.1:9/team"}},
            "dba": {"webhook": {"url": "http://127.0.0.1:9/dba"}},
        },
        "route": {**base_route, **(route or {})},
        **top,
    }
    return parse_notify(data)


def dispatcher(route: dict[str, Any] | None = None, **top: Any) -> Dispatcher:
    return Dispatcher.from_config(notify_config(route, **top))


def events(notifications: list[Notification]) -> list[tuple[str, str, str]]:
    """``(receiver, event, group)`` per alert, in order."""
    return [(n.receiver, a.event.value, a.incident.group) for n in notifications for a in n.alerts]


# --------------------------------------------------------------------------------------------
# Config


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
            {"route": {"receiver": "r", "routes": [{"matchers": ["colour=red"]}]}},
            "route.routes[0].matchers",
            "unknown label 'colour'",
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


# --------------------------------------------------------------------------------------------
# Incidents


def test_an_incident_opens_escalates_and_resolves_with_one_stable_id():
    d = dispatcher()
    d.handle([move("orders", OK, WARN, T0)], T0)
    [opened] = d.tick(T0)
    d.handle([move("orders", WARN, ERR, T0 + M)], T0 + M)
    [escalated] = d.tick(T0 + M)
    d.handle([move("orders", ERR, OK, T0 + 2 * M)], T0 + 2 * M)
    [resolved] = d.tick(T0 + 2 * M)

    alerts = [opened.alerts[0], escalated.alerts[0], resolved.alerts[0]]
    assert [a.event for a in alerts] == [Event.OPEN, Event.ESCALATE, Event.RESOLVE]
    assert len({a.incident.id for a in alerts}) == 1
    assert [a.incident.status for a in alerts] == [WARN, ERR, OK]
    assert [a.incident.peak_status for a in alerts] == [WARN, ERR, ERR]
    final = alerts[2].incident
    assert (final.opened_at, final.closed_at, final.close_reason) == (T0, T0 + 2 * M, "recovered")
    # Findings accumulate over the incident's life: the lag-growing one, then the stall.
    assert [f.status for f in final.findings] == ["WARN", "STALL"]
    assert d.incidents(T0 + 3 * M) == []


def test_findings_over_time_keep_every_distinct_finding():
    d = dispatcher()
    d.handle([move("orders", OK, WARN, T0, findings=[finding(WARN, partition=0)])], T0)
    d.handle([move("orders", WARN, ERR, T0 + M, findings=[finding(ERR, partition=1)])], T0 + M)
    [incident] = d.incidents(T0 + M)
    assert [(f.partition, f.status) for f in incident.findings] == [(0, "WARN"), (1, "STALL")]


def test_a_group_that_vanishes_closes_its_incident_as_gone():
    d = dispatcher()
    d.handle([move("orders", OK, ERR, T0)], T0)
    d.tick(T0)
    d.handle([move("orders", ERR, GONE, T0 + M)], T0 + M)
    [n] = d.tick(T0 + M)
    [alert] = n.alerts
    assert (alert.event, alert.result, alert.incident.close_reason) == (Event.RESOLVE, None, "gone")
    assert alert.incident.status is GONE


def test_a_notfound_status_closes_as_gone_too():
    d = dispatcher()
    d.handle([move("orders", OK, ERR, T0)], T0)
    d.tick(T0)
    notfound = result("prod", "orders", GONE, T0 + M)
    d.handle([Transition("prod", "orders", ERR, GONE, T0 + M, notfound)], T0 + M)
    [n] = d.tick(T0 + M)
    assert n.alerts[0].incident.close_reason == "gone"


def test_a_reopened_group_gets_a_new_incident():
    d = dispatcher()
    d.handle([move("orders", OK, WARN, T0)], T0)
    [first] = d.tick(T0)
    d.handle([move("orders", WARN, OK, T0 + M), move("orders", OK, WARN, T0 + 2 * M)], T0 + 2 * M)
    [n] = d.tick(T0 + 2 * M)
    assert [a.event for a in n.alerts] == [Event.RESOLVE, Event.OPEN]
    assert n.alerts[0].incident.id == first.alerts[0].incident.id
    assert n.alerts[1].incident.id != first.alerts[0].incident.id


def test_ids_and_notifications_are_deterministic_for_the_backtest():
    def run() -> list[tuple[str, list[str]]]:
        d = dispatcher({"group_by": ["cluster"], "group_wait": "30s"})
        d.handle([move(f"g{i}", OK, ERR, T0) for i in range(5)], T0)
        return [(n.id, [a.incident.id for a in n.alerts]) for n in d.tick(T0 + 30 * S)]

    assert run() == run()


# --------------------------------------------------------------------------------------------
# Burrow's notifier vectors


def burrow_vectors() -> list[dict[str, Any]]:
    try:
        return load_vectors("burrow_notifier_vectors.json")
    except pytest.skip.Exception:
        return []


HEALTHY_NOTIFY = "Burrow's threshold OK notifies a healthy group; we notify OK only as a resolve"


def run_burrow_vector(v: dict[str, Any]) -> tuple[list[Notification], Dispatcher]:
    """Burrow's notifyModule as our route: threshold 1 (OK) and 2 → warn, 3 → err;
    send-close → send_resolved; send-interval 0 → repeat_interval 0; send-once → never.

    "existing incident" is an incident opened (and, when the threshold allows, notified) one
    evaluation earlier; Burrow's ``last_notify_preset`` is exactly that earlier notification.
    Returns what the second evaluation sends.
    """
    threshold = {1: "warn", 2: "warn", 3: "err"}[v["threshold"]]
    d = dispatcher(
        {
            "threshold": threshold,
            "send_resolved": v["send_close"],
            "repeat_interval": "never" if v["send_once"] else 0,
        }
    )
    status = GroupStatus(v["status"])
    t1 = T0 + M
    if v["existing_incident"]:
        d.handle([move("g", OK, WARN, T0)], T0)
        d.tick(T0)
        d.handle([] if status is WARN else [move("g", WARN, status, t1)], t1)
    else:
        d.handle([] if status is OK else [move("g", OK, status, t1)], t1)
    return d.tick(t1), d


@pytest.mark.parametrize("vector", burrow_vectors() or [None], ids=lambda v: v and v["name"])
def test_burrow_notifier_vectors(vector):
    if vector is None:
        load_vectors("burrow_notifier_vectors.json")  # skips, saying where they were looked for
    sent, d = run_burrow_vector(vector)

    expect_send = vector["expect_send"]
    if vector["threshold"] == 1 and vector["status"] == "OK" and not vector["expect_close"]:
        # Deliberate difference: Burrow at threshold OK sends every evaluation of a healthy
        # group (a non-close notification); we never notify a healthy group except as a resolve.
        assert expect_send, HEALTHY_NOTIFY
        expect_send = False
    assert bool(sent) == expect_send, vector["name"]
    if sent:
        [alert] = sent[0].alerts
        assert (alert.event is Event.RESOLVE) == vector["expect_close"]
    assert bool(d.book.open) == vector["expect_incident_id_after"]


def test_burrow_sends_a_close_for_an_incident_it_never_opened_and_we_do_not():
    """Burrow: "Closed incidents get sent regardless of the threshold". A WARN incident under
    an err threshold was never notified, so its recovery sends nothing here."""
    d = dispatcher({"threshold": "err", "send_resolved": True})
    d.handle([move("g", OK, WARN, T0)], T0)
    assert d.tick(T0) == []
    d.handle([move("g", WARN, OK, T0 + M)], T0 + M)
    assert d.tick(T0 + M) == []
    assert d.book.open == {}


def test_partial_results_are_gated_by_the_evaluator_not_here():
    """The complete-flag gate is TransitionTracker's: a partial result never becomes a
    transition, so the notifier only ever sees gated changes. (Evaluator tests cover it.)"""
    from notifier.rules import TransitionTracker

    assert "partial result never" in (TransitionTracker.__doc__ or "")


# --------------------------------------------------------------------------------------------
# Thresholds, repeats, resolves


def test_below_threshold_tracks_but_does_not_notify_and_crossing_it_is_an_open():
    d = dispatcher({"threshold": "err"})
    d.handle([move("orders", OK, WARN, T0)], T0)
    assert d.tick(T0) == []
    assert [i.group for i in d.incidents(T0)] == ["orders"]

    d.handle([move("orders", WARN, ERR, T0 + M)], T0 + M)
    # The first thing this route hears is an open, at ERR.
    assert events(d.tick(T0 + M)) == [("oncall", "open", "orders")]

    # Back under the threshold: silent; the incident stays open (and notified, so it resolves).
    d.handle([move("orders", ERR, WARN, T0 + 2 * M)], T0 + 2 * M)
    assert d.tick(T0 + 10 * H) == []
    d.handle([move("orders", WARN, OK, T0 + 11 * H)], T0 + 11 * H)
    assert events(d.tick(T0 + 11 * H)) == [("oncall", "resolve", "orders")]


def test_repeat_interval_resends_open_incidents_no_sooner():
    d = dispatcher({"repeat_interval": "1h", "group_interval": "5m"})
    d.handle([move("orders", OK, ERR, T0)], T0)
    d.tick(T0)
    assert d.tick(T0 + 59 * M) == []
    assert d.next_due() == T0 + H
    assert events(d.tick(T0 + H)) == [("oncall", "repeat", "orders")]
    assert d.tick(T0 + H + 30 * M) == []
    assert events(d.tick(T0 + 2 * H)) == [("oncall", "repeat", "orders")]


def test_repeats_of_a_group_are_coalesced_into_one_message():
    d = dispatcher({"group_by": ["cluster"], "repeat_interval": "1h", "group_interval": "5m"})
    d.handle([move("a", OK, ERR, T0)], T0)
    d.tick(T0)
    d.handle([move("b", OK, ERR, T0 + 10 * M)], T0 + 10 * M)
    assert events(d.tick(T0 + 10 * M)) == [("oncall", "open", "b")]
    # a's repeat is due at 1h; b rides along rather than getting its own message at 1h10.
    [repeat] = d.tick(T0 + H)
    assert [(a.event.value, a.incident.group) for a in repeat.alerts] == [
        ("repeat", "a"),
        ("repeat", "b"),
    ]


def test_repeat_never_is_burrows_send_once():
    d = dispatcher({"repeat_interval": "never"})
    d.handle([move("orders", OK, ERR, T0)], T0)
    d.tick(T0)
    assert d.next_due() is None
    assert d.tick(T0 + 1000 * H) == []


def test_send_resolved_false_sends_no_resolve():
    d = dispatcher({"send_resolved": False})
    d.handle([move("orders", OK, ERR, T0)], T0)
    d.tick(T0)
    d.handle([move("orders", ERR, OK, T0 + M)], T0 + M)
    assert d.tick(T0 + M) == []
    assert d.incidents(T0 + M, open_only=False) == []  # nothing left owed: forgotten


# --------------------------------------------------------------------------------------------
# Routing


ROUTES = {
    "group_by": ["cluster"],
    "routes": [
        {"matchers": ['group=~"data-.*"'], "receiver": "team", "continue": True},
        {"matchers": ['rule="retention"'], "receiver": "dba"},
        {"matchers": ["cluster=staging"], "receiver": "team"},
    ],
}


def test_first_match_wins_unless_continue():
    d = dispatcher(ROUTES)
    d.handle(
        [
            move("data-etl", OK, ERR, T0),  # team (continue); no later sibling matches
            move("data-cdc", OK, ERR, T0, findings=[finding(ERR, rule="retention")]),  # + dba
            move("orders", OK, ERR, T0, cluster="staging"),  # the staging route: team
            move("billing", OK, ERR, T0),  # no child matches: the root, oncall
        ],
        T0,
    )
    got = sorted(events(d.tick(T0)))
    assert got == [
        ("dba", "open", "data-cdc"),
        ("oncall", "open", "billing"),
        ("team", "open", "data-cdc"),
        ("team", "open", "data-etl"),
        ("team", "open", "orders"),
    ]


def test_routes_match_on_any_findings_rule_topic_and_severity():
    d = dispatcher(
        {
            "routes": [
                {"matchers": ['rule="retention"', 'severity="err"'], "receiver": "dba"},
                {"matchers": ['topic=~"pay.*"'], "receiver": "team"},
            ]
        }
    )
    retention = [finding(WARN, rule="burrow"), finding(ERR, rule="retention", partition=2)]
    warn_retention = [finding(WARN, rule="retention")]
    d.handle(
        [
            move("a", OK, ERR, T0, findings=retention),
            move("b", OK, WARN, T0, findings=warn_retention),  # severity does not match
            move("c", OK, WARN, T0, findings=[finding(WARN, topic="payments")]),
            move("d", OK, ERR, T0, findings=[finding(ERR, rule="consumers_gone", topic=None)]),
        ],
        T0,
    )
    assert sorted(events(d.tick(T0))) == [
        ("dba", "open", "a"),
        ("oncall", "open", "b"),
        ("oncall", "open", "d"),
        ("team", "open", "c"),
    ]


def test_negative_matchers_and_missing_labels():
    d = dispatcher({"routes": [{"matchers": ['topic!="orders"'], "receiver": "team"}]})
    d.handle([move("grouplevel", OK, ERR, T0, findings=[finding(ERR, topic=None)])], T0)
    d.handle([move("orders-reader", OK, ERR, T0)], T0)
    assert sorted(events(d.tick(T0))) == [
        ("oncall", "open", "orders-reader"),
        ("team", "open", "grouplevel"),  # no topic compares as "" != "orders"
    ]


def test_a_resolve_follows_the_route_that_sent_the_open_even_if_matching_moved():
    d = dispatcher({"routes": [{"matchers": ['rule="retention"'], "receiver": "dba"}]})
    d.handle([move("orders", OK, WARN, T0)], T0)
    assert events(d.tick(T0)) == [("oncall", "open", "orders")]
    # A retention finding now routes the incident to dba (first match), but oncall was told.
    d.handle([move("orders", WARN, ERR, T0 + M, findings=[finding(ERR, rule="retention")])], T0 + M)
    assert sorted(events(d.tick(T0 + M))) == [
        ("dba", "open", "orders"),
        ("oncall", "escalate", "orders"),
    ]
    d.handle([move("orders", ERR, OK, T0 + 2 * M)], T0 + 2 * M)
    assert sorted(events(d.tick(T0 + 2 * M))) == [
        ("dba", "resolve", "orders"),
        ("oncall", "resolve", "orders"),
    ]


# --------------------------------------------------------------------------------------------
# Grouping


def test_a_storm_of_500_groups_is_one_message_per_receiver_per_group_interval():
    d = dispatcher(
        {
            "group_by": ["cluster"],
            "group_wait": "30s",
            "group_interval": "5m",
            "routes": [
                {"matchers": ["cluster=prod"], "receiver": "team", "continue": True},
                {"matchers": ["cluster=prod"], "receiver": "oncall"},
            ],
        }
    )
    d.handle([move(f"g{i:03d}", OK, ERR, T0) for i in range(500)], T0)
    assert d.tick(T0 + 29 * S) == []
    first = d.tick(T0 + 30 * S)
    assert [(n.receiver, len(n.alerts)) for n in first] == [("team", 500), ("oncall", 500)]
    assert first[0].group_key == '{cluster="prod"}'

    # More trouble during the interval waits for the next flush, again one message each.
    d.handle([move(f"late{i}", OK, WARN, T0 + M + i * S) for i in range(20)], T0 + 2 * M)
    assert d.tick(T0 + 5 * M) == []
    second = d.tick(T0 + 30 * S + 5 * M)
    assert [(n.receiver, len(n.alerts)) for n in second] == [("team", 20), ("oncall", 20)]
    assert d.counters.notifications == 4


def test_resolves_of_a_storm_are_batched_too():
    d = dispatcher({"group_by": ["cluster"], "group_interval": "5m"})
    d.handle([move(f"g{i}", OK, ERR, T0) for i in range(50)], T0)
    d.tick(T0)
    d.handle([move(f"g{i}", ERR, OK, T0 + M) for i in range(50)], T0 + M)
    assert d.tick(T0 + M) == []  # group_interval not over
    [n] = d.tick(T0 + 5 * M)
    assert {a.event for a in n.alerts} == {Event.RESOLVE} and len(n.alerts) == 50
    assert d.next_due() is None and d.incidents(T0 + 5 * M, open_only=False) == []


def test_group_by_status_splits_warn_from_err():
    d = dispatcher({"group_by": ["cluster", "status"]})
    d.handle([move("a", OK, WARN, T0), move("b", OK, ERR, T0), move("c", OK, ERR, T0)], T0)
    keys = {n.group_key: len(n.alerts) for n in d.tick(T0)}
    assert keys == {'{cluster="prod",status="WARN"}': 1, '{cluster="prod",status="ERR"}': 2}


def test_group_by_ellipsis_is_one_group_per_incident():
    d = dispatcher({"group_by": ["..."]})
    d.handle([move("a", OK, WARN, T0), move("b", OK, ERR, T0)], T0)
    assert sorted(n.group_key for n in d.tick(T0)) == [
        '{cluster="prod",group="a"}',
        '{cluster="prod",group="b"}',
    ]


# --------------------------------------------------------------------------------------------
# Silences


def silence(matchers: Any, ends_at: int, *, starts_at: int | None = None, now: int = T0):
    return make_silence(
        matchers, ends_at=ends_at, starts_at=starts_at, author="me", comment="maintenance", now=now
    )


def test_a_silenced_incident_is_tracked_marked_and_notified_when_the_silence_expires():
    d = dispatcher({"group_interval": "1m"})
    d.add_silence(silence(['group="orders"'], T0 + 10 * M), T0)
    d.handle([move("orders", OK, ERR, T0), move("billing", OK, ERR, T0)], T0)

    assert events(d.tick(T0)) == [("oncall", "open", "billing")]
    [orders] = [i for i in d.incidents(T0) if i.group == "orders"]
    assert orders.silenced
    assert d.counters.held["silenced"] == 1
    assert d.next_due() == T0 + 10 * M  # the silence's end wakes the group

    assert events(d.tick(T0 + 10 * M)) == [("oncall", "open", "orders")]
    assert not next(i for i in d.incidents(T0 + 10 * M) if i.group == "orders").silenced


def test_a_silence_on_a_rule_holds_only_incidents_with_that_finding():
    d = dispatcher()
    d.add_silence(silence(['rule="retention"'], T0 + H), T0)
    d.handle(
        [
            move("a", OK, ERR, T0, findings=[finding(ERR, rule="retention")]),
            move("b", OK, ERR, T0),
        ],
        T0,
    )
    assert events(d.tick(T0)) == [("oncall", "open", "b")]


def test_deleting_a_silence_releases_what_it_held():
    d = dispatcher({"group_interval": "1m"})
    s = silence(["cluster=prod"], T0 + 24 * H)
    d.add_silence(s, T0)
    d.handle([move("orders", OK, ERR, T0)], T0)
    assert d.tick(T0) == []
    d.delete_silence(s.id, T0 + 5 * M)
    assert events(d.tick(T0 + 5 * M)) == [("oncall", "open", "orders")]


def test_a_silence_in_the_future_does_not_hold_yet():
    d = dispatcher()
    d.add_silence(silence(["cluster=prod"], T0 + 2 * H, starts_at=T0 + H), T0)
    d.handle([move("orders", OK, ERR, T0)], T0)
    assert events(d.tick(T0)) == [("oncall", "open", "orders")]


def test_a_resolve_is_sent_even_while_silenced():
    d = dispatcher()
    d.handle([move("orders", OK, ERR, T0)], T0)
    d.tick(T0)
    d.add_silence(silence(["cluster=prod"], T0 + H), T0 + M)
    d.handle([move("orders", ERR, OK, T0 + 2 * M)], T0 + 2 * M)
    assert events(d.tick(T0 + 2 * M)) == [("oncall", "resolve", "orders")]


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"matchers": []}, "matchers"),
        ({"matchers": ['group=~"("']}, "matchers[0]"),
        ({"matchers": ["shape=round"]}, "matchers"),
        ({"ends_at": T0 - 1}, "ends_at"),
        ({"starts_at": T0 + H, "ends_at": T0 + M}, "ends_at"),
        ({"author": " "}, "author"),
        ({"comment": ""}, "comment"),
    ],
)
def test_silence_validation_names_the_field(kwargs, field):
    request = {
        "matchers": ["cluster=prod"],
        "ends_at": T0 + H,
        "author": "me",
        "comment": "why",
        **kwargs,
    }
    from notifier.notify import SilenceError

    with pytest.raises(SilenceError) as exc:
        make_silence(now=T0, **request)
    assert field in dict(exc.value.problems)


def test_config_silences_are_loaded():
    d = dispatcher(
        silences=[
            {
                "matchers": ['group="batch"'],
                "ends_at": "2100-01-01T00:00:00Z",
                "author": "ops",
                "comment": "lags by design",
            }
        ]
    )
    d.handle([move("batch", OK, ERR, T0)], T0)
    assert d.tick(T0) == []
    assert [s.source for s in d.silences.values()] == ["config"]


# --------------------------------------------------------------------------------------------
# Inhibition


def test_a_cluster_down_raises_one_alert_and_mutes_its_groups():
    d = dispatcher(
        {
            "group_by": ["cluster"],
            "group_interval": "1m",
            "routes": [{"matchers": ["cluster=prod"], "receiver": "team"}],
        }
    )
    d.handle([move("orders", OK, ERR, T0)], T0)
    assert events(d.tick(T0)) == [("team", "open", "orders")]

    d.cluster_down("prod", T0 + M, "brokers unreachable: timed out")
    d.handle([move(f"g{i}", OK, ERR, T0 + M) for i in range(30)], T0 + M)
    d.handle([move("elsewhere", OK, ERR, T0 + M, cluster="dev")], T0 + M)
    sent = d.tick(T0 + 2 * M)
    assert events(sent) == [("team", "open", CLUSTER_GROUP), ("oncall", "open", "elsewhere")]
    cluster_alert = sent[0].alerts[0]
    assert cluster_alert.incident.cluster == "prod"
    assert "brokers unreachable" in cluster_alert.incident.findings[0].message
    assert d.counters.held["inhibited"] == 30
    # While it is down only the cluster alert repeats; its groups' alerts stay muted.
    later = events(d.tick(T0 + 10 * H))
    assert later == [("team", "repeat", CLUSTER_GROUP), ("oncall", "repeat", "elsewhere")]

    d.cluster_up("prod", T0 + 11 * H)
    [n] = d.tick(T0 + 11 * H)
    got = sorted((a.event.value, a.incident.group) for a in n.alerts)
    assert got == sorted(
        [("resolve", CLUSTER_GROUP), ("repeat", "orders")] + [("open", f"g{i}") for i in range(30)]
    )


def test_cluster_down_without_inhibition_still_notifies_groups():
    d = dispatcher({"group_by": ["cluster"]}, inhibit_cluster_down=False)
    d.cluster_down("prod", T0, "unreachable")
    d.handle([move("orders", OK, ERR, T0)], T0)
    [n] = d.tick(T0)
    assert sorted(a.incident.group for a in n.alerts) == [CLUSTER_GROUP, "orders"]


def test_cluster_down_twice_is_one_incident():
    d = dispatcher()
    first = d.cluster_down("prod", T0, "a")
    assert d.cluster_down("prod", T0 + M, "b") is None
    assert first is not None and first.id == d.book.clusters["prod"].id


# --------------------------------------------------------------------------------------------
# Persistence hooks


def test_restore_from_changes_neither_resends_nor_forgets():
    d = dispatcher({"group_by": ["cluster"], "repeat_interval": "1h"})
    d.handle([move("a", OK, ERR, T0), move("b", OK, WARN, T0)], T0)
    d.tick(T0)
    changes = d.take_changes()
    incidents = {i.id: (i, r, k) for i, r, k in changes.incidents}

    fresh = dispatcher({"group_by": ["cluster"], "repeat_interval": "1h"})
    fresh.restore(incidents.values(), changes.log, T0 + M)
    assert fresh.tick(T0 + M) == []  # both were sent: nothing again
    assert sorted(i.group for i in fresh.incidents(T0 + M)) == ["a", "b"]
    fresh.handle([move("a", ERR, OK, T0 + 2 * M)], T0 + 2 * M)
    assert events(fresh.tick(T0 + 2 * M)) == [("oncall", "resolve", "a")]
    assert events(fresh.tick(T0 + H)) == [("oncall", "repeat", "b")]


def test_take_changes_reports_what_to_store_and_forget():
    d = dispatcher()
    d.handle([move("a", OK, ERR, T0)], T0)
    d.tick(T0)
    first = d.take_changes()
    assert [i.group for i, _r, _k in first.incidents] == ["a"]
    assert [(e.route, e.last_event) for e in first.log] == [("root", Event.OPEN)]
    d.handle([move("a", ERR, OK, T0 + M)], T0 + M)
    d.tick(T0 + M)
    second = d.take_changes()
    assert second.forget == [first.incidents[0][0].id]
    assert d.take_changes().incidents == []
