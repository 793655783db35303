"""A Kafka listener that logs clients in as a broker does, in front of the embedded broker.

Tansu 0.6 (the embedded broker) offers OAUTHBEARER in its SaslHandshake when started with
``--authentication`` but rejects every token: it has no setting for an issuer, a key or a
validator, and no client certificate check (its ``--cert``/``--key`` serve TLS only). So the
tests put :class:`KafkaGate` in front of it: it speaks the Kafka protocol on its own port,
performs SaslHandshake and SaslAuthenticate itself — checking the bearer token the client sends
with a :class:`Verifier` — or requires a client certificate signed by the test's CA, then
relays every other request to Tansu and its answers back. The broker advertises the gate's
port, so every connection the collector opens (bootstrap, coordinator, leaders) goes through
the gate. As a broker with ``connections.max.reauth.ms`` does (KIP-368), a connection whose
token has expired is closed on its next request. A refused OAUTHBEARER token is answered as
Kafka's broker answers it: the error as a challenge, then the failure once the client
acknowledges it.

:class:`TokenEndpoint` is an OAuth 2.0 token endpoint (client-credentials grant) issuing
HS256 JWTs, and :class:`JwtVerifier` checks them as a broker configured with its key would; given
an RSA key it issues RS256 JWTs instead, which Apache Kafka's own validator checks against the
endpoint's JSON Web Key Set (:func:`jwks`).
:class:`MskIamVerifier` checks Amazon MSK IAM tokens: a SigV4-presigned ``kafka-cluster:Connect``
URL, its signature recomputed with the secret key of the access key it names.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import hashlib
import hmac
import json
import secrets
import ssl
import struct
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Protocol
from urllib.parse import parse_qsl, quote, unquote_plus, urlsplit

from aiokafka.protocol.admin import (
    SaslAuthenticateRequest_v0,
    SaslAuthenticateResponse_v0,
    SaslAuthenticateResponse_v1,
    SaslHandShakeRequest_v0,
    SaslHandShakeResponse_v0,
)
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import padding, rsa

API_VERSIONS, SASL_HANDSHAKE, SASL_AUTHENTICATE = 18, 17, 36
UNSUPPORTED_SASL_MECHANISM, SASL_AUTHENTICATION_FAILED = 33, 58


@dataclass
class Login:
    """A verdict on one SaslAuthenticate: ``error`` when refused, ``challenge`` when the
    exchange goes on (bytes for the client, more to come), else who logged in and until when
    their session lasts."""

    principal: str = ""
    expires_at: float | None = None
    error: str | None = None
    challenge: bytes | None = None


class Verifier(Protocol):
    def __call__(self, auth_bytes: bytes) -> Login: ...


def oauthbearer_token(auth_bytes: bytes) -> tuple[str, dict[str, str]]:
    """The bearer token and SASL extensions of an OAUTHBEARER client message (RFC 7628:
    ``n,,\\x01auth=Bearer <token>\\x01key=value\\x01\\x01``)."""
    text = auth_bytes.decode()
    gs2, _, rest = text.partition("\x01")
    if not gs2.startswith("n,"):
        raise ValueError("not an OAUTHBEARER client message")
    pairs = dict(kv.split("=", 1) for kv in rest.split("\x01") if "=" in kv)
    scheme, _, token = pairs.pop("auth", "").partition(" ")
    if scheme.lower() != "bearer" or not token:
        raise ValueError("no bearer token")
    return token, pairs


# ------------------------------------------------------------------------------------------------
# The gate


class _LoopbackServer:
    """A TCP server on a free loopback port (TLS with ``tls``) for ``async with``; handlers
    still running when it closes are cancelled."""

    tls: ssl.SSLContext | None = None

    def __init__(self) -> None:
        self.port = 0
        self._server: asyncio.Server | None = None
        self._tasks: set[asyncio.Task[None]] = set()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        raise NotImplementedError

    async def __aenter__(self) -> Any:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0, ssl=self.tls)
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        assert self._server is not None
        self._server.close()
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        await self._server.wait_closed()


@dataclass
class _Session:
    authenticated: bool = False
    login: Login | None = None
    verify: Verifier | None = None
    refused_token: Login | None = None
    """An OAUTHBEARER refusal sent as a challenge, failed once the client acknowledges it."""


class KafkaGate(_LoopbackServer):
    """``async with KafkaGate(mechanism="OAUTHBEARER", verify=...) as gate:`` then start the
    broker with ``advertised_port=gate.port`` and :meth:`relay_to` it.

    ``mechanism=None`` asks for no SASL login (a TLS gate: ``tls`` with a context that
    requires client certificates)."""

    def __init__(
        self,
        *,
        mechanism: str | None = None,
        verify: Verifier | None = None,
        verifier_per_connection: Callable[[], Verifier] | None = None,
        tls: ssl.SSLContext | None = None,
    ) -> None:
        super().__init__()
        self.mechanism = mechanism
        self.verify = verify
        self.verifier_per_connection = verifier_per_connection
        """For exchanges with state (GSSAPI): a new verifier for each connection."""
        self.tls = tls
        self.logins: list[Login] = []
        """Every SaslAuthenticate, accepted or refused, in order."""
        self.expired_requests = 0
        """Requests that arrived on a connection whose session had expired (then closed)."""
        self.relayed = 0
        self._upstream: tuple[str, int] | None = None

    def relay_to(self, host: str, port: int) -> None:
        self._upstream = (host, port)

    @property
    def accepted(self) -> list[Login]:
        return [login for login in self.logins if login.error is None]

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._tasks.add(task)
        upstream: asyncio.StreamWriter | None = None
        pump: asyncio.Task[None] | None = None
        try:
            assert self._upstream is not None, "relay_to() the broker first"
            up_reader, upstream = await asyncio.open_connection(*self._upstream)
            pump = asyncio.create_task(_copy(up_reader, writer))
            session = _Session(authenticated=self.mechanism is None, verify=self.verify)
            if self.verifier_per_connection is not None:
                session.verify = self.verifier_per_connection()
            while frame := await _read_frame(reader):
                if not await self._handle(frame, session, writer, upstream):
                    break
        except (ConnectionError, asyncio.IncompleteReadError, ssl.SSLError):
            pass
        except asyncio.CancelledError:
            pass  # the gate is closing: asyncio would log a cancelled handler as an error
        finally:
            if pump is not None:
                pump.cancel()
                await asyncio.gather(pump, return_exceptions=True)
            for stream in (writer, upstream):
                if stream is not None:
                    stream.close()
            self._tasks.discard(task)

    async def _handle(
        self,
        frame: bytes,
        session: _Session,
        client: asyncio.StreamWriter,
        upstream: asyncio.StreamWriter,
    ) -> bool:
        """Answer or relay one request; False closes the connection."""
        api_key, api_version, correlation_id = struct.unpack(">hhi", frame[:8])
        (client_id_length,) = struct.unpack(">h", frame[8:10])
        body = frame[10 + max(client_id_length, 0) :]
        if api_key == SASL_HANDSHAKE and self.mechanism is not None:
            mechanism = SaslHandShakeRequest_v0.decode(body).mechanism
            error = 0 if mechanism == self.mechanism else UNSUPPORTED_SASL_MECHANISM
            answer = SaslHandShakeResponse_v0(error, [self.mechanism]).encode()
            await _write_frame(client, struct.pack(">i", correlation_id) + answer)
            return error == 0
        if api_key == SASL_AUTHENTICATE and session.verify is not None:
            auth_bytes = SaslAuthenticateRequest_v0.decode(body).sasl_auth_bytes
            refused, session.refused_token = session.refused_token, None
            if refused is not None:
                # The client acknowledged the refusal (or sent anything else): fail the login.
                login = refused
            else:
                try:
                    login = session.verify(auth_bytes)
                except ValueError as exc:
                    login = Login(error=str(exc))
            if login.error is not None and self.mechanism == "OAUTHBEARER" and refused is None:
                # As Kafka's broker does (RFC 7628 §3.2.2): the error goes to the client as a
                # challenge, and the login fails only on the client's %x01 that answers it.
                session.refused_token = login
                status = json.dumps({"status": login.error}).encode()
                await _write_frame(client, struct.pack(">i", correlation_id) + _auth_answer(
                    api_version, Login(challenge=status)))  # fmt: skip
                return True
            if login.challenge is not None:
                await _write_frame(client, struct.pack(">i", correlation_id) + _auth_answer(
                    api_version, login))  # fmt: skip
                return True
            self.logins.append(login)
            session.login, session.authenticated = login, login.error is None
            await _write_frame(client, struct.pack(">i", correlation_id) + _auth_answer(
                api_version, login))  # fmt: skip
            return session.authenticated
        if api_key != API_VERSIONS and not session.authenticated:
            return False  # a request before the login: a broker drops the connection
        login = session.login
        if login is not None and login.expires_at is not None and time.time() > login.expires_at:
            self.expired_requests += 1
            return False
        self.relayed += 1
        await _write_frame(upstream, frame)
        return True


def _auth_answer(api_version: int, login: Login) -> bytes:
    error = 0 if login.error is None else SASL_AUTHENTICATION_FAILED
    challenge = login.challenge or b""
    if api_version == 0:
        return SaslAuthenticateResponse_v0(error, login.error, challenge).encode()
    lifetime_ms = 0
    if login.expires_at is not None and login.error is None:
        lifetime_ms = max(1, int((login.expires_at - time.time()) * 1000))
    return SaslAuthenticateResponse_v1(error, login.error, challenge, lifetime_ms).encode()


async def _read_frame(reader: asyncio.StreamReader) -> bytes:
    try:
        header = await reader.readexactly(4)
    except asyncio.IncompleteReadError:
        return b""
    (size,) = struct.unpack(">i", header)
    return await reader.readexactly(size)


async def _write_frame(writer: asyncio.StreamWriter, frame: bytes) -> None:
    writer.write(struct.pack(">i", len(frame)) + frame)
    await writer.drain()


async def _copy(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    with contextlib.suppress(ConnectionError, asyncio.IncompleteReadError):
        while frame := await _read_frame(reader):
            await _write_frame(writer, frame)
    writer.close()


# ------------------------------------------------------------------------------------------------
# OAuth 2.0: a token endpoint and the broker's check of its tokens


def _b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _b64url_decode(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def sign_jwt(claims: dict[str, Any], key: bytes) -> str:
    header = _b64url(json.dumps({"alg": "HS256", "typ": "JWT"}).encode())
    payload = _b64url(json.dumps(claims).encode())
    signature = hmac.new(key, f"{header}.{payload}".encode(), hashlib.sha256).digest()
    return f"{header}.{payload}.{_b64url(signature)}"


def sign_jwt_rs256(claims: dict[str, Any], key: rsa.RSAPrivateKey, kid: str) -> str:
    header = _b64url(json.dumps({"alg": "RS256", "typ": "JWT", "kid": kid}).encode())
    payload = _b64url(json.dumps(claims).encode())
    signed = f"{header}.{payload}".encode()
    signature = key.sign(signed, padding.PKCS1v15(), hashes.SHA256())
    return f"{header}.{payload}.{_b64url(signature)}"


def jwks(key: rsa.RSAPrivateKey, kid: str) -> dict[str, Any]:
    """The JSON Web Key Set (RFC 7517) publishing the public half of ``key`` as ``kid``."""
    numbers = key.public_key().public_numbers()

    def unsigned(value: int) -> str:
        return _b64url(value.to_bytes((value.bit_length() + 7) // 8, "big"))

    return {"keys": [{"kty": "RSA", "use": "sig", "alg": "RS256", "kid": kid,
                      "n": unsigned(numbers.n), "e": unsigned(numbers.e)}]}  # fmt: skip


@dataclass
class JwtVerifier:
    """The broker's side of OAUTHBEARER: an HS256 JWT signed with ``key``, not expired, with
    the scope the listener requires."""

    key: bytes
    required_scope: str | None = None
    extensions_seen: list[dict[str, str]] = field(default_factory=list)

    def __call__(self, auth_bytes: bytes) -> Login:
        token, extensions = oauthbearer_token(auth_bytes)
        self.extensions_seen.append(extensions)
        try:
            header, payload, signature = token.split(".")
        except ValueError:
            return Login(error="invalid_token: not a JWT")
        expected = hmac.new(self.key, f"{header}.{payload}".encode(), hashlib.sha256).digest()
        if not hmac.compare_digest(expected, _b64url_decode(signature)):
            return Login(error="invalid_token: bad signature")
        claims = json.loads(_b64url_decode(payload))
        if claims["exp"] <= time.time():
            return Login(error="invalid_token: expired")
        if self.required_scope and self.required_scope not in claims.get("scope", "").split():
            return Login(error=f"insufficient_scope: needs {self.required_scope}")
        return Login(principal=claims["sub"], expires_at=float(claims["exp"]))


TokenHandler = Callable[[dict[str, str], dict[str, str]], Awaitable[tuple[int, dict[str, Any]]]]


class TokenEndpoint(_LoopbackServer):
    """``async with TokenEndpoint(...) as idp:`` — an OAuth 2.0 token endpoint at ``idp.url``
    for one client (client-credentials grant, client_secret_basic or client_secret_post),
    issuing HS256 JWTs that live ``lifetime`` seconds."""

    def __init__(
        self,
        client_id: str,
        client_secret: str,
        *,
        key: bytes | None = None,
        lifetime: float = 3600,
        scopes: tuple[str, ...] = ("kafka",),
        tls: ssl.SSLContext | None = None,
        rsa_key: rsa.RSAPrivateKey | None = None,
        kid: str = "notifier-test",
        audience: str | None = None,
        issuer: str | None = None,
    ) -> None:
        super().__init__()
        self.client_id = client_id
        self.client_secret = client_secret
        self.key = key or secrets.token_bytes(32)
        self.lifetime = lifetime
        self.scopes = scopes
        self.issued: list[str] = []
        self.requests: list[dict[str, Any]] = []
        """Each request's form and headers, as received."""
        self.refuse_next: list[tuple[int, dict[str, Any]]] = []
        """Answers given instead of a token to the next requests (e.g. an outage)."""
        self.tls = tls
        """A server-side TLS context: serve HTTPS, as ``https://localhost:port``."""
        self.rsa_key = rsa_key
        """Sign RS256 tokens with this key (published by :func:`jwks` as ``kid``), not HS256."""
        self.kid = kid
        self.audience = audience
        """The ``aud`` claim of every token, when set."""
        self.issuer = issuer
        """The ``iss`` claim of every token, when set."""

    @property
    def url(self) -> str:
        if self.tls is not None:
            return f"https://localhost:{self.port}/oauth2/token"
        return f"http://127.0.0.1:{self.port}/oauth2/token"

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            request_line = (await reader.readline()).decode()
            headers: dict[str, str] = {}
            while (line := (await reader.readline()).decode().strip()) != "":
                name, _, value = line.partition(":")
                headers[name.strip().lower()] = value.strip()
            body = await reader.readexactly(int(headers.get("content-length", "0")))
            form = dict(parse_qsl(body.decode()))
            self.requests.append({"line": request_line, "form": form, "headers": headers})
            status, answer = self._answer(request_line, form, headers)
            payload = json.dumps(answer).encode()
            writer.write(
                f"HTTP/1.1 {status} X\r\nContent-Type: application/json\r\n"
                f"Content-Length: {len(payload)}\r\nConnection: close\r\n\r\n".encode()
                + payload
            )
            await writer.drain()
        finally:
            writer.close()

    def _answer(
        self, request_line: str, form: dict[str, str], headers: dict[str, str]
    ) -> tuple[int, dict[str, Any]]:
        if not request_line.startswith("POST /oauth2/token "):
            return 404, {"error": "not_found"}
        if self.refuse_next:
            return self.refuse_next.pop(0)
        client = (form.get("client_id"), form.get("client_secret"))
        authorization = headers.get("authorization", "")
        if authorization.startswith("Basic "):
            user, _, password = base64.b64decode(authorization[6:]).decode().partition(":")
            client = (unquote_plus(user), unquote_plus(password))
        if client != (self.client_id, self.client_secret):
            return 401, {"error": "invalid_client", "error_description": "unknown client"}
        if form.get("grant_type") != "client_credentials":
            return 400, {"error": "unsupported_grant_type"}
        scope = form.get("scope", " ".join(self.scopes))
        if not set(scope.split()) <= set(self.scopes):
            return 400, {"error": "invalid_scope"}
        now = time.time()
        claims = {"sub": self.client_id, "iat": int(now), "exp": now + self.lifetime,
                  "scope": scope, "jti": secrets.token_hex(8)}  # fmt: skip
        if self.audience is not None:
            claims["aud"] = self.audience
        if self.issuer is not None:
            claims["iss"] = self.issuer
        if self.rsa_key is not None:
            # NumericDate is whole seconds for JOSE libraries such as Kafka's jose4j.
            claims["exp"] = int(claims["exp"])
            token = sign_jwt_rs256(claims, self.rsa_key, self.kid)
        else:
            token = sign_jwt(claims, self.key)
        self.issued.append(token)
        return 200, {"access_token": token, "token_type": "Bearer",
                     "expires_in": self.lifetime, "scope": scope}  # fmt: skip


