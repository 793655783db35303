"""Logging in to Kafka where a stock Apache Kafka broker cannot check the login: OAUTHBEARER
with an OIDC token endpoint (the endpoint's answers and failures, token renewal, the SASL
extensions the broker receives) and with Amazon MSK IAM, and GSSAPI; each from a service config
through the collector the service builds. Also ``notifier check`` loading a client key.

PLAIN, SCRAM-SHA-256/512, OAUTHBEARER checked by Kafka's own validator and mutual TLS are
tested against Apache Kafka itself, in tests/test_kafka_logins.py.

Tansu 0.6 offers OAUTHBEARER but cannot check a token, so the brokers here sit behind
:class:`tests.kafka_gate.KafkaGate`, which logs clients in as a broker does (SaslHandshake,
SaslAuthenticate with the token checked) and relays everything else to the embedded broker: the
scans read real groups through aiokafka's own login code.
"""

from __future__ import annotations

import asyncio
import importlib.util
import os
import ssl
import subprocess
import sys
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import trustme
import yaml
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient, NewTopic
from cryptography.hazmat.primitives import serialization

from notifier.collect import (
    ClusterCollector,
    CredentialsError,
    OidcTokenProvider,
    ScanError,
)
from notifier.config import Secret, parse_service_config
from notifier.demo import HttpReceiver
from notifier.embedded import EmbeddedBroker
from notifier.service import make_collector
from notifier.types import table_to_samples

from .kafka_gate import JwtVerifier, KafkaGate, MskIamVerifier, TokenEndpoint
from .kerberos import BROKER_HOST, CLIENT_PRINCIPAL, GssapiVerifier, Kdc, kdc_missing

pytestmark = pytest.mark.broker

CLIENT_ID, CLIENT_SECRET = "lag-notifier", "oidc-Secret-7f3a91"


def _name(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def cluster_from_yaml(text: str, env: dict[str, str] | None = None) -> Any:
    """The first cluster of a service config written as YAML, as ``notifier run`` reads it."""
    return parse_service_config(yaml.safe_load(text), "service.yaml", env or {}).clusters[0]


@pytest.fixture
async def gated(broker_factory: Callable[..., EmbeddedBroker]):
    """Start a broker behind a gate: every address it advertises is the gate's."""

    async def start(gate: KafkaGate) -> EmbeddedBroker:
        broker = await asyncio.to_thread(broker_factory, advertised_port=gate.port)
        gate.relay_to(broker.host, broker.port)
        return broker

    return start


async def lagging_group(bootstrap: str, group: str, **login: Any) -> str:
    """A topic with 5 records and ``group`` committed at 2 (lag 3), written by clients that
    log in with ``login`` (aiokafka's keyword arguments)."""
    topic = _name("logins")
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap, **login)
    await admin.start()
    try:
        await admin.create_topics([NewTopic(topic, 1, 1)])
    finally:
        await admin.close()
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, **login)
    await producer.start()
    try:
        for i in range(5):  # one record per batch: how Tansu counts log-end offsets
            await producer.send_and_wait(topic, b"r%d" % i, partition=0)
    finally:
        await producer.stop()
    consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, group_id=group, **login)
    await consumer.start()
    try:
        consumer.assign([TopicPartition(topic, 0)])
        await consumer.commit({TopicPartition(topic, 0): 2})
    finally:
        await consumer.stop()
    return topic


async def lags(collector: ClusterCollector, group: str) -> dict[str, int | None]:
    result = await collector.scan()
    return {s.topic: s.lag for s in table_to_samples(result.samples) if s.group == group}


# ------------------------------------------------------------------------------------------------
# OAUTHBEARER with an OIDC token endpoint


def oidc_config(gate: KafkaGate, idp: TokenEndpoint, **oauth: Any) -> str:
    settings = {"token_url": idp.url, "client_id": CLIENT_ID, "scope": "kafka",
                "client_secret": "${KAFKA_OAUTH_CLIENT_SECRET}", **oauth}  # fmt: skip
    return yaml.safe_dump({"clusters": [{
        "name": "managed", "bootstrap_servers": f"127.0.0.1:{gate.port}",
        "request_timeout": "3s", "scan_timeout": "6s",
        "security": {"protocol": "SASL_PLAINTEXT", "sasl_mechanism": "OAUTHBEARER",
                     "oauth": settings}}]})  # fmt: skip


