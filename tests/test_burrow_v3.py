"""Burrow's v3 API, complete: who owns each partition (client id and host, as the group's
coordinator describes its members), the consumers of a topic, forgetting a consumer group, the
log level, the configuration without its secrets, and Burrow's health paths. Answers are checked
in the shapes of Burrow's HTTP server (core/internal/httpserver)."""

from __future__ import annotations

import logging
import time
import uuid
from pathlib import Path

import httpx
import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
from aiokafka.admin import AIOKafkaAdminClient, NewTopic

from notifier.api import create_app
from notifier.collect import ClusterCollector
from notifier.config import parse_service_config
from notifier.notify import Notifier
from notifier.notify.channels.templates import Templates
from notifier.notify.channels.webhook import webhook_payload
from notifier.notify.config import parse_notify
from notifier.rules import RulesConfig, load_rules
from notifier.service import Coordinator, checkpoint
from notifier.types import (
    Alert,
    Event,
    Finding,
    GroupMember,
    GroupResult,
    GroupStatus,
    Incident,
    Notification,
    PartitionResult,
    PartitionStatus,
    Sample,
    Severity,
)

from .member_proxy import MemberDetailsProxy
from .scripted import RecordingSink, drive, scan_result, service

ROOT = Path(__file__).resolve().parents[1]
REQUEST = {"url", "host"}


def api(coord, notifier=None, token=None, host="127.0.0.1", now=None) -> httpx.AsyncClient:
    def clock() -> int:
        if now is not None:
            return now
        return max((s.metrics.last_success_ms or 0) for s in coord.clusters.values())

    app = create_app(coord, notifier, token, clock=clock, host=host)
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://notifier")


# ---------------------------------------------------------------------------------------------
# Who owns a partition


async def _consume_as(bootstrap: str, topic: str, group: str, client_id: str) -> AIOKafkaConsumer:
    """A member of ``group`` called ``client_id`` that owns every partition of ``topic`` and
    committed 1 record of each."""
    consumer = AIOKafkaConsumer(
        topic,
        bootstrap_servers=bootstrap,
        group_id=group,
        client_id=client_id,
        enable_auto_commit=False,
        session_timeout_ms=2000,
        heartbeat_interval_ms=300,
    )
    await consumer.start()
    deadline = time.monotonic() + 20
    while not consumer.assignment():
        assert time.monotonic() < deadline, "the consumer never got its partitions"
        await consumer.getmany(timeout_ms=50)
    await consumer.commit({tp: 1 for tp in consumer.assignment()})
    return consumer


async def _topic_with_records(bootstrap: str, topic: str, partitions: int) -> None:
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    await admin.start()
    try:
        await admin.create_topics([NewTopic(topic, partitions, 1)])
    finally:
        await admin.close()
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap)
    await producer.start()
    try:
        for partition in range(partitions):
            for i in range(4):  # one record per batch: how Tansu counts log-end offsets
                await producer.send_and_wait(topic, b"r%d" % i, partition=partition)
    finally:
        await producer.stop()


@pytest.fixture
async def described(broker_factory):
    """A broker whose DescribeGroups names members as Apache Kafka does (see member_proxy)."""
    proxy = MemberDetailsProxy()
    port = await proxy.start()
    broker = broker_factory(advertised_port=port)
    proxy.upstream_port = broker.port
    yield f"127.0.0.1:{port}"
    await proxy.close()


