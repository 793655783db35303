"""Inhibit rules, the Alertmanager way, through the notifier to a real HTTP receiver.

An alert here is one finding of an incident, labelled cluster, group, topic, rule, severity and
its rule's labels. While a source alert fires, target alerts with the same `equal` labels are
muted: an incident whose findings are all muted is held back, one with some muted findings is
sent with them set apart. The built-in rules: a down cluster mutes its groups, a group's ERR
mutes its WARN.
"""

from __future__ import annotations

from notifier.notify.config import parse_notify
from notifier.types import Finding, GroupStatus, Severity
from tests.notify_helpers import FAST_DELIVERY, eventually, move, now_ms

OK, WARN, ERR = GroupStatus.OK, GroupStatus.WARN, GroupStatus.ERR


def lag_finding(rule: str, severity: Severity, team: str = "data") -> Finding:
    return Finding(
        rule=rule,
        kind="lag",
        severity=severity,
        status=severity.value.upper(),
        topic="orders",
        partition=0,
        message="behind",
        labels={"team": team},
    )


def notify(url: str, **top):
    return parse_notify(
        {
            "receivers": {
                "oncall": {"webhook": {"url": url + "/oncall"}},
                "data": {"webhook": {"url": url + "/data"}},
            },
            "route": {
                "receiver": "oncall",
                "group_wait": 0,
                "group_interval": 0,
                "group_by": ["..."],
                "threshold": "err",
                "routes": [
                    {"matchers": ['severity="warn"'], "receiver": "data", "threshold": "warn"}
                ],
            },
            "delivery": FAST_DELIVERY,
            **top,
        },
        env={},
    )


def opened(http, path: str) -> list[str]:
    return [
        alert["incident"]["group"]
        for request in http.to(path)
        for alert in request.json["alerts"]
        if alert["event"] == "open"
    ]


async def test_an_err_mutes_the_warn_of_its_own_group_only(http, notifiers, tmp_path):
    n = await notifiers(notify(http.url), tmp_path / "n.sqlite")
    now = now_ms()
    both = [lag_finding("lag-err", Severity.ERR), lag_finding("lag-warn", Severity.WARN)]
    n.handle([move("orders", OK, ERR, now, findings=both)])
    n.handle([move("billing", OK, WARN, now, findings=[both[1]])])
    await eventually(lambda: opened(http, "/oncall") and opened(http, "/data"))
    await n.wait_delivered(5)

    # The WARN route hears of billing (only a WARN), not of orders, whose WARN its ERR mutes.
    assert opened(http, "/data") == ["billing"]
    (alert,) = http.to("/oncall")[0].json["alerts"]
    assert [f["rule"] for f in alert["findings"]] == ["lag-err"]
    assert [f["rule"] for f in alert["muted_findings"]] == ["lag-warn"]


async def test_a_custom_rule_mutes_downstream_groups_until_the_source_resolves(
    http, notifiers, tmp_path
):
    rules = [
        {
            "name": "upstream-first",
            "source_matchers": ['group="etl"', 'severity="err"'],
            "target_matchers": ['group=~"report-.*"'],
            "equal": ["cluster", "team"],
        }
    ]
    n = await notifiers(notify(http.url, inhibit_rules=rules), tmp_path / "n.sqlite")
    now = now_ms()
    err = lag_finding("lag-err", Severity.ERR)
    n.handle([move("etl", OK, ERR, now, findings=[err])])
    n.handle([move("report-daily", OK, ERR, now, findings=[err])])
    # Same group pattern, another team: `equal: [team]` keeps it apart.
    other = lag_finding("lag-err", Severity.ERR, team="finance")
    n.handle([move("report-ledger", OK, ERR, now, findings=[other])])
    # Another cluster: `equal: [cluster]` keeps it apart.
    n.handle([move("report-daily", OK, ERR, now, cluster="dr", findings=[err])])
    await eventually(lambda: len(opened(http, "/oncall")) == 3)
    await n.wait_delivered(5)
    assert sorted(opened(http, "/oncall")) == ["etl", "report-daily", "report-ledger"]
    assert n.core.counters.held["inhibited"] >= 1

    # The source resolves: what it muted is told at once.
    n.handle([move("etl", ERR, OK, now + 1000)])
    await eventually(lambda: len(opened(http, "/oncall")) == 4)
    assert opened(http, "/oncall")[-1] == "report-daily"


async def test_the_built_in_cluster_down_rule_can_be_left_out(http, notifiers, tmp_path):
    rules = [
        {
            "source_matchers": ['severity="err"'],
            "target_matchers": ['severity="warn"'],
            "equal": ["cluster", "group"],
        }
    ]
    n = await notifiers(notify(http.url, inhibit_rules=rules), tmp_path / "n.sqlite")
    now = now_ms()
    n.cluster_down("prod", now, "no answer")
    n.handle([move("orders", OK, ERR, now, findings=[lag_finding("lag-err", Severity.ERR)])])
    await eventually(lambda: len(opened(http, "/oncall")) == 2)
    assert sorted(opened(http, "/oncall")) == ["*", "orders"]


def test_inhibit_rules_and_inhibit_cluster_down_cannot_both_be_given():
    import pytest

    from notifier.config import ConfigError

    with pytest.raises(ConfigError) as exc:
        parse_notify(
            {
                "receivers": {"r": {"webhook": {"url": "http://127.0.0.1:9/"}}},
                "route": {"receiver": "r"},
                "inhibit_rules": [{"source_matchers": ['severity="err"']}],
                "inhibit_cluster_down": False,
            },
            "notify.yaml",
        )
    assert "inhibit_cluster_down" in dict(exc.value.problems)


def test_rules_files_with_bad_labels_or_annotations_are_refused_naming_the_field():
    import pytest

    from notifier.config import ConfigError
    from notifier.rules import parse_rules

    with pytest.raises(ConfigError) as exc:
        parse_rules(
            {
                "rules": [
                    {"name": "a", "kind": "rewind", "labels": {"severity": "page"}},
                    {"name": "b", "kind": "rewind", "annotations": {"summary": "{{ grup }}"}},
                    {"name": "c", "kind": "rewind", "annotations": {"summary": "{% if %}"}},
                ]
            },
            "rules.yaml",
        )
    problems = dict(exc.value.problems)
    assert "built in" in problems["rules.a.labels"]
    assert "unknown variable(s) grup" in problems["rules.b.annotations"]
    assert "template error on line 1" in problems["rules.c.annotations"]
