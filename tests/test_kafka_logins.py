"""Logging in to Apache Kafka itself: every login notifier offers that a stock broker can check,
from a service config as a user writes it, through the collector the service builds.

One extra Kafka 4 broker for the module (started once per session), with a listener per way in:

* ``SASL`` (SASL_PLAINTEXT) and ``SASLTLS`` (SASL_SSL): PLAIN (users in the listener's JAAS
  config), SCRAM-SHA-256 and SCRAM-SHA-512 (users created by ``kafka-storage format
  --add-scram``), and OAUTHBEARER checked by Kafka's own validator
  (``OAuthBearerValidatorCallbackHandler``: the RS256 signature against a JSON Web Key Set, the
  expiry, the audience) for tokens from a local OAuth token endpoint;
* ``MTLS`` (SSL with ``ssl.client.auth=required``): client certificates from the test's CA.

Each login scans the broker and reads a group's lag; each wrong password, unknown user, token
the broker does not accept and untrusted certificate fails the scan within the request timeout,
with a message that names the cluster and the mechanism and shows no secret. The OAuth token
endpoint's own failures, Amazon MSK IAM and GSSAPI stay in tests/test_logins.py, behind the
Kafka-protocol gate (a stock broker has no MSK IAM or Kerberos of its own).
"""

from __future__ import annotations

import asyncio
import json
import os
import time
import uuid
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import trustme
import yaml
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient, NewTopic
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa

from notifier.collect import ScanError
from notifier.config import load_service_config
from notifier.embedded.apache_kafka import KAFKA_VERSION, ApacheKafkaBroker, KafkaUnavailable
from notifier.embedded.apache_kafka import kafka_jars as resolve_kafka_jars
from notifier.service import make_collector
from notifier.types import table_to_samples

from .kafka_gate import TokenEndpoint, jwks

pytestmark = pytest.mark.kafka

USER = "notifier"
PASSWORD = "Kafka-Login-5150-pw"
"""The password of USER for PLAIN and both SCRAM mechanisms."""
WRONG_PASSWORD = "Not-The-Password-0042"
KEY_PASSWORD = "client-Key-Pass-5150"
"""The client certificate's private key is encrypted with this."""
CLIENT_ID, CLIENT_SECRET = "lag-notifier", "oidc-Secret-7f3a91"
AUDIENCE = "kafka-broker"
ISSUER = "https://idp.notifier.test/realms/kafka"
KID = "kafka-logins-1"
REQUEST_TIMEOUT_S = 5.0
PASSWORD_MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")
SASL_LISTENERS = {"SASL": "SASL_PLAINTEXT", "SASLTLS": "SASL_SSL"}


def _name(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


# ------------------------------------------------------------------------------------------------
# The broker and what it trusts


@dataclass(frozen=True)
class SecuredKafka:
    """The session's secured broker, the files its clients need, and the key its token
    endpoint signs with."""

    broker: ApacheKafkaBroker
    files: dict[str, Path]
    rsa_key: rsa.RSAPrivateKey
    group: str
    topic: str
    """A group committed at 2 on a topic of 5 records (lag 3), made over PLAINTEXT."""


def _pkcs8(key_pem: bytes, password: str | None = None) -> bytes:
    """A PEM private key as PKCS#8 (what Kafka's PEM keystore reads), encrypted with
    ``password`` when given."""
    key = serialization.load_pem_private_key(key_pem, password=None)
    encryption: serialization.KeySerializationEncryption = (
        serialization.BestAvailableEncryption(password.encode())
        if password
        else serialization.NoEncryption()
    )
    return key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, encryption
    )