@pytest.mark.broker
async def test_each_partition_names_the_client_id_and_host_of_its_owner(described, tmp_path):
    topic, group = f"billing-{uuid.uuid4().hex[:6]}", f"billing-{uuid.uuid4().hex[:6]}"
    await _topic_with_records(described, topic, partitions=2)
    consumer = await _consume_as(described, topic, group, client_id="billing-7f9c")
    collector = ClusterCollector(described, cluster="local", group_allow=f"^{group}$")
    config = parse_service_config(
        {
            "clusters": [{"name": "local", "bootstrap_servers": described}],
            "history": {"enabled": False},
        },
        "test",
    )
    coord = Coordinator(
        config, RulesConfig(), tmp_path, RecordingSink(), collector_factory=lambda _: collector
    )
    coord.clusters["local"].collector = collector
    try:
        result = await collector.scan()
        await coord.scan_once("local")
    finally:
        await consumer.stop()
        await collector.close()

    owners = result.owners[group]
    assert set(owners) == {(topic, 0), (topic, 1)}
    for member in owners.values():
        assert (member.client_id, member.client_host) == ("billing-7f9c", "127.0.0.1")
        assert member.member_id.startswith("billing-7f9c-")
        assert member.describe() == "billing-7f9c on 127.0.0.1"

    async with api(coord) as http:
        lag = (await http.get(f"/v3/kafka/local/consumer/{group}/lag")).json()
        detail = (await http.get(f"/v3/kafka/local/consumer/{group}")).json()
        page = (await http.get(f"/api/groups/local/{group}")).json()
    partitions = lag["status"]["partitions"]
    assert [(p["partition"], p["owner"], p["client_id"]) for p in partitions] == [
        (0, "127.0.0.1", "billing-7f9c"),
        (1, "127.0.0.1", "billing-7f9c"),
    ]
    assert lag["status"]["maxlag"]["owner"] == "127.0.0.1"
    for entry in detail["topics"][topic]:
        assert (entry["owner"], entry["client_id"]) == ("127.0.0.1", "billing-7f9c")
    assert {p["owned_by"] for p in page["partitions"]} == {"billing-7f9c on 127.0.0.1"}


def _stalled_alert(owner: str, client_id: str) -> Alert:
    """A group whose partition 3 stalled, owned as given."""
    stalled = PartitionResult(
        topic="orders",
        partition=3,
        status=PartitionStatus.STALL,
        complete=1.0,
        burrow_complete=1.0,
        committed_offset=1000,
        log_end_offset=49_000,
        log_start_offset=0,
        current_lag=48_000,
        lag_seconds=2820.0,
        start=None,
        end=None,
    )
    finding = Finding(
        rule="burrow",
        kind="stall",
        severity=Severity.ERR,
        status="STALL",
        topic="orders",
        partition=3,
        message="committed offset stopped moving",
    )
    result = GroupResult(
        cluster="prod",
        group="billing",
        status=GroupStatus.ERR,
        complete=1.0,
        burrow_complete=1.0,
        partial=False,
        evaluated_at=1_700_000_600_000,
        partitions=[stalled],
        findings=[finding],
        total_lag=48_000,
        max_lag=stalled,
        max_lag_seconds=2820.0,
        group_state="Stable",
        members=1,
    )
    result.attach_owners({("orders", 3): GroupMember("m-1", client_id, owner)} if owner else {})
    incident = Incident(
        id="i-1",
        cluster="prod",
        group="billing",
        opened_at=1_700_000_000_000,
        status=GroupStatus.ERR,
        peak_status=GroupStatus.ERR,
        findings=[finding],
    )
    return Alert(Event.OPEN, incident, result)


def _rendered(alert: Alert) -> dict[str, str]:
    templates = Templates()
    notification = Notification(
        id="n-1", receiver="oncall", group_key="{}", alerts=[alert], created_at=1_700_000_600_000
    )
    context = templates.context(notification, payload=webhook_payload(notification))
    names = [
        "slack/open.json.j2",
        "email/open.txt.j2",
        "email/open.html.j2",
        "pagerduty/open.summary.j2",
        "webhook/text.json.j2",
    ]
    return {name: templates.render(name, context) for name in names}


def test_notifications_say_who_owns_the_partition_a_finding_names():
    for name, text in _rendered(_stalled_alert("10.2.0.14", "billing-7f9c")).items():
        assert "owned by billing-7f9c on 10.2.0.14" in text, (name, text)
    payload = webhook_payload(
        Notification("n", "oncall", "{}", [_stalled_alert("10.2.0.14", "billing-7f9c")], 0)
    )
    (partition,) = payload["alerts"][0]["result"]["partitions"]
    assert (partition["owner"], partition["client_id"]) == ("10.2.0.14", "billing-7f9c")


def test_a_partition_no_member_owns_names_nobody():
    for name, text in _rendered(_stalled_alert("", "")).items():
        assert "owned by" not in text, (name, text)


# ---------------------------------------------------------------------------------------------
# Forgetting a consumer group