@pytest.fixture
async def idp() -> AsyncIterator[TokenEndpoint]:
    async with TokenEndpoint(CLIENT_ID, CLIENT_SECRET) as endpoint:
        yield endpoint


def oidc_login(idp: TokenEndpoint) -> dict[str, Any]:
    """aiokafka settings for the test's own producer and consumer behind the gate."""
    provider = OidcTokenProvider(idp.url, CLIENT_ID, Secret(CLIENT_SECRET), scope="kafka")
    return {"security_protocol": "SASL_PLAINTEXT", "sasl_mechanism": "OAUTHBEARER",
            "sasl_oauth_token_provider": provider}  # fmt: skip


async def test_oidc_client_credentials_log_in_to_a_broker_that_checks_the_token(
    gated: Callable[[KafkaGate], Awaitable[EmbeddedBroker]], idp: TokenEndpoint
):
    checker = JwtVerifier(idp.key, required_scope="kafka")
    async with KafkaGate(mechanism="OAUTHBEARER", verify=checker) as gate:
        await gated(gate)
        group = _name("oidc-group")
        topic = await lagging_group(f"127.0.0.1:{gate.port}", group, **oidc_login(idp))
        config = oidc_config(gate, idp, extensions={"logicalCluster": "lkc-x1"})
        cluster = cluster_from_yaml(config, {"KAFKA_OAUTH_CLIENT_SECRET": CLIENT_SECRET})
        requests_before = len(idp.requests)
        async with make_collector(cluster) as collector:
            assert await lags(collector, group) == {topic: 3}

    # The token endpoint saw the client credentials grant, the client authenticated by HTTP
    # Basic, the scope asked for; the broker accepted the token it issued and got the extensions.
    ours = idp.requests[requests_before:]
    assert len(ours) == 1
    assert ours[0]["form"] == {"grant_type": "client_credentials", "scope": "kafka"}
    assert ours[0]["headers"]["authorization"].startswith("Basic ")
    assert [login.principal for login in gate.accepted][-1] == CLIENT_ID
    assert checker.extensions_seen[-1] == {"logicalCluster": "lkc-x1"}


async def test_client_secret_post_sends_the_credentials_in_the_form(
    gated: Callable[[KafkaGate], Awaitable[EmbeddedBroker]], idp: TokenEndpoint
):
    async with KafkaGate(mechanism="OAUTHBEARER", verify=JwtVerifier(idp.key)) as gate:
        await gated(gate)
        cluster = cluster_from_yaml(oidc_config(gate, idp, client_auth="post"),
                                    {"KAFKA_OAUTH_CLIENT_SECRET": CLIENT_SECRET})  # fmt: skip
        async with make_collector(cluster) as collector:
            await collector.scan()
    form = idp.requests[-1]["form"]
    assert form["client_id"] == CLIENT_ID and form["client_secret"] == CLIENT_SECRET
    assert "authorization" not in idp.requests[-1]["headers"]


async def test_a_token_endpoint_with_a_private_ca_is_verified_with_oauth_ca_file(
    gated: Callable[[KafkaGate], Awaitable[EmbeddedBroker]], tmp_path: Path
):
    ca = trustme.CA()
    server_context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ca.issue_cert("localhost").configure_cert(server_context)
    ca_file = tmp_path / "idp-ca.pem"
    ca.cert_pem.write_to_path(str(ca_file))
    env = {"KAFKA_OAUTH_CLIENT_SECRET": CLIENT_SECRET}
    async with (
        TokenEndpoint(CLIENT_ID, CLIENT_SECRET, tls=server_context) as https_idp,
        KafkaGate(mechanism="OAUTHBEARER", verify=JwtVerifier(https_idp.key)) as gate,
    ):
        await gated(gate)
        trusted = cluster_from_yaml(oidc_config(gate, https_idp, ca_file=str(ca_file)), env)
        async with make_collector(trusted) as collector:
            await collector.scan()
        assert len(https_idp.issued) == 1
        # Without the CA the endpoint's certificate is not trusted: no token, no login.
        untrusted = cluster_from_yaml(oidc_config(gate, https_idp), env)
        async with make_collector(untrusted) as collector:
            with pytest.raises(ScanError, match="CERTIFICATE_VERIFY_FAILED"):
                await collector.scan()
    assert len(https_idp.issued) == 1