def _pki(folder: Path) -> dict[str, Path]:
    """The broker's CA and certificate (for 127.0.0.1), a client certificate from that CA with
    an encrypted key, and one from a CA the broker does not trust."""
    ca, stranger = trustme.CA(), trustme.CA()
    server = ca.issue_cert("127.0.0.1", "localhost")
    client = ca.issue_cert("lag-notifier@example.com")
    intruder = stranger.issue_cert("intruder@example.com")
    names = ("ca", "broker_keystore", "client_cert", "client_key", "stranger_cert", "stranger_key")
    files = {name: folder / f"{name}.pem" for name in names}
    ca.cert_pem.write_to_path(str(files["ca"]))
    files["broker_keystore"].write_bytes(
        _pkcs8(server.private_key_pem.bytes())
        + b"".join(blob.bytes() for blob in server.cert_chain_pems)
    )
    client.cert_chain_pems[0].write_to_path(str(files["client_cert"]))
    files["client_key"].write_bytes(_pkcs8(client.private_key_pem.bytes(), KEY_PASSWORD))
    intruder.cert_chain_pems[0].write_to_path(str(files["stranger_cert"]))
    intruder.private_key_pem.write_to_path(str(files["stranger_key"]))
    return files


def secured_broker_settings(
    files: dict[str, Path], jwks_file: Path
) -> tuple[dict[str, str], dict[str, str], list[str], list[str]]:
    """Listeners, properties, ``kafka-storage format`` options and JVM options of a broker
    that checks each login notifier offers."""
    plain_users = f'user_{USER}="{PASSWORD}"'
    properties: dict[str, str] = {
        # Kafka's own validator: an RS256 JWT whose key is in the key set, from our issuer,
        # for our audience.
        "sasl.oauthbearer.jwks.endpoint.url": jwks_file.as_uri(),
        "sasl.oauthbearer.expected.audience": AUDIENCE,
        "sasl.oauthbearer.expected.issuer": ISSUER,
    }
    for name in SASL_LISTENERS:
        prefix = f"listener.name.{name.lower()}"
        properties |= {
            f"{prefix}.sasl.enabled.mechanisms": ",".join([*PASSWORD_MECHANISMS, "OAUTHBEARER"]),
            f"{prefix}.plain.sasl.jaas.config": (
                f"org.apache.kafka.common.security.plain.PlainLoginModule required {plain_users};"
            ),
            f"{prefix}.scram-sha-256.sasl.jaas.config": (
                "org.apache.kafka.common.security.scram.ScramLoginModule required;"
            ),
            f"{prefix}.scram-sha-512.sasl.jaas.config": (
                "org.apache.kafka.common.security.scram.ScramLoginModule required;"
            ),
            f"{prefix}.oauthbearer.sasl.jaas.config": (
                "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required;"
            ),
            f"{prefix}.oauthbearer.sasl.server.callback.handler.class": (
                "org.apache.kafka.common.security.oauthbearer.OAuthBearerValidatorCallbackHandler"
            ),
        }
    for name in ("SASLTLS", "MTLS"):
        prefix = f"listener.name.{name.lower()}"
        properties |= {
            f"{prefix}.ssl.keystore.type": "PEM",
            f"{prefix}.ssl.keystore.location": str(files["broker_keystore"]),
        }
    properties |= {
        # A listener with PLAIN alone, for a client that asks for a mechanism it lacks.
        "listener.name.plainonly.sasl.enabled.mechanisms": "PLAIN",
        "listener.name.plainonly.plain.sasl.jaas.config": (
            f"org.apache.kafka.common.security.plain.PlainLoginModule required {plain_users};"
        ),
        "listener.name.mtls.ssl.client.auth": "required",
        "listener.name.mtls.ssl.truststore.type": "PEM",
        "listener.name.mtls.ssl.truststore.location": str(files["ca"]),
    }
    listeners = {**SASL_LISTENERS, "PLAINONLY": "SASL_PLAINTEXT", "MTLS": "SSL"}
    format_options = [
        option
        for mechanism in ("SCRAM-SHA-256", "SCRAM-SHA-512")
        for option in ("--add-scram", f"{mechanism}=[name={USER},password={PASSWORD}]")
    ]
    # Kafka 4 fetches OAuth URLs (token endpoints, key sets) only where they are allowed.
    jvm_options = [f"-Dorg.apache.kafka.sasl.oauthbearer.allowed.urls={jwks_file.as_uri()}"]
    return listeners, properties, format_options, jvm_options


