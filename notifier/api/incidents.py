"""``/api/incidents``: incidents with what each channel was sent and whether it was delivered
(open ones first), and one incident with its timeline. Read-only.

The notifier's outbox is read in worker threads (``api.in_thread``, see
:mod:`notifier.api.context`), so a busy outbox never holds up the event loop the scans run on.
In a fleet, an incident of another instance's group is that instance's answer.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any
from urllib.parse import quote

from fastapi import APIRouter, HTTPException, Query, Request

from notifier.api.context import Api, ApiContext
from notifier.api.errors import NOT_FOUND
from notifier.api.models import IncidentDetail, IncidentList
from notifier.api.notifylog import (
    Delivery,
    channel_summary,
    deliveries,
    incidents_between,
    overall_state,
)
from notifier.api.owner import ask_instance, forwarded, not_in_view
from notifier.api.sources import FleetSource
from notifier.api.views import jsonable
from notifier.notify.channels.format import humanize_seconds
from notifier.types import Incident

CLUSTER_GROUP = "*"
"""The group of a cluster-down incident (:data:`notifier.notify.incidents.CLUSTER_GROUP`)."""
RECENT_INCIDENTS = 200
"""How many incidents ``/api/incidents`` lists by default (open ones always come first)."""

router = APIRouter(tags=["notifier"])


@router.get("/api/incidents", response_model=IncidentList)
async def api_incidents(
    api: Api,
    open_only: bool = Query(False, description="only the open ones"),
    limit: int = Query(RECENT_INCIDENTS, ge=1, le=1000, description="at most this many"),
) -> dict[str, Any]:
    """Open incidents first (worst first), then recent ones newest first; each with how
    long it was open and, per channel, the state of its latest notification."""
    notifier = api.notifier
    if notifier is None:
        return {"incidents": []}
    now = api.clock()
    current = notifier.incidents(open_only=True)
    listed = {i.id: i for i in current}
    if not open_only:
        for incident in notifier.incidents(open_only=False, limit=limit):
            listed.setdefault(incident.id, incident)
    ordered = sorted(listed.values(), key=lambda i: _incident_order(i))[:limit]
    sent = await _deliveries(api, ordered)
    return {"incidents": [incident_out(i, sent[i.id], now) for i in ordered]}


@router.get(
    "/api/incidents/{incident_id}",
    response_model=IncidentDetail,
    responses={404: NOT_FOUND[404]},
)
async def api_incident(incident_id: str, request: Request, api: Api) -> dict[str, Any]:
    """One incident: its findings, what happened to it (opened, each notification planned,
    closed) and every notification per channel with its delivery state. In a fleet, an
    incident of another instance's group is that instance's answer."""
    notifier, fleet = api.notifier, api.fleet
    if notifier is None:
        raise HTTPException(404, "incidents need notifications to be configured (notify:)")
    incident = next((i for i in notifier.incidents(open_only=True) if i.id == incident_id),
                    None)  # fmt: skip
    if incident is None:
        incident = next(
            (i for i in notifier.incidents(open_only=False) if i.id == incident_id), None
        )
    if incident is None and fleet is not None and not forwarded(request):
        return await _others_incident(fleet, incident_id)
    if incident is None:
        raise HTTPException(404, "no such incident")
    sent = (await _deliveries(api, [incident]))[incident.id]
    waiting = notifier.waiting(incident.id) if not sent else []
    return {
        "incident": incident_out(incident, sent, api.clock()),
        "timeline": timeline(incident, sent, waiting, api.clock()),
        "deliveries": [d.to_dict() for d in sent],
        "instance": fleet.instance if fleet is not None else None,
    }


async def incident_spans(
    api: ApiContext, cluster: str, group: str, start: int, end: int
) -> list[Any]:
    """The group's incidents and its cluster's outages overlapping ``[start, end)`` (the
    chart's spans), as the notifier sees the open ones now."""
    notifier = api.notifier
    if notifier is None:
        return []
    spans = await api.in_thread(incidents_between, notifier.store.path, cluster, group, start,
                                end)  # fmt: skip
    live = {i.id: i for i in notifier.incidents(open_only=True)}
    for span in spans:
        incident = live.get(span["id"])
        if incident is not None:  # the notifier's own view: silenced as of now
            span.update(status=incident.status.value, silenced=incident.silenced)
    return spans


async def _deliveries(api: ApiContext, incidents: list[Incident]) -> dict[str, list[Delivery]]:
    notifier = api.notifier
    assert notifier is not None
    if not incidents:
        return {}
    since = min(i.opened_at for i in incidents)
    ids = [i.id for i in incidents]
    found: dict[str, list[Delivery]] = await api.in_thread(
        deliveries, notifier.store.path, ids, since
    )
    return found


async def _others_incident(fleet: FleetSource, incident_id: str) -> dict[str, Any]:
    """The incident from the instance whose group has it open (the view says which), else
    from whichever other instance has it (a closed one is only in its owner's outbox)."""
    path = f"/api/incidents/{quote(incident_id, safe='')}"
    owner = fleet.incident_owner(incident_id)
    if owner is not None:
        asked = [owner]
    elif fleet.available:
        asked = fleet.other_members()
    else:
        raise not_in_view(fleet, "the incident")
    what = f"incident {incident_id}"
    answers = await asyncio.gather(
        *(ask_instance(fleet, name, base, path, None, what) for name, base in asked),
        return_exceptions=True,
    )
    unreachable = []
    for (name, _base), answer in zip(asked, answers, strict=True):
        if isinstance(answer, HTTPException):
            unreachable.append(str(answer.detail))
        elif isinstance(answer, BaseException):
            raise answer
        elif answer.status_code == 200:
            return {**answer.json(), "instance": name}
    if unreachable:
        raise HTTPException(
            503, "no instance that answered has the incident; " + "; ".join(unreachable)
        )
    raise HTTPException(404, "no such incident (on any instance of the fleet)")


def _incident_order(incident: Incident) -> tuple[Any, ...]:
    """Open before closed; open ones worst first (a cluster that is down first of all), then
    oldest; closed ones newest first."""
    if incident.closed_at is None:
        cluster_down = incident.group == CLUSTER_GROUP
        return (0, not cluster_down, -incident.status.rank, incident.opened_at, incident.id)
    return (1, -incident.closed_at, incident.id)


def incident_out(incident: Incident, sent: list[Delivery], now: int) -> dict[str, Any]:
    """An incident as ``/api/incidents`` lists it (the fields it always had, then how long it
    was open and its delivery state per channel)."""
    channels = channel_summary(sent)
    until = incident.closed_at if incident.closed_at is not None else now
    return {
        "id": incident.id, "cluster": incident.cluster, "group": incident.group,
        "status": incident.status.value, "peak_status": incident.peak_status.value,
        "opened_at": incident.opened_at, "closed_at": incident.closed_at,
        "close_reason": incident.close_reason, "silenced": incident.silenced,
        "findings": [jsonable(f.to_dict()) for f in incident.findings],
        "duration_seconds": round(max(0, until - incident.opened_at) / 1000, 1),
        "delivery": overall_state(channels), "channels": channels,
    }  # fmt: skip


_EVENT_WORDS = {
    "open": "notified as opened",
    "escalate": "notified as escalated",
    "repeat": "reminder sent",
    "resolve": "notified as resolved",
}


_WAITING_WORDS = {
    "group_wait": "its group_wait (alerts that come together go out together)",
    "cluster_down_wait": "the cluster-down alert's cluster_down_wait",
    "group_interval": "the group_interval since the last notification of its aggregation group",
    "silenced": "silenced",
    "inhibited": "muted by an inhibit rule (a cluster-down alert, or its own ERR), until that ends",
    "below_threshold": "below the route's threshold",
    "sent": "notified; nothing new to send",
}


def waiting_text(waiting: Mapping[str, Any], now: int) -> str:
    """``route default (to ops) waits for its group_wait (…) until 12:00:30 UTC (in 25 s)``."""
    what = _WAITING_WORDS.get(waiting["reason"], waiting["reason"])
    until = waiting.get("until")
    when = ""
    if until is not None:
        stamp = datetime.fromtimestamp(until / 1000, UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
        when = f" until {stamp} (in {humanize_seconds(max(0, until - now) / 1000)})"
    return f"route {waiting['route']} (to {waiting['receiver']}) waits: {what}{when}"


def timeline(
    incident: Incident,
    sent: list[Delivery],
    waiting: Sequence[Mapping[str, Any]] = (),
    now: int = 0,
) -> list[dict[str, Any]]:
    """What happened to the incident, oldest first: opened, each notification planned (once,
    however many channels it went to) with the status it carried, closed. The statuses the
    notifications carried are the incident's status changes as its receivers saw them. Until
    a notification is sent, what each route ``waiting`` for it waits for, and until when."""
    entries: list[dict[str, Any]] = [
        {"at": incident.opened_at, "event": "opened", "status": None,
         "text": f"opened for {incident.cluster}/{incident.group}"}
    ]  # fmt: skip
    planned: dict[str, list[Delivery]] = {}
    for delivery in sent:
        planned.setdefault(delivery.notification_id, []).append(delivery)
    for rows in planned.values():
        first = rows[0]
        channels = ", ".join(sorted({r.channel for r in rows}))
        entries.append(
            {"at": first.created_at, "event": first.event, "status": first.status,
             "text": f"{_EVENT_WORDS.get(first.event, first.event)} ({first.status}) "
                     f"to {first.receiver}: {channels}"}
        )  # fmt: skip
    if incident.closed_at is not None:
        reason = incident.close_reason or "closed"
        entries.append({"at": incident.closed_at, "event": "closed",
                        "status": incident.status.value, "text": f"closed: {reason}"})  # fmt: skip
    if not sent:
        why = "; ".join(waiting_text(w, now) for w in waiting) or (
            "silenced" if incident.silenced else "no route took it"
        )
        entries.append({"at": incident.opened_at, "event": "opened", "status": None,
                        "text": f"no notification sent yet: {why}",
                        "waiting": list(waiting)})  # fmt: skip
    entries.sort(key=lambda e: (e["at"], e["event"] == "closed"))
    return entries
