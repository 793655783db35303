"""The HTTP API as its users see it: Burrow's v3 shapes, our /api, /metrics, readiness."""

from __future__ import annotations

import json
import logging
import time
from datetime import UTC, datetime
from pathlib import Path

import httpx
import pytest
import schemathesis
from hypothesis import HealthCheck, settings
from prometheus_client.parser import text_string_to_metric_families

from notifier.api import create_app
from notifier.collect import ScanError
from notifier.rules import RulesConfig, load_rules
from notifier.types import Sample

from .conformance import load_vectors
from .scripted import drive, replayed_service, scan_result, service

ROOT = Path(__file__).resolve().parents[1]
LATER = datetime.fromtimestamp(time.time() + 30 * 86400, UTC).isoformat()
"""A silence's end within ``notify.silence_limits.max_silence_ends_in`` of the notifier's
(wall) clock."""
GROUP_CASES = [
    c for c in load_vectors("burrow_evaluator_vectors.json") if c["kind"] == "group_evaluation"
]


async def burrow_vector_service(tmp_path: Path, case: dict):
    """A service that saw the vector's commits as scans, evaluated at the vector's `now`."""
    config = case.get("config", {"intervals": 10, "min-distance": 0, "minimum-complete": 0.0,
                                 "allowed-lag": 0})  # fmt: skip
    rules = RulesConfig.model_validate(
        {"window": {"intervals": case.get("ring_size", 10), "min_distance": config["min-distance"]},
         "burrow": {"allowed_lag": config["allowed-lag"],
                    "minimum_complete": config["minimum-complete"]}}
    )  # fmt: skip
    script = [
        scan_result(
            [Sample(ts=c["timestamp_ms"], cluster="local", group="testgroup", topic="testtopic",
                    partition=0, committed_offset=c["offset"],
                    log_end_offset=case["broker_offset"], group_state="Empty", members=0)],
            "local", c["timestamp_ms"],
        )
        for c in case["offsets"]
    ]  # fmt: skip
    coord, _ = service(tmp_path, script, rules, cluster="local")
    await drive(coord, len(script), "local")
    state = coord.clusters["local"]
    if case["offsets"]:
        state.evaluation = state.evaluator.evaluate(case["now_ms"])
    return coord


def last_scan(coord) -> int:
    """When the coordinator's newest data was observed: tests look at it as fresh by default."""
    return max((s.metrics.last_success_ms or 0) for s in coord.clusters.values())


def client(coord, notifier=None, now: int | None = None) -> httpx.AsyncClient:
    clock = (lambda: now) if now is not None else (lambda: last_scan(coord))
    transport = httpx.ASGITransport(app=create_app(coord, notifier, clock=clock))
    return httpx.AsyncClient(transport=transport, base_url="http://notifier")


@pytest.mark.parametrize("case", [c for c in GROUP_CASES if c["offsets"]], ids=lambda c: c["name"])
async def test_burrow_status_and_lag_bodies_match_the_group_vectors(tmp_path, case):
    coord = await burrow_vector_service(tmp_path, case)
    async with client(coord) as http:
        status = (await http.get("/v3/kafka/local/consumer/testgroup/status")).json()
        lag = (await http.get("/v3/kafka/local/consumer/testgroup/lag")).json()
    for body in (status, lag):
        assert body["error"] is False
        assert body["message"] == "consumer status returned"
        assert body["request"]["url"].startswith("/v3/kafka/local/consumer/testgroup/")
        s = body["status"]
        assert (s["cluster"], s["group"]) == ("local", "testgroup")
        assert s["status"] == case["expected_status"]
        assert s["complete"] == case["expected_complete"]
        assert s["partition_count"] == case["expected_partition_count"]
        assert s["totallag"] == case["expected_total_lag"]
        assert s["maxlag"]["status"] == case["expected_partition_status"]
        assert s["maxlag"]["complete"] == case["expected_partition_complete"]
        assert set(s["maxlag"]) == {"topic", "partition", "owner", "client_id", "status", "start",
                                    "end", "current_lag", "complete"}  # fmt: skip
        assert set(s["maxlag"]["start"]) == {"offset", "timestamp", "lag"}
    if "expected_partitions_len" in case:
        expected = case["expected_partitions_len"]
        assert len(status["status"]["partitions"]) == expected["status_endpoint_ShowAll_false"]
        assert len(lag["status"]["partitions"]) == expected["lag_endpoint_ShowAll_true"]
    if "expected_maxlag_start_offset" in case:
        assert lag["status"]["maxlag"]["start"]["offset"] == case["expected_maxlag_start_offset"]
        assert lag["status"]["maxlag"]["end"]["offset"] == case["expected_maxlag_end_offset"]