async def _lagging_group(bootstrap: str) -> tuple[str, str]:
    """A topic with 5 records and a group committed at 2 (lag 3)."""
    topic, group = _name("logins"), _name("logins-group")
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    await admin.start()
    try:
        await admin.create_topics([NewTopic(topic, 1, 1)])
    finally:
        await admin.close()
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap)
    await producer.start()
    try:
        for i in range(5):
            await producer.send_and_wait(topic, b"r%d" % i, partition=0)
    finally:
        await producer.stop()
    consumer = AIOKafkaConsumer(
        bootstrap_servers=bootstrap, group_id=group, enable_auto_commit=False
    )
    await consumer.start()
    try:
        consumer.assign([TopicPartition(topic, 0)])
        await consumer.commit({TopicPartition(topic, 0): 2})
    finally:
        await consumer.stop()
    return topic, group


@pytest.fixture(scope="session")
def secured_kafka(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SecuredKafka]:
    """One Apache Kafka 4 broker for the session with every login's listener."""
    try:
        jars = resolve_kafka_jars(KAFKA_VERSION)
    except KafkaUnavailable as err:
        # The same rule as tests/conftest.py's brokers: CI must run these tests.
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(f"Apache Kafka {KAFKA_VERSION} is needed in CI: {err}", pytrace=False)
        pytest.skip(f"Apache Kafka {KAFKA_VERSION} unavailable: {err}")
    folder = tmp_path_factory.mktemp("kafka-logins")
    files = _pki(folder)
    rsa_key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    jwks_file = folder / "jwks.json"
    jwks_file.write_text(json.dumps(jwks(rsa_key, KID)))
    listeners, properties, format_options, jvm_options = secured_broker_settings(files, jwks_file)
    broker = ApacheKafkaBroker(
        KAFKA_VERSION,
        jars=jars,
        data_dir=folder / "data",
        listeners=listeners,
        properties=properties,
        format_options=format_options,
        jvm_options=jvm_options,
        heap="384m",
    )
    broker.start()
    try:
        topic, group = asyncio.run(_lagging_group(broker.bootstrap_servers))
        yield SecuredKafka(broker, files, rsa_key, group, topic)
    finally:
        broker.close()


# ------------------------------------------------------------------------------------------------
# The service's config and its scans


def service_yaml(name: str, bootstrap: str, security: dict[str, Any]) -> str:
    return yaml.safe_dump({"clusters": [{
        "name": name, "bootstrap_servers": bootstrap,
        "request_timeout": f"{REQUEST_TIMEOUT_S:g}s", "scan_timeout": "20s",
        "security": security}]})  # fmt: skip


def load_cluster(tmp_path: Path, text: str) -> Any:
    """The first cluster of ``text`` written to a file and loaded as ``notifier run`` does
    (secrets from the environment, TLS files loaded)."""
    config = tmp_path / "service.yaml"
    config.write_text(text)
    return load_service_config(config).clusters[0]


async def lag_of(cluster: Any, secured: SecuredKafka) -> dict[str, int | None]:
    async with make_collector(cluster) as collector:
        result = await collector.scan()
    return {s.topic: s.lag for s in table_to_samples(result.samples) if s.group == secured.group}


async def refused(cluster: Any) -> tuple[str, float]:
    """The message of the scan's failure and how long it took to fail."""
    started = time.monotonic()
    async with make_collector(cluster) as collector:
        with pytest.raises(ScanError) as failure:
            await collector.scan()
    return str(failure.value), time.monotonic() - started


def assert_clear_refusal(message: str, elapsed: float, cluster: str, *named: str) -> None:
    assert elapsed < REQUEST_TIMEOUT_S, f"took {elapsed:.1f}s to fail: {message}"
    assert f"cluster {cluster!r}" in message
    for word in named:
        assert word in message, message
    for secret in (PASSWORD, WRONG_PASSWORD, KEY_PASSWORD, CLIENT_SECRET):
        assert secret not in message


def password_security(listener: str, mechanism: str, files: dict[str, Path]) -> dict[str, Any]:
    security = {"protocol": SASL_LISTENERS[listener], "sasl_mechanism": mechanism,
                "sasl_username": USER, "sasl_password": "${KAFKA_PASSWORD}"}  # fmt: skip
    if listener == "SASLTLS":
        security["ssl_cafile"] = str(files["ca"])
    return security


# ------------------------------------------------------------------------------------------------
# PLAIN and SCRAM


