"""No secret ever leaves the config: the real service is started with a known value for every
kind of credential (the SASL password of a cluster, an OIDC client secret and the tokens issued
for it, a TLS client key's password, a Slack webhook URL and bot token, a PagerDuty routing
key, an SMTP password, a webhook's bearer token and auth header, the API token), each given
through ``${ENV}``; it is driven through an alert that opens and resolves on every channel
(receivers that fail once echo the credentials back in their errors), every API route is
called, good and bad requests alike (Burrow's ``/v3/config`` and each of its modules
included); then every log line, every answer, /metrics and every file in the data directory
(outbox and checkpoint databases, the Parquet history) is searched for each secret. There must
be none."""

from __future__ import annotations

import asyncio
import json
import re
import sqlite3
import time
import uuid
from pathlib import Path
from typing import Any

import httpx
import pyarrow.parquet as pq
import pytest
import trustme
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient, NewTopic
from cryptography.hazmat.primitives import serialization

from notifier.config import secret_fragments
from notifier.demo import HttpReceiver, SmtpReceiver
from notifier.embedded import EmbeddedBroker

from .kafka_gate import JwtVerifier, KafkaGate, TokenEndpoint
from .service_process import ServiceProcess
from .waiting import until_true

pytestmark = [
    pytest.mark.broker,
    # The SMTP receiver takes the password without TLS on purpose: it is loopback, and the
    # password must travel for the test to search where it went.
    pytest.mark.filterwarnings("ignore:Requiring AUTH while not requiring TLS:UserWarning"),
]

STATIC = Path(__file__).resolve().parents[1] / "notifier" / "api" / "static"

SASL_PASSWORD = "saslPw-c0ffee91ab"
SLACK_HOOK_SECRET = "slackHook-7e1d4b22"
SLACK_BOT_TOKEN = "xoxb-botToken-5a2f90"
PAGERDUTY_ROUTING_KEY = "pdRouting-3c9e77d1"
SMTP_PASSWORD = "smtpPw-88d1f0aa"
WEBHOOK_TOKEN = "hookBearer-41b7aa0c"
WEBHOOK_API_KEY = "hookHeader-0d5e3c6f"
API_TOKEN = "apiToken-6f02bd19"
OAUTH_CLIENT_SECRET = "oidcClient-9b1e44c2"
SSL_KEY_PASSWORD = "sslKeyPw-2d7c0e85"

RULES = """
window: {intervals: 3}
burrow: {enabled: false, minimum_complete: 0}
rules:
  - {name: lag-high, kind: lag, threshold: 1, severity: warn}
"""


def service_config(
    bootstrap: str,
    prefix: str,
    http: HttpReceiver,
    smtp: SmtpReceiver,
    login: tuple[KafkaGate, TokenEndpoint, dict[str, Path]],
) -> str:
    """Every credential from the environment; the receivers on loopback."""
    gate, idp, tls = login
    return f"""
clusters:
  - name: local
    bootstrap_servers: {bootstrap}
    scan_interval: 0.5s
    request_timeout: 2s
    scan_timeout: 4s
    group_allow: ["^{prefix}"]
  - name: guarded   # SASL to a broker that does not speak it: every scan fails, logged
    bootstrap_servers: {bootstrap}
    scan_interval: 0.5s
    request_timeout: 1s
    scan_timeout: 2s
    down_after_failures: 1
    security:
      protocol: SASL_PLAINTEXT
      sasl_mechanism: PLAIN
      sasl_username: notifier
      sasl_password: ${{KAFKA_SASL_PASSWORD}}
  - name: managed   # OAUTHBEARER through a broker that checks the tokens
    bootstrap_servers: 127.0.0.1:{gate.port}
    scan_interval: 0.5s
    request_timeout: 2s
    scan_timeout: 4s
    security:
      protocol: SASL_PLAINTEXT
      sasl_mechanism: OAUTHBEARER
      oauth: {{token_url: "{idp.url}", client_id: lag-notifier,
              client_secret: "${{KAFKA_OAUTH_CLIENT_SECRET}}"}}
  - name: mutual   # an encrypted client key for a broker that speaks no TLS: scans fail, logged
    bootstrap_servers: {bootstrap}
    scan_interval: 0.5s
    request_timeout: 1s
    scan_timeout: 2s
    down_after_failures: 1
    security:
      protocol: SSL
      ssl_cafile: {tls["ca"]}
      ssl_certfile: {tls["cert"]}
      ssl_keyfile: {tls["key"]}
      ssl_password: ${{KAFKA_SSL_KEY_PASSWORD}}
rules: rules.yaml
data_dir: data
checkpoint_interval: 1s
history: {{enabled: true, roll_interval: 1s}}
api: {{host: 127.0.0.1, port: 0, token: "${{NOTIFIER_API_TOKEN}}"}}
logging: {{level: DEBUG, format: json}}
notify:
  receivers:
    everyone:
      - slack_webhook: {{url: "${{SLACK_WEBHOOK_URL}}"}}
      - slack_bot: {{token: "${{SLACK_BOT_TOKEN}}", channel: "#alerts",
                     api_url: "{http.url_for("/api")}"}}
      - pagerduty: {{routing_key: "${{PAGERDUTY_ROUTING_KEY}}",
                     url: "{http.url_for("/v2/enqueue")}"}}
      - email: {{host: 127.0.0.1, port: {smtp.port}, tls: none, sender: notifier@localhost,
                 recipients: [oncall@localhost], username: notifier,
                 password: "${{SMTP_PASSWORD}}"}}
      - webhook: {{url: "{http.url_for("/hooks/secure")}", bearer_token: "${{WEBHOOK_TOKEN}}",
                   headers: {{X-Api-Key: "${{WEBHOOK_API_KEY}}"}}}}
  route: {{receiver: everyone, threshold: warn, group_by: ["..."], group_wait: 0s,
           group_interval: 1s, repeat_interval: never, send_resolved: true}}
  delivery: {{retry_initial: 0.2s, retry_max: 1s}}
"""