# ------------------------------------------------------------------------------------------------
# Amazon MSK IAM: the broker's check of a presigned kafka-cluster:Connect URL (SigV4)


@dataclass
class MskIamVerifier:
    """Checks an MSK IAM token as the MSK broker does: base64url of a SigV4-presigned URL of
    ``https://kafka.<region>.amazonaws.com/?Action=kafka-cluster:Connect``, signed for the
    ``kafka-cluster`` service in ``region`` by a known access key, and not expired."""

    region: str
    secret_keys: dict[str, str]
    """access key id → secret access key of the identities allowed in."""
    session_tokens: list[str | None] = field(default_factory=list)

    def __call__(self, auth_bytes: bytes) -> Login:
        token, _ = oauthbearer_token(auth_bytes)
        url = _b64url_decode(token).decode()
        parts = urlsplit(url)
        query = parse_qsl(parts.query, keep_blank_values=True)
        params = dict(query)
        if parts.netloc != f"kafka.{self.region}.amazonaws.com":
            return Login(error=f"wrong host {parts.netloc}")
        if params.get("Action") != "kafka-cluster:Connect":
            return Login(error="not a kafka-cluster:Connect token")
        key_id, date, region, service, _ = params["X-Amz-Credential"].split("/")
        if (region, service) != (self.region, "kafka-cluster"):
            return Login(error=f"signed for {service} in {region}")
        if key_id not in self.secret_keys:
            return Login(error=f"unknown access key {key_id}")
        signed_at = datetime.strptime(params["X-Amz-Date"], "%Y%m%dT%H%M%SZ").replace(tzinfo=UTC)
        expires_at = signed_at.timestamp() + int(params["X-Amz-Expires"])
        if expires_at <= time.time():
            return Login(error="token expired")
        # The canonical request covers every parameter but the signature and the user agent,
        # which the signer appends after signing.
        signed = sorted((k, v) for k, v in query if k not in ("X-Amz-Signature", "User-Agent"))
        canonical_query = "&".join(f"{quote(k, safe='-_.~')}={quote(v, safe='-_.~')}"
                                   for k, v in signed)  # fmt: skip
        canonical = "\n".join(
            [
                "GET",
                parts.path or "/",
                canonical_query,
                f"host:{parts.netloc}\n",
                "host",
                hashlib.sha256(b"").hexdigest(),
            ]
        )
        scope = f"{date}/{region}/{service}/aws4_request"
        to_sign = "\n".join(["AWS4-HMAC-SHA256", params["X-Amz-Date"], scope,
                             hashlib.sha256(canonical.encode()).hexdigest()])  # fmt: skip
        key = ("AWS4" + self.secret_keys[key_id]).encode()
        for step in (date, region, service, "aws4_request"):
            key = hmac.new(key, step.encode(), hashlib.sha256).digest()
        expected = hmac.new(key, to_sign.encode(), hashlib.sha256).hexdigest()
        if not hmac.compare_digest(expected, params["X-Amz-Signature"]):
            return Login(error="signature does not match")
        self.session_tokens.append(params.get("X-Amz-Security-Token"))
        return Login(principal=key_id, expires_at=expires_at)