async def test_a_refused_client_fails_the_scan_with_the_endpoints_reason_and_no_secret(
    gated: Callable[[KafkaGate], Awaitable[EmbeddedBroker]], idp: TokenEndpoint
):
    async with KafkaGate(mechanism="OAUTHBEARER", verify=JwtVerifier(idp.key)) as gate:
        await gated(gate)
        wrong = "not-the-Secret-0042"
        cluster = cluster_from_yaml(oidc_config(gate, idp), {"KAFKA_OAUTH_CLIENT_SECRET": wrong})
        async with make_collector(cluster) as collector:
            with pytest.raises(ScanError) as failure:
                await collector.scan()
    message = str(failure.value)
    assert f"token endpoint {idp.url} refused client '{CLIENT_ID}'" in message
    assert "HTTP 401 invalid_client: unknown client" in message
    assert wrong not in message and CLIENT_SECRET not in message
    assert gate.logins == []  # no token, so no login was even tried


async def test_a_token_the_broker_does_not_accept_fails_the_scan(
    gated: Callable[[KafkaGate], Awaitable[EmbeddedBroker]], idp: TokenEndpoint
):
    # The listener wants a scope the client was not given.
    checker = JwtVerifier(idp.key, required_scope="kafka-admin")
    async with KafkaGate(mechanism="OAUTHBEARER", verify=checker) as gate:
        await gated(gate)
        cluster = cluster_from_yaml(oidc_config(gate, idp),
                                    {"KAFKA_OAUTH_CLIENT_SECRET": CLIENT_SECRET})  # fmt: skip
        async with make_collector(cluster) as collector:
            with pytest.raises(ScanError, match="insufficient_scope: needs kafka-admin"):
                await collector.scan()


async def test_tokens_are_renewed_before_they_expire_and_no_request_meets_an_expired_session(
    gated: Callable[[KafkaGate], Awaitable[EmbeddedBroker]],
):
    # Tokens live 2 s; the broker closes a connection whose token expired on its next request.
    async with (
        TokenEndpoint(CLIENT_ID, CLIENT_SECRET, lifetime=2.0) as short_lived,
        KafkaGate(mechanism="OAUTHBEARER", verify=JwtVerifier(short_lived.key)) as gate,
    ):
        await gated(gate)
        group = _name("refresh-group")
        topic = await lagging_group(f"127.0.0.1:{gate.port}", group, **oidc_login(short_lived))
        cluster = cluster_from_yaml(oidc_config(gate, short_lived),
                                    {"KAFKA_OAUTH_CLIENT_SECRET": CLIENT_SECRET})  # fmt: skip
        issued_before = len(short_lived.issued)
        results = []
        async with make_collector(cluster) as collector:
            deadline = time.monotonic() + 5.5
            while time.monotonic() < deadline:
                results.append(await lags(collector, group))
                await asyncio.sleep(0.3)
    assert results and all(r == {topic: 3} for r in results)
    ours = short_lived.issued[issued_before:]
    assert len(ours) >= 3  # 5.5 s of 2 s tokens renewed at 1.6 s
    assert gate.expired_requests == 0
    assert all(login.error is None for login in gate.logins)


async def test_a_renewal_that_fails_keeps_the_valid_token_and_says_so_once(
    idp: TokenEndpoint, caplog: pytest.LogCaptureFixture
):
    now = [1_000.0]
    provider = OidcTokenProvider(idp.url, CLIENT_ID, Secret(CLIENT_SECRET), clock=lambda: now[0])
    idp.lifetime = 100
    first = await provider.token()
    assert await provider.token() == first and not provider.renewal_due()

    now[0] += 81  # past 80% of the lifetime: due for renewal, still valid
    assert provider.renewal_due()
    idp.refuse_next = [(503, {"error": "temporarily_unavailable"})] * 2
    assert await provider.token() == first
    assert await provider.token() == first
    warnings = [r for r in caplog.records if r.levelname == "WARNING"]
    assert len(warnings) == 1
    said = warnings[0].getMessage()
    assert "the current one is used until it expires in 19s" in said
    assert "HTTP 503 temporarily_unavailable" in said

    second = await provider.token()  # the endpoint is back
    assert second != first and not provider.renewal_due()

    now[0] += 101  # expired, and the endpoint is down: no stale token is handed out
    idp.refuse_next = [(503, {"error": "temporarily_unavailable"})]
    with pytest.raises(CredentialsError, match="HTTP 503"):
        await provider.token()
    assert all(CLIENT_SECRET not in r.getMessage() for r in caplog.records)
    assert all(token not in r.getMessage() for r in caplog.records for token in idp.issued)


