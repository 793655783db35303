"""Asking the instance that owns a group for what only it has (its offsets' history, its
incidents' notification log, its Parquet history): in a fleet, any instance's API answers for
every group, and for these it forwards the request to the owner's API (the ``api`` of the
owner's member record in the fleet view).

The wait is bounded (:data:`OWNER_TIMEOUT_S`); an owner that cannot be reached is a 503 naming
it. A forwarded request carries :data:`FORWARDED`, and is never forwarded again: during a
hand-over two instances' views may each name the other as the owner for a moment, and the
answer is then a 503 to retry rather than a loop.
"""

from __future__ import annotations

import asyncio
from typing import Any

import httpx
from fastapi import HTTPException, Request

from notifier.api.sources import FleetSource

OWNER_TIMEOUT_S = 5.0
"""How long an instance waits for another instance's API to answer a forwarded request."""
FORWARDED = "x-notifier-forwarded-by"
"""The header naming the instance that forwarded a request."""


def forwarded(request: Request) -> bool:
    """Whether another instance forwarded this request (so it must not be forwarded on)."""
    return FORWARDED in request.headers


def not_in_view(fleet: FleetSource, what: str) -> HTTPException:
    """The answer about something this instance does not have: a 404, or a 503 while the fleet
    view (which would know the other instances' groups) has not been read yet."""
    if not fleet.available:
        reason = fleet.unavailable_reason or "not read yet"
        return HTTPException(
            503,
            f"{what} is not this instance's ({fleet.instance}), and the fleet view is not "
            f"available yet ({reason}): only this instance's groups answer for now",
        )
    return HTTPException(404, f"{what} not found")


async def ask_owner(
    fleet: FleetSource,
    cluster: str,
    group: str,
    path: str,
    request: Request,
    params: dict[str, Any] | None = None,
) -> Any:
    """The JSON answer of the instance that owns ``cluster``/``group`` to ``GET path``."""
    owner = fleet.owner_api(cluster, group)
    if owner is None:
        raise not_in_view(fleet, "cluster or consumer")
    instance, base = owner
    if forwarded(request):
        raise HTTPException(
            503,
            f"instance {fleet.instance} was asked as the owner of {cluster}/{group}, which "
            f"instance {instance} owns now (a hand-over is under way): ask again",
        )
    answer = await ask_instance(fleet, instance, base, path, params, f"{cluster}/{group}")
    if answer.status_code == 404:
        raise HTTPException(404, f"cluster or consumer not found (instance {instance} owns it)")
    return answer.json()


async def ask_instance(
    fleet: FleetSource,
    instance: str,
    base: str | None,
    path: str,
    params: dict[str, Any] | None,
    what: str,
) -> httpx.Response:
    """``GET path`` on ``instance``'s API; a 503 naming it when it gives no address, does not
    answer within :data:`OWNER_TIMEOUT_S` or answers with an error other than a 404."""
    if base is None:
        raise HTTPException(
            503, f"instance {instance} has {what} and gives no API address to ask it"
        )
    url = base.rstrip("/") + path
    headers = {FORWARDED: fleet.instance}
    try:
        async with httpx.AsyncClient(timeout=OWNER_TIMEOUT_S) as client:
            answer = await asyncio.wait_for(
                client.get(url, params=params, headers=headers), OWNER_TIMEOUT_S
            )
    except (httpx.HTTPError, TimeoutError) as exc:
        raise HTTPException(
            503,
            f"instance {instance} has {what}; its API at {base} did not answer within "
            f"{OWNER_TIMEOUT_S:g}s: {exc!r}",
        ) from None
    if answer.status_code not in (200, 404):
        raise HTTPException(
            503, f"instance {instance} has {what}; its API at {base} answered {answer.status_code}"
        )
    return answer
