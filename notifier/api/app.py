"""The HTTP API: Burrow's v3 endpoints, our richer /api, Prometheus /metrics, the status page.

Everything here reads what the coordinator already computed (the last evaluation of each
cluster); no request ever triggers work on Kafka, so a scrape or a refreshing browser costs
the clusters nothing. The app runs on uvicorn inside the service's own event loop.
"""

from __future__ import annotations

import asyncio
import math
import socket
from pathlib import Path
from typing import Any

import numpy as np
from fastapi import Depends, FastAPI, HTTPException, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import FileResponse, JSONResponse, PlainTextResponse, Response
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from pydantic import BaseModel, Field
from starlette.exceptions import HTTPException as StarletteHTTPException

from notifier.rules import NULL, Evaluation, group_without_partitions, not_found
from notifier.types import GroupResult, GroupStatus, PartitionResult

STATIC = Path(__file__).parent / "static"


# --------------------------------------------------------------------------------------------
# Reading the coordinator


def _cluster(app: FastAPI, cluster: str) -> Any:
    state = app.state.coordinator.clusters.get(cluster)
    if state is None:
        raise HTTPException(404, "cluster not found")
    return state


def group_result(state: Any, cluster: str, group: str) -> GroupResult:
    """The group's last result; Burrow's OK/complete 0 for a listed group with no partitions;
    NOTFOUND for a group the cluster does not list."""
    evaluation: Evaluation | None = state.evaluation
    now = evaluation.now if evaluation is not None else 0
    if evaluation is not None:
        gid = state.store.group_id(cluster, group)
        if gid is not None and np.any(evaluation.group_ids == gid):
            return evaluation.result_for_gid(gid)
    if group in state.groups:
        return group_without_partitions(cluster, group, now)
    return not_found(cluster, group, now)


# --------------------------------------------------------------------------------------------
# Burrow's JSON shapes


def _request_info(request: Request) -> dict[str, str]:
    return {"url": request.url.path, "host": socket.gethostname()}


def burrow_body(request: Request, message: str, **fields: Any) -> dict[str, Any]:
    return {"error": False, "message": message, **fields, "request": _request_info(request)}


def _point(point: Any) -> dict[str, Any] | None:
    if point is None:
        return None
    return {"offset": point.offset, "timestamp": point.timestamp, "lag": point.lag}


def burrow_partition(p: PartitionResult) -> dict[str, Any]:
    return {
        "topic": p.topic,
        "partition": p.partition,
        "owner": p.owner,
        "client_id": p.client_id,
        "status": p.status.value,
        "start": _point(p.start),
        "end": _point(p.end),
        "current_lag": p.current_lag or 0,
        "complete": p.burrow_complete,
    }


def burrow_status(result: GroupResult, show_all: bool) -> dict[str, Any]:
    """Burrow's consumer status: ``/status`` lists only non-OK partitions, ``/lag`` all."""
    partitions = [p for p in result.partitions if show_all or p.status.value != "OK"]
    return {
        "cluster": result.cluster,
        "group": result.group,
        "status": result.status.value,
        "complete": result.burrow_complete,
        "partitions": [burrow_partition(p) for p in partitions],
        "partition_count": result.partition_count,
        "maxlag": burrow_partition(result.max_lag) if result.max_lag else None,
        "totallag": result.total_lag,
    }


# --------------------------------------------------------------------------------------------
# Our richer views


