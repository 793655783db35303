"""What a client of Burrow meets when it is pointed at notifier instead: every route of Burrow's
route table (core/internal/httpserver/coordinator.go), Burrow's status code for each case its
handlers tell apart, one handler for a cluster under /v3/kafka and /v3/config/cluster, integer
settings where Burrow's Go types are integers, and forgetting one topic of a consumer group."""

from __future__ import annotations

import re

import httpx
import pytest

from notifier.api import create_app
from notifier.config import parse_service_config
from notifier.rules import RulesConfig
from notifier.service import Coordinator
from notifier.types import Sample

from .scripted import RecordingSink, ScriptedCollector, drive, scan_result, service

TS = 1_700_000_000_000
RULES = RulesConfig()

# Burrow's route table as its coordinator.go (linkedin/Burrow, ced55ba, 2025-10-03) registers
# it, parameters renamed to nothing: the name of a path parameter is not part of the API.
BURROW_ROUTES = [
    ("GET", "/burrow/admin"),
    ("GET", "/burrow/admin/ready"),
    ("GET", "/metrics"),
    ("GET", "/v3/kafka"),
    ("GET", "/v3/kafka/:cluster"),
    ("GET", "/v3/kafka/:cluster/topic"),
    ("GET", "/v3/kafka/:cluster/topic/:topic"),
    ("GET", "/v3/kafka/:cluster/topic/:topic/consumers"),
    ("GET", "/v3/kafka/:cluster/consumer"),
    ("GET", "/v3/kafka/:cluster/consumer/:consumer"),
    ("GET", "/v3/kafka/:cluster/consumer/:consumer/status"),
    ("GET", "/v3/kafka/:cluster/consumer/:consumer/lag"),
    ("GET", "/v3/config"),
    ("GET", "/v3/config/storage"),
    ("GET", "/v3/config/storage/:name"),
    ("GET", "/v3/config/evaluator"),
    ("GET", "/v3/config/evaluator/:name"),
    ("GET", "/v3/config/cluster"),
    ("GET", "/v3/config/cluster/:cluster"),
    ("GET", "/v3/config/consumer"),
    ("GET", "/v3/config/consumer/:name"),
    ("GET", "/v3/config/notifier"),
    ("GET", "/v3/config/notifier/:name"),
    ("DELETE", "/v3/kafka/:cluster/consumer/:consumer"),
    ("DELETE", "/v3/kafka/:cluster/consumer/:consumer/topic/:topic"),
    ("GET", "/v3/admin/loglevel"),
    ("POST", "/v3/admin/loglevel"),
]

# (method, path, body, Burrow's status, the start of Burrow's message): each case Burrow's
# handlers (kafka.go, config.go, coordinator.go) answer differently. Cluster `c` reads topics
# `orders` and `payments`; `billing` reads both, `audit` only `orders`.
BURROW_ANSWERS = [
    ("GET", "/v3/kafka/c/topic/orders/consumers", None, 200, "consumers of topic returned"),
    ("GET", "/v3/kafka/c/topic/nope/consumers", None, 200, "consumers of topic returned"),
    ("GET", "/v3/kafka/x/topic/orders/consumers", None, 404, "cluster not found"),
    ("GET", "/v3/kafka/x/topic", None, 404, "cluster not found"),
    ("GET", "/v3/kafka/c/topic/nope", None, 404, "cluster or topic not found"),
    ("GET", "/v3/kafka/x/consumer", None, 404, "cluster not found"),
    ("GET", "/v3/kafka/c/consumer/nope", None, 404, "cluster or consumer not found"),
    ("GET", "/v3/kafka/c/consumer/nope/status", None, 404, "cluster or consumer not found"),
    ("GET", "/v3/kafka/c/consumer/nope/lag", None, 404, "cluster or consumer not found"),
    ("GET", "/v3/kafka/x", None, 404, "cluster module not found"),
    ("GET", "/v3/config/cluster/x", None, 404, "cluster module not found"),
    ("GET", "/v3/config/consumer/x", None, 404, "consumer module not found"),
    ("GET", "/v3/config/storage/x", None, 404, "storage module not found"),
    ("GET", "/v3/config/evaluator/x", None, 404, "evaluator module not found"),
    ("GET", "/v3/config/notifier/x", None, 404, "notifier module not found"),
    ("DELETE", "/v3/kafka/c/consumer/nope", None, 200, "consumer group removed"),
    ("DELETE", "/v3/kafka/x/consumer/nope", None, 200, "consumer group removed"),
    ("DELETE", "/v3/kafka/c/consumer/nope/topic/orders", None, 200, "consumer group removed"),
    ("POST", "/v3/admin/loglevel", b'{"level": "loud"}', 404, "unknown log level"),
    ("POST", "/v3/admin/loglevel", b"{}", 404, "unknown log level"),
    ("POST", "/v3/admin/loglevel", b"{not json", 400, "could not decode message body"),
    ("POST", "/v3/admin/loglevel", b'{"level": "info"}', 200, "set log level"),
]