@pytest.mark.parametrize("listener", list(SASL_LISTENERS))
@pytest.mark.parametrize("mechanism", PASSWORD_MECHANISMS)
async def test_a_password_login_scans_the_cluster(
    secured_kafka: SecuredKafka,
    listener: str,
    mechanism: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
):
    monkeypatch.setenv("KAFKA_PASSWORD", PASSWORD)
    security = password_security(listener, mechanism, secured_kafka.files)
    text = service_yaml("prod", secured_kafka.broker.bootstrap(listener), security)
    cluster = load_cluster(tmp_path, text)
    assert await lag_of(cluster, secured_kafka) == {secured_kafka.topic: 3}


@pytest.mark.parametrize("listener", list(SASL_LISTENERS))
@pytest.mark.parametrize("mechanism", PASSWORD_MECHANISMS)
@pytest.mark.parametrize("wrong", ["password", "user"])
async def test_a_wrong_password_or_unknown_user_is_a_clear_error(
    secured_kafka: SecuredKafka,
    listener: str,
    mechanism: str,
    wrong: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
):
    security = password_security(listener, mechanism, secured_kafka.files)
    if wrong == "password":
        monkeypatch.setenv("KAFKA_PASSWORD", WRONG_PASSWORD)
    else:
        monkeypatch.setenv("KAFKA_PASSWORD", PASSWORD)
        security["sasl_username"] = "nobody-here"
    text = service_yaml("prod", secured_kafka.broker.bootstrap(listener), security)
    message, elapsed = await refused(load_cluster(tmp_path, text))
    assert_clear_refusal(
        message, elapsed, "prod", f"the broker refused the login (SASL {mechanism}", "failed"
    )