def groups_overview(state: Any, cluster: str, notifier: Any) -> list[dict[str, Any]]:
    """Every group of a cluster from the evaluation arrays (no per-group objects built), with
    a lag sparkline: the group's total lag at each sample of the window."""
    evaluation: Evaluation | None = state.evaluation
    out: list[dict[str, Any]] = []
    seen: set[str] = set()
    incidents = _open_incidents(notifier)
    if evaluation is not None and evaluation.rows.size:
        store = state.store
        rows = evaluation.rows
        gids = evaluation.gids
        n_groups = len(store.group_key)
        committed = store.s_committed[rows]
        leo = store.s_leo[rows]
        lag2d = np.where(committed >= 0, np.maximum(leo - committed, 0), 0)
        spark = np.stack(
            [
                np.bincount(gids, weights=lag2d[:, j], minlength=n_groups)
                for j in range(store.width)
            ],
            axis=1,
        )
        counts = np.bincount(gids, minlength=n_groups)
        firing = {name: fired for name, fired in evaluation.group_fired.items() if fired.any()}
        for gid in evaluation.group_ids.tolist():
            _, group = store.group_key[gid]
            seen.add(group)
            seconds = float(evaluation.group_max_lag_seconds[gid])
            incident = incidents.get((cluster, group))
            out.append(
                {
                    "cluster": cluster,
                    "group": group,
                    "status": evaluation.status_of(gid).value,
                    "complete": float(evaluation.group_complete[gid]),
                    "partial": bool(evaluation.group_partial[gid]),
                    "total_lag": int(evaluation.group_total_lag[gid]),
                    "max_lag_seconds": None if math.isnan(seconds) else round(seconds, 1),
                    "partitions": int(counts[gid]),
                    "rules": sorted(name for name, fired in firing.items() if fired[gid]),
                    "lag_history": [int(v) for v in spark[gid]],
                    "incident_id": incident.id if incident else None,
                    "silenced": bool(incident.silenced) if incident else False,
                    "group_state": state.groups.get(group, "Unknown"),
                }
            )
    for group in sorted(set(state.groups) - seen):
        out.append(
            {
                "cluster": cluster, "group": group, "status": "OK", "complete": 0.0,
                "partial": False, "total_lag": 0, "max_lag_seconds": None, "partitions": 0,
                "rules": [], "lag_history": [], "incident_id": None, "silenced": False,
                "group_state": state.groups[group],
            }
        )  # fmt: skip
    return out


def _open_incidents(notifier: Any) -> dict[tuple[str, str], Any]:
    if notifier is None or not hasattr(notifier, "incidents"):
        return {}
    return {(i.cluster, i.group): i for i in notifier.incidents(open_only=True)}


def group_detail(state: Any, cluster: str, group: str, notifier: Any) -> dict[str, Any]:
    result = group_result(state, cluster, group)
    if result.status is GroupStatus.NOTFOUND:
        raise HTTPException(404, "cluster or consumer not found")
    store = state.store
    partitions = []
    for p in result.partitions:
        row = store.row(cluster, group, p.topic, p.partition)
        partitions.append(
            {
                **_jsonable(p.to_dict()),
                "status": p.status.value,
                "window": store.samples(row) if row is not None else [],
                "commits": [_point(c) for c in store.ring(row)] if row is not None else [],
                "leo_table": [{"log_end_offset": leo, "ts": ts} for leo, ts in store.leo_table(row)]
                if row is not None
                else [],
            }
        )
    incident = _open_incidents(notifier).get((cluster, group))
    return {
        "cluster": cluster,
        "group": group,
        "status": result.status.value,
        "complete": result.complete,
        "burrow_complete": result.burrow_complete,
        "partial": result.partial,
        "evaluated_at": result.evaluated_at,
        "total_lag": result.total_lag,
        "max_lag_seconds": result.max_lag_seconds,
        "group_state": result.group_state,
        "members": result.members,
        "findings": [_jsonable(f.to_dict()) for f in result.findings],
        "partitions": partitions,
        "incident_id": incident.id if incident else None,
        "silenced": bool(incident.silenced) if incident else False,
    }


def _jsonable(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_jsonable(v) for v in value]
    if isinstance(value, float) and (math.isnan(value) or math.isinf(value)):
        return None
    if isinstance(value, np.generic):
        return value.item()
    if hasattr(value, "value") and isinstance(getattr(value, "value", None), str):
        return value.value
    return value


# --------------------------------------------------------------------------------------------
# Metrics