def _rows(ts: int, orders_lag: int = 0) -> list[Sample]:
    return [
        Sample(ts, "c", "billing", "orders", 0, 90, 100 + orders_lag),
        Sample(ts, "c", "billing", "payments", 0, 5, 5),
        Sample(ts, "c", "audit", "orders", 0, 100, 100 + orders_lag),
    ]


@pytest.fixture
async def http(tmp_path):
    script = [scan_result(_rows(TS + i * 10_000), "c", TS + i * 10_000) for i in range(3)]
    coord, _ = service(tmp_path, script, RULES)
    await drive(coord, 3)
    app = create_app(coord, clock=lambda: TS + 25_000)
    async with httpx.AsyncClient(
        transport=httpx.ASGITransport(app=app), base_url="http://notifier"
    ) as client:
        client.coordinator = coord  # type: ignore[attr-defined]
        yield client


def _shape(path: str) -> str:
    return re.sub(r"(:\w+|\{\w+\})", "{}", path)


async def test_every_route_of_burrows_route_table_is_served(http):
    paths = (await http.get("/openapi.json")).json()["paths"]
    ours = {(method.upper(), _shape(path)) for path, ops in paths.items() for method in ops}
    ours.add(("GET", "/metrics"))  # served as text, outside the OpenAPI document's JSON shapes
    missing = [(m, p) for m, p in BURROW_ROUTES if (m, _shape(p)) not in ours]
    assert missing == []


@pytest.mark.parametrize(("method", "path", "body", "status", "message"), BURROW_ANSWERS)
async def test_each_case_gets_burrows_status_code(http, root_level, method, path, body, status,
                                                  message):  # fmt: skip
    answer = await http.request(method, path, content=body)
    assert answer.status_code == status, answer.text
    got = answer.json()
    assert got["error"] is (status >= 400)
    assert got["message"].startswith(message)
    assert set(got["request"]) == {"url", "host"}


@pytest.fixture
def root_level():
    import logging

    root = logging.getLogger()
    before = root.level
    yield root
    root.setLevel(before)


async def test_consumers_of_an_unconsumed_topic_are_an_empty_list(http):
    body = (await http.get("/v3/kafka/c/topic/nope/consumers")).json()
    assert body["consumers"] == []
    assert (await http.get("/v3/kafka/c/topic/payments/consumers")).json()["consumers"] == [
        "billing"
    ]