def planted(http: HttpReceiver) -> dict[str, str]:
    return {
        "KAFKA_SASL_PASSWORD": SASL_PASSWORD,
        "KAFKA_OAUTH_CLIENT_SECRET": OAUTH_CLIENT_SECRET,
        "KAFKA_SSL_KEY_PASSWORD": SSL_KEY_PASSWORD,
        "SLACK_WEBHOOK_URL": http.url_for(f"/services/T0SECRET/B0SECRET/{SLACK_HOOK_SECRET}"),
        "SLACK_BOT_TOKEN": SLACK_BOT_TOKEN,
        "PAGERDUTY_ROUTING_KEY": PAGERDUTY_ROUTING_KEY,
        "SMTP_PASSWORD": SMTP_PASSWORD,
        "WEBHOOK_TOKEN": WEBHOOK_TOKEN,
        "WEBHOOK_API_KEY": WEBHOOK_API_KEY,
        "NOTIFIER_API_TOKEN": API_TOKEN,
    }


def echo_credentials_once(http: HttpReceiver, env: dict[str, str]) -> None:
    """Each HTTP receiver fails its first request (retryably) with an error that repeats the
    credential, as real services and proxies do, so the error path is searched too."""
    webhook_url = env["SLACK_WEBHOOK_URL"]
    http.reply(webhook_url.removeprefix(http.url), 500, text=f"no_service: {webhook_url}",
               times=1)  # fmt: skip
    http.reply("/api/chat.postMessage", 500, text=f"invalid_auth for {SLACK_BOT_TOKEN}", times=1)
    http.reply("/v2/enqueue", 503, json_body={"message": f"unknown key {PAGERDUTY_ROUTING_KEY}"},
               times=1)  # fmt: skip
    http.reply("/hooks/secure", 503, text=f"bad token {WEBHOOK_TOKEN} / {WEBHOOK_API_KEY}",
               times=1)  # fmt: skip


def client_certificate(directory: Path) -> dict[str, Path]:
    """A CA and a client certificate whose key is encrypted with SSL_KEY_PASSWORD."""
    ca = trustme.CA()
    client = ca.issue_cert("lag-notifier@example.com")
    files = {"ca": directory / "ca.pem", "cert": directory / "client.pem",
             "key": directory / "client.key"}  # fmt: skip
    ca.cert_pem.write_to_path(str(files["ca"]))
    client.cert_chain_pems[0].write_to_path(str(files["cert"]))
    key = serialization.load_pem_private_key(client.private_key_pem.bytes(), password=None)
    files["key"].write_bytes(key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
        serialization.BestAvailableEncryption(SSL_KEY_PASSWORD.encode())))  # fmt: skip
    return files


async def lagging_group(bootstrap: str, topic: str, group: str) -> None:
    """A topic with 6 records and a group that committed 1 of them: lag 5."""
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    await admin.start()
    try:
        await admin.create_topics([NewTopic(topic, 1, 1)])
    finally:
        await admin.close()
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap)
    await producer.start()
    try:
        for i in range(6):  # one record per batch: how Tansu counts log-end offsets
            await producer.send_and_wait(topic, b"r%d" % i, partition=0)
    finally:
        await producer.stop()
    await commit(bootstrap, group, topic, 1)