class ServiceMetrics:
    """A prometheus_client collector reading the last evaluations (a scrape does no work on
    Kafka). Names follow the ``kafka_consumergroup_*`` exporters where the meaning is the same."""

    def __init__(self, coordinator: Any, notifier: Any = None):
        self.coordinator = coordinator
        self.notifier = notifier

    def collect(self):
        labels = ["cluster", "consumergroup", "topic", "partition"]
        lag = GaugeMetricFamily(
            "kafka_consumergroup_lag",
            "Current lag (LEO - committed) of a group-partition.",
            labels=labels,
        )
        lag_s = GaugeMetricFamily(
            "kafka_consumergroup_lag_seconds",
            "Estimated seconds a group-partition is behind.",
            labels=labels,
        )
        offset = GaugeMetricFamily(
            "kafka_consumergroup_current_offset",
            "Committed offset of a group-partition.",
            labels=labels,
        )
        leo = GaugeMetricFamily(
            "kafka_topic_partition_current_offset",
            "Log-end offset of a partition.",
            labels=["cluster", "topic", "partition"],
        )
        oldest = GaugeMetricFamily(
            "kafka_topic_partition_oldest_offset",
            "Log-start offset of a partition.",
            labels=["cluster", "topic", "partition"],
        )
        status = GaugeMetricFamily(
            "notifier_group_status",
            "Group status: 0 OK, 1 WARN, 2 ERR.",
            labels=["cluster", "consumergroup"],
        )
        complete = GaugeMetricFamily(
            "notifier_group_complete",
            "Fraction of the group's partitions whose window is complete.",
            labels=["cluster", "consumergroup"],
        )
        partial = GaugeMetricFamily(
            "notifier_group_partial",
            "1 when the group's result is partial (gated: it cannot notify).",
            labels=["cluster", "consumergroup"],
        )
        total = GaugeMetricFamily(
            "kafka_consumergroup_lag_sum",
            "Total lag of a group.",
            labels=["cluster", "consumergroup"],
        )
        max_s = GaugeMetricFamily(
            "kafka_consumergroup_max_lag_seconds",
            "Seconds behind of the group's furthest-behind partition.",
            labels=["cluster", "consumergroup"],
        )
        scans = CounterMetricFamily("notifier_scans", "Successful scans.", labels=["cluster"])
        errors = CounterMetricFamily(
            "notifier_scan_errors", "Failed scans (each is a gap).", labels=["cluster"]
        )
        duration = GaugeMetricFamily(
            "notifier_scan_duration_seconds",
            "Duration of the last successful scan.",
            labels=["cluster"],
        )
        requests = GaugeMetricFamily(
            "notifier_scan_requests",
            "Kafka requests the last scan sent, by API.",
            labels=["cluster", "api"],
        )
        last = GaugeMetricFamily(
            "notifier_last_scan_timestamp_seconds",
            "When the last successful scan observed the cluster.",
            labels=["cluster"],
        )
        evaluate = GaugeMetricFamily(
            "notifier_evaluation_seconds",
            "Time to ingest and evaluate the last scan.",
            labels=["cluster"],
        )
        down = GaugeMetricFamily(
            "notifier_cluster_down", "1 while the cluster cannot be scanned.", labels=["cluster"]
        )
        for name, state in self.coordinator.clusters.items():
            m = state.metrics
            scans.add_metric([name], m.scans)
            errors.add_metric([name], m.failures)
            duration.add_metric([name], m.last_duration_s)
            evaluate.add_metric([name], m.last_evaluate_s)
            down.add_metric([name], 1 if m.down else 0)
            for api, count in m.last_requests.items():
                requests.add_metric([name, api], count)
            if m.last_success_ms is not None:
                last.add_metric([name], m.last_success_ms / 1000)
            evaluation = state.evaluation
            if evaluation is None:
                continue
            store = state.store
            seen_tables: set[int] = set()
            for i, row in enumerate(evaluation.rows.tolist()):
                _, group, topic, part = store.row_key[row]
                key = [name, group, topic, str(part)]
                current = int(evaluation.current_lag[i])
                if current >= 0:
                    lag.add_metric(key, current)
                    offset.add_metric(key, int(store.latest_committed[row]))
                seconds = float(evaluation.lag_seconds[i])
                if not math.isnan(seconds):
                    lag_s.add_metric(key, seconds)
                table = int(store.row_table[row])
                if table not in seen_tables:
                    seen_tables.add(table)
                    leo.add_metric([name, topic, str(part)], int(store.latest_leo[row]))
                    if store.latest_log_start[row] != NULL:
                        oldest.add_metric(
                            [name, topic, str(part)], int(store.latest_log_start[row])
                        )
            for gid in evaluation.group_ids.tolist():
                _, group = store.group_key[gid]
                status.add_metric([name, group], int(evaluation.group_status[gid]))
                complete.add_metric([name, group], float(evaluation.group_complete[gid]))
                partial.add_metric([name, group], 1 if evaluation.group_partial[gid] else 0)
                total.add_metric([name, group], int(evaluation.group_total_lag[gid]))
                seconds = float(evaluation.group_max_lag_seconds[gid])
                if not math.isnan(seconds):
                    max_s.add_metric([name, group], seconds)
        yield from (lag, lag_s, offset, leo, oldest, status, complete, partial, total, max_s,
                    scans, errors, duration, requests, last, evaluate, down)  # fmt: skip
        yield from self._notification_metrics()

    def _notification_metrics(self):
        metrics = getattr(self.notifier, "metrics", None)
        if metrics is None:
            return
        snapshot = metrics() if callable(metrics) else metrics
        for key, help_text in (
            ("sent", "Notifications delivered, by channel."),
            ("failed", "Notifications that failed for good, by channel."),
            ("retried", "Delivery attempts retried, by channel."),
        ):
            family = CounterMetricFamily(
                f"notifier_notifications_{key}", help_text, labels=["channel"]
            )
            for channel, value in dict(snapshot.get(key, {})).items():
                family.add_metric([channel], value)
            yield family
        depth = GaugeMetricFamily("notifier_outbox_depth", "Notifications waiting in the outbox.")
        depth.add_metric([], snapshot.get("outbox_depth", 0))
        yield depth
        age = GaugeMetricFamily(
            "notifier_outbox_oldest_pending_seconds", "Age of the oldest pending notification."
        )
        age.add_metric([], snapshot.get("oldest_pending_age_seconds", 0) or 0)
        yield age