async def test_unknown_group_and_cluster_get_burrows_404(tmp_path):
    (case,) = [c for c in GROUP_CASES if c["expected_status"] == "NOTFOUND"]
    coord = await burrow_vector_service(tmp_path, GROUP_CASES[0])
    async with client(coord) as http:
        missing = await http.get("/v3/kafka/local/consumer/nosuchgroup/status")
        no_cluster = await http.get("/v3/kafka/nope/consumer")
    assert missing.status_code == 404
    body = missing.json()
    assert body["error"] is True and body["status"]["status"] == case["expected_status"]
    assert body["status"]["complete"] == case["expected_complete"]
    assert body["status"]["partitions"] == [] and body["status"]["totallag"] == 0
    assert no_cluster.status_code == 404
    assert no_cluster.json() == {"error": True, "message": "cluster not found",
                                 "request": no_cluster.json()["request"]}  # fmt: skip


async def test_a_listed_group_without_partitions_is_ok_with_complete_zero(tmp_path):
    (case,) = [c for c in GROUP_CASES if not c["offsets"] and c["expected_status"] == "OK"]
    coord = await burrow_vector_service(tmp_path, GROUP_CASES[0])
    coord.clusters["local"].groups["emptied"] = "Empty"
    async with client(coord) as http:
        body = (await http.get("/v3/kafka/local/consumer/emptied/status")).json()
    assert body["status"]["status"] == case["expected_status"]
    assert body["status"]["complete"] == case["expected_complete"]


async def test_burrow_lists_clusters_consumers_topics_and_offsets(tmp_path):
    coord = await burrow_vector_service(tmp_path, GROUP_CASES[0])
    async with client(coord) as http:
        assert (await http.get("/v3/kafka")).json()["clusters"] == ["local"]
        assert (await http.get("/v3/kafka/local")).json()["module"]["class-name"] == "kafka"
        assert (await http.get("/v3/kafka/local/consumer")).json()["consumers"] == ["testgroup"]
        assert (await http.get("/v3/kafka/local/topic")).json()["topics"] == ["testtopic"]
        assert (await http.get("/v3/kafka/local/topic/testtopic")).json()["offsets"] == [4321]
        detail = (await http.get("/v3/kafka/local/consumer/testgroup")).json()
        assert detail["topics"]["testtopic"][0]["current-lag"] == 2421
        assert len(detail["topics"]["testtopic"][0]["offsets"]) == 10
        assert (await http.get("/v3/kafka/local/topic/nope")).status_code == 404


@pytest.fixture
async def demo_service(tmp_path):
    coord, script = replayed_service(tmp_path, ROOT / "examples" / "sample-history.csv",
                                     load_rules(ROOT / "rules.yaml"))  # fmt: skip
    await drive(coord, len(script), "demo")
    return coord


async def test_groups_overview_shows_every_scenario(demo_service):
    async with client(demo_service) as http:
        data = (await http.get("/api/groups")).json()
    status = {g["group"]: g["status"] for g in data["groups"]}
    assert status["healthy"] == "OK"
    assert status["stalled"] == status["stopped"] == status["rebalancing"] == "ERR"
    assert status["lagging"] == "WARN"
    stalled = next(g for g in data["groups"] if g["group"] == "stalled")
    assert stalled["rules"] == ["stalled-or-stopped"] and len(stalled["lag_history"]) == 10
    assert stalled["partitions"] == 2 and stalled["max_lag_seconds"] > 0
    assert data["clusters"][0]["cluster"] == "demo"


async def test_group_detail_has_windows_and_evidence(demo_service):
    async with client(demo_service) as http:
        detail = (await http.get("/api/groups/demo/stalled")).json()
        missing = await http.get("/api/groups/demo/nope")
    assert detail["status"] == "ERR"
    (finding, *_) = detail["findings"]
    assert finding["rule"] == "stalled-or-stopped" and finding["status"] == "STALL"
    assert finding["evidence"]["waiting_since"] and finding["evidence"]["arrived"] > 0
    partition = detail["partitions"][0]
    assert len(partition["window"]) == 10 and partition["commits"] and partition["leo_table"]
    assert missing.status_code == 404


