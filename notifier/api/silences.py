"""``/api/silences``: list, add and delete silences (Alertmanager's matchers, a start, an end,
an author and a comment). Adding and deleting write, so the API's
:class:`~notifier.api.auth.WriteGuard` asks for the token; in a fleet, a silence made here is
published to every instance."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated

from fastapi import APIRouter, HTTPException, Query
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict, Field

from notifier.api.bodylimit import MAX_BODY_BYTES
from notifier.api.burrow import json_answer
from notifier.api.context import Api
from notifier.api.errors import INVALID, WRITE, errors
from notifier.config import MAX_SILENCE_MATCHERS, ConfigError
from notifier.notify.silences import SilenceLimitError, silences_page

router = APIRouter(tags=["notifier"])


class SilenceIn(BaseModel):
    matchers: (
        Annotated[list[str], Field(min_length=1, max_length=MAX_SILENCE_MATCHERS)]
        | Annotated[dict[str, str], Field(min_length=1, max_length=MAX_SILENCE_MATCHERS)]
    ) = Field(
        description='Alertmanager-style matchers: ["group=~\\"batch-.*\\"", "cluster=\\"prod\\""] '
        "or a mapping of cluster, group, topic, rule or severity to a value (=~ prefix: regex); "
        "at least one"
    )
    starts_at: str | int | None = Field(
        default=None, description="ISO-8601 or epoch ms; default now"
    )
    ends_at: str | int = Field(description="ISO-8601 or epoch ms")
    author: str
    comment: str = Field(description="why: required, as in Alertmanager")


class SilenceOut(BaseModel):
    model_config = ConfigDict(extra="allow")

    id: str
    matchers: list[str]
    starts_at: int = Field(description="epoch ms")
    ends_at: int = Field(description="epoch ms")
    author: str
    comment: str
    created_at: int = Field(description="epoch ms")
    source: str = Field(description="api, or config: from the config file (read-only here)")
    state: str = Field(description="pending, active or expired")


class SilenceList(BaseModel):
    silences: list[SilenceOut]
    next: str | None = Field(
        description="the cursor of the next page (pass it as `after`); null on the last page"
    )


class SilenceCreated(BaseModel):
    silence: SilenceOut


class SilenceExpired(BaseModel):
    expired: str = Field(description="the silence's id")
    silence: SilenceOut = Field(description="the silence, now ended (kept, listed as expired)")


SILENCES_PAGE = 100
"""Silences per page of ``GET /api/silences`` unless the request says (``limit``)."""
SILENCES_PAGE_MAX = 1000


@router.get(
    "/api/silences",
    response_model=SilenceList,
    responses=errors(e404=WRITE["e404"], e422=INVALID),
)
def api_silences(
    api: Api,
    limit: Annotated[
        int, Query(ge=1, le=SILENCES_PAGE_MAX, description="silences per page")
    ] = SILENCES_PAGE,
    after: Annotated[str | None, Query(description="the `next` of the previous page")] = None,
) -> JSONResponse:
    """Every silence, expired ones too, by start then id, a page at a time: ``next`` is the
    cursor of the next page (``after=``), null on the last."""
    n = api.silences()
    now = n.clock()
    try:
        page, following = silences_page(n.list_silences(), limit, after)
    except ValueError as exc:
        raise HTTPException(422, f"after: {exc}") from None
    return json_answer({"silences": [s.to_dict(now) for s in page], "next": following})


@router.post(
    "/api/silences",
    status_code=201,
    response_model=SilenceCreated,
    responses=errors(
        e400="the body cannot be read as JSON text (bad encoding, nested too deep)",
        e409="as many silences are active or pending as notify.silence_limits allows",
        e413=f"the body is larger than {MAX_BODY_BYTES} bytes",
        e422=INVALID,
        **WRITE,
    ),
)
def api_add_silence(silence: SilenceIn, api: Api) -> JSONResponse:
    n = api.silences()
    starts_at = silence.starts_at
    try:
        created = n.add_silence(
            silence.matchers,
            starts_at=None if starts_at is None else _epoch_ms(starts_at, "starts_at"),
            ends_at=_epoch_ms(silence.ends_at, "ends_at"),
            author=silence.author,
            comment=silence.comment,
        )
    except SilenceLimitError as exc:
        raise HTTPException(409, "; ".join(f"{w}: {m}" for w, m in exc.problems)) from None
    except ConfigError as exc:
        raise HTTPException(422, "; ".join(f"{w}: {m}" for w, m in exc.problems)) from None
    if api.fleet is not None:
        api.fleet.publish_silence(created)
    return json_answer({"silence": created.to_dict(n.clock())}, status_code=201)


@router.delete(
    "/api/silences/{silence_id}",
    response_model=SilenceExpired,
    responses=errors(
        e404="no such silence, or notifications are not configured",
        e409="the silence comes from the config file (remove it there), or has expired",
        e422=INVALID,
        e401=WRITE["e401"],
        e403=WRITE["e403"],
    ),
)
def api_expire_silence(silence_id: str, api: Api) -> JSONResponse:
    """Expire a silence now (Alertmanager's DELETE): it is kept and listed as expired."""
    n = api.silences()
    if silence_id not in {s.id for s in n.list_silences()}:
        raise HTTPException(404, "no such silence")
    try:
        expired = n.expire_silence(silence_id)
    except ConfigError as exc:
        raise HTTPException(409, "; ".join(m for _, m in exc.problems)) from None
    if api.fleet is not None:
        api.fleet.publish_silence(expired)
    return json_answer({"expired": silence_id, "silence": expired.to_dict(n.clock())})


def _epoch_ms(value: str | int, field: str) -> int:
    if isinstance(value, int):
        return value
    try:
        parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        raise HTTPException(422, f"{field}: expected ISO-8601 or epoch ms, got {value!r}") from None
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=UTC)
    return int(parsed.timestamp() * 1000)
