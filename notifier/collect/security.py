"""Logging in to Kafka: aiokafka's SASL settings for a cluster, and the token providers behind
OAUTHBEARER.

aiokafka authenticates each new connection itself (``aiokafka.conn``: PLAIN, SCRAM, GSSAPI
through the ``gssapi`` package, OAUTHBEARER through an
:class:`aiokafka.abc.AbstractTokenProvider`). What it leaves to the application is where a
bearer token comes from and when it must be renewed:

* :class:`OidcTokenProvider` asks an OIDC/OAuth 2.0 token endpoint for a token with the
  client-credentials grant (RFC 6749 §4.4), as Kafka's own OAUTHBEARER login does;
* :class:`MskIamTokenProvider` signs one with AWS credentials for Amazon MSK's IAM access
  control (the ``aws-msk-iam-sasl-signer-python`` package, an optional extra).

Connections are opened by :func:`open_connection`: aiokafka's, except that a token the broker
refuses fails the login with the broker's reason (see :class:`_OAuthBearerAuthenticator`), and
:func:`login_failure` says what a failed login was and why, naming the mechanism and the user
(never a secret).

Both token providers keep their token until 80% of its lifetime has passed (Kafka's
``sasl.login.refresh.window.factor``), then fetch the next one; a refresh that fails keeps the
current token while it is still valid and says so once. A broker ends a SASL session when its
token expires (KIP-368: the next request on the connection closes it), so the collector replaces
its connections at the start of the first scan after a renewal falls due
(:meth:`RefreshingTokenProvider.renewal_due`): no scan ever meets an expired session.

Token values and client secrets never appear in a message of this module.
"""

from __future__ import annotations

import abc
import asyncio
import base64
import binascii
import importlib
import json
import logging
import ssl
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, cast
from urllib.parse import quote_plus

import httpx
from aiokafka.abc import AbstractTokenProvider
from aiokafka.conn import AIOKafkaConnection, OAuthAuthenticator
from aiokafka.errors import (
    AuthenticationFailedError,
    IllegalSaslStateError,
    KafkaError,
    SaslAuthenticationFailed,
    UnsupportedSaslMechanismError,
)
from aiokafka.helpers import create_ssl_context

from notifier.config.kafka_security import (
    KERBEROS_EXTRA,
    KERBEROS_PACKAGE,
    MSK_IAM_EXTRA,
    MSK_IAM_MODULE,
    MSK_IAM_PACKAGE,
    SASL_MECHANISMS,
    SecurityConfig,
    package_missing,
)
from notifier.config.secrets import Scrubber, Secret

log = logging.getLogger("notifier.collect.security")

REFRESH_FACTOR = 0.8
"""A token is renewed once this share of its lifetime has passed (as Kafka's Java client)."""

UNSTATED_LIFETIME_S = 300.0
"""A token whose lifetime neither ``expires_in`` nor a JWT ``exp`` states is renewed after this."""

_PASSWORD_MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")


class CredentialsError(KafkaError):
    """No token could be had: the token endpoint or AWS refused, or could not be reached.

    A :class:`~aiokafka.errors.KafkaError`, so that a connection that cannot log in fails like
    any other connection (the scan fails, the cluster's failure count goes up)."""


@dataclass(frozen=True)
class _Token:
    value: str
    renew_at: float
    expires_at: float