async def test_a_log_end_offset_reset_is_logged_once_and_shown_with_the_evidence(tmp_path, caplog):
    # The topic is recreated between scans 4 and 5: its log-end offset falls from 1040 to 10.
    leo = [1000 + 10 * i for i in range(5)] + [10 + i for i in range(5)]
    script = [
        scan_result([Sample(ts=1_000_000 + i * 10_000, cluster="c", group="g", topic="t",
                            partition=0, committed_offset=offset, log_end_offset=offset)],
                    "c", 1_000_000 + i * 10_000)
        for i, offset in enumerate(leo)
    ]  # fmt: skip
    coord, _ = service(tmp_path, script, RulesConfig())
    caplog.set_level(logging.INFO, logger="notifier.service")
    await drive(coord, len(script))
    resets = [r for r in caplog.records if getattr(r, "event", None) == "log_end_offset_reset"]
    assert len(resets) == 1
    (line,) = resets
    assert "log-end offset went backwards" in line.getMessage()
    assert (line.cluster, line.topic, line.partition) == ("c", "t", 0)
    assert (line.previous_log_end_offset, line.log_end_offset) == (1040, 10)
    async with client(coord) as http:
        detail = (await http.get("/api/groups/c/g")).json()
    (partition,) = detail["partitions"]
    assert partition["leo_reset"] == {
        "at": 1_050_000,
        "previous_log_end_offset": 1040,
        "log_end_offset": 10,
    }
    assert [p["log_end_offset"] for p in partition["leo_table"]] == [10, 11, 12, 13, 14]
    assert detail["max_lag_seconds"] == 0.0


async def test_during_an_outage_every_answer_says_how_old_the_data_is(tmp_path):
    # Twelve good scans 10 s apart fill every window; then the cluster stops answering.
    t0 = 1_800_000_000_000
    script = [
        scan_result([Sample(ts=t0 + i * 10_000, cluster="c", group="g", topic="t", partition=0,
                            committed_offset=100 * i, log_end_offset=100 * i)],
                    "c", t0 + i * 10_000)
        for i in range(12)
    ]  # fmt: skip
    script += [ScanError("connection refused")] * 6
    coord, _ = service(tmp_path, script, RulesConfig())
    await drive(coord, len(script))
    last = t0 + 11 * 10_000

    async def answers(now: int) -> dict:
        async with client(coord, now=now) as http:
            return {
                path: (await http.get(path))
                for path in ("/v3/kafka/c/consumer/g/status", "/v3/kafka/c/consumer/g/lag",
                             "/api/groups", "/api/groups/c/g", "/metrics")
            }  # fmt: skip

    fresh = await answers(last + 5_000)
    status = fresh["/v3/kafka/c/consumer/g/lag"].json()["status"]
    assert (status["complete"], status["stale"], status["data_age_seconds"]) == (1.0, False, 5.0)
    assert status["partitions"][0]["complete"] == 1.0
    assert "kafka_consumergroup_lag{" in fresh["/metrics"].text

    stale = await answers(last + 60_000)  # six scan intervals without a successful scan
    for path in ("/v3/kafka/c/consumer/g/status", "/v3/kafka/c/consumer/g/lag"):
        body = stale[path]
        assert body.status_code == 200
        status = body.json()["status"]
        assert status["status"] == "OK"  # the last verdict stays, but says how old it is
        assert (status["stale"], status["data_age_seconds"], status["last_scan"]) == (
            True, 60.0, last
        )  # fmt: skip
        assert status["complete"] == 0.0  # Burrow's complete drops: the window is not covered
    (partition,) = stale["/v3/kafka/c/consumer/g/lag"].json()["status"]["partitions"]
    assert partition["complete"] == pytest.approx(0.4)  # 4 of the window's 10 intervals seen
    overview = stale["/api/groups"].json()
    (cluster,) = overview["clusters"]
    assert (cluster["stale"], cluster["data_age_seconds"], cluster["last_scan"]) == (
        True, 60.0, last
    )  # fmt: skip
    (group,) = overview["groups"]
    assert (group["stale"], group["data_age_seconds"], group["complete"], group["partial"]) == (
        True, 60.0, 0.0, True
    )  # fmt: skip
    detail = stale["/api/groups/c/g"].json()
    assert (detail["stale"], detail["data_age_seconds"], detail["complete"]) == (True, 60.0, 0.0)
    families = {f.name: f for f in text_string_to_metric_families(stale["/metrics"].text)}
    for name in ("kafka_consumergroup_lag", "kafka_consumergroup_group_lag_seconds",
                 "kafka_consumergroup_lag_sum", "notifier_group_status",
                 "kafka_topic_partition_current_offset"):  # fmt: skip
        assert not families[name].samples, name  # stale values are not exported as current
    assert families["notifier_cluster_stale"].samples[0].value == 1
    assert families["notifier_cluster_data_age_seconds"].samples[0].value == 60.0
    assert families["notifier_last_scan_timestamp_seconds"].samples[0].value == last / 1000