async def test_a_mechanism_the_listener_does_not_offer_is_a_clear_error(
    secured_kafka: SecuredKafka, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    monkeypatch.setenv("KAFKA_PASSWORD", PASSWORD)
    security = password_security("SASL", "SCRAM-SHA-512", secured_kafka.files)
    text = service_yaml("prod", secured_kafka.broker.bootstrap("PLAINONLY"), security)
    message, elapsed = await refused(load_cluster(tmp_path, text))
    assert_clear_refusal(
        message, elapsed, "prod", "the broker refused the login (SASL SCRAM-SHA-512",
        "the broker does not offer SCRAM-SHA-512 on this listener",
    )  # fmt: skip


async def test_sasl_ssl_with_a_broker_certificate_the_client_does_not_trust(
    secured_kafka: SecuredKafka, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    monkeypatch.setenv("KAFKA_PASSWORD", PASSWORD)
    security = password_security("SASLTLS", "SCRAM-SHA-512", secured_kafka.files)
    del security["ssl_cafile"]  # the system's CAs do not know the test's CA
    text = service_yaml("prod", secured_kafka.broker.bootstrap("SASLTLS"), security)
    message, elapsed = await refused(load_cluster(tmp_path, text))
    assert_clear_refusal(
        message, elapsed, "prod", "the broker's certificate is not trusted", "SCRAM-SHA-512"
    )


# ------------------------------------------------------------------------------------------------
# OAUTHBEARER: tokens from an OIDC token endpoint, checked by Kafka's validator


@pytest.fixture
async def idp(secured_kafka: SecuredKafka) -> AsyncIterator[TokenEndpoint]:
    """A token endpoint signing with the key the broker's key set publishes."""
    async with TokenEndpoint(
        CLIENT_ID,
        CLIENT_SECRET,
        rsa_key=secured_kafka.rsa_key,
        kid=KID,
        audience=AUDIENCE,
        issuer=ISSUER,
    ) as endpoint:
        yield endpoint


def oauth_security(listener: str, idp: TokenEndpoint, files: dict[str, Path]) -> dict[str, Any]:
    security: dict[str, Any] = {
        "protocol": SASL_LISTENERS[listener], "sasl_mechanism": "OAUTHBEARER",
        "oauth": {"token_url": idp.url, "client_id": CLIENT_ID, "scope": "kafka",
                  "client_secret": "${KAFKA_OAUTH_CLIENT_SECRET}"}}  # fmt: skip
    if listener == "SASLTLS":
        security["ssl_cafile"] = str(files["ca"])
    return security


@pytest.mark.parametrize("listener", list(SASL_LISTENERS))
async def test_oauthbearer_with_client_credentials_scans_the_cluster(
    secured_kafka: SecuredKafka,
    idp: TokenEndpoint,
    listener: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
):
    monkeypatch.setenv("KAFKA_OAUTH_CLIENT_SECRET", CLIENT_SECRET)
    security = oauth_security(listener, idp, secured_kafka.files)
    text = service_yaml("managed", secured_kafka.broker.bootstrap(listener), security)
    cluster = load_cluster(tmp_path, text)
    assert await lag_of(cluster, secured_kafka) == {secured_kafka.topic: 3}
    assert len(idp.issued) == 1  # one token, for every connection of the scan
    assert idp.requests[0]["form"] == {"grant_type": "client_credentials", "scope": "kafka"}


@pytest.mark.parametrize("token", ["another-key", "another-audience"])
async def test_a_token_the_broker_does_not_accept_is_a_clear_error(
    secured_kafka: SecuredKafka, token: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    monkeypatch.setenv("KAFKA_OAUTH_CLIENT_SECRET", CLIENT_SECRET)
    other = (
        {"rsa_key": rsa.generate_private_key(public_exponent=65537, key_size=2048), "kid": KID,
         "audience": AUDIENCE, "issuer": ISSUER}
        if token == "another-key"
        else {"rsa_key": secured_kafka.rsa_key, "kid": KID, "audience": "someone-else",
              "issuer": ISSUER}
    )  # fmt: skip
    async with TokenEndpoint(CLIENT_ID, CLIENT_SECRET, **other) as stranger:
        security = oauth_security("SASL", stranger, secured_kafka.files)
        text = service_yaml("managed", secured_kafka.broker.bootstrap("SASL"), security)
        message, elapsed = await refused(load_cluster(tmp_path, text))
        assert len(stranger.issued) == 1
    assert_clear_refusal(
        message,
        elapsed,
        "managed",
        "the broker refused the login (SASL OAUTHBEARER",
        "invalid_token",
    )
    assert stranger.issued[0] not in message


# ------------------------------------------------------------------------------------------------
# Mutual TLS


def mtls_security(files: dict[str, Path], **overrides: Any) -> dict[str, Any]:
    return {"protocol": "SSL", "ssl_cafile": str(files["ca"]),
            "ssl_certfile": str(files["client_cert"]), "ssl_keyfile": str(files["client_key"]),
            "ssl_password": "${KAFKA_SSL_KEY_PASSWORD}", **overrides}  # fmt: skip


async def test_mutual_tls_with_an_encrypted_key_whose_password_comes_from_the_environment(
    secured_kafka: SecuredKafka, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    monkeypatch.setenv("KAFKA_SSL_KEY_PASSWORD", KEY_PASSWORD)
    text = service_yaml(
        "tls", secured_kafka.broker.bootstrap("MTLS"), mtls_security(secured_kafka.files)
    )
    cluster = load_cluster(tmp_path, text)
    assert await lag_of(cluster, secured_kafka) == {secured_kafka.topic: 3}


@pytest.mark.parametrize("certificate", ["none", "untrusted"])
async def test_mutual_tls_without_an_accepted_client_certificate_is_a_clear_error(
    secured_kafka: SecuredKafka, certificate: str, tmp_path: Path
):
    files = secured_kafka.files
    settings: dict[str, Any] = {"ssl_certfile": None, "ssl_keyfile": None, "ssl_password": None}
    if certificate == "untrusted":
        settings |= {"ssl_certfile": str(files["stranger_cert"]),
                     "ssl_keyfile": str(files["stranger_key"])}  # fmt: skip
    text = service_yaml("tls", secured_kafka.broker.bootstrap("MTLS"),
                        mtls_security(files, **settings))  # fmt: skip
    message, elapsed = await refused(load_cluster(tmp_path, text))
    assert_clear_refusal(
        message, elapsed, "tls", "cannot connect to 127.0.0.1",
        "the broker refused the client certificate",
    )  # fmt: skip
