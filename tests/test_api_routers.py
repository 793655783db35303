"""The API as routers: an endpoint added from outside the package is served through
``create_app``'s composition with the same write guard, error shape and shared state as the
built-in ones (the README's "How to add an endpoint"), and every JSON answer of the built-in
routers is what its response model documents."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi.responses import JSONResponse
from fastapi.routing import APIRoute
from pydantic import BaseModel
from starlette.routing import Match

from notifier.api import ROUTERS, create_app, reload
from notifier.notify import Notifier
from notifier.notify.config import parse_notify
from notifier.rules import load_rules

from . import toy_endpoint
from .scripted import drive, replayed_service

ROOT = Path(__file__).resolve().parents[1]
TOKEN = "toy-token"


@pytest.fixture
async def demo(tmp_path):
    coord, script = replayed_service(tmp_path, ROOT / "examples" / "sample-history.csv",
                                     load_rules(ROOT / "rules.yaml"))  # fmt: skip
    await drive(coord, len(script), "demo")
    notify = parse_notify({"receivers": {"oncall": [{"webhook": {"url": "https://hooks.example/a"}}]},
                           "route": {"receiver": "oncall"}})  # fmt: skip
    return coord, Notifier(notify, tmp_path / "notify.sqlite")


def _client(app: Any) -> httpx.AsyncClient:
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://notifier")


async def test_a_router_from_the_tests_folder_is_served_like_the_built_in_ones(demo):
    coord, notifier = demo
    now = coord.clusters["demo"].metrics.last_success_ms
    app = create_app(coord, notifier, TOKEN, clock=lambda: now, host="0.0.0.0",
                     routers=[toy_endpoint.router])  # fmt: skip
    async with _client(app) as http:
        counted = await http.get("/api/toy/demo")
        unknown = await http.get("/api/toy/nope")
        refused = await http.post("/api/toy/notes", content=b"hello")
        noted = await http.post("/api/toy/notes", content=b"hello",
                                headers={"Authorization": f"Bearer {TOKEN}"})  # fmt: skip
        built_in = await http.get("/v3/kafka")
        doc = (await http.get("/openapi.json")).json()
    # The shared state: the same coordinator the built-in routers read.
    assert counted.status_code == 200
    assert counted.json() == {"cluster": "demo", "groups": len(coord.clusters["demo"].groups),
                              "scanned_at": now}  # fmt: skip
    # The error shape every endpoint answers with.
    assert unknown.status_code == 404
    assert unknown.json()["error"] is True and unknown.json()["message"] == "cluster not found"
    assert unknown.json()["request"]["url"] == "/api/toy/nope"
    # The write guard: beyond loopback, a write needs the token.
    assert refused.status_code == 401 and refused.json()["error"] is True
    assert noted.status_code == 200 and noted.json() == {"noted": "hello"}
    # Beside the built-in routers, not instead of them; documented like them.
    assert built_in.status_code == 200 and built_in.json()["clusters"] == ["demo"]
    answer = doc["paths"]["/api/toy/{cluster}"]["get"]["responses"]
    assert answer["200"]["content"]["application/json"]["schema"]["$ref"].endswith("GroupCount")
    assert set(answer) == {"200", "404", "422"}


def _route(method: str, path: str) -> APIRoute:
    """The built-in route that answers ``method path`` (the routers have no prefix)."""
    scope = {"type": "http", "method": method, "path": path, "root_path": ""}
    for router in ROUTERS:
        for route in router.routes:
            if isinstance(route, APIRoute) and route.matches(scope)[0] is Match.FULL:
                return route
    raise AssertionError(f"no route answers {method} {path}")


async def test_every_json_answer_is_what_its_response_model_documents(demo):
    coord, notifier = demo
    now = coord.clusters["demo"].metrics.last_success_ms
    app = create_app(coord, notifier, clock=lambda: now)
    ends_at = notifier.clock() + 86_400_000  # within notify.silence_limits
    silence = {"matchers": {"group": "stalled"}, "ends_at": ends_at,
               "author": "ops", "comment": "maintenance"}  # fmt: skip
    async with _client(app) as http:
        created = await http.post("/api/silences", json=silence)
        silence_id = created.json()["silence"]["id"]
        topic = (await http.get("/v3/kafka/demo/topic")).json()["topics"][0]
        asked = [("POST", "/api/silences", created)]
        for path in (
            "/v3/kafka", "/v3/kafka/demo", "/v3/kafka/demo/consumer",
            "/v3/kafka/demo/consumer/stalled", "/v3/kafka/demo/consumer/stalled/status",
            "/v3/kafka/demo/consumer/stalled/lag", "/v3/kafka/demo/topic",
            f"/v3/kafka/demo/topic/{topic}", f"/v3/kafka/demo/topic/{topic}/consumers",
            "/api/groups", "/api/groups/demo/stalled", "/api/groups/demo/stalled/history",
            "/api/incidents", "/api/silences", "/healthz", "/readyz", "/v3/admin/loglevel",
            "/v3/config", "/v3/config/storage", "/v3/config/storage/default",
            "/v3/config/evaluator/default", "/v3/config/cluster/demo",
            "/v3/config/consumer/demo", "/v3/config/notifier", "/v3/config/notifier/oncall.webhook",
        ):  # fmt: skip
            asked.append(("GET", path, await http.get(path)))
        asked.append(("DELETE", f"/api/silences/{silence_id}",
                      await http.delete(f"/api/silences/{silence_id}")))  # fmt: skip
    for method, path, answer in asked:
        assert answer.status_code in (200, 201), (method, path, answer.text[:200])
        model = _route(method, path).response_model
        assert isinstance(model, type) and issubclass(model, BaseModel), (method, path)
        model.model_validate(answer.json())  # raises, naming the member, when they differ


def test_every_built_in_json_endpoint_declares_a_response_model():
    routes = [route for router in (*ROUTERS, reload.router) for route in router.routes]
    undeclared = [
        f"{sorted(route.methods)[0]} {route.path}"
        for route in routes
        if isinstance(route, APIRoute) and route.include_in_schema
        and issubclass(getattr(route.response_class, "value", route.response_class), JSONResponse)
        and not (isinstance(route.response_model, type)
                 and issubclass(route.response_model, BaseModel))
    ]  # fmt: skip
    assert len(routes) > 40 and undeclared == []
