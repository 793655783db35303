"""The FastAPI app: every route (Burrow's v3 endpoints, our /api with silences, /healthz,
/readyz, Prometheus /metrics and the status page) and the silence request model. Every route
runs :class:`~notifier.api.auth.WriteGuard`: reads are open, writes need the token (or loopback).

Everything here reads what the coordinator already computed (the last evaluation of each
cluster); no request ever triggers work on Kafka, so a scrape or a refreshing browser costs
the clusters nothing. The bodies are built in :mod:`~notifier.api.burrow`,
:mod:`~notifier.api.views` and :mod:`~notifier.api.metrics`. The read endpoints run on the
service's event loop, beside the scans: what they return is worked out once per scan and
encoded once (:mod:`~notifier.api.cache`), the status page's files are served from memory.
"""

from __future__ import annotations

import hashlib
import mimetypes
import time
from collections.abc import Callable, Collection
from datetime import UTC, datetime
from email.utils import formatdate
from pathlib import Path
from typing import Annotated, Any
from urllib.parse import quote

import orjson
from fastapi import Depends, FastAPI, HTTPException, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from pydantic import BaseModel, ConfigDict, Field
from starlette.datastructures import Headers
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from notifier.api.auth import WriteGuard
from notifier.api.burrow import burrow_body, burrow_point, burrow_status, request_info
from notifier.api.burrow_admin import add_burrow_admin_routes
from notifier.api.cache import JSONBytes, ScanCache, encode, with_members
from notifier.api.metrics import add_metrics_routes
from notifier.api.overview import Overviews
from notifier.api.owner import ask_owner, forwarded, not_in_view
from notifier.api.page import add_page_routes
from notifier.api.priority import ScanPriority
from notifier.api.sources import ClusterView, CoordinatorView, FleetSource, NotifierView
from notifier.api.views import (
    ActiveSilences,
    as_of,
    cluster_summaries,
    freshness,
    group_detail,
    group_evidence,
    group_live_members,
    group_result,
    history_summary,
    open_incidents,
    state_summaries,
)
from notifier.config import EXPORTER_FAMILIES, MAX_SILENCE_MATCHERS, ConfigError, Secret
from notifier.rules import not_found
from notifier.types import GroupResult, GroupStatus

STATIC = Path(__file__).parent / "static"

MAX_BODY_BYTES = 65_536
"""The largest request body accepted: a silence is a few hundred bytes; anything near this is a
mistake or an attack, refused with 413 before it is parsed."""


class BodyLimit:
    """ASGI middleware: a request body over ``max_bytes`` (declared in Content-Length, or
    counted as it streams in) gets a 413 with the usual JSON error body, and the app never sees
    it. Bodies within the limit are buffered and handed on unchanged."""

    def __init__(self, app: ASGIApp, max_bytes: int = MAX_BODY_BYTES) -> None:
        self.app = app
        self.max_bytes = max_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = Headers(scope=scope).get("content-length", "")
        if declared.isdigit() and int(declared) > self.max_bytes:
            await self._refuse(scope, receive, send)
            return
        body = bytearray()
        while True:
            message = await receive()
            if message["type"] != "http.request":
                break  # the client went away; the app will see the disconnect
            body += message.get("body", b"")
            if len(body) > self.max_bytes:
                await self._refuse(scope, receive, send)
                return
            if not message.get("more_body", False):
                break
        replayed = False

        async def replay() -> Message:
            nonlocal replayed
            if replayed:
                return await receive()
            replayed = True
            return {"type": "http.request", "body": bytes(body), "more_body": False}

        await self.app(scope, replay, send)

    async def _refuse(self, scope: Scope, receive: Receive, send: Send) -> None:
        request = Request(scope)
        message = f"request body larger than {self.max_bytes} bytes"
        body = {"error": True, "message": message, "request": request_info(request)}
        await JSONResponse(body, status_code=413)(scope, receive, send)


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


class RequestInfo(BaseModel):
    url: str = Field(description="the path asked for")
    host: str = Field(description="the host that answered")