RULES = RulesConfig.model_validate(
    {
        "window": {"intervals": 3},
        "burrow": {"enabled": False, "minimum_complete": 0.99},
        "rules": [{"name": "lag-high", "kind": "lag", "threshold": 10, "severity": "warn"}],
    }
)


def _scan(ts: int, lags: dict[str, int]) -> object:
    rows = [
        Sample(
            ts=ts,
            cluster="c",
            group=g,
            topic="orders",
            partition=0,
            committed_offset=1000,
            log_end_offset=1000 + lag,
        )
        for g, lag in lags.items()
    ]
    return scan_result(rows, "c", ts)


@pytest.fixture
def lagging(tmp_path):
    """``billing`` lags 50 (its incident is open after three scans), ``audit`` is fine, and
    both are still consumed afterwards."""
    start = 1_700_000_000_000
    script = [_scan(start + i * 10_000, {"billing": 50, "audit": 0}) for i in range(6)]
    config = parse_notify(
        {
            "receivers": {"hooks": {"webhook": {"url": "http://127.0.0.1:9/h"}}},
            "route": {"receiver": "hooks"},
        }
    )
    notifier = Notifier(config, tmp_path / "notify.sqlite")
    coord, _ = service(tmp_path, script, RULES, sink=notifier)
    return coord, notifier


async def test_deleting_a_consumer_forgets_it_and_resolves_its_incident_as_removed(
    lagging, tmp_path
):
    coord, notifier = lagging
    await drive(coord, 3)
    (incident,) = notifier.incidents(open_only=True)
    assert incident.group == "billing"
    async with api(coord, notifier) as http:
        removed = await http.delete("/v3/kafka/c/consumer/billing")
        assert removed.status_code == 200
        body = removed.json()
        assert body == {
            "error": False,
            "message": "consumer group removed",
            "request": body["request"],
        }
        assert set(body["request"]) == REQUEST
        assert (await http.get("/v3/kafka/c/consumer")).json()["consumers"] == ["audit"]
        assert (await http.get("/v3/kafka/c/consumer/billing/lag")).status_code == 404
        assert (await http.get("/v3/kafka/c/consumer/audit/lag")).status_code == 200
        # Burrow answers 200 whether or not the group (or the cluster) was known.
        again = await http.delete("/v3/kafka/c/consumer/billing")
        assert again.status_code == 200
        assert again.json()["message"] == "consumer group removed"
        assert (await http.delete("/v3/kafka/nope/consumer/billing")).status_code == 200
    assert notifier.incidents(open_only=True) == []
    (closed,) = notifier.incidents(open_only=False)
    assert (closed.id, closed.close_reason) == (incident.id, "removed")

    # Durable: a service started from the checkpoint does not know the group either.
    state = coord.clusters["c"]
    restarted, _ = service(tmp_path / "again", [], RULES)
    fresh = restarted.clusters["c"]
    assert checkpoint.load(coord.checkpoint_path("c"), fresh.store, fresh.evaluator, fresh.tracker)
    assert fresh.store.groups("c") == [("c", "audit")]
    assert ("c", "billing") not in fresh.tracker.statuses

    # Still consumed: the next scan lists it again, as a new group whose window must fill
    # before any rule may alert on it.
    transitions = []
    for _ in range(2):
        state.retry_at = 0
        transitions += await coord.scan_once("c")
    async with api(coord, notifier) as http:
        status = (await http.get("/v3/kafka/c/consumer/billing/lag")).json()["status"]
    assert status["partition_count"] == 1 and status["complete"] < 1.0
    assert transitions == [] and notifier.incidents(open_only=True) == []
    state.retry_at = 0
    transitions = await coord.scan_once("c")
    assert [(t.group, t.current) for t in transitions] == [("billing", GroupStatus.WARN)]
    (reopened,) = notifier.incidents(open_only=True)
    assert reopened.id != incident.id


