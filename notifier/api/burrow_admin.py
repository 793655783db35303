"""The rest of Burrow's HTTP API: the consumers of a topic, forgetting a consumer group, the
log level, the configuration, and the health paths load balancers call.

* ``GET /burrow/admin``: ``GOOD`` while the process serves (Burrow's liveness check);
  ``GET /burrow/admin/ready``: ``READY`` (200) once every cluster has been scanned and none
  is stale, else ``STARTING`` or ``STALE`` (503), both as plain text, as Burrow answers.
* ``GET /v3/kafka/{cluster}/topic/{topic}/consumers``: the groups that commit to or are
  assigned the topic (``[]`` for a topic no group reads; 404 only for an unknown cluster).
* ``DELETE /v3/kafka/{cluster}/consumer/{group}[/topic/{topic}]``: forget the group (or its
  partitions of one topic): its windows, evidence and rule state; resolve its incident as
  ``removed``, checkpoint; a group still consumed comes back as a new one on the next scan.
  200 whether or not the group was known, as Burrow answers.
* ``GET|POST /v3/admin/loglevel``: the service's log level, Burrow's names (``debug``,
  ``info``, ``warn``, ``error``, ``fatal``; ``trace`` and ``warning`` are accepted too); a body
  that is not JSON is 400, a level Burrow does not know 404 ``unknown log level``.
* ``GET /v3/kafka/{cluster}`` and ``/v3/config/cluster/{cluster}``: one answer (one handler in
  Burrow), the cluster module.
* ``GET /v3/config`` and ``/v3/config/{storage,evaluator,cluster,consumer,notifier}[/{name}]``:
  the configuration in Burrow's module shapes, its numbers integers as Burrow's Go types are,
  its group lists under Burrow 1.3's ``group-allowlist``/``group-denylist`` and the older
  ``group-whitelist``/``group-blacklist``. No secret is shown: passwords, tokens, routing
  keys and header values are left out, and webhook URLs (whose path is their credential) are
  cut to scheme, host and port.

The two writing endpoints go through :class:`~notifier.api.auth.WriteGuard` like every other
write: the token beyond loopback, 401 on a wrong one.
"""

from __future__ import annotations

import logging
import math
from collections import Counter
from typing import Any

import orjson
from fastapi import APIRouter, HTTPException, Request
from fastapi.responses import JSONResponse, PlainTextResponse
from pydantic import BaseModel, Field

from notifier.api.burrow import BurrowBody, burrow_body, json_answer
from notifier.api.context import Api, ApiContext
from notifier.api.errors import NOT_FOUND
from notifier.config import ClusterConfig, NotifyConfig
from notifier.config.notify import ChannelEntry

log = logging.getLogger(__name__)

BURROW_LEVELS = {
    "trace": logging.DEBUG,
    "debug": logging.DEBUG,
    "info": logging.INFO,
    "warn": logging.WARNING,
    "warning": logging.WARNING,
    "error": logging.ERROR,
    "fatal": logging.CRITICAL,
}
"""The levels Burrow's ``POST /v3/admin/loglevel`` accepts, as Python's."""

_LEVEL_NAMES = {logging.DEBUG: "debug", logging.INFO: "info", logging.WARNING: "warn",
                logging.ERROR: "error", logging.CRITICAL: "fatal"}  # fmt: skip

CONFIG_COORDINATORS = ("storage", "evaluator", "cluster", "consumer", "notifier")


class LogLevelIn(BaseModel):
    """Burrow's body for ``POST /v3/admin/loglevel``: ``{"level": "debug"}``."""

    level: str = Field(
        description="debug, info, warn, error or fatal (trace, warning accepted)",
        examples=["debug"],
    )


class TopicConsumers(BurrowBody):
    consumers: list[str] = Field(description="groups committing to or assigned the topic")


class LogLevel(BurrowBody):
    level: str = Field(description="debug, info, warn, error or fatal")