async def test_a_token_endpoint_that_cannot_be_reached_is_named():
    provider = OidcTokenProvider("http://127.0.0.1:9/token", CLIENT_ID, Secret(CLIENT_SECRET))
    with pytest.raises(CredentialsError, match=r"token endpoint http://127.0.0.1:9/token: cannot"):
        await provider.token()


# ------------------------------------------------------------------------------------------------
# OAUTHBEARER with Amazon MSK IAM


ACCESS_KEY, SECRET_KEY = "AKIANOTIFIERTEST0001", "msk/Test+SecretKey0123456789abcdef"
REGION = "eu-west-1"


@pytest.fixture
def aws_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """Credentials in the environment, nothing else of the machine's AWS setup."""
    for name in list(os.environ):
        if name.startswith("AWS_"):
            monkeypatch.delenv(name)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", ACCESS_KEY)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", SECRET_KEY)
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "no-aws-config"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "no-aws-credentials"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")


def msk_config(gate: KafkaGate, **msk_iam: Any) -> str:
    return yaml.safe_dump({"clusters": [{
        "name": "msk", "bootstrap_servers": f"127.0.0.1:{gate.port}",
        "request_timeout": "5s", "scan_timeout": "10s",
        "security": {"protocol": "SASL_PLAINTEXT", "sasl_mechanism": "OAUTHBEARER",
                     "msk_iam": {"region": REGION, **msk_iam}}}]})  # fmt: skip


async def test_msk_iam_signs_a_token_the_broker_verifies(
    gated: Callable[[KafkaGate], Awaitable[EmbeddedBroker]], aws_env: None
):
    checker = MskIamVerifier(REGION, {ACCESS_KEY: SECRET_KEY})
    async with KafkaGate(mechanism="OAUTHBEARER", verify=checker) as gate:
        await gated(gate)
        async with make_collector(cluster_from_yaml(msk_config(gate))) as collector:
            await collector.scan()
    login = gate.accepted[-1]
    assert login.principal == ACCESS_KEY
    assert login.expires_at is not None and 850 < login.expires_at - time.time() <= 900


async def test_msk_iam_signed_with_another_key_is_refused(
    gated: Callable[[KafkaGate], Awaitable[EmbeddedBroker]], aws_env: None
):
    checker = MskIamVerifier(REGION, {ACCESS_KEY: "some-other-secret-key"})
    async with KafkaGate(mechanism="OAUTHBEARER", verify=checker) as gate:
        await gated(gate)
        async with make_collector(cluster_from_yaml(msk_config(gate))) as collector:
            with pytest.raises(ScanError, match="signature does not match"):
                await collector.scan()


ASSUMED_KEY, ASSUMED_SECRET = "ASIANOTIFIERROLE0001", "assumed/Role+Secret0123456789"
SESSION_TOKEN = "FwoGZXIvYXdzEXAMPLESESSIONTOKEN"
ROLE_ARN = "arn:aws:iam::123456789012:role/lag-reader"

ASSUME_ROLE_ANSWER = f"""<AssumeRoleResponse xmlns="https://sts.amazonaws.com/doc/2011-06-15/">
  <AssumeRoleResult>
    <Credentials>
      <AccessKeyId>{ASSUMED_KEY}</AccessKeyId>
      <SecretAccessKey>{ASSUMED_SECRET}</SecretAccessKey>
      <SessionToken>{SESSION_TOKEN}</SessionToken>
      <Expiration>2099-01-01T00:00:00Z</Expiration>
    </Credentials>
    <AssumedRoleUser>
      <AssumedRoleId>AROANOTIFIER:lag-notifier</AssumedRoleId>
      <Arn>arn:aws:sts::123456789012:assumed-role/lag-reader/lag-notifier</Arn>
    </AssumedRoleUser>
  </AssumeRoleResult>
  <ResponseMetadata><RequestId>7a62c49f-347e-4fc4-9331-6e8eEXAMPLE</RequestId></ResponseMetadata>
</AssumeRoleResponse>"""