async def test_forgetting_is_a_write_the_token_guards(lagging):
    coord, notifier = lagging
    await drive(coord, 3)
    async with api(coord, notifier, host="0.0.0.0") as http:
        refused = await http.delete("/v3/kafka/c/consumer/billing")
        assert refused.status_code == 403 and "api.token" in refused.json()["message"]
    async with api(coord, notifier, token="Tk-91c0ffee", host="0.0.0.0") as http:
        wrong = await http.delete(
            "/v3/kafka/c/consumer/billing", headers={"Authorization": "Bearer nope"}
        )
        assert wrong.status_code == 401
        assert (await http.get("/v3/kafka/c/consumer")).json()["consumers"] == ["audit", "billing"]
        right = await http.delete(
            "/v3/kafka/c/consumer/billing", headers={"Authorization": "Bearer Tk-91c0ffee"}
        )
        assert right.status_code == 200


# ---------------------------------------------------------------------------------------------
# Consumers of a topic, the health paths


async def test_the_consumers_of_a_topic_are_the_groups_reading_it(tmp_path):
    ts = 1_700_000_000_000
    rows = [
        Sample(ts, "c", "billing", "orders", 0, 5, 9),
        Sample(ts, "c", "audit", "orders", 1, 5, 9),
        Sample(ts, "c", "audit", "payments", 0, 1, 2),
    ]
    coord, _ = service(tmp_path, [scan_result(rows, "c", ts)], RULES)
    await drive(coord, 1)
    async with api(coord) as http:
        orders = (await http.get("/v3/kafka/c/topic/orders/consumers")).json()
        payments = (await http.get("/v3/kafka/c/topic/payments/consumers")).json()
        unknown = await http.get("/v3/kafka/c/topic/nope/consumers")
        no_cluster = await http.get("/v3/kafka/x/topic/orders/consumers")
    assert orders == {
        "error": False,
        "message": "consumers of topic returned",
        "consumers": ["audit", "billing"],
        "request": orders["request"],
    }
    assert payments["consumers"] == ["audit"]
    # Burrow: a topic no group reads has no consumers (200, []); only the cluster is a 404.
    assert (unknown.status_code, unknown.json()["consumers"]) == (200, [])
    assert (no_cluster.status_code, no_cluster.json()["message"]) == (404, "cluster not found")


async def test_burrows_health_paths_answer_in_plain_text(tmp_path):
    ts = 1_700_000_000_000
    coord, _ = service(
        tmp_path, [scan_result([Sample(ts, "c", "g", "t", 0, 1, 2)], "c", ts)], RULES
    )
    async with api(coord, now=ts) as http:
        alive = await http.get("/burrow/admin")
        starting = await http.get("/burrow/admin/ready")
        await drive(coord, 1)
        ready = await http.get("/burrow/admin/ready")
    assert (alive.status_code, alive.text) == (200, "GOOD")
    assert alive.headers["content-type"].startswith("text/plain")
    assert (starting.status_code, starting.text) == (503, "STARTING")
    assert (ready.status_code, ready.text) == (200, "READY")
    async with api(coord, now=ts + 10 * 60_000) as http:  # no scan for 10 minutes
        stale = await http.get("/burrow/admin/ready")
    assert (stale.status_code, stale.text) == (503, "STALE")


# ---------------------------------------------------------------------------------------------
# The log level


@pytest.fixture
def root_level():
    root = logging.getLogger()
    before = root.level
    root.setLevel(logging.INFO)
    yield root
    root.setLevel(before)