class MainConfig(BurrowBody):
    """Burrow's main config sections; what Burrow has no counterpart for is empty."""

    general: dict[str, Any]
    logging: dict[str, Any]
    zookeeper: dict[str, Any]
    httpserver: dict[str, Any]


class ModuleList(BurrowBody):
    coordinator: str = Field(description="storage, evaluator, cluster, consumer or notifier")
    modules: list[str]


class ModuleDetail(BurrowBody):
    module: dict[str, Any] = Field(description="the module in Burrow's shape, no secret in it")


guarded: dict[int | str, dict[str, Any]] = {
    401: NOT_FOUND[404] | {"description": "a token is configured and not sent"},
    403: NOT_FOUND[404] | {"description": "writes are disabled: not loopback, no token"},
}
"""The OpenAPI description of a refused write."""

router = APIRouter(tags=["burrow"])


def burrow_answer(request: Request, message: str, **fields: Any) -> JSONResponse:
    """Burrow's envelope around ``fields``, encoded as FastAPI encodes a returned dict."""
    return json_answer(burrow_body(request, message, **fields))


# ---- health paths


@router.get("/burrow/admin", response_class=PlainTextResponse)
def burrow_admin() -> PlainTextResponse:
    """Burrow's liveness check: ``GOOD`` whenever the process answers."""
    return PlainTextResponse("GOOD")


@router.get(
    "/burrow/admin/ready",
    response_class=PlainTextResponse,
    responses={503: {"description": "STARTING (a cluster was never scanned) or STALE "
                                    "(a cluster's last scan is too old)",
                     "content": {"text/plain": {}}}},
)  # fmt: skip
def burrow_ready(api: Api) -> PlainTextResponse:
    """``READY`` once every cluster has been scanned within its last 3 intervals (what
    ``/readyz`` says); 503 with ``STARTING`` or ``STALE`` before or otherwise."""
    now = api.clock()
    states = list(api.coordinator.clusters.values())
    if any(s.metrics.last_success_ms is None for s in states):
        return PlainTextResponse("STARTING", status_code=503)
    if any(s.stale(now) for s in states):
        return PlainTextResponse("STALE", status_code=503)
    return PlainTextResponse("READY")


# ---- consumers of a topic, forgetting a consumer


@router.get(
    "/v3/kafka/{cluster}/topic/{topic}/consumers",
    response_model=TopicConsumers,
    responses=NOT_FOUND,
)
def burrow_topic_consumers(cluster: str, topic: str, request: Request, api: Api) -> JSONResponse:
    """The groups that commit to the topic or are assigned its partitions; ``[]`` for a
    topic no group reads (or none the cluster has), as Burrow answers."""
    state = api.cluster(cluster)
    store = state.store
    evaluation = state.evaluation
    rows = evaluation.rows.tolist() if evaluation is not None else []
    keys = (store.row_key_of(row) for row in rows)
    groups = sorted({group for (_c, group, t, _p) in keys if t == topic})
    return burrow_answer(request, "consumers of topic returned", consumers=groups)


@router.delete("/v3/kafka/{cluster}/consumer/{group}", response_model=BurrowBody, responses=guarded)
async def burrow_remove_consumer(
    cluster: str, group: str, request: Request, api: Api
) -> JSONResponse:
    """Forget the group: its windows, commit rings and evidence are dropped, its open
    incident resolves as ``removed`` and the cluster's checkpoint is written at once. A
    group the cluster still lists comes back on the next scan as a new group, judged
    only once its windows have filled again. 200 even for a group (or cluster) nothing
    is known of: there is nothing left to forget, as Burrow answers."""
    return _forget(request, api, cluster, group, None)


@router.delete(
    "/v3/kafka/{cluster}/consumer/{group}/topic/{topic}",
    response_model=BurrowBody,
    responses=guarded,
)
async def burrow_remove_consumer_topic(
    cluster: str, group: str, topic: str, request: Request, api: Api
) -> JSONResponse:
    """Forget the group's partitions of one topic (the group whole when it reads no other
    topic); the topic comes back on the next scan if the group still commits to it."""
    return _forget(request, api, cluster, group, topic)