async def test_msk_iam_assumes_the_configured_role_first(
    gated: Callable[[KafkaGate], Awaitable[EmbeddedBroker]],
    aws_env: None,
    monkeypatch: pytest.MonkeyPatch,
    http: HttpReceiver,
):
    # STS on loopback (botocore's AWS_ENDPOINT_URL_STS): it hands out the role's credentials.
    monkeypatch.setenv("AWS_ENDPOINT_URL_STS", http.url)
    http.reply("/", text=ASSUME_ROLE_ANSWER, headers={"Content-Type": "text/xml"})
    checker = MskIamVerifier(REGION, {ASSUMED_KEY: ASSUMED_SECRET})
    async with KafkaGate(mechanism="OAUTHBEARER", verify=checker) as gate:
        await gated(gate)
        config = msk_config(gate, role_arn=ROLE_ARN, session_name="lag-notifier")
        async with make_collector(cluster_from_yaml(config)) as collector:
            await collector.scan()
    assert gate.accepted[-1].principal == ASSUMED_KEY
    assert checker.session_tokens[-1] == SESSION_TOKEN
    assume = http.requests[-1].body.decode()
    assert "Action=AssumeRole" in assume and "RoleSessionName=lag-notifier" in assume
    assert "RoleArn=arn%3Aaws%3Aiam%3A%3A123456789012%3Arole%2Flag-reader" in assume


async def test_msk_iam_without_credentials_says_so(
    gated: Callable[[KafkaGate], Awaitable[EmbeddedBroker]],
    aws_env: None,
    monkeypatch: pytest.MonkeyPatch,
):
    monkeypatch.delenv("AWS_ACCESS_KEY_ID")
    monkeypatch.delenv("AWS_SECRET_ACCESS_KEY")
    async with KafkaGate(mechanism="OAUTHBEARER", verify=MskIamVerifier(REGION, {})) as gate:
        await gated(gate)
        async with make_collector(cluster_from_yaml(msk_config(gate))) as collector:
            with pytest.raises(ScanError, match="Amazon MSK IAM in eu-west-1: cannot sign a token"):
                await collector.scan()


# ------------------------------------------------------------------------------------------------
# Mutual TLS: the client key as ``notifier check`` loads it (logins: tests/test_kafka_logins.py)


KEY_PASSWORD = "client-Key-Pass-5150"


@pytest.fixture
def pki(tmp_path: Path) -> dict[str, Path]:
    """A CA and a client certificate whose private key is encrypted with KEY_PASSWORD; plus a
    client certificate from another CA."""
    ca, stranger = trustme.CA(), trustme.CA()
    client = ca.issue_cert("lag-notifier@example.com")
    files = {"ca": tmp_path / "ca.pem",
             "client_cert": tmp_path / "client.pem", "client_key": tmp_path / "client.key",
             "stranger_cert": tmp_path / "stranger.pem",
             "stranger_key": tmp_path / "stranger.key"}  # fmt: skip
    ca.cert_pem.write_to_path(str(files["ca"]))
    client.cert_chain_pems[0].write_to_path(str(files["client_cert"]))
    key = serialization.load_pem_private_key(client.private_key_pem.bytes(), password=None)
    files["client_key"].write_bytes(key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
        serialization.BestAvailableEncryption(KEY_PASSWORD.encode())))  # fmt: skip
    other = stranger.issue_cert("intruder@example.com")
    other.cert_chain_pems[0].write_to_path(str(files["stranger_cert"]))
    other.private_key_pem.write_to_path(str(files["stranger_key"]))
    return files


def mtls_config(gate: KafkaGate, pki: dict[str, Path], **overrides: Any) -> str:
    security = {"protocol": "SSL", "ssl_cafile": str(pki["ca"]),
                "ssl_certfile": str(pki["client_cert"]), "ssl_keyfile": str(pki["client_key"]),
                "ssl_password": "${KAFKA_SSL_KEY_PASSWORD}", **overrides}  # fmt: skip
    return yaml.safe_dump({"clusters": [{"name": "tls", "request_timeout": "3s",
                                         "bootstrap_servers": f"127.0.0.1:{gate.port}",
                                         "security": security}]})  # fmt: skip