async def test_deleting_a_consumers_topic_forgets_only_that_topic(http):
    before = (await http.get("/v3/kafka/c/consumer/billing/lag")).json()["status"]
    assert {p["topic"] for p in before["partitions"]} == {"orders", "payments"}
    removed = await http.delete("/v3/kafka/c/consumer/billing/topic/payments")
    assert (removed.status_code, removed.json()["message"]) == (200, "consumer group removed")
    after = (await http.get("/v3/kafka/c/consumer/billing/lag")).json()["status"]
    assert {p["topic"] for p in after["partitions"]} == {"orders"}
    assert (await http.get("/v3/kafka/c/topic/payments/consumers")).json()["consumers"] == []
    metrics = (await http.get("/metrics")).text
    assert 'consumer_group="billing",topic="orders"' in metrics
    assert 'consumer_group="billing",topic="payments"' not in metrics
    # The group's last topic: the group is forgotten whole, as Burrow does.
    await http.delete("/v3/kafka/c/consumer/billing/topic/orders")
    assert (await http.get("/v3/kafka/c/consumer/billing/lag")).status_code == 404
    assert (await http.get("/v3/kafka/c/consumer")).json()["consumers"] == ["audit"]
    assert (await http.get("/v3/kafka/c/consumer/audit/lag")).status_code == 200


async def test_a_cluster_is_one_answer_under_v3_kafka_and_v3_config_cluster(http):
    kafka = (await http.get("/v3/kafka/c")).json()
    config = (await http.get("/v3/config/cluster/c")).json()
    assert kafka.pop("request")["url"] == "/v3/kafka/c"
    assert config.pop("request")["url"] == "/v3/config/cluster/c"
    assert kafka == config
    assert kafka["message"] == "cluster module detail returned"
    assert set(kafka["module"]) >= {
        "class-name", "servers", "client-profile", "topic-refresh", "offset-refresh"
    }  # fmt: skip


def _integers(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


async def test_burrows_integer_settings_are_integers_and_both_list_names_are_served(tmp_path):
    config = parse_service_config(
        {"clusters": [{"name": "c", "bootstrap_servers": "k:9092", "scan_interval": "2.5s",
                       "metadata_max_age": "300s", "group_allow": ["^billing"],
                       "group_deny": ["-test$"]}], "history": {"enabled": False}},
        "notifier.yaml",
    )  # fmt: skip
    rules = RulesConfig.model_validate({"window": {"min_distance": 0.4, "expire_group": 604800}})
    coord = Coordinator(config, rules, tmp_path, RecordingSink(),
                        collector_factory=lambda _: ScriptedCollector([]))  # fmt: skip
    app = create_app(coord, clock=lambda: TS)
    async with httpx.AsyncClient(
        transport=httpx.ASGITransport(app=app), base_url="http://notifier"
    ) as http:
        storage = (await http.get("/v3/config/storage/default")).json()["module"]
        evaluator = (await http.get("/v3/config/evaluator/default")).json()["module"]
        cluster = (await http.get("/v3/config/cluster/c")).json()["module"]
        consumer = (await http.get("/v3/config/consumer/c")).json()["module"]
        main = (await http.get("/v3/config")).json()
        raw = (await http.get("/v3/config/storage/default")).text
    assert '"expire-group":604800' in raw and "604800.0" not in raw
    assert (storage["expire-group"], storage["min-distance"]) == (604800, 1)
    assert (cluster["topic-refresh"], cluster["offset-refresh"]) == (300, 3)
    assert _integers(evaluator["expire-cache"]) and evaluator["expire-cache"] == 3
    # Every field Burrow's structs.go types int, int32 or int64.
    for module, names in [
        (storage, ("intervals", "min-distance", "expire-group")),
        (cluster, ("topic-refresh", "offset-refresh")),
        (evaluator, ("expire-cache",)),
        (main["logging"], ("max-size", "max-backups", "max-age")),
        (main["zookeeper"], ("timeout",)),
        (consumer, ("zookeeper-timeout",)),
    ]:
        for name in names:
            assert _integers(module[name]), f"{name} is {module[name]!r}: Burrow's is an integer"
    assert consumer["group-allowlist"] == consumer["group-whitelist"] == "^billing"
    assert consumer["group-denylist"] == consumer["group-blacklist"] == "-test$"
    assert storage["group-allowlist"] == storage["group-whitelist"] == ""
