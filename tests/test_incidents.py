"""Incidents through the dispatcher: open, escalate, resolve (or gone) with one stable id,
findings accumulating over an incident's life, and ids the backtest can replay.
"""

from __future__ import annotations

from notifier.types import Event, Transition

from .notify_helpers import ERR, GONE, OK, T0, WARN, M, S, dispatcher, finding, move, result


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
