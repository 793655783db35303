"""The planning core: pure, synchronous, simulated time.

Everything here drives :class:`~notifier.notify.dispatcher.Dispatcher` with explicit ``now``
values (ms), as the backtest does: thresholds, ``repeat_interval``, ``send_resolved``, grouping
storms, cluster-down inhibition, restore — and Burrow's notifier vectors where our semantics
match, with the deliberate differences tested as such. Incidents, routing and silences have
their own files; delivery over real sockets is in ``test_delivery.py``.
"""

from __future__ import annotations

from typing import Any

import pytest

from notifier.api.incidents import timeline
from notifier.notify import CLUSTER_GROUP, Dispatcher
from notifier.types import Event, GroupStatus, Notification

from .conformance import load_vectors
from .notify_helpers import ERR, OK, T0, WARN, H, M, S, dispatcher, events, move

# --------------------------------------------------------------------------------------------
# Burrow's notifier vectors


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


@pytest.mark.parametrize(
    "vector", load_vectors("burrow_notifier_vectors.json"), ids=lambda v: v["name"]
)
def test_burrow_notifier_vectors(vector):
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
    """The complete-flag gate is TransitionTracker's: a partial result becomes a transition
    only where a rule that needs no whole window raises it, so the notifier only ever sees
    gated changes. (tests/test_rules.py covers the gate.)"""
    from notifier.rules import TransitionTracker

    assert "partial result" in (TransitionTracker.__doc__ or "")


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
    # The cluster alert has an aggregation group of its own (it never waits behind the
    # groups' group_interval): its resolve is one notification, its groups' alerts another.
    resolved, groups = d.tick(T0 + 11 * H)
    assert [(a.event.value, a.incident.group) for a in resolved.alerts] == [
        ("resolve", CLUSTER_GROUP)
    ]
    assert resolved.group_key == '{cluster="prod",alert="cluster-down"}'
    got = sorted((a.event.value, a.incident.group) for a in [*resolved.alerts, *groups.alerts])
    assert got == sorted(
        [("resolve", CLUSTER_GROUP), ("repeat", "orders")] + [("open", f"g{i}") for i in range(30)]
    )


def test_cluster_down_without_inhibition_still_notifies_groups():
    d = dispatcher({"group_by": ["cluster"]}, inhibit_cluster_down=False)
    d.cluster_down("prod", T0, "unreachable")
    d.handle([move("orders", OK, ERR, T0)], T0)
    cluster_alert, groups = d.tick(T0)  # the cluster alert in a group of its own
    alerts = [*cluster_alert.alerts, *groups.alerts]
    assert sorted(a.incident.group for a in alerts) == [CLUSTER_GROUP, "orders"]


def test_a_cluster_down_alert_does_not_wait_behind_the_groups_interval():
    """The cluster's groups were notified a minute ago (group_interval 5m): the cluster-down
    alert, which mutes them all, goes out at once (cluster_down_wait, default 0), or after
    the wait configured, not at the groups' next flush four minutes later."""
    for wait, due in ((0.0, T0 + M), (20.0, T0 + M + 20 * S)):
        d = dispatcher({"group_by": ["cluster"], "group_wait": "30s", "group_interval": "5m"},
                       cluster_down_wait=wait)  # fmt: skip
        d.handle([move("orders", OK, ERR, T0)], T0)
        assert events(d.tick(T0 + 30 * S)) == [("oncall", "open", "orders")]
        d.cluster_down("prod", T0 + M, "brokers unreachable: timed out")
        assert d.next_due() == due
        assert d.tick(due - 1) == []
        assert events(d.tick(due)) == [("oncall", "open", CLUSTER_GROUP)]


