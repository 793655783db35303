"""PagerDuty Events API v2, against a real loopback receiver (notifier/demo/receivers.py): trigger
and resolve events, severities, PagerDuty's size limits, error classification, and a routing
key that never shows.
"""

from __future__ import annotations

import pytest

from notifier.demo import HttpReceiver
from notifier.notify.channels.pagerduty import PagerDuty
from notifier.types import Event, Finding, GroupStatus, Severity

from .channel_helpers import make_alert, make_notification, many_alerts

ROUTING_KEY = "R0UT1NGK3Y0000000000000000000000"


def pagerduty(http: HttpReceiver, **kwargs) -> PagerDuty:
    return PagerDuty(ROUTING_KEY, url=http.url_for("/v2/enqueue"), **kwargs)


async def test_pagerduty_trigger_event_carries_the_incident(http):
    async with pagerduty(http) as pd:
        delivery = await pd.send(make_notification(make_alert(Event.OPEN)))

    assert delivery.ok and delivery.status_code == 202
    [request] = http.to("/v2/enqueue")
    event = request.json
    assert event["routing_key"] == ROUTING_KEY
    assert event["event_action"] == "trigger"
    assert event["dedup_key"] == "prod/orders/1714556400000"
    payload = event["payload"]
    assert payload["summary"] == (
        "[ERR] prod/orders: 48k messages, 47 min behind (worst: orders[3]) · "
        "STALL orders[3]: committed offset stopped moving while lag grew"
    )
    assert (payload["source"], payload["component"], payload["group"]) == (
        "prod",
        "orders",
        "prod",
    )
    assert (payload["severity"], payload["class"]) == ("error", "ERR")
    assert payload["timestamp"] == "2024-05-01T10:40:00Z"
    details = payload["custom_details"]
    assert details["findings"][0]["evidence"] == {"lag_start": 1200, "lag_end": 48_000}
    assert details["behind"] == "47 min"
    assert event["links"] == [{"href": "https://notifier.example/status", "text": "Status page"}]
    assert delivery.meta["events"] == [
        {
            "dedup_key": "prod/orders/1714556400000",
            "event_action": "trigger",
            "ok": True,
            "status_code": 202,
        }
    ]


async def test_pagerduty_resolve_sends_only_what_resolve_needs(http):
    async with pagerduty(http) as pd:
        await pd.send(make_notification(make_alert(Event.RESOLVE, status=GroupStatus.OK)))

    assert http.to("/v2/enqueue")[0].json == {
        "routing_key": ROUTING_KEY,
        "event_action": "resolve",
        "dedup_key": "prod/orders/1714556400000",
    }


async def test_pagerduty_sends_one_event_per_alert_with_mapped_severity(http):
    notification = make_notification(
        make_alert(Event.ESCALATE, group="a"),
        make_alert(Event.REPEAT, group="b", status=GroupStatus.WARN),
        make_alert(Event.RESOLVE, group="c", status=GroupStatus.OK),
    )
    async with pagerduty(http, severity_map={"WARN": "info", "ERR": "critical"}) as pd:
        assert (await pd.send(notification)).ok

    events = [r.json for r in http.to("/v2/enqueue")]
    assert [e["event_action"] for e in events] == ["trigger", "trigger", "resolve"]
    assert [e["payload"]["severity"] for e in events[:2]] == ["critical", "info"]
    assert [e["dedup_key"].split("/")[1] for e in events] == ["a", "b", "c"]


async def test_pagerduty_limits_summary_dedup_key_and_event_size(http):
    huge = {"samples": ["x" * 1000] * 1000}  # ~1 MB of evidence
    findings = [Finding("r", "k", Severity.ERR, "STALL", "t", 0, "m", huge)]
    alert = make_alert(group="g" * 2000, findings=findings)
    async with pagerduty(http) as pd:
        assert (await pd.send(make_notification(alert))).ok

    [request] = http.to("/v2/enqueue")
    event = request.json
    assert len(request.body) < 512 * 1024
    assert len(event["payload"]["summary"]) <= 1024
    assert len(event["dedup_key"]) <= 255
    assert event["payload"]["custom_details"]["trimmed"] is True


@pytest.mark.parametrize(
    ("status", "retryable"), [(400, False), (429, True), (500, True), (502, True)]
)
async def test_pagerduty_errors_are_classified(http, status, retryable):
    http.reply(
        "/v2/enqueue",
        status,
        json_body={"status": "invalid event", "message": "Event object is invalid"},
        headers={"Retry-After": "12"} if status == 429 else None,
    )
    async with pagerduty(http) as pd:
        delivery = await pd.send(make_notification())

    assert (delivery.ok, delivery.retryable, delivery.status_code) == (False, retryable, status)
    assert delivery.error.startswith(f"trigger prod/orders/1714556400000: HTTP {status}")
    assert ROUTING_KEY not in delivery.error
    if status == 429:
        assert delivery.retry_after == 12.0


async def test_pagerduty_stops_at_a_retryable_failure_but_not_at_a_bad_event(http):
    http.reply("/v2/enqueue", 400, json_body={"status": "invalid event"}, times=1)
    http.reply("/v2/enqueue", 500, text="down", times=1)
    async with pagerduty(http) as pd:
        delivery = await pd.send(make_notification(*many_alerts(4)))

    assert len(http.to("/v2/enqueue")) == 2  # the 400 did not stop it, the 500 did
    assert (delivery.ok, delivery.retryable) == (False, True)
    assert [e["ok"] for e in delivery.meta["events"]] == [False, False]


def test_pagerduty_rejects_severities_it_does_not_know():
    with pytest.raises(ValueError, match="severities"):
        PagerDuty(ROUTING_KEY, severity_map={"ERR": "sev1"})


def test_pagerduty_routing_key_not_in_repr():
    pd = PagerDuty(ROUTING_KEY)
    assert ROUTING_KEY not in repr(pd) + repr(pd.routing_key) + str(pd.routing_key)