class RefreshingTokenProvider(AbstractTokenProvider, abc.ABC):
    """A bearer token shared by every connection of a collector, renewed before it expires.

    ``clock`` is the wall clock (token lifetimes are wall-clock times)."""

    def __init__(
        self,
        *,
        extensions: Mapping[str, str] | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._extensions = dict(extensions or {})
        self._clock = clock
        self._current: _Token | None = None
        self._lock = asyncio.Lock()
        self._failing = False

    @property
    @abc.abstractmethod
    def source(self) -> str:
        """Where tokens come from, for messages (``token endpoint https://…``)."""

    @abc.abstractmethod
    async def _fetch(self) -> tuple[str, float | None]:
        """A new token and its lifetime in seconds (None: not stated). Raises CredentialsError."""

    async def token(self) -> str:
        """The current token, renewed first when its renewal is due."""
        async with self._lock:
            now = self._clock()
            current = self._current
            if current is not None and now < current.renew_at:
                return current.value
            try:
                value, lifetime = await self._fetch()
            except CredentialsError as exc:
                if current is None or now >= current.expires_at:
                    raise
                if not self._failing:
                    log.warning(
                        "cannot renew the Kafka login token; the current one is used until it "
                        "expires in %.0fs: %s",
                        current.expires_at - now,
                        exc,
                        extra={"event": "token_refresh_failed", "source": self.source},
                    )
                self._failing = True
                return current.value
            if self._failing:
                log.info("the Kafka login token was renewed again", extra={"source": self.source})
            self._failing = False
            stated = lifetime is not None and lifetime > 0
            span = lifetime if stated and lifetime is not None else UNSTATED_LIFETIME_S
            self._current = _Token(
                value, renew_at=now + REFRESH_FACTOR * span, expires_at=now + span
            )
            return value

    def extensions(self) -> dict[str, str]:
        """SASL extensions sent with every token (aiokafka calls this when it exists)."""
        return dict(self._extensions)

    def renewal_due(self) -> bool:
        """Whether connections logged in with the current token should be replaced now."""
        current = self._current
        return current is not None and self._clock() >= current.renew_at


class OidcTokenProvider(RefreshingTokenProvider):
    """Tokens from an OIDC/OAuth 2.0 token endpoint with the client-credentials grant."""

    def __init__(
        self,
        token_url: str,
        client_id: str,
        client_secret: Secret,
        *,
        scope: str | None = None,
        audience: str | None = None,
        client_auth: str = "basic",
        ca_file: str | None = None,
        extensions: Mapping[str, str] | None = None,
        timeout: float = 10.0,
        clock: Callable[[], float] = time.time,
    ) -> None:
        super().__init__(extensions=extensions, clock=clock)
        if client_auth not in ("basic", "post"):
            raise ValueError("client_auth must be 'basic' or 'post'")
        self._token_url = token_url
        self._client_id = client_id
        self._client_secret = Secret(client_secret)
        self._scope = scope
        self._audience = audience
        self._client_auth = client_auth
        self._verify: ssl.SSLContext | bool = (
            ssl.create_default_context(cafile=ca_file) if ca_file else True
        )
        self._timeout = timeout
        self._scrub = Scrubber([self._client_secret])

    @property
    def source(self) -> str:
        return f"token endpoint {self._token_url}"

    async def _fetch(self) -> tuple[str, float | None]:
        form = {"grant_type": "client_credentials"}
        if self._scope:
            form["scope"] = self._scope
        if self._audience:
            form["audience"] = self._audience
        secret = self._client_secret.reveal()
        headers = {"Accept": "application/json"}
        if self._client_auth == "basic":
            # RFC 6749 §2.3.1: both are form-encoded before they are joined for Basic.
            pair = f"{quote_plus(self._client_id)}:{quote_plus(secret)}".encode()
            headers["Authorization"] = "Basic " + base64.b64encode(pair).decode("ascii")
        else:
            form |= {"client_id": self._client_id, "client_secret": secret}
        try:
            async with httpx.AsyncClient(
                timeout=self._timeout, verify=self._verify, follow_redirects=False
            ) as client:
                response = await client.post(self._token_url, data=form, headers=headers)
        except httpx.HTTPError as exc:
            detail = self._scrub(str(exc)) or type(exc).__name__
            raise CredentialsError(f"{self.source}: cannot reach it: {detail}") from None
        return self._read_answer(response)

    def _read_answer(self, response: httpx.Response) -> tuple[str, float | None]:
        try:
            body = response.json()
        except ValueError:
            body = None
        if response.status_code != 200:
            # RFC 6749 §5.2: {"error": "invalid_client", "error_description": "..."}
            reason = ""
            if isinstance(body, dict) and isinstance(body.get("error"), str):
                reason = f" {body['error']}"
                if isinstance(body.get("error_description"), str):
                    reason += f": {body['error_description']}"
            raise CredentialsError(self._scrub(
                f"{self.source} refused client {self._client_id!r}: "
                f"HTTP {response.status_code}{reason}"))  # fmt: skip
        if not isinstance(body, dict):
            raise CredentialsError(f"{self.source}: expected a JSON object in its answer")
        value = body.get("access_token")
        if not isinstance(value, str) or not value:
            raise CredentialsError(f"{self.source}: its answer has no access_token")
        kind = body.get("token_type", "Bearer")
        if not isinstance(kind, str) or kind.lower() != "bearer":
            raise CredentialsError(f"{self.source}: expected a Bearer token, got {kind!r}")
        expires_in = body.get("expires_in")
        if isinstance(expires_in, str) and expires_in.isdigit():
            expires_in = int(expires_in)  # some identity providers send it as a string
        if isinstance(expires_in, int | float) and not isinstance(expires_in, bool):
            return value, float(expires_in)
        expiry = jwt_expiry(value)
        return value, None if expiry is None else expiry - self._clock()


def jwt_expiry(token: str) -> float | None:
    """The ``exp`` claim of a JWT (seconds since the epoch), None for any other token. The
    signature is not checked: the broker checks it, this only tells when to renew."""
    parts = token.split(".")
    if len(parts) != 3:
        return None
    payload = parts[1] + "=" * (-len(parts[1]) % 4)
    try:
        claims = json.loads(base64.urlsafe_b64decode(payload))
    except (ValueError, binascii.Error):
        return None
    expiry = claims.get("exp") if isinstance(claims, dict) else None
    if isinstance(expiry, int | float) and not isinstance(expiry, bool):
        return float(expiry)
    return None


class MskIamTokenProvider(RefreshingTokenProvider):
    """Amazon MSK IAM tokens, signed by ``aws-msk-iam-sasl-signer-python`` (botocore does the
    signing and finds the credentials; it blocks, so it runs in a thread)."""

    def __init__(
        self,
        region: str,
        *,
        role_arn: str | None = None,
        session_name: str = "notifier",
        profile: str | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        super().__init__(clock=clock)
        if package_missing(MSK_IAM_MODULE):
            raise ValueError(
                f"Amazon MSK IAM needs the Python package {MSK_IAM_PACKAGE}, which is not "
                f"installed: pip install 'notifier[{MSK_IAM_EXTRA}]'"
            )
        self._region = region
        self._role_arn = role_arn
        self._session_name = session_name
        self._profile = profile

    @property
    def source(self) -> str:
        via = f" as {self._role_arn}" if self._role_arn else ""
        return f"Amazon MSK IAM in {self._region}{via}"

    def _sign(self) -> tuple[str, int]:
        # Imported by name, so untyped; each call returns (token, expiry in epoch ms).
        signer = importlib.import_module(f"{MSK_IAM_MODULE}.MSKAuthTokenProvider")
        if self._role_arn is not None:
            # The signer's own role assumption asks STS without a region (and fails where none
            # is configured); this asks the cluster's region, with the profile's credentials
            # when one is named.
            role = _assumed_role(self._region, self._role_arn, self._session_name, self._profile)
            token = signer.generate_auth_token_from_credentials_provider(self._region, role)
            return cast(tuple[str, int], token)
        if self._profile is not None:
            token = signer.generate_auth_token_from_profile(self._region, self._profile)
            return cast(tuple[str, int], token)
        return cast(tuple[str, int], signer.generate_auth_token(self._region))

    async def _fetch(self) -> tuple[str, float | None]:
        try:
            value, expiry_ms = await asyncio.to_thread(self._sign)
        except Exception as exc:  # botocore's many errors: no credentials, STS refused, ...
            raise CredentialsError(
                f"{self.source}: cannot sign a token: {exc or type(exc).__name__}"
            ) from None
        return value, expiry_ms / 1000 - self._clock()


def _assumed_role(region: str, role_arn: str, session_name: str, profile: str | None) -> Any:
    """A botocore CredentialProvider (what the signer takes) with the credentials of
    ``role_arn``, assumed through the STS endpoint of ``region`` with the default credentials
    or ``profile``'s. botocore comes with the signer, so it is imported only here."""
    import boto3
    from botocore.credentials import CredentialProvider, Credentials

    class AssumedRole(CredentialProvider):
        METHOD = "notifier-assume-role"

        def load(self) -> Credentials:
            session = boto3.Session(profile_name=profile, region_name=region)
            answer = session.client("sts", region_name=region).assume_role(
                RoleArn=role_arn, RoleSessionName=session_name
            )
            found = answer["Credentials"]
            return Credentials(
                found["AccessKeyId"], found["SecretAccessKey"], found["SessionToken"]
            )

    return AssumedRole()


def token_provider(security: SecurityConfig) -> RefreshingTokenProvider:
    """The OAUTHBEARER token provider a (validated) cluster security config describes."""
    if security.msk_iam is not None:
        msk = security.msk_iam
        assert msk.region is not None  # the config requires it
        return MskIamTokenProvider(
            msk.region, role_arn=msk.role_arn, session_name=msk.session_name, profile=msk.profile
        )
    oauth = security.oauth
    assert oauth is not None and oauth.token_url and oauth.client_id and oauth.client_secret
    return OidcTokenProvider(
        oauth.token_url,
        oauth.client_id,
        oauth.client_secret,
        scope=oauth.scope,
        audience=oauth.audience,
        client_auth=oauth.client_auth,
        ca_file=oauth.ca_file,
        extensions=oauth.extensions,
    )


def collector_security(security: SecurityConfig) -> dict[str, Any]:
    """:class:`~notifier.collect.ClusterCollector`'s keyword arguments for a cluster's
    ``security`` section (secrets revealed here, for the connection and nothing else)."""
    settings: dict[str, Any] = {
        "security_protocol": security.protocol,
        "ssl_cafile": security.ssl_cafile,
        "ssl_certfile": security.ssl_certfile,
        "ssl_keyfile": security.ssl_keyfile,
        "ssl_password": security.ssl_password.reveal() if security.ssl_password else None,
        "sasl_mechanism": security.sasl_mechanism,
    }
    if not security.uses_sasl:
        return settings
    mechanism = security.sasl_mechanism
    if mechanism in _PASSWORD_MECHANISMS:
        settings["sasl_username"] = security.sasl_username
        settings["sasl_password"] = (
            security.sasl_password.reveal() if security.sasl_password else None
        )
    elif mechanism == "OAUTHBEARER":
        settings["sasl_oauth_token_provider"] = token_provider(security)
    elif mechanism == "GSSAPI" and security.kerberos is not None:
        settings["sasl_kerberos_service_name"] = security.kerberos.service_name
        settings["sasl_kerberos_domain_name"] = security.kerberos.domain_name
    return settings


def sasl_settings(
    security_protocol: str,
    mechanism: str,
    *,
    username: str | None = None,
    password: str | None = None,
    token_provider: AbstractTokenProvider | None = None,
    kerberos_service_name: str = "kafka",
    kerberos_domain_name: str | None = None,
) -> dict[str, Any]:
    """aiokafka's SASL keyword arguments for ``create_conn``; ValueError for settings that
    cannot log in (a mechanism without its credentials or its package)."""
    if not security_protocol.startswith("SASL_"):
        return {"sasl_mechanism": None}
    if mechanism not in SASL_MECHANISMS:
        raise ValueError(f"sasl_mechanism must be one of {SASL_MECHANISMS}")
    if mechanism in _PASSWORD_MECHANISMS:
        if username is None or password is None:
            raise ValueError(f"{mechanism} needs sasl_username and sasl_password")
        return {"sasl_mechanism": mechanism, "sasl_plain_username": username,
                "sasl_plain_password": password}  # fmt: skip
    if mechanism == "OAUTHBEARER":
        if not isinstance(token_provider, AbstractTokenProvider):
            raise ValueError("OAUTHBEARER needs a token provider (sasl_oauth_token_provider)")
        return {"sasl_mechanism": mechanism, "sasl_oauth_token_provider": token_provider}
    if package_missing(KERBEROS_PACKAGE):
        raise ValueError(
            f"GSSAPI needs the Python package {KERBEROS_PACKAGE}, which is not installed: "
            f"pip install 'notifier[{KERBEROS_EXTRA}]'"
        )
    return {"sasl_mechanism": mechanism, "sasl_kerberos_service_name": kerberos_service_name,
            "sasl_kerberos_domain_name": kerberos_domain_name}  # fmt: skip


def client_security(security: SecurityConfig) -> dict[str, Any]:
    """aiokafka client keyword arguments (``AIOKafkaProducer``, ``AIOKafkaConsumer``,
    ``AIOKafkaAdminClient``) for a cluster's ``security`` section: the same login the collector
    makes, through :func:`collector_security` and :func:`sasl_settings`."""
    found = collector_security(security)
    settings = sasl_settings(
        security.protocol,
        security.sasl_mechanism,
        username=found.get("sasl_username"),
        password=found.get("sasl_password"),
        token_provider=found.get("sasl_oauth_token_provider"),
        kerberos_service_name=found.get("sasl_kerberos_service_name", "kafka"),
        kerberos_domain_name=found.get("sasl_kerberos_domain_name"),
    )
    settings["security_protocol"] = security.protocol
    if security.uses_tls:
        settings["ssl_context"] = create_ssl_context(
            cafile=found["ssl_cafile"],
            certfile=found["ssl_certfile"],
            keyfile=found["ssl_keyfile"],
            password=found["ssl_password"],
        )
    if settings.get("sasl_mechanism") is None:
        # aiokafka's clients check the mechanism even without SASL; PLAIN is their default.
        settings["sasl_mechanism"] = "PLAIN"
    return settings


# ------------------------------------------------------------------------------------------------
# Connections, and what a failed login was


class _OAuthBearerAuthenticator(OAuthAuthenticator):
    """aiokafka's OAUTHBEARER exchange, plus the client's part when the broker refuses the
    token. Kafka's broker answers a bad token with a challenge holding its error
    (``{"status":"invalid_token"}``, RFC 7628 §3.2.2) and fails the login only once the client
    acknowledges it with ``%x01``; aiokafka stops after sending the token, so the connection
    stayed half logged in and the broker's answer to the next request was misread (a scan
    failed with "metadata without brokers")."""

    def __init__(self, *, sasl_oauth_token_provider: AbstractTokenProvider) -> None:
        super().__init__(sasl_oauth_token_provider=sasl_oauth_token_provider)
        self._error_acknowledged = False

    async def step(self, payload: bytes | None) -> tuple[bytes, bool] | None:
        if self._token_sent and payload and not self._error_acknowledged:
            self._error_acknowledged = True
            return b"\x01", True
        result: tuple[bytes, bool] | None = await super().step(payload)
        return result


class _Connection(AIOKafkaConnection):
    def authenticator_oauth(self) -> _OAuthBearerAuthenticator:
        return _OAuthBearerAuthenticator(sasl_oauth_token_provider=self._sasl_oauth_token_provider)


async def open_connection(host: str, port: int, **settings: Any) -> AIOKafkaConnection:
    """An authenticated connection, as :func:`aiokafka.conn.create_conn` opens one (the same
    keyword arguments)."""
    conn = _Connection(host, port, **settings)
    await conn.connect()
    return conn


def describe_login(
    security_protocol: str,
    sasl_mechanism: str | None,
    *,
    username: str | None = None,
    token_provider: AbstractTokenProvider | None = None,
    client_certificate: str | None = None,
) -> str:
    """How a connection logs in, for messages: ``SASL SCRAM-SHA-512 as 'lag-notifier' over
    TLS``, ``TLS with client certificate /etc/notifier/client.pem``. No secret is named."""
    parts: list[str] = []
    if security_protocol.startswith("SASL_") and sasl_mechanism:
        login = f"SASL {sasl_mechanism}"
        if sasl_mechanism in _PASSWORD_MECHANISMS and username is not None:
            login += f" as {username!r}"
        elif isinstance(token_provider, RefreshingTokenProvider):
            login += f" with a token from {token_provider.source}"
        parts.append(login)
    if security_protocol in ("SSL", "SASL_SSL"):
        if client_certificate is not None:
            parts.append(f"TLS with client certificate {client_certificate}")
        elif security_protocol == "SSL":
            parts.append("TLS without a client certificate")
        else:
            parts.append("TLS")
    return " over ".join(parts) or "PLAINTEXT"


_LOGIN_REFUSALS = (
    SaslAuthenticationFailed,
    AuthenticationFailedError,
    IllegalSaslStateError,
    UnsupportedSaslMechanismError,
)
_CERTIFICATE_ALERTS = (
    "ALERT_BAD_CERTIFICATE",
    "ALERT_CERTIFICATE_UNKNOWN",
    "ALERT_UNKNOWN_CA",
    "ALERT_CERTIFICATE_REQUIRED",
    "ALERT_UNSUPPORTED_CERTIFICATE",
    "ALERT_CERTIFICATE_EXPIRED",
    "ALERT_CERTIFICATE_REVOKED",
)
"""TLS alerts by which a server refuses the client's certificate (or its absence)."""


def login_failure(exc: BaseException, login: str, sasl_mechanism: str | None = None) -> str | None:
    """What a failed connection says about its login (``login`` from :func:`describe_login`,
    with ``sasl_mechanism`` when it logs in with SASL), or None when the failure is not the
    login's (a refused connection, a timeout)."""
    if isinstance(exc, _LOGIN_REFUSALS):
        if exc.args and isinstance(exc.args[0], str):
            reason = exc.args[0]
        elif isinstance(exc, UnsupportedSaslMechanismError):
            # aiokafka raises it from the SaslHandshake answer without the broker's list.
            reason = f"the broker does not offer {sasl_mechanism} on this listener"
        else:
            reason = type(exc).__name__
        return f"the broker refused the login ({login}): {reason}"
    cause: BaseException | None = exc
    while cause is not None and not isinstance(cause, ssl.SSLError):
        cause = cause.__cause__  # aiokafka keeps a closed connection's error here
    if cause is None:
        return None
    if isinstance(cause, ssl.SSLCertVerificationError):
        return (
            f"the broker's certificate is not trusted ({login}; ssl_cafile names the CA that "
            f"signed it): {cause}"
        )
    if any(alert in str(cause) for alert in _CERTIFICATE_ALERTS):
        return f"the broker refused the client certificate ({login}): {cause}"
    return f"TLS failed ({login}): {cause}"