async def commit(bootstrap: str, group: str, topic: str, offset: int) -> None:
    consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, group_id=group)
    await consumer.start()
    try:
        consumer.assign([TopicPartition(topic, 0)])
        await consumer.commit({TopicPartition(topic, 0): offset})
    finally:
        await consumer.stop()


def events_at(http: HttpReceiver, smtp: SmtpReceiver, env: dict[str, str]) -> dict[str, int]:
    """How many notifications each channel has accepted."""
    ok = {
        "slack": env["SLACK_WEBHOOK_URL"].removeprefix(http.url),
        "slack_bot": "/api/chat.postMessage",
        "pagerduty": "/v2/enqueue",
        "webhook": "/hooks/secure",
    }
    counts = {name: len(http.to(path)) - 1 for name, path in ok.items()}  # the failed first
    counts["email"] = len(smtp.messages)
    return counts


def webhook_events(http: HttpReceiver, group: str) -> list[str]:
    """The events the webhook accepted for ``group``'s incident."""
    return [
        alert["event"]
        for request in http.to("/hooks/secure")[1:]
        for alert in request.json.get("alerts", [])
        if alert.get("incident", {}).get("group") == group
    ]


class Answers:
    """Every answer the API gave, kept whole (status line, headers, body) to be searched."""

    def __init__(self, http: httpx.AsyncClient) -> None:
        self.http = http
        self.texts: list[str] = []
        self.statuses: set[int] = set()

    async def __call__(self, method: str, path: str, **kwargs: Any) -> httpx.Response:
        response = await self.http.request(method, path, **kwargs)
        self.statuses.add(response.status_code)
        headers = "\n".join(f"{k}: {v}" for k, v in response.headers.items())
        self.texts.append(f"{method} {path} {response.status_code}\n{headers}\n{response.text}")
        return response


async def call_every_route(ask: Answers, names: dict[str, list[str]]) -> None:
    """Every route of /openapi.json with real and unknown path values, writes with and
    without the token and with bad bodies, the status page and its files, /metrics."""
    doc = (await ask("GET", "/openapi.json")).json()
    authorized = {"Authorization": f"Bearer {API_TOKEN}"}
    ends_at = round(time.time() * 1000) + 86_400_000  # within the silence limits
    silence = {"matchers": {"cluster": "local"}, "ends_at": ends_at,
               "author": "ops", "comment": "checking secrets"}  # fmt: skip
    for headers in ({}, {"Authorization": "Bearer guess"}, authorized):
        await ask("POST", "/api/silences", json=silence, headers=headers)
    await ask("POST", "/api/silences", json={"matchers": []}, headers=authorized)
    undecodable = {"Content-Type": "application/json", **authorized}
    await ask("POST", "/api/silences", content=b'{"author": "\x80"}', headers=undecodable)
    created = (await ask("GET", "/api/silences")).json()["silences"]
    names["silence_id"] = [s["id"] for s in created] + ["no-such-silence"]
    for path, methods in doc["paths"].items():
        for method in methods:
            for concrete in fill(path, names):
                await ask(method.upper(), concrete, headers=authorized)
                if method != "get":
                    await ask(method.upper(), concrete)  # without the token
    for path in ("/", "/groups/local/x", "/docs", "/redoc", "/metrics", "/no/such/page",
                 "/static/no-such-file", "/static/..%2f..%2fconfig.yaml"):  # fmt: skip
        await ask("GET", path)
    for asset in STATIC.iterdir():
        await ask("GET", f"/static/{asset.name}")
    await ask("PUT", "/api/silences", json=silence, headers=authorized)  # 405


def fill(template: str, names: dict[str, list[str]]) -> list[str]:
    """``template`` with each ``{parameter}`` replaced by each value known for it (a parameter
    with none, such as one added later, by its own name)."""
    paths = [template]
    for parameter in re.findall(r"\{(\w+)\}", template):
        values = names.get(parameter, [parameter])
        paths = [p.replace("{" + parameter + "}", v) for p in paths for v in values]
    return paths


def data_files_text(data_dir: Path) -> dict[str, bytes]:
    """Every file of the data directory as its raw bytes, plus what the databases and the
    Parquet files hold once decoded (a compressed page hides nothing this way)."""
    found: dict[str, bytes] = {}
    for path in sorted(p for p in data_dir.rglob("*") if p.is_file()):
        name = str(path.relative_to(data_dir))
        found[name] = path.read_bytes()
        if path.suffix == ".sqlite":
            with sqlite3.connect(path) as db:
                found[f"{name} (rows)"] = "\n".join(db.iterdump()).encode()
        if path.suffix == ".parquet":
            table = pq.read_table(path)
            found[f"{name} (rows)"] = json.dumps(table.to_pylist(), default=str).encode()
    return found