def test_a_held_incident_says_what_it_waits_for_and_until_when():
    d = dispatcher({"group_by": ["cluster"], "group_wait": "30s", "group_interval": "5m"},
                   cluster_down_wait=20.0)  # fmt: skip
    d.handle([move("orders", OK, ERR, T0)], T0)
    [orders] = d.incidents(T0)
    assert d.waiting(orders.id, T0) == [
        {"route": "root", "receiver": "oncall", "reason": "group_wait", "until": T0 + 30 * S}
    ]
    d.tick(T0 + 30 * S)
    d.handle([move("billing", OK, ERR, T0 + M)], T0 + M)  # joins the group flushed at 30 s
    billing = next(i for i in d.incidents(T0 + M) if i.group == "billing")
    [waits] = d.waiting(billing.id, T0 + M)
    assert (waits["reason"], waits["until"]) == ("group_interval", T0 + 30 * S + 5 * M)
    down = d.cluster_down("prod", T0 + 2 * M, "brokers unreachable")
    assert down is not None
    assert d.waiting(down.id, T0 + 2 * M) == [{"route": "root", "receiver": "oncall",
                                               "reason": "cluster_down_wait",
                                               "until": T0 + 2 * M + 20 * S}]  # fmt: skip
    assert d.waiting(orders.id, T0 + 2 * M)[0]["reason"] == "inhibited"

    [entry] = [e for e in timeline(down, [], d.waiting(down.id, T0 + 2 * M), T0 + 2 * M)
               if e["text"].startswith("no notification")]  # fmt: skip
    assert entry["text"] == (
        "no notification sent yet: route root (to oncall) waits: the cluster-down alert's "
        "cluster_down_wait until 2024-05-01 10:42:20 UTC (in 20 s)"
    )


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


# --------------------------------------------------------------------------------------------
# News: a rule that begins firing at the status already notified


def _news(group: str, status: GroupStatus, at: int, rules: list[str]) -> Any:
    """The same-status transition the tracker makes when ``rules[-1]`` joins the others."""
    from notifier.types import Transition

    from .notify_helpers import finding, result

    findings = [finding(status, rule=rule) for rule in rules]
    return Transition(
        "prod", group, status, status, at, result("prod", group, status, at, findings),
        news=(rules[-1],),
    )  # fmt: skip


def test_a_rule_that_joins_an_open_incident_at_its_status_is_sent_as_news():
    """A group paged as stopped whose offsets are then rewound: the incident stays ERR, and
    the on-call hears of the rewind at once (as Alertmanager tells a group of a new alert),
    not at the next repeat hours later."""
    from .notify_helpers import finding

    d = dispatcher({"repeat_interval": "4h"})
    d.handle([move("g", OK, ERR, T0, findings=[finding(ERR, rule="stalled-or-stopped")])], T0)
    assert events(d.tick(T0)) == [("oncall", "open", "g")]

    d.handle([_news("g", ERR, T0 + M, ["stalled-or-stopped", "rewound"])], T0 + M)
    [sent] = d.tick(T0 + M)
    [alert] = sent.alerts
    assert alert.event is Event.ESCALATE and alert.news == ["rewound"]
    # Told once: the same rules firing again are not news, nor is a repeat before its time.
    d.handle([_news("g", ERR, T0 + 2 * M, ["stalled-or-stopped", "rewound"])], T0 + 2 * M)
    assert d.tick(T0 + 2 * M) == []


def test_a_warn_rule_joining_an_err_incident_is_not_news():
    """ERR mutes WARN: a group stalled (ERR) that is also falling behind (WARN) was told of
    its ERR; the WARN joining it says nothing new."""
    from .notify_helpers import finding

    d = dispatcher()
    d.handle([move("g", OK, ERR, T0, findings=[finding(ERR, rule="stalled-or-stopped")])], T0)
    d.tick(T0)
    both = [finding(ERR, rule="stalled-or-stopped"), finding(WARN, rule="falling-behind")]
    d.handle([move("g", ERR, ERR, T0 + M, findings=both)], T0 + M)
    assert d.tick(T0 + M) == []


def test_a_log_without_rules_counts_every_rule_as_told():
    """An incident restored from a log kept before rules were logged is not re-notified for
    the rules it already fires for; from its next notification on, its rules are kept."""
    from .notify_helpers import finding

    d = dispatcher({"repeat_interval": "1h"})
    d.handle([move("g", OK, ERR, T0, findings=[finding(ERR, rule="stalled-or-stopped")])], T0)
    d.tick(T0)
    changes = d.take_changes()
    for entry in changes.log:
        entry.sent_rules = None
    fresh = dispatcher({"repeat_interval": "1h"})
    fresh.restore([(i, r, k) for i, r, k in changes.incidents], changes.log, T0 + M)
    fresh.handle([_news("g", ERR, T0 + M, ["stalled-or-stopped", "rewound"])], T0 + M)
    assert fresh.tick(T0 + M) == []
    assert events(fresh.tick(T0 + H)) == [("oncall", "repeat", "g")]
    fresh.handle([_news("g", ERR, T0 + H + M, ["stalled-or-stopped", "rewound", "x"])], T0 + H + M)
    [sent] = fresh.tick(T0 + H + M)
    assert [a.news for a in sent.alerts] == [["x"]]