async def test_metrics_parse_and_follow_exporter_names(demo_service):
    async with client(demo_service) as http:
        text = (await http.get("/metrics")).text
    families = {f.name: f for f in text_string_to_metric_families(text)}
    lag = families["kafka_consumergroup_lag"]
    sample = next(s for s in lag.samples if s.labels["consumergroup"] == "stalled")
    assert set(sample.labels) == {"cluster", "consumergroup", "topic", "partition"}
    status = {s.labels["consumergroup"]: s.value for s in families["notifier_group_status"].samples}
    assert status["stalled"] == 2 and status["healthy"] == 0
    for name in ("kafka_consumergroup_group_lag_seconds", "kafka_topic_partition_current_offset",
                 "notifier_scans", "notifier_scan_duration_seconds", "notifier_evaluation_seconds",
                 "notifier_group_complete"):  # fmt: skip
        assert name in families, name


async def test_readiness_follows_successful_scans(tmp_path, demo_service):
    coord, _ = service(tmp_path, [], RulesConfig())
    now = int(time.time() * 1000)
    async with client(coord, now=now) as http:
        assert (await http.get("/healthz")).json() == {"status": "ok"}
        assert (await http.get("/readyz")).status_code == 503
    # the demo service scanned, but long ago (the sample history is from 2026-11-21 00:00)
    async with client(demo_service, now=now) as http:
        assert (await http.get("/readyz")).status_code == 503
    state = demo_service.clusters["demo"]
    state.metrics.last_success_ms = now
    async with client(demo_service, now=now) as http:
        assert (await http.get("/readyz")).status_code == 200


async def test_silences_without_notifications_configured_say_so(demo_service):
    async with client(demo_service) as http:
        response = await http.get("/api/silences")
    assert response.status_code == 404
    assert "notify" in response.json()["message"]


async def test_status_page_and_assets_are_served(demo_service):
    async with client(demo_service) as http:
        index = await http.get("/")
        group = await http.get("/groups/demo/stalled")
        script = await http.get("/static/app.js")
        escape = await http.get("/static/..%2F..%2Fapi.py")
    assert "notifierIndex" in index.text and "notifierGroup" in group.text
    assert script.status_code == 200 and "fetch(" in script.text
    assert escape.status_code == 404
    assert "http://" not in index.text.replace("http://www.w3.org", "")  # nothing from the internet


@pytest.mark.parametrize(
    "path",
    ["/static/%00", "/static/app.js%00.png", "/static/..%2F..%2Fapi%2Fapp.py", "/static/%2e%2e",
     "/static/..%5Capp.py", "/static/" + "a" * 5000, "/static/%ff%fe", "/static/.",
     "/static/%0d%0aSet-Cookie:x=1"],
    ids=lambda path: path[:40],
)  # fmt: skip
async def test_odd_static_paths_are_404_never_500(demo_service, path):
    async with client(demo_service) as http:
        response = await http.get(path)
    assert response.status_code == 404, response.text[:200]
    assert response.json()["error"] is True