def _forget(
    request: Request, api: ApiContext, cluster: str, group: str, topic: str | None
) -> JSONResponse:
    # Called on the event loop, not in a worker thread: the scans change the same store
    # there, so the group is forgotten between two scans, never in the middle of one.
    if cluster in api.coordinator.clusters:
        known = api.coordinator.forget_group(cluster, group, topic)
        log.info("DELETE of a consumer group", extra={"event": "group_delete_requested",
                 "cluster": cluster, "group": group, "topic": topic,
                 "known": known})  # fmt: skip
    return burrow_answer(request, "consumer group removed")


# ---- log level


@router.get("/v3/admin/loglevel", response_model=LogLevel)
def burrow_log_level(request: Request) -> JSONResponse:
    """The level the service logs at, by Burrow's name for it."""
    level = logging.getLogger().getEffectiveLevel()
    name = _LEVEL_NAMES.get(level, logging.getLevelName(level).lower())
    return burrow_answer(request, "log level returned", level=name)


@router.post(
    "/v3/admin/loglevel",
    response_model=BurrowBody,
    responses={
        400: NOT_FOUND[404] | {"description": "the body is not a JSON object with a string "
                                              "`level`"},
        404: NOT_FOUND[404] | {"description": "unknown log level"},
        **guarded,
    },
    openapi_extra={"requestBody": {"required": True, "content": {
        "application/json": {"schema": LogLevelIn.model_json_schema()}}}},
)  # fmt: skip
async def burrow_set_log_level(request: Request) -> JSONResponse:
    """Change the level the service logs at until it restarts (the config's
    ``logging.level`` applies again then). Burrow's answers: 400 when the body cannot be
    read, 404 ``unknown log level``."""
    try:
        body = orjson.loads(await request.body())
    except orjson.JSONDecodeError:
        body = None
    wanted = body.get("level", "") if isinstance(body, dict) else None
    if not isinstance(wanted, str):
        raise HTTPException(400, 'could not decode message body: expected {"level": "<name>"}')
    level = BURROW_LEVELS.get(wanted.strip().lower())
    if level is None:
        raise HTTPException(
            404,
            f"unknown log level: level: expected one of {', '.join(BURROW_LEVELS)}, got {wanted!r}",
        )
    root = logging.getLogger()
    # Said before a change to a quieter level would swallow it.
    log.warning("log level set through the API", extra={"event": "log_level_changed",
                "level": _LEVEL_NAMES[level]})  # fmt: skip
    root.setLevel(level)
    return burrow_answer(request, "set log level")


# ---- configuration


@router.get("/v3/config", response_model=MainConfig)
def burrow_config(request: Request, api: Api) -> JSONResponse:
    """The service's own settings in Burrow's shape (general, logging, zookeeper,
    httpserver): what Burrow has no counterpart for is empty."""
    config = api.coordinator.config
    api_config = config.api
    level = logging.getLogger().getEffectiveLevel()
    return burrow_answer(
        request,
        "main config returned",
        general={"pidfile": "", "stdout-logfile": "", "access-control-allow-origin": "",
                 "data-dir": config.data_dir,
                 "checkpoint-interval": whole_seconds(config.checkpoint_interval)},
        logging={"filename": "", "max-size": 0, "max-backups": 0, "max-age": 0,
                 "use-local-time": False, "use-compression": False,
                 "level": _LEVEL_NAMES.get(level, "info"),
                 "format": config.logging.format},
        zookeeper={"servers": [], "timeout": 0, "root-path": ""},
        httpserver={} if not api_config.enabled else {
            "default": {"address": f"{api_config.host}:{api_config.port}",
                        "tls": "api" if api_config.tls else "",
                        "timeout": 0},
        },
    )  # fmt: skip


def module_list(request: Request, coordinator_name: str, modules: list[str]) -> JSONResponse:
    return burrow_answer(request, "module list returned", coordinator=coordinator_name,
                         modules=modules)  # fmt: skip