async def test_the_log_level_is_read_and_set_with_burrows_names(tmp_path, root_level):
    coord, _ = service(tmp_path, [], RULES)
    async with api(coord, now=0) as http:
        read = (await http.get("/v3/admin/loglevel")).json()
        assert read == {
            "error": False,
            "message": "log level returned",
            "level": "info",
            "request": read["request"],
        }
        changed = await http.post("/v3/admin/loglevel", json={"level": "debug"})
        assert changed.json() == {
            "error": False,
            "message": "set log level",
            "request": changed.json()["request"],
        }
        assert root_level.level == logging.DEBUG
        assert (await http.get("/v3/admin/loglevel")).json()["level"] == "debug"
        await http.post("/v3/admin/loglevel", json={"level": "WARNING"})
        assert (await http.get("/v3/admin/loglevel")).json()["level"] == "warn"
        # Burrow's answers: 404 "unknown log level" (a missing level is an empty one), 400 for
        # a body it cannot decode.
        bad = await http.post("/v3/admin/loglevel", json={"level": "loud"})
        assert bad.status_code == 404
        assert bad.json()["message"] == (
            "unknown log level: level: expected one of trace, debug, info, warn, warning, "
            "error, fatal, got 'loud'"
        )
        missing = await http.post("/v3/admin/loglevel", json={})
        assert missing.status_code == 404 and missing.json()["message"].endswith("got ''")
        for body in (b"{not json", b'{"level": 3}', b"[]"):
            garbled = await http.post("/v3/admin/loglevel", content=body)
            assert garbled.status_code == 400, body
            assert garbled.json()["error"] is True
            assert garbled.json()["message"].startswith("could not decode message body")
    assert root_level.level == logging.WARNING
    async with api(coord, now=0, host="0.0.0.0") as http:
        refused = await http.post("/v3/admin/loglevel", json={"level": "debug"})
    assert refused.status_code == 403 and root_level.level == logging.WARNING


# ---------------------------------------------------------------------------------------------
# The configuration

SASL_PASSWORD = "saslPw-0a9b8c7d"
SSL_PASSWORD = "sslKeyPw-11f2e3d4"
API_TOKEN = "apiTok-5e6f7a8b"
SECRETS = {
    "slack": "https://hooks.example/services/T0/B0/hookSecret-3c4d5e6f",
    "bot": "xoxb-botSecret-1a2b3c",
    "pagerduty": "pdKey-9e8d7c6b",
    "smtp": "smtpPw-2468ace0",
    "bearer": "bearer-13579bdf",
    "header": "hdrSecret-0f1e2d3c",
    "basic": "basicPw-a1b2c3d4",
}


@pytest.fixture
def configured(tmp_path):
    config = parse_service_config(
        {
            "clusters": [
                {
                    "name": "plain",
                    "bootstrap_servers": "k1:9092,k2:9092",
                    "client_id": "lagwatch",
                    "group_allow": ["^billing", "^audit"],
                    "group_deny": ["-test$"],
                },
                {
                    "name": "guarded",
                    "bootstrap_servers": "k3:9093",
                    "scan_interval": "30s",
                    "security": {
                        "protocol": "SASL_SSL",
                        "sasl_mechanism": "SCRAM-SHA-512",
                        "sasl_username": "watcher",
                        "sasl_password": SASL_PASSWORD,
                        "ssl_cafile": "/etc/ca.pem",
                        "ssl_password": SSL_PASSWORD,
                    },
                },
            ],
            "history": {"enabled": False},
            "api": {"host": "127.0.0.1", "port": 8123, "token": API_TOKEN},
        },
        "service.yaml",
    )
    rules = load_rules(ROOT / "rules.yaml")
    coord = Coordinator(config, rules, tmp_path, RecordingSink())
    notify = parse_notify(
        {
            "receivers": {
                "oncall": [
                    {"slack_webhook": {"url": SECRETS["slack"]}},
                    {"slack_bot": {"token": SECRETS["bot"], "channel": "#lag"}},
                    {"pagerduty": {"routing_key": SECRETS["pagerduty"]}},
                    {
                        "email": {
                            "host": "smtp.example",
                            "port": 587,
                            "sender": "lag@example",
                            "recipients": ["a@example", "b@example"],
                            "username": "lag",
                            "password": SECRETS["smtp"],
                        }
                    },
                    {
                        "webhook": {
                            "url": "https://hooks.example/a",
                            "bearer_token": SECRETS["bearer"],
                            "headers": {"X-Api-Key": SECRETS["header"]},
                        }
                    },
                    {
                        "webhook": {
                            "url": "https://hooks.example/b",
                            "basic_auth": {"username": "u", "password": SECRETS["basic"]},
                        }
                    },
                ]
            },
            "route": {"receiver": "oncall"},
            "extras": {"team": "payments"},
        }
    )
    return coord, Notifier(notify, tmp_path / "notify.sqlite")