async def test_the_openapi_document_lists_the_status_codes_the_api_answers_with(demo_service):
    async with client(demo_service) as http:
        doc = (await http.get("/openapi.json")).json()

    def codes(path: str, method: str = "get") -> set[str]:
        return set(doc["paths"][path][method]["responses"])

    for path in ("/v3/kafka/{cluster}", "/v3/kafka/{cluster}/consumer",
                 "/v3/kafka/{cluster}/consumer/{group}",
                 "/v3/kafka/{cluster}/consumer/{group}/status",
                 "/v3/kafka/{cluster}/consumer/{group}/lag", "/v3/kafka/{cluster}/topic",
                 "/v3/kafka/{cluster}/topic/{topic}", "/api/groups/{cluster}/{group}"):  # fmt: skip
        assert "404" in codes(path), path
    assert codes("/readyz") == {"200", "503"}
    assert codes("/api/silences") == {"200", "404", "422"}  # 422: a bad page cursor or limit
    assert codes("/api/silences", "post") == {
        "201", "400", "401", "403", "404", "409", "413", "422"}  # fmt: skip
    assert codes("/api/silences/{silence_id}", "delete") == {
        "200", "401", "403", "404", "409", "422"}  # fmt: skip
    error = doc["paths"]["/v3/kafka/{cluster}"]["get"]["responses"]["404"]
    assert error["content"]["application/json"]["schema"]["$ref"].endswith("/ErrorBody")
    matchers = doc["components"]["schemas"]["SilenceIn"]["properties"]["matchers"]["anyOf"]
    as_list = next(m for m in matchers if m["type"] == "array")
    as_mapping = next(m for m in matchers if m["type"] == "object")
    assert (as_list["minItems"], as_list["maxItems"], as_mapping["minProperties"]) == (1, 32, 1)


async def test_a_body_that_is_not_json_text_gets_the_documented_400(demo_service, notifier):
    async with writer(demo_service, notifier) as http:
        response = await http.post("/api/silences", content=b'{"author": "\x80"}',
                                   headers={"Content-Type": "application/json"})  # fmt: skip
    assert response.status_code == 400
    assert response.json()["error"] is True and "parsing the body" in response.json()["message"]


async def test_an_empty_matcher_list_is_refused_as_the_document_says(demo_service, notifier):
    body = {"matchers": [], "ends_at": LATER, "author": "ops", "comment": "x"}
    async with writer(demo_service, notifier) as http:
        response = await http.post("/api/silences", json=body)
    assert response.status_code == 422
    assert response.json()["problems"][0]["field"].startswith("body.matchers")


# ---------------------------------------------------------------------------------------------
# Robustness: generated requests against the OpenAPI document never get a 500.


def _robust_app():
    import asyncio
    import tempfile

    async def build():
        history = ROOT / "examples" / "sample-history.csv"
        rules = load_rules(ROOT / "rules.yaml")
        coord, script = replayed_service(Path(tempfile.mkdtemp()), history, rules)
        await drive(coord, len(script), "demo")
        return coord

    coord = asyncio.run(build())
    return create_app(coord, clock=lambda: last_scan(coord))


ROBUST = schemathesis.openapi.from_asgi("/openapi.json", _robust_app())


@ROBUST.parametrize()
@settings(max_examples=25, deadline=None, suppress_health_check=list(HealthCheck))
def test_no_generated_request_gets_a_server_error(case):
    response = case.call()
    if case.formatted_path == "/readyz" and case.method == "GET":  # 503: "not ready" for a probe
        assert response.status_code in (200, 503)
        return
    assert response.status_code < 500, (case.method, case.formatted_path, response.text[:300])
    if response.status_code >= 400:
        content_type = response.headers.get("content-type")
        content_type = content_type[0] if isinstance(content_type, list) else content_type
        assert content_type.startswith("application/json")
        assert response.json()["error"] is True


async def test_unknown_paths_and_bad_parameters_get_json_4xx(demo_service):
    async with client(demo_service) as http:
        unknown = await http.get("/v3/nothing/here")
        bad = await http.post("/api/silences", json={"matchers": "not a mapping"})
    assert unknown.status_code == 404 and unknown.json()["error"] is True
    assert bad.status_code in (404, 422) and bad.json()["error"] is True


# ---------------------------------------------------------------------------------------------
# Silences and incidents through a real notification pipeline


@pytest.fixture
def notifier(tmp_path):
    from notifier.notify import Notifier
    from notifier.notify.config import parse_notify

    config = parse_notify(
        {"receivers": {"hooks": {"webhook": {"url": "http://127.0.0.1:9/hook"}}},
         "route": {"receiver": "hooks"}}
    )  # fmt: skip
    return Notifier(config, tmp_path / "notify.sqlite")


def writer(coord, notifier, token=None) -> httpx.AsyncClient:
    app = create_app(coord, notifier, token, clock=lambda: last_scan(coord))
    transport = httpx.ASGITransport(app=app)
    return httpx.AsyncClient(transport=transport, base_url="http://notifier")