def scan_failed(cluster: str) -> Any:
    return lambda line: line.get("event") == "scan_failed" and line["cluster"] == cluster


async def test_no_secret_appears_in_logs_answers_metrics_or_files(
    kafka_broker: EmbeddedBroker, broker_factory: Any, tmp_path: Path
):
    prefix = f"secrets-{uuid.uuid4().hex[:6]}"
    topic, group = f"{prefix}-topic", f"{prefix}-group"
    bootstrap = kafka_broker.bootstrap_servers
    (tmp_path / "rules.yaml").write_text(RULES)
    log_path = tmp_path / "service.log"
    tls = client_certificate(tmp_path)
    async with (
        HttpReceiver() as http,
        SmtpReceiver(login=("notifier", SMTP_PASSWORD)) as smtp,
        TokenEndpoint("lag-notifier", OAUTH_CLIENT_SECRET, lifetime=2) as idp,
        KafkaGate(mechanism="OAUTHBEARER", verify=JwtVerifier(idp.key)) as gate,
    ):
        gated = await asyncio.to_thread(broker_factory, advertised_port=gate.port)
        gate.relay_to(gated.host, gated.port)
        env = planted(http)
        echo_credentials_once(http, env)
        # The token endpoint's first answer repeats the secret it was sent, as some do.
        echo = {"error": "invalid_client", "error_description": f"bad {OAUTH_CLIENT_SECRET}"}
        idp.refuse_next = [(401, echo)]
        config = tmp_path / "service.yaml"
        config.write_text(service_config(bootstrap, prefix, http, smtp, (gate, idp, tls)))
        await lagging_group(bootstrap, topic, group)
        async with ServiceProcess(config, log_path, env) as service:
            # Open: every channel gets it once its first, failing, attempt is retried.
            await until_true(lambda: "open" in webhook_events(http, group), 90, "the alert")
            await commit(bootstrap, group, topic, 6)  # caught up: the alert resolves
            await until_true(lambda: "resolve" in webhook_events(http, group), 90, "its resolve")
            await until_true(
                lambda: min(events_at(http, smtp, env).values()) >= 2, 90, "every channel"
            )
            for failing in ("guarded", "mutual"):
                await service.wait_for_log(scan_failed(failing))
            # Tokens live 2 s: several are issued and used while the alert goes round.
            await until_true(lambda: len({login.expires_at for login in gate.accepted}) >= 3,
                             90, "three tokens accepted by the broker")  # fmt: skip
            async with httpx.AsyncClient(base_url=service.url, timeout=30) as client:
                ask = Answers(client)
                names = {"cluster": ["local", "guarded", "nope"], "group": [group, "nope"],
                         "topic": [topic, "nope"]}  # fmt: skip
                # Burrow's /v3/config modules: each cluster's and each channel's, shown whole.
                channels = (await ask("GET", "/v3/config/notifier")).json()["modules"]
                assert len(channels) == 5
                names["name"] = ["default", "local", "guarded", *channels, "nope"]
                await call_every_route(ask, names)
            assert await service.stop() == 0
    assert {200, 201, 400, 401, 404, 405, 422} <= ask.statuses
    shown = [t for t in ask.texts if t.startswith("GET /v3/config/") and " 200\n" in t]
    assert len(shown) >= 5 + 2 + 2 + 2  # every channel, cluster and consumer, storage, evaluator

    searched = {"log": log_path.read_bytes()}
    searched |= {f"answer {i}": text.encode() for i, text in enumerate(ask.texts)}
    searched |= data_files_text(tmp_path / "data")
    assert any(name.startswith("notify.sqlite") for name in searched)
    assert any(name.startswith("state/") for name in searched)
    assert any(name.endswith(".parquet") for name in searched)

    assert gate.expired_requests == 0 and len(idp.issued) >= 3
    secrets = [*env.values(), *idp.issued]
    needles = {fragment for value in secrets for fragment in secret_fragments(value)}
    assert SLACK_HOOK_SECRET in needles or any(SLACK_HOOK_SECRET in n for n in needles)
    leaks = sorted(
        f"{needle!r} in {where}"
        for where, content in searched.items()
        for needle in needles
        if needle.encode() in content
    )
    assert leaks == []