async def test_the_config_is_shown_in_burrows_module_shapes(configured):
    coord, notifier = configured
    async with api(coord, notifier, token=API_TOKEN, now=0) as http:
        main = (await http.get("/v3/config")).json()
        assert main["message"] == "main config returned"
        assert set(main) == {
            "error",
            "message",
            "request",
            "general",
            "logging",
            "zookeeper",
            "httpserver",
        }
        assert main["httpserver"] == {
            "default": {"address": "127.0.0.1:8123", "tls": "", "timeout": 0}
        }
        lists = {
            name: (await http.get(f"/v3/config/{name}")).json()
            for name in ("storage", "evaluator", "cluster", "consumer", "notifier")
        }
        for name, body in lists.items():
            assert (body["message"], body["coordinator"]) == ("module list returned", name)
        assert lists["cluster"]["modules"] == ["guarded", "plain"]
        assert lists["consumer"]["modules"] == ["guarded", "plain"]
        assert lists["notifier"]["modules"] == [
            "oncall.email",
            "oncall.pagerduty",
            "oncall.slack_bot",
            "oncall.slack_webhook",
            "oncall.webhook.0",
            "oncall.webhook.1",
        ]

        storage = (await http.get("/v3/config/storage/default")).json()
        assert storage["message"] == "storage module detail returned"
        assert storage["module"]["class-name"] == "inmemory"
        assert storage["module"]["intervals"] == coord.rules.window.intervals
        cluster = (await http.get("/v3/config/cluster/guarded")).json()["module"]
        assert cluster["servers"] == ["k3:9093"] and cluster["offset-refresh"] == 30
        assert cluster["client-profile"]["sasl"]["username"] == "watcher"
        assert cluster["client-profile"]["tls"]["cafile"] == "/etc/ca.pem"
        consumer = (await http.get("/v3/config/consumer/plain")).json()["module"]
        assert consumer["group-whitelist"] == "^billing|^audit"
        assert consumer["group-blacklist"] == "-test$"
        assert consumer["client-profile"]["client-id"] == "lagwatch"
        email = (await http.get("/v3/config/notifier/oncall.email")).json()["module"]
        assert (email["class-name"], email["server"], email["to"]) == (
            "email",
            "smtp.example",
            "a@example,b@example",
        )
        hook = (await http.get("/v3/config/notifier/oncall.webhook.0")).json()["module"]
        assert (hook["class-name"], hook["auth-type"], hook["headers"]) == (
            "http",
            "bearer",
            ["X-Api-Key"],
        )
        assert hook["url-open"] == "https://hooks.example/***"
        assert hook["extra"] == {"team": "payments"}
        for path, message in [
            ("/v3/config/cluster/nope", "cluster module not found"),
            ("/v3/config/consumer/nope", "consumer module not found"),
            ("/v3/config/notifier/nope", "notifier module not found"),
            ("/v3/config/storage/nope", "storage module not found"),
            ("/v3/config/evaluator/nope", "evaluator module not found"),
        ]:
            missing = await http.get(path)
            assert (missing.status_code, missing.json()["message"]) == (404, message)

        answers = [main, *lists.values()]
        for kind, names in ((k, b["modules"]) for k, b in lists.items()):
            for name in names:
                answers.append((await http.get(f"/v3/config/{kind}/{name}")).json())
    text = repr(answers)
    for secret in [SASL_PASSWORD, SSL_PASSWORD, API_TOKEN, *SECRETS.values(), "hookSecret"]:
        assert secret not in text


async def test_without_notifications_there_is_no_notifier_module(configured):
    coord, _ = configured
    async with api(coord, now=0) as http:
        assert (await http.get("/v3/config/notifier")).json()["modules"] == []
        assert (await http.get("/v3/config/notifier/oncall.email")).status_code == 404


async def test_every_new_endpoint_is_in_the_openapi_document(configured):
    coord, notifier = configured
    async with api(coord, notifier, now=0) as http:
        paths = (await http.get("/openapi.json")).json()["paths"]
    assert "delete" in paths["/v3/kafka/{cluster}/consumer/{group}"]
    assert set(paths["/v3/admin/loglevel"]) == {"get", "post"}
    for path in (
        "/v3/kafka/{cluster}/topic/{topic}/consumers",
        "/burrow/admin",
        "/burrow/admin/ready",
        "/v3/config",
        "/v3/config/notifier/{name}",
    ):
        assert path in paths