async def test_silences_can_be_created_listed_and_expired(demo_service, notifier):
    async with writer(demo_service, notifier) as http:
        created = await http.post("/api/silences", json={
            "matchers": ['group=~"stall.*"'], "ends_at": LATER,
            "author": "ops", "comment": "deploying a fix"})  # fmt: skip
        assert created.status_code == 201, created.text
        silence = created.json()["silence"]
        assert silence["state"] == "active" and silence["author"] == "ops"
        listed = (await http.get("/api/silences")).json()["silences"]
        assert [s["id"] for s in listed] == [silence["id"]]
        expired = await http.delete(f"/api/silences/{silence['id']}")
        assert expired.status_code == 200, expired.text
        assert expired.json()["silence"]["state"] == "expired"
        # Alertmanager's semantics: DELETE expires the silence; it is still listed, ended now.
        [listed] = (await http.get("/api/silences")).json()["silences"]
        assert listed["id"] == silence["id"] and listed["state"] == "expired"
        assert listed["ends_at"] <= notifier.clock() and listed["starts_at"] == silence["starts_at"]
        again = await http.delete(f"/api/silences/{silence['id']}")
        assert again.status_code == 409 and "already expired" in again.text
        assert (await http.delete("/api/silences/nope")).status_code == 404


async def test_a_bad_silence_is_rejected_with_the_field(demo_service, notifier):
    async with writer(demo_service, notifier) as http:
        past = await http.post(
            "/api/silences",
            json={
                "matchers": ['group="x"'],
                "ends_at": "2001-01-01T00:00:00Z",
                "author": "ops",
                "comment": "c",
            },
        )
        bad_time = await http.post(
            "/api/silences",
            json={
                "matchers": ['group="x"'],
                "ends_at": "tomorrow",
                "author": "ops",
                "comment": "c",
            },
        )
        bad_matcher = await http.post(
            "/api/silences",
            json={
                "matchers": ["nonsense"],
                "ends_at": LATER,
                "author": "ops",
                "comment": "c",
            },
        )
        no_comment = await http.post(
            "/api/silences",
            json={"matchers": ['group="x"'], "ends_at": LATER, "author": "ops"},
        )
    assert past.status_code == 422 and "ends_at" in past.json()["message"]
    assert bad_time.status_code == 422 and "ends_at" in bad_time.json()["message"]
    assert bad_matcher.status_code == 422 and "matchers" in bad_matcher.json()["message"]
    assert (
        no_comment.status_code == 422
        and no_comment.json()["problems"][0]["field"] == "body.comment"
    )


async def test_oversized_silence_bodies_are_refused_with_413(demo_service, notifier):
    # 200,000 matchers, about 3 MB: refused before it is parsed, whether its size is declared
    # or it arrives chunked.
    body = {"matchers": ['group="g"'] * 200_000, "ends_at": LATER,
            "author": "ops", "comment": "x"}  # fmt: skip
    data = json.dumps(body).encode()

    async def chunks():
        for start in range(0, len(data), 65_536):
            yield data[start : start + 65_536]

    async with writer(demo_service, notifier) as http:
        declared = await http.post("/api/silences", content=data,
                                   headers={"Content-Type": "application/json"})  # fmt: skip
        chunked = await http.post("/api/silences", content=chunks(),
                                  headers={"Content-Type": "application/json"})  # fmt: skip
        listed = (await http.get("/api/silences")).json()["silences"]
    for response in (declared, chunked):
        assert response.status_code == 413
        assert response.json()["error"] is True
        assert "larger than 65536 bytes" in response.json()["message"]
    assert listed == []


async def test_a_catastrophic_regex_is_refused_naming_the_matcher(demo_service, notifier):
    body = {"matchers": ['cluster="demo"', 'group=~"(a+)+$"'],
            "ends_at": LATER, "author": "ops", "comment": "x"}  # fmt: skip
    async with writer(demo_service, notifier) as http:
        response = await http.post("/api/silences", json=body)
    assert response.status_code == 422
    assert "matchers[1]" in response.json()["message"]
    assert "nested quantifier" in response.json()["message"]


async def test_writing_silences_needs_the_token_when_one_is_set(demo_service, notifier):
    body = {"matchers": ['group="x"'], "ends_at": LATER, "author": "ops",
            "comment": "maintenance"}  # fmt: skip
    async with writer(demo_service, notifier, token="s3cret") as http:
        assert (await http.post("/api/silences", json=body)).status_code == 401
        ok = await http.post("/api/silences", json=body, headers={"Authorization": "Bearer s3cret"})
        assert ok.status_code == 201
        assert (await http.get("/api/silences")).status_code == 200  # reading needs no token


