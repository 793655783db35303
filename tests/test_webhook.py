"""The generic webhook, against a real loopback receiver (notifier/demo/receivers.py): the
documented default body, auth, custom body templates, and credentials that never show.
"""

from __future__ import annotations

import logging

from notifier.notify.channels.webhook import Webhook, webhook_payload
from notifier.types import Event, GroupStatus

from .channel_helpers import make_alert, make_notification


async def test_webhook_default_body_is_the_documented_document(http):
    notification = make_notification(
        make_alert(Event.OPEN), make_alert(Event.RESOLVE, group="billing", status=GroupStatus.OK)
    )
    async with Webhook(http.url_for("/hook"), headers={"X-Team": "data"}) as hook:
        delivery = await hook.send(notification)

    assert delivery.ok
    [request] = http.to("/hook")
    assert request.method == "POST"
    assert request.headers["x-team"] == "data"
    body = request.json
    assert body["version"] == "1"
    assert (body["receiver"], body["group_key"]) == ("oncall", '{cluster="prod"}')
    assert body["status"] == "firing"  # firing while any alert fires
    assert body["status_page_url"] == "https://notifier.example/status"
    firing, resolved = body["alerts"]
    assert (firing["event"], firing["status"]) == ("open", "firing")
    assert (resolved["event"], resolved["status"]) == ("resolve", "resolved")
    assert firing["incident"] == {
        "id": "prod/orders/1714556400000",
        "cluster": "prod",
        "group": "orders",
        "status": "ERR",
        "peak_status": "ERR",
        "opened_at": "2024-05-01T09:40:00Z",
        "closed_at": None,
        "close_reason": None,
        "findings": firing["findings"],
    }
    result = firing["result"]
    assert (result["status"], result["complete"], result["total_lag"]) == ("ERR", 1.0, 48_000)
    assert result["max_lag_seconds"] == 2820
    assert result["partitions"][0]["lag"] == 48_000
    assert firing["findings"][0]["evidence"] == {"lag_start": 1200, "lag_end": 48_000}
    assert resolved["incident"]["closed_at"] == "2024-05-01T10:40:00Z"


async def test_webhook_sends_bearer_or_basic_auth(http):
    async with Webhook(http.url_for("/bearer"), bearer_token="t0ken-abcdef") as hook:
        await hook.send(make_notification())
    async with Webhook(http.url_for("/basic"), basic_auth=("user", "pa55word")) as hook:
        await hook.send(make_notification())

    assert http.to("/bearer")[0].headers["authorization"] == "Bearer t0ken-abcdef"
    assert http.to("/basic")[0].headers["authorization"] == "Basic dXNlcjpwYTU1d29yZA=="


async def test_webhook_custom_template_renders_the_body(http, tmp_path):
    template = tmp_path / "opsgenie.json.j2"
    template.write_text(
        '{"message": {{ (alert.incident.group ~ " is " ~ (alert|alert_status))|tojson }},\n'
        ' "alias": {{ alert.incident.id|tojson }},\n'
        ' "alerts": {{ payload.alerts|length }}}\n'
    )
    async with Webhook(http.url_for("/custom"), body_template=template, method="PUT") as hook:
        delivery = await hook.send(make_notification())

    assert delivery.ok
    [request] = http.to("/custom")
    assert request.method == "PUT"
    assert request.json == {
        "message": "orders is ERR",
        "alias": "prod/orders/1714556400000",
        "alerts": 1,
    }


async def test_webhook_shipped_text_template_suits_chat_bridges(http):
    async with Webhook(http.url_for("/mattermost"), body_template="webhook/text.json.j2") as hook:
        await hook.send(make_notification())

    text = http.to("/mattermost")[0].json["text"]
    assert text.splitlines()[0] == "Consumer lag ERR: prod/orders"


async def test_webhook_template_with_invalid_json_sends_the_built_in_body_and_says_so(
    http, tmp_path, caplog
):
    template = tmp_path / "broken.json.j2"
    template.write_text('{"group": {{ alert.incident.group }}}')  # forgot |tojson
    caplog.set_level(logging.ERROR, logger="notifier.notify")
    async with Webhook(http.url_for("/custom"), body_template=template) as hook:
        delivery = await hook.send(make_notification())

    assert delivery.ok
    [request] = http.to("/custom")
    assert request.json == webhook_payload(make_notification())
    [line] = caplog.records
    assert (line.event, line.template) == ("template_failed", str(template))
    assert "invalid JSON" in line.error


async def test_webhook_url_credentials_never_appear(http):
    url = http.url_for("/hook?token=SuperS3cretQuery")
    http.reply("/hook", 403, text="forbidden for https://x/hook?token=SuperS3cretQuery")
    hook = Webhook(url, basic_auth=("user", "B4sicPassw0rd"))
    async with hook:
        delivery = await hook.send(make_notification())

    assert (delivery.ok, delivery.retryable) == (False, False)
    assert "SuperS3cretQuery" not in delivery.error
    assert "SuperS3cretQuery" not in repr(hook) + repr(hook.url)
    assert "B4sicPassw0rd" not in repr(hook.basic_auth)


async def test_webhook_credential_headers_are_sent_but_never_shown(http):
    http.reply("/hook", 401, text="bad key Ap1K3y-0000-1111")
    hook = Webhook(http.url_for("/hook"), headers={"X-Api-Key": "Ap1K3y-0000-1111"})
    async with hook:
        delivery = await hook.send(make_notification())

    assert http.to("/hook")[0].headers["x-api-key"] == "Ap1K3y-0000-1111"
    assert delivery.error == "HTTP 401: bad key ***"
    assert repr(hook.headers["X-Api-Key"]) == "Secret('***')"
