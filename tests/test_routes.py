"""Routing: first match wins unless ``continue``, matchers on any finding's rule, topic and
severity, negative matchers and missing labels, and resolves that follow the route that sent
the open.
"""

from __future__ import annotations

from .notify_helpers import ERR, OK, T0, WARN, M, dispatcher, events, finding, move

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