class Problem(BaseModel):
    field: str
    problem: str


class ErrorBody(BaseModel):
    """Every error answer, in Burrow's shape. A 422 lists ``problems`` by field; Burrow's
    ``/status`` and ``/lag`` 404 also carry Burrow's NOTFOUND ``status`` object."""

    model_config = ConfigDict(extra="allow")

    error: bool = True
    message: str
    request: RequestInfo
    problems: list[Problem] | None = None


def _errors(**codes: str) -> dict[int | str, dict[str, Any]]:
    """OpenAPI ``responses`` for error codes (``e404="why"``), each with :class:`ErrorBody`."""
    return {int(code[1:]): {"model": ErrorBody, "description": why} for code, why in codes.items()}


_INVALID = "a parameter or the body is invalid: `problems` (or the message) names each field"
_NOT_FOUND = _errors(e404="no such cluster (or group, or topic)", e422=_INVALID)
_WRITE = {
    "e401": "a bearer token is configured and the request does not carry it",
    "e403": "writes are disabled: the API listens beyond loopback and no token is configured",
    "e404": "notifications are not configured, so there are no silences",
}


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


def _wall_ms() -> int:
    return int(time.time() * 1000)


def create_app(
    coordinator: CoordinatorView,
    notifier: NotifierView | None = None,
    token: str | Secret | None = None,
    clock: Callable[[], int] = _wall_ms,
    host: str = "127.0.0.1",
    metric_families: Collection[str] = EXPORTER_FAMILIES,
    fleet: FleetSource | None = None,
) -> FastAPI:
    """The app over a running coordinator (and notifier); ``clock`` (epoch ms) is what the age
    of the data is measured against. ``token`` and ``host`` (where the app will listen) decide
    who may write (:class:`~notifier.api.auth.WriteGuard`). ``metric_families``: the exporters
    whose families /metrics offers beside notifier's own (the config's ``metrics.families``).

    ``fleet``: the fleet-wide view when instances share the clusters (``coordination:``): the
    groups this instance owns are answered from its own state, every other group of the fleet
    from the view, each answer naming its ``instance``; silences made here are published to
    every instance; ``/metrics`` labels every series with this ``instance``."""
    guard = WriteGuard(token, host)
    app = FastAPI(
        title="notifier",
        description=(
            "Kafka consumer-lag alerting: Burrow-compatible v3 API, group status, incidents, "
            "silences, Prometheus metrics."
        ),
        version="0.1.0",
        dependencies=[Depends(guard)],
    )
    app.state.write_guard = guard
    app.state.coordinator = coordinator
    app.state.notifier = notifier
    app.state.fleet = fleet
    app.add_middleware(BodyLimit, max_bytes=MAX_BODY_BYTES)
    app.add_middleware(ScanPriority, scanning=lambda: coordinator.scanning)

    @app.exception_handler(StarletteHTTPException)
    async def http_error(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        body = {"error": True, "message": str(exc.detail), "request": request_info(request)}
        return JSONResponse(
            body, status_code=exc.status_code, headers=getattr(exc, "headers", None)
        )

    @app.exception_handler(RequestValidationError)
    async def bad_request(request: Request, exc: RequestValidationError) -> JSONResponse:
        problems = [
            {"field": ".".join(str(p) for p in e["loc"]), "problem": e["msg"]} for e in exc.errors()
        ]
        body = {"error": True, "message": "invalid request", "problems": problems,
                "request": request_info(request)}  # fmt: skip
        return JSONResponse(body, status_code=422)

    # ---- Burrow v3 (each answer built from the cluster's last scan, once: see ScanCache)

    scans = ScanCache()
    mine: dict[str, Any] = {} if fleet is None else {"instance": fleet.instance}
    """What answers about this instance's own groups add in a fleet: who answered them."""

    def result_of(state: ClusterView, cluster: str, group: str) -> GroupResult:
        """The group's last result, worked out once per scan for every endpoint showing it."""
        return scans.get(
            cluster, state, ("result", group), lambda: group_result(state, cluster, group)
        )

    @app.get("/v3/kafka", tags=["burrow"])
    async def burrow_clusters(request: Request) -> JSONBytes:
        clusters = sorted(coordinator.clusters)
        return JSONBytes(burrow_body(request, "cluster list returned", clusters=clusters))

    @app.get("/v3/kafka/{cluster}", tags=["burrow"], responses=_NOT_FOUND)
    async def burrow_cluster(cluster: str, request: Request) -> JSONBytes:
        state = _cluster(coordinator, cluster)
        config = state.config
        module = {
            "class-name": "kafka",
            "servers": config.bootstrap_servers,
            "client-profile": {"name": config.client_id, "client-id": config.client_id},
            "topic-refresh": config.metadata_max_age,
            "offset-refresh": config.scan_interval,
        }
        return JSONBytes(burrow_body(request, "cluster module detail returned", module=module))

    @app.get("/v3/kafka/{cluster}/consumer", tags=["burrow"], responses=_NOT_FOUND)
    async def burrow_consumers(cluster: str, request: Request) -> JSONBytes:
        state = _cluster(coordinator, cluster)

        def consumers() -> orjson.Fragment:
            groups = set(state.groups) | {g for _, g in state.store.groups(cluster)}
            return orjson.Fragment(encode(sorted(groups)))

        if fleet is not None:  # ours and the others', as the view has them
            local = set(state.groups) | {g for _, g in state.store.groups(cluster)}
            groups = {g for g in local if fleet.owns(cluster, g)}
            groups.update(r.group for r in fleet.remote_groups(cluster, clock()))
            listed = orjson.Fragment(encode(sorted(groups)))
        else:
            listed = scans.get(cluster, state, "consumers", consumers)
        return JSONBytes(burrow_body(request, "consumer list returned", consumers=listed))

    @app.get("/v3/kafka/{cluster}/consumer/{group}", tags=["burrow"], responses=_NOT_FOUND)
    async def burrow_consumer(cluster: str, group: str, request: Request) -> JSONBytes:
        state = _cluster(coordinator, cluster)
        if fleet is not None and not fleet.owns(cluster, group):
            # The offsets' rings are the owner's alone: it is asked (bounded, 503 naming it).
            path = f"/v3/kafka/{quote(cluster, safe='')}/consumer/{quote(group, safe='')}"
            answer = await ask_owner(fleet, cluster, group, path, request)
            owner = fleet.owner_api(cluster, group)
            return JSONBytes(
                {**answer, "instance": owner[0] if owner else None,
                 "request": request_info(request)}
            )  # fmt: skip

        def offsets() -> orjson.Fragment:
            result = result_of(state, cluster, group)
            if result.status is GroupStatus.NOTFOUND:
                raise HTTPException(404, "cluster or consumer not found")
            topics: dict[str, list[dict[str, Any]]] = {}
            for p in result.partitions:
                row = state.store.row(cluster, group, p.topic, p.partition)
                commits = state.store.ring(row) if row is not None else []
                points = [burrow_point(c) for c in commits]
                padded = [None] * (state.store.ring_size - len(commits)) + points
                entries = topics.setdefault(p.topic, [])
                while len(entries) <= p.partition:
                    entries.append({"offsets": [], "owner": "", "client_id": "", "current-lag": 0})
                entries[p.partition] = {
                    "offsets": padded, "owner": p.owner, "client_id": p.client_id,
                    "current-lag": p.current_lag or 0,
                }  # fmt: skip
            return orjson.Fragment(encode(topics))

        topics = scans.get(cluster, state, ("consumer", group), offsets)
        return JSONBytes(burrow_body(request, "consumer detail returned", topics=topics))

    def _status(cluster: str, group: str, request: Request, show_all: bool) -> JSONBytes:
        state = _cluster(coordinator, cluster)
        if fleet is not None and not fleet.owns(cluster, group):
            return _remote_status(cluster, group, request, show_all)
        fresh = freshness(state, clock())
        if fresh.stale:  # as of now: the windows shrink with every scan missed
            result = as_of(group_result(state, cluster, group), fresh)
            found = result.status is not GroupStatus.NOTFOUND
            status = orjson.Fragment(
                encode(burrow_status(result, show_all, {**fresh.fields(), **mine}))
            )
        else:

            def encoded() -> tuple[bool, bytes]:
                result = result_of(state, cluster, group)
                body = burrow_status(result, show_all)
                return result.status is not GroupStatus.NOTFOUND, encode(body)

            found, cached = scans.get(cluster, state, ("status", group, show_all), encoded)
            status = orjson.Fragment(with_members(cached, {**fresh.fields(), **mine}))
        body = burrow_body(request, "consumer status returned", status=status)
        if not found:
            body["error"] = True
            body["message"] = "cluster or consumer not found"
            return JSONBytes(body, status_code=404)
        return JSONBytes(body)

    def _remote_status(cluster: str, group: str, request: Request, show_all: bool) -> JSONBytes:
        assert fleet is not None
        remote = fleet.remote_group(cluster, group, clock())
        if remote is None and not fleet.available:
            raise not_in_view(fleet, "cluster or consumer")
        if remote is None:
            missing = burrow_status(not_found(cluster, group, clock()), show_all)
            body = burrow_body(request, "cluster or consumer not found", status=missing)
            body["error"] = True
            return JSONBytes(body, status_code=404)
        return JSONBytes(
            burrow_body(request, "consumer status returned", status=remote.burrow_status(show_all))
        )

    @app.get("/v3/kafka/{cluster}/consumer/{group}/status", tags=["burrow"], responses=_NOT_FOUND)
    async def burrow_group_status(cluster: str, group: str, request: Request) -> JSONBytes:
        return _status(cluster, group, request, show_all=False)

    @app.get("/v3/kafka/{cluster}/consumer/{group}/lag", tags=["burrow"], responses=_NOT_FOUND)
    async def burrow_group_lag(cluster: str, group: str, request: Request) -> JSONBytes:
        return _status(cluster, group, request, show_all=True)

    @app.get("/v3/kafka/{cluster}/topic", tags=["burrow"], responses=_NOT_FOUND)
    async def burrow_topics(cluster: str, request: Request) -> JSONBytes:
        state = _cluster(coordinator, cluster)

        def topics() -> orjson.Fragment:
            names = sorted({t for (c, t, _p) in state.store._table_of if c == cluster})
            return orjson.Fragment(encode(names))

        listed = scans.get(cluster, state, "topics", topics)
        return JSONBytes(burrow_body(request, "topic list returned", topics=listed))

    @app.get("/v3/kafka/{cluster}/topic/{topic}", tags=["burrow"], responses=_NOT_FOUND)
    async def burrow_topic(cluster: str, topic: str, request: Request) -> JSONBytes:
        state = _cluster(coordinator, cluster)

        def offsets() -> orjson.Fragment:
            store = state.store
            partitions = {
                p: i for (c, t, p), i in store._table_of.items() if c == cluster and t == topic
            }
            if not partitions:
                raise HTTPException(404, "cluster or topic not found")
            leos = []
            for p in range(max(partitions) + 1):
                table = partitions.get(p)
                count = int(store.t_count[table]) if table is not None else 0
                leos.append(int(store.t_leo[table, -1]) if count else 0)
            return orjson.Fragment(encode(leos))

        leos = scans.get(cluster, state, ("topic", topic), offsets)
        return JSONBytes(burrow_body(request, "topic offsets returned", offsets=leos))

    # ---- ours

    overviews = Overviews(
        lambda name, state, group: result_of(state, name, group), lambda: coordinator.scanning
    )

    @app.get("/api/groups", tags=["notifier"])
    async def api_groups() -> JSONBytes:
        now = clock()
        incidents = open_incidents(notifier)
        silences = ActiveSilences(notifier)
        parts = [
            overviews.rows(name, s, incidents, silences, now, fleet)
            for name, s in coordinator.clusters.items()
        ]
        if fleet is not None:  # the other instances' groups, as the view has them
            parts.extend(
                b",".join(encode(remote.row()) for remote in fleet.remote_groups(name, now))
                for name in coordinator.clusters
            )
        groups = orjson.Fragment(b"[" + b",".join(p for p in parts if p) + b"]")
        body = {"groups": groups, "clusters": cluster_summaries(coordinator, now)}
        if fleet is not None and not fleet.available:  # only ours: say so
            body["fleet_view"] = (
                f"not available yet ({fleet.unavailable_reason}): only the groups of instance "
                f"{fleet.instance} are listed"
            )
        return JSONBytes(body)

    @app.get("/api/groups/{cluster}/{group}", tags=["notifier"], responses=_NOT_FOUND)
    async def api_group(cluster: str, group: str, request: Request) -> JSONBytes:
        state = _cluster(coordinator, cluster)
        now = clock()
        if fleet is not None and not fleet.owns(cluster, group):
            remote = fleet.remote_group(cluster, group, now)
            if remote is None:
                raise not_in_view(fleet, "cluster or consumer")
            if not remote.owner_gone and not forwarded(request):
                # The windows are the owner's alone: ask it; when it cannot answer, the
                # bulletin's detail (no windows) is better than none.
                path = f"/api/groups/{quote(cluster, safe='')}/{quote(group, safe='')}"
                try:
                    return JSONBytes(await ask_owner(fleet, cluster, group, path, request))
                except HTTPException as exc:
                    if exc.status_code == 404:
                        raise
            return JSONBytes(remote.detail())
        fresh = freshness(state, now)
        if fresh.stale:  # as of now: the windows shrink with every scan missed
            return JSONBytes({**group_detail(state, cluster, group, notifier, now), **mine})
        result = result_of(state, cluster, group)
        evidence = scans.get(
            cluster, state, ("detail", group),
            lambda: encode(group_evidence(state, cluster, group, fresh, result)),
        )  # fmt: skip
        live = group_live_members(
            cluster, group, result, open_incidents(notifier), ActiveSilences(notifier), fresh, now
        )
        return JSONBytes(with_members(evidence, {**live, **mine}))

    @app.get(
        "/api/fleet",
        tags=["notifier"],
        responses=_errors(e404="not part of a fleet", e503="the fleet view is not read yet"),
    )
    async def api_fleet() -> JSONBytes:
        if fleet is None:
            raise HTTPException(404, "this instance runs alone (no coordination: in the config)")
        if not fleet.available:
            raise HTTPException(
                503, f"the fleet view is not available yet ({fleet.unavailable_reason})"
            )
        return JSONBytes(fleet.fleet(clock()))

    add_page_routes(app, coordinator, notifier, clock, STATIC, _NOT_FOUND, fleet)
    add_burrow_admin_routes(app, coordinator, notifier, clock, _NOT_FOUND)

    @app.get("/api/silences", tags=["notifier"], responses=_errors(e404=_WRITE["e404"]))
    def api_silences() -> dict[str, Any]:
        n = _silences(notifier)
        now = n.clock()
        return {"silences": [s.to_dict(now) for s in n.list_silences()]}

    @app.post(
        "/api/silences",
        tags=["notifier"],
        status_code=201,
        responses=_errors(
            e400="the body cannot be read as JSON text (bad encoding, nested too deep)",
            e413=f"the body is larger than {MAX_BODY_BYTES} bytes",
            e422=_INVALID,
            **_WRITE,
        ),
    )
    def api_add_silence(silence: SilenceIn) -> dict[str, Any]:
        n = _silences(notifier)
        starts_at = silence.starts_at
        try:
            created = n.add_silence(
                silence.matchers,
                starts_at=None if starts_at is None else _epoch_ms(starts_at, "starts_at"),
                ends_at=_epoch_ms(silence.ends_at, "ends_at"),
                author=silence.author,
                comment=silence.comment,
            )
        except ConfigError as exc:
            raise HTTPException(422, "; ".join(f"{w}: {m}" for w, m in exc.problems)) from None
        if fleet is not None:
            fleet.publish_silence(created)
        return {"silence": created.to_dict(n.clock())}

    @app.delete(
        "/api/silences/{silence_id}",
        tags=["notifier"],
        responses=_errors(
            e404="no such silence, or notifications are not configured",
            e409="the silence comes from the config file (remove it there), or has expired",
            e422=_INVALID,
            e401=_WRITE["e401"],
            e403=_WRITE["e403"],
        ),
    )
    def api_expire_silence(silence_id: str) -> dict[str, Any]:
        """Expire a silence now (Alertmanager's DELETE): it is kept and listed as expired."""
        n = _silences(notifier)
        if silence_id not in {s.id for s in n.list_silences()}:
            raise HTTPException(404, "no such silence")
        try:
            expired = n.expire_silence(silence_id)
        except ConfigError as exc:
            raise HTTPException(409, "; ".join(m for _, m in exc.problems)) from None
        if fleet is not None:
            fleet.publish_silence(expired)
        return {"expired": silence_id, "silence": expired.to_dict(n.clock())}

    @app.get("/healthz", tags=["ops"])
    def healthz() -> dict[str, Any]:
        return {"status": "ok"}

    @app.get(
        "/readyz",
        tags=["ops"],
        responses={
            200: {"description": "every cluster was scanned within its last 3 intervals"},
            503: {
                "description": "not ready: some cluster's data is stale (the same body)",
                "content": {"application/json": {}},
            },
        },
    )
    def readyz() -> JSONResponse:
        now = clock()
        ready = not any(state.stale(now) for state in coordinator.clusters.values())
        body = {
            "ready": ready,
            "clusters": cluster_summaries(coordinator, now),
            "history": history_summary(coordinator),
            "state": state_summaries(coordinator, notifier),
        }
        fleet = getattr(coordinator, "fleet", None)
        if fleet is not None:
            # Which shards this instance watches; an unreachable coordination cluster is said
            # here but keeps the instance ready: it keeps its shards and keeps watching.
            body["fleet"] = fleet.readiness()
        return JSONResponse(body, status_code=200 if ready else 503)

    add_metrics_routes(
        app, coordinator, notifier, clock, metric_families, fleet.instance if fleet else None
    )

    # ---- the status page

    # Only the files shipped beside the app are served, from memory (they are small, and a
    # file read per request costs the scans a thread hop or two): a name is looked up, never
    # turned into a path, so traversal, NUL bytes and names too long for the filesystem are
    # all a 404.
    assets = {path.name: _StaticFile(path) for path in STATIC.iterdir() if path.is_file()}

    @app.get("/", include_in_schema=False)
    async def index() -> Response:
        return assets["index.html"].response()

    @app.get("/groups/{cluster}/{group}", include_in_schema=False)
    async def group_page(cluster: str, group: str) -> Response:
        return assets["group.html"].response()

    @app.get("/static/{name}", include_in_schema=False)
    async def static(name: str) -> Response:
        asset = assets.get(name)
        if asset is None:
            raise HTTPException(404, "not found")
        return asset.response()

    return app


class _StaticFile:
    """A file of the status page, read once, with the headers ``FileResponse`` would send."""

    def __init__(self, path: Path) -> None:
        self.content = path.read_bytes()
        stat = path.stat()
        self.media_type = mimetypes.guess_type(path.name)[0] or "text/plain"
        etag = hashlib.md5(f"{stat.st_mtime}-{stat.st_size}".encode(), usedforsecurity=False)
        self.headers = {
            "last-modified": formatdate(stat.st_mtime, usegmt=True),
            "etag": f'"{etag.hexdigest()}"',
        }

    def response(self) -> Response:
        return Response(self.content, media_type=self.media_type, headers=self.headers)


def _cluster(coordinator: CoordinatorView, cluster: str) -> ClusterView:
    state = coordinator.clusters.get(cluster)
    if state is None:
        raise HTTPException(404, "cluster not found")
    return state


def _silences(notifier: NotifierView | None) -> NotifierView:
    if notifier is None:
        raise HTTPException(
            404, "silences need notifications to be configured (notify: in the config)"
        )
    return notifier