def check(config: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """``notifier check --config FILE`` as a user runs it."""
    return subprocess.run(
        [sys.executable, "-m", "notifier.cli", "check", "--config", str(config)],
        capture_output=True, text=True, timeout=60, env={**os.environ, **(env or {})},
    )  # fmt: skip


def test_check_loads_the_client_key_with_its_password(pki: dict[str, Path], tmp_path: Path):
    config = tmp_path / "service.yaml"
    gate = KafkaGate()
    gate.port = 9093
    config.write_text(mtls_config(gate, pki))

    ok = check(config, {"KAFKA_SSL_KEY_PASSWORD": KEY_PASSWORD})
    assert ok.returncode == 0, ok.stdout + ok.stderr
    assert f"{config}: OK (1 cluster(s))" in ok.stdout

    wrong = check(config, {"KAFKA_SSL_KEY_PASSWORD": "guess-123456"})
    assert wrong.returncode == 1
    assert (f"clusters.tls.security.ssl_password: does not decrypt {pki['client_key']} "
            "(the password is wrong)") in wrong.stdout + wrong.stderr  # fmt: skip
    assert "guess-123456" not in wrong.stdout + wrong.stderr

    config.write_text(mtls_config(gate, pki, ssl_password=None))
    missing = check(config)
    assert (f"clusters.tls.security.ssl_password: required: {pki['client_key']} is an "
            "encrypted private key") in missing.stdout + missing.stderr  # fmt: skip

    config.write_text(mtls_config(gate, pki, ssl_keyfile=str(pki["stranger_key"]),
                                  ssl_password=None))  # fmt: skip
    mismatch = check(config)
    assert (f"clusters.tls.security.ssl_keyfile: {pki['stranger_key']}: is not the private key "
            "of ssl_certfile") in mismatch.stdout + mismatch.stderr  # fmt: skip


# ------------------------------------------------------------------------------------------------
# GSSAPI (Kerberos)


@pytest.fixture
def kdc(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Kdc]:
    """A realm with the broker's and notifier's principals; the environment a deployed notifier
    would have (the realm's krb5.conf, a client keytab)."""
    if importlib.util.find_spec("gssapi") is None:
        pytest.skip("the gssapi package is not installed (the kerberos extra)")
    if (why := kdc_missing()) is not None:
        pytest.skip(why)
    with Kdc(tmp_path / "realm") as realm:
        for name, value in realm.environ.items():
            monkeypatch.setenv(name, value)
        yield realm


def gssapi_config(gate: KafkaGate, **kerberos: Any) -> str:
    return yaml.safe_dump({"clusters": [{
        "name": "corp", "bootstrap_servers": f"127.0.0.1:{gate.port}", "request_timeout": "5s",
        "security": {"protocol": "SASL_PLAINTEXT", "sasl_mechanism": "GSSAPI",
                     "kerberos": {"domain_name": BROKER_HOST, **kerberos}}}]})  # fmt: skip


async def test_gssapi_logs_in_with_a_ticket_from_the_client_keytab(
    gated: Callable[[KafkaGate], Awaitable[EmbeddedBroker]], kdc: Kdc
):
    async with KafkaGate(mechanism="GSSAPI", verifier_per_connection=GssapiVerifier) as gate:
        await gated(gate)
        async with make_collector(cluster_from_yaml(gssapi_config(gate))) as collector:
            result = await collector.scan()
    assert result.requests["Metadata"] == 1
    assert {login.principal for login in gate.accepted} == {CLIENT_PRINCIPAL}
    assert all(login.error is None for login in gate.logins)


async def test_gssapi_for_a_service_the_realm_does_not_know_fails_the_scan(
    gated: Callable[[KafkaGate], Awaitable[EmbeddedBroker]], kdc: Kdc
):
    async with KafkaGate(mechanism="GSSAPI", verifier_per_connection=GssapiVerifier) as gate:
        await gated(gate)
        config = gssapi_config(gate, service_name="kafka-unknown")
        async with make_collector(cluster_from_yaml(config)) as collector:
            with pytest.raises(ScanError, match="not found in Kerberos database"):
                await collector.scan()