# --------------------------------------------------------------------------------------------
# Silences


class SilenceIn(BaseModel):
    matchers: list[str] | dict[str, str] = Field(
        description='Alertmanager-style matchers: ["group=~\\"batch-.*\\"", "cluster=\\"prod\\""] '
        "or a mapping of cluster, group, topic, rule or severity to a value (=~ prefix: regex)"
    )
    starts_at: str | int | None = Field(
        default=None, description="ISO-8601 or epoch ms; default now"
    )
    ends_at: str | int = Field(description="ISO-8601 or epoch ms")
    author: str
    comment: str = Field(description="why: required, as in Alertmanager")


def _epoch_ms(value: str | int | None, field: str) -> int | None:
    if value is None or isinstance(value, int):
        return value
    from datetime import UTC, datetime

    try:
        parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        raise HTTPException(422, f"{field}: expected ISO-8601 or epoch ms, got {value!r}") from None
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=UTC)
    return int(parsed.timestamp() * 1000)


# --------------------------------------------------------------------------------------------
# The app


def create_app(coordinator: Any, notifier: Any = None, token: str | None = None) -> FastAPI:
    app = FastAPI(
        title="notifier",
        description=(
            "Kafka consumer-lag alerting: Burrow-compatible v3 API, group status, incidents, "
            "silences, Prometheus metrics."
        ),
        version="0.1.0",
    )
    app.state.coordinator = coordinator
    app.state.notifier = notifier

    def require_token(request: Request) -> None:
        if token is None:
            return
        if request.headers.get("authorization") != f"Bearer {token}":
            raise HTTPException(401, "a bearer token is required to change silences")

    @app.exception_handler(StarletteHTTPException)
    async def http_error(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        body = {"error": True, "message": str(exc.detail), "request": _request_info(request)}
        return JSONResponse(
            body, status_code=exc.status_code, headers=getattr(exc, "headers", None)
        )

    @app.exception_handler(RequestValidationError)
    async def bad_request(request: Request, exc: RequestValidationError) -> JSONResponse:
        problems = [
            {"field": ".".join(str(p) for p in e["loc"]), "problem": e["msg"]} for e in exc.errors()
        ]
        body = {"error": True, "message": "invalid request", "problems": problems,
                "request": _request_info(request)}  # fmt: skip
        return JSONResponse(body, status_code=422)

    # ---- Burrow v3

    @app.get("/v3/kafka", tags=["burrow"])
    def burrow_clusters(request: Request) -> dict[str, Any]:
        return burrow_body(request, "cluster list returned", clusters=sorted(coordinator.clusters))

    @app.get("/v3/kafka/{cluster}", tags=["burrow"])
    def burrow_cluster(cluster: str, request: Request) -> dict[str, Any]:
        state = _cluster(app, cluster)
        config = state.config
        module = {
            "class-name": "kafka",
            "servers": config.bootstrap_servers,
            "client-profile": {"name": config.client_id, "client-id": config.client_id},
            "topic-refresh": config.metadata_max_age,
            "offset-refresh": config.scan_interval,
        }
        return burrow_body(request, "cluster module detail returned", module=module)

    @app.get("/v3/kafka/{cluster}/consumer", tags=["burrow"])
    def burrow_consumers(cluster: str, request: Request) -> dict[str, Any]:
        state = _cluster(app, cluster)
        groups = set(state.groups) | {g for _, g in state.store.groups(cluster)}
        return burrow_body(request, "consumer list returned", consumers=sorted(groups))

    @app.get("/v3/kafka/{cluster}/consumer/{group}", tags=["burrow"])
    def burrow_consumer(cluster: str, group: str, request: Request) -> dict[str, Any]:
        state = _cluster(app, cluster)
        result = group_result(state, cluster, group)
        if result.status is GroupStatus.NOTFOUND:
            raise HTTPException(404, "cluster or consumer not found")
        topics: dict[str, list[dict[str, Any]]] = {}
        for p in result.partitions:
            row = state.store.row(cluster, group, p.topic, p.partition)
            commits = state.store.ring(row) if row is not None else []
            padded = [None] * (state.store.ring_size - len(commits)) + [_point(c) for c in commits]
            entries = topics.setdefault(p.topic, [])
            while len(entries) <= p.partition:
                entries.append({"offsets": [], "owner": "", "client_id": "", "current-lag": 0})
            entries[p.partition] = {
                "offsets": padded, "owner": p.owner, "client_id": p.client_id,
                "current-lag": p.current_lag or 0,
            }  # fmt: skip
        return burrow_body(request, "consumer detail returned", topics=topics)

    def _status(cluster: str, group: str, request: Request, show_all: bool) -> JSONResponse:
        state = _cluster(app, cluster)
        result = group_result(state, cluster, group)
        body = burrow_body(
            request, "consumer status returned", status=burrow_status(result, show_all)
        )
        if result.status is GroupStatus.NOTFOUND:
            body["error"] = True
            body["message"] = "cluster or consumer not found"
            return JSONResponse(body, status_code=404)
        return JSONResponse(body)

    @app.get("/v3/kafka/{cluster}/consumer/{group}/status", tags=["burrow"])
    def burrow_group_status(cluster: str, group: str, request: Request) -> JSONResponse:
        return _status(cluster, group, request, show_all=False)

    @app.get("/v3/kafka/{cluster}/consumer/{group}/lag", tags=["burrow"])
    def burrow_group_lag(cluster: str, group: str, request: Request) -> JSONResponse:
        return _status(cluster, group, request, show_all=True)

    @app.get("/v3/kafka/{cluster}/topic", tags=["burrow"])
    def burrow_topics(cluster: str, request: Request) -> dict[str, Any]:
        state = _cluster(app, cluster)
        topics = sorted({t for (c, t, _p) in state.store._table_of if c == cluster})
        return burrow_body(request, "topic list returned", topics=topics)

    @app.get("/v3/kafka/{cluster}/topic/{topic}", tags=["burrow"])
    def burrow_topic(cluster: str, topic: str, request: Request) -> dict[str, Any]:
        state = _cluster(app, cluster)
        store = state.store
        partitions = {
            p: i for (c, t, p), i in store._table_of.items() if c == cluster and t == topic
        }
        if not partitions:
            raise HTTPException(404, "cluster or topic not found")
        offsets = []
        for p in range(max(partitions) + 1):
            table = partitions.get(p)
            count = int(store.t_count[table]) if table is not None else 0
            offsets.append(int(store.t_leo[table, -1]) if count else 0)
        return burrow_body(request, "topic offsets returned", offsets=offsets)

    # ---- ours

    @app.get("/api/groups", tags=["notifier"])
    def api_groups() -> dict[str, Any]:
        groups = []
        for name, state in coordinator.clusters.items():
            groups += groups_overview(state, name, app.state.notifier)
        return {"groups": groups, "clusters": _cluster_summaries(coordinator)}

    @app.get("/api/groups/{cluster}/{group}", tags=["notifier"])
    def api_group(cluster: str, group: str) -> dict[str, Any]:
        return group_detail(_cluster(app, cluster), cluster, group, app.state.notifier)

    @app.get("/api/incidents", tags=["notifier"])
    def api_incidents() -> dict[str, Any]:
        n = app.state.notifier
        if n is None or not hasattr(n, "incidents"):
            return {"incidents": []}
        return {"incidents": [_jsonable(_incident(i)) for i in n.incidents(open_only=False)]}

    @app.get("/api/silences", tags=["notifier"])
    def api_silences() -> dict[str, Any]:
        n = _silences(app)
        now = n.clock()
        return {"silences": [s.to_dict(now) for s in n.list_silences()]}

    @app.post(
        "/api/silences", tags=["notifier"], status_code=201, dependencies=[Depends(require_token)]
    )
    def api_add_silence(silence: SilenceIn) -> dict[str, Any]:
        from notifier.config import ConfigError

        n = _silences(app)
        try:
            created = n.add_silence(
                silence.matchers,
                starts_at=_epoch_ms(silence.starts_at, "starts_at"),
                ends_at=_epoch_ms(silence.ends_at, "ends_at"),
                author=silence.author,
                comment=silence.comment,
            )
        except ConfigError as exc:
            raise HTTPException(422, "; ".join(f"{w}: {m}" for w, m in exc.problems)) from None
        return {"silence": created.to_dict(n.clock())}

    @app.delete(
        "/api/silences/{silence_id}", tags=["notifier"], dependencies=[Depends(require_token)]
    )
    def api_delete_silence(silence_id: str) -> dict[str, Any]:
        from notifier.config import ConfigError

        n = _silences(app)
        if silence_id not in {s.id for s in n.list_silences()}:
            raise HTTPException(404, "no such silence")
        try:
            n.delete_silence(silence_id)
        except ConfigError as exc:
            raise HTTPException(409, "; ".join(m for _, m in exc.problems)) from None
        return {"deleted": silence_id}

    @app.get("/healthz", tags=["ops"])
    def healthz() -> dict[str, Any]:
        return {"status": "ok"}

    @app.get("/readyz", tags=["ops"])
    def readyz() -> JSONResponse:
        ready = coordinator.ready()
        return JSONResponse({"ready": ready, "clusters": _cluster_summaries(coordinator)},
                            status_code=200 if ready else 503)  # fmt: skip

    registry = CollectorRegistry(auto_describe=False)
    registry.register(ServiceMetrics(coordinator, notifier))

    @app.get("/metrics", tags=["ops"], response_class=PlainTextResponse)
    def metrics() -> Response:
        return Response(
            generate_latest(registry), media_type="text/plain; version=0.0.4; charset=utf-8"
        )

    # ---- the status page

    @app.get("/", include_in_schema=False)
    def index() -> FileResponse:
        return FileResponse(STATIC / "index.html")

    @app.get("/groups/{cluster}/{group}", include_in_schema=False)
    def group_page(cluster: str, group: str) -> FileResponse:
        return FileResponse(STATIC / "group.html")

    @app.get("/static/{name}", include_in_schema=False)
    def static(name: str) -> FileResponse:
        path = (STATIC / name).resolve()
        if path.parent != STATIC.resolve() or not path.is_file():
            raise HTTPException(404, "not found")
        return FileResponse(path)

    return app


def _silences(app: FastAPI) -> Any:
    n = app.state.notifier
    if n is None or not hasattr(n, "list_silences"):
        raise HTTPException(
            404, "silences need notifications to be configured (notify: in the config)"
        )
    return n


def _incident(incident: Any) -> dict[str, Any]:
    return {
        "id": incident.id, "cluster": incident.cluster, "group": incident.group,
        "status": incident.status, "peak_status": incident.peak_status,
        "opened_at": incident.opened_at, "closed_at": incident.closed_at,
        "close_reason": incident.close_reason, "silenced": incident.silenced,
        "findings": [f.to_dict() for f in incident.findings],
    }  # fmt: skip


def _cluster_summaries(coordinator: Any) -> list[dict[str, Any]]:
    return [
        {
            "cluster": name, "last_scan": s.metrics.last_success_ms, "down": s.metrics.down,
            "consecutive_failures": s.metrics.consecutive_failures,
            "last_error": s.metrics.last_error, "scan_interval_s": s.config.scan_interval,
        }
        for name, s in coordinator.clusters.items()
    ]  # fmt: skip


class ApiServer:
    """uvicorn inside the service's event loop."""

    def __init__(self, app: FastAPI, host: str, port: int):
        import uvicorn

        self.config = uvicorn.Config(app, host=host, port=port, log_config=None, lifespan="off",
                                     access_log=False)  # fmt: skip
        self.server = uvicorn.Server(self.config)
        self.task: asyncio.Task | None = None

    @property
    def port(self) -> int:
        servers = getattr(self.server, "servers", [])
        for server in servers:
            for sock in server.sockets:
                return sock.getsockname()[1]
        return self.config.port

    async def start(self) -> None:
        self.task = asyncio.create_task(self.server.serve())
        while not self.server.started:
            if self.task.done():
                self.task.result()
            await asyncio.sleep(0.02)

    async def stop(self) -> None:
        self.server.should_exit = True
        if self.task is not None:
            await self.task