def module_detail(request: Request, kind: str, module: dict[str, Any]) -> JSONResponse:
    return burrow_answer(request, f"{kind} module detail returned", module=module)


def cluster_config(api: ApiContext, name: str, kind: str) -> ClusterConfig:
    state = api.coordinator.clusters.get(name)
    if state is None:
        raise HTTPException(404, f"{kind} module not found")
    return state.config


@router.get("/v3/config/storage", response_model=ModuleList)
def burrow_config_storage(request: Request) -> JSONResponse:
    return module_list(request, "storage", ["default"])


@router.get("/v3/config/storage/{name}", response_model=ModuleDetail, responses=NOT_FOUND)
def burrow_config_storage_module(name: str, request: Request, api: Api) -> JSONResponse:
    """The window store: ``intervals`` commits per partition, ``min-distance`` and
    ``expire-group`` in seconds, as Burrow's in-memory storage has them."""
    if name != "default":
        raise HTTPException(404, "storage module not found")
    window = api.coordinator.rules.window
    return module_detail(request, "storage", {
        "class-name": "inmemory", "intervals": window.intervals,
        "min-distance": whole_seconds(window.min_distance), "group-allowlist": "",
        "group-whitelist": "", "expire-group": whole_seconds(window.expire_group),
    })  # fmt: skip


@router.get("/v3/config/evaluator", response_model=ModuleList)
def burrow_config_evaluator(request: Request) -> JSONResponse:
    return module_list(request, "evaluator", ["default"])


@router.get("/v3/config/evaluator/{name}", response_model=ModuleDetail, responses=NOT_FOUND)
def burrow_config_evaluator_module(name: str, request: Request, api: Api) -> JSONResponse:
    """Verdicts are worked out once per scan: a cached one lives as long as the shortest
    scan interval."""
    if name != "default":
        raise HTTPException(404, "evaluator module not found")
    intervals = [s.config.scan_interval for s in api.coordinator.clusters.values()]
    return module_detail(request, "evaluator", {
        "class-name": "caching", "expire-cache": whole_seconds(min(intervals, default=0)),
        "minimum-complete": api.coordinator.rules.burrow.minimum_complete,
    })  # fmt: skip


@router.get("/v3/config/cluster", response_model=ModuleList)
def burrow_config_clusters(request: Request, api: Api) -> JSONResponse:
    return module_list(request, "cluster", sorted(api.coordinator.clusters))


# One handler for both paths, as in Burrow's route table.
@router.get("/v3/kafka/{cluster}", response_model=ModuleDetail, responses=NOT_FOUND)
@router.get("/v3/config/cluster/{cluster}", response_model=ModuleDetail, responses=NOT_FOUND)
def burrow_config_cluster(cluster: str, request: Request, api: Api) -> JSONResponse:
    """The cluster module: its servers, client profile, and how often its topics
    (``topic-refresh``) and offsets (``offset-refresh``) are read, in seconds."""
    config = cluster_config(api, cluster, "cluster")
    return module_detail(request, "cluster", {
        "class-name": "kafka", "servers": config.bootstrap_servers,
        "client-profile": client_profile(config),
        "topic-refresh": whole_seconds(config.metadata_max_age),
        "offset-refresh": whole_seconds(config.scan_interval),
    })  # fmt: skip


@router.get("/v3/config/consumer", response_model=ModuleList)
def burrow_config_consumers(request: Request, api: Api) -> JSONResponse:
    return module_list(request, "consumer", sorted(api.coordinator.clusters))