def limited_notifier(tmp_path, **limits):
    from notifier.notify import Notifier
    from notifier.notify.config import parse_notify

    config = parse_notify(
        {"receivers": {"hooks": {"webhook": {"url": "http://127.0.0.1:9/hook"}}},
         "route": {"receiver": "hooks"}, "silence_limits": limits}
    )  # fmt: skip
    return Notifier(config, tmp_path / "limited.sqlite")


async def test_silences_beyond_the_limits_are_refused_with_the_reason(demo_service, tmp_path):
    notifier = limited_notifier(tmp_path, max_silences=3)

    def body(group: str, **changes) -> dict:
        return {"matchers": [f'group="{group}"'], "ends_at": LATER, "author": "ops",
                "comment": "maintenance", **changes}  # fmt: skip

    async with writer(demo_service, notifier) as http:
        made = [await http.post("/api/silences", json=body(f"g{i}")) for i in range(3)]
        assert [r.status_code for r in made] == [201] * 3
        fourth = await http.post("/api/silences", json=body("g3"))
        assert fourth.status_code == 409
        assert fourth.json()["message"] == (
            "silences: 3 silences are active or pending, the most allowed "
            "(notify.silence_limits.max_silences): expire one first"
        )
        expired = made[0].json()["silence"]["id"]
        assert (await http.delete(f"/api/silences/{expired}")).status_code == 200
        assert (await http.post("/api/silences", json=body("g3"))).status_code == 201

        forever = await http.post("/api/silences", json=body("g4", ends_at="9999-12-31"))
        huge = await http.post("/api/silences", json=body("g5", comment="x" * 62_000))
    assert forever.status_code == 422
    assert forever.json()["message"] == (
        "ends_at: is more than 366d ahead (notify.silence_limits.max_silence_ends_in)"
    )
    assert huge.status_code == 422
    assert "notify.silence_limits.max_silence_size_bytes" in huge.json()["message"]
    assert len(notifier.list_silences()) == 4  # 3 active, 1 expired: nothing refused was kept


async def test_silences_are_listed_a_page_at_a_time(demo_service, tmp_path):
    notifier = limited_notifier(tmp_path)
    for i in range(7):
        notifier.add_silence([f'group="g{i}"'], ends_at=notifier.clock() + 3_600_000,
                             author="ops", comment="maintenance")  # fmt: skip
    async with writer(demo_service, notifier) as http:
        pages = [(await http.get("/api/silences", params={"limit": 3})).json()]
        while pages[-1]["next"]:
            after = {"limit": 3, "after": pages[-1]["next"]}
            pages.append((await http.get("/api/silences", params=after)).json())
        whole = (await http.get("/api/silences")).json()
        bad_cursor = await http.get("/api/silences", params={"after": "somewhere"})
        too_many = await http.get("/api/silences", params={"limit": 100_000})
    assert [len(page["silences"]) for page in pages] == [3, 3, 1]
    listed = [s["id"] for page in pages for s in page["silences"]]
    assert listed == [s.id for s in notifier.list_silences()]
    assert [s["id"] for s in whole["silences"]] == listed and whole["next"] is None
    assert bad_cursor.status_code == 422 and "after: not a cursor" in bad_cursor.json()["message"]
    assert too_many.status_code == 422


async def test_incidents_and_groups_show_what_the_pipeline_opened(demo_service, notifier):
    from notifier.rules import TransitionTracker

    state = demo_service.clusters["demo"]
    transitions = TransitionTracker().update(state.evaluation)
    notifier.handle(transitions, state.evaluation.now)
    async with writer(demo_service, notifier) as http:
        incidents = (await http.get("/api/incidents")).json()["incidents"]
        groups = {g["group"]: g for g in (await http.get("/api/groups")).json()["groups"]}
        metrics = (await http.get("/metrics")).text
    opened = {i["group"] for i in incidents}
    assert {"stalled", "stopped", "rebalancing", "lagging"} <= opened
    assert "healthy" not in opened
    assert groups["stalled"]["incident_id"] == next(
        i["id"] for i in incidents if i["group"] == "stalled"
    )
    assert "notifier_outbox_depth" in metrics