@router.get("/v3/config/consumer/{name}", response_model=ModuleDetail, responses=NOT_FOUND)
def burrow_config_consumer(name: str, request: Request, api: Api) -> JSONResponse:
    """How a cluster's groups are read: from the group coordinators (not the offsets
    topic), filtered by the allow and deny regexes."""
    config = cluster_config(api, name, "consumer")
    return module_detail(request, "consumer", {
        "class-name": "kafka", "cluster": config.name, "servers": config.bootstrap_servers,
        "group-allowlist": "|".join(config.group_allow),
        "group-denylist": "|".join(config.group_deny),
        "group-whitelist": "|".join(config.group_allow),
        "group-blacklist": "|".join(config.group_deny),
        "zookeeper-path": "", "zookeeper-timeout": 0,
        "client-profile": client_profile(config), "offsets-topic": "",
        "start-latest": False,
    })  # fmt: skip


@router.get("/v3/config/notifier", response_model=ModuleList)
def burrow_config_notifiers(request: Request, api: Api) -> JSONResponse:
    """One module per channel of each receiver (``oncall.slack_webhook``; a receiver
    with several channels of one kind numbers them: ``oncall.webhook.1``)."""
    names = sorted(channel_modules(api.notifier.config)) if api.notifier is not None else []
    return module_list(request, "notifier", names)


@router.get("/v3/config/notifier/{name}", response_model=ModuleDetail, responses=NOT_FOUND)
def burrow_config_notifier(name: str, request: Request, api: Api) -> JSONResponse:
    notifier = api.notifier
    found = channel_modules(notifier.config).get(name) if notifier is not None else None
    if notifier is None or found is None:
        raise HTTPException(404, "notifier module not found")
    receiver, entry = found
    module = channel_module(notifier.config, receiver, entry)
    return module_detail(request, "notifier", module)


def whole_seconds(seconds: float) -> int:
    """A duration as Burrow's Go ``int``/``int64`` seconds (a float would not decode there);
    a positive duration under a second is 1, not 0 (which Burrow reads as "off")."""
    if seconds <= 0:
        return 0
    return max(1, math.floor(seconds + 0.5))


def client_profile(config: ClusterConfig) -> dict[str, Any]:
    """Burrow's client profile of a cluster, its TLS and SASL profiles included: file names
    and the SASL user name, never a password."""
    security = config.security
    tls = None
    if security.protocol in ("SSL", "SASL_SSL"):
        tls = {
            "name": config.name, "noverify": False, "certfile": security.ssl_certfile or "",
            "keyfile": security.ssl_keyfile or "", "cafile": security.ssl_cafile or "",
        }  # fmt: skip
    sasl = None
    if security.protocol.startswith("SASL_"):
        sasl = {"name": config.name, "handshake-first": True, "mechanism": security.sasl_mechanism,
                "username": security.sasl_username or ""}  # fmt: skip
    return {"name": config.name, "client-id": config.client_id, "kafka-version": "",
            "tls": tls, "sasl": sasl}  # fmt: skip


def channel_modules(config: NotifyConfig) -> dict[str, tuple[str, ChannelEntry]]:
    """Every channel of every receiver by its module name."""
    modules: dict[str, tuple[str, ChannelEntry]] = {}
    for receiver, entries in config.receivers.items():
        kinds = Counter(entry.kind for entry in entries)
        seen: Counter[str] = Counter()
        for entry in entries:
            kind = entry.kind
            name = f"{receiver}.{kind}" + (f".{seen[kind]}" if kinds[kind] > 1 else "")
            seen[kind] += 1
            modules[name] = (receiver, entry)
    return modules


def channel_module(config: NotifyConfig, receiver: str, entry: ChannelEntry) -> dict[str, Any]:
    """One channel in the shape of the Burrow notifier class closest to it (its settings say
    which, and add their own fields). Left out: every password, token, routing key and header
    value; a webhook URL keeps its scheme, host and port (its path is the credential of a Slack
    webhook)."""
    settings = entry.config
    module: dict[str, Any] = {
        "class-name": settings.burrow_class, "kind": entry.kind, "receiver": receiver,
        "group-allowlist": "", "group-whitelist": "", "timeout": whole_seconds(settings.timeout),
        "extra": dict(config.extras),
    }  # fmt: skip
    module.update(settings.burrow_fields())
    return module
