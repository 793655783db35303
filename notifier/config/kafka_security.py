"""How notifier logs in to a Kafka cluster (``clusters[].security``): TLS (mutual TLS with a
client certificate, its key encrypted or not) and SASL with PLAIN, SCRAM-SHA-256/512,
OAUTHBEARER (an OIDC token endpoint's client-credentials grant, or Amazon MSK IAM) or GSSAPI
(Kerberos).

Every combination is checked when the config is read (``notifier check`` and ``notifier run``
alike), with each problem named by its field: ``clusters.prod.security.oauth.token_url:
required for sasl_mechanism OAUTHBEARER``. A mechanism whose optional Python package is missing
is reported with the package's name and the extra that installs it. Credentials (SASL and key
passwords, the OIDC client secret) are :class:`~notifier.config.secrets.Secret` values, given
as ``${ENV_VAR}`` or ``{file: path}``.
"""

from __future__ import annotations

import importlib
import ssl
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import Field, ValidationError
from pydantic import model_validator as _model_validator

from notifier.config.base import StrictModel
from notifier.config.notify import HttpUrl, SecretValue

SASL_MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER", "GSSAPI")
SECURITY_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")

KERBEROS_PACKAGE = "gssapi"
KERBEROS_EXTRA = "kerberos"
MSK_IAM_PACKAGE = "aws-msk-iam-sasl-signer-python"
MSK_IAM_MODULE = "aws_msk_iam_sasl_signer"
MSK_IAM_EXTRA = "msk-iam"

_AWS_REGION = r"^[a-z]{2}(-[a-z]+)+-\d+$"
_ROLE_ARN = r"^arn:aws[a-z-]*:iam::\d{12}:role/[\w+=,.@/-]+$"


class OAuthConfig(StrictModel):
    """An OIDC/OAuth 2.0 token endpoint that gives notifier bearer tokens for its own client id
    (the client-credentials grant, RFC 6749 §4.4), as Kafka's OAUTHBEARER login does."""

    token_url: HttpUrl | None = None
    client_id: str | None = None
    client_secret: SecretValue | None = None
    scope: str | None = None
    """Space-separated scopes to ask for (some identity providers need one, e.g. ``kafka``)."""
    audience: str | None = None
    """Sent as ``audience`` when set (Auth0 and others issue tokens for one audience)."""
    client_auth: Literal["basic", "post"] = "basic"
    """How the client id and secret are sent: HTTP Basic (``client_secret_basic``, the
    default of RFC 6749 and Kafka's Java client) or in the form (``client_secret_post``)."""
    ca_file: str | None = None
    """PEM CA certificates to verify the token endpoint with, instead of the system's."""
    extensions: dict[str, str] = Field(default_factory=dict)
    """SASL extensions sent with the token (Confluent Cloud needs ``logicalCluster`` and
    ``identityPoolId``)."""


class MskIamConfig(StrictModel):
    """Amazon MSK's IAM access control: a token signed with AWS credentials (the default chain:
    environment, shared files, container or instance role; or a named profile), optionally for
    a role assumed first."""

    region: Annotated[str, Field(pattern=_AWS_REGION)] | None = None
    role_arn: Annotated[str, Field(pattern=_ROLE_ARN)] | None = None
    session_name: Annotated[str, Field(pattern=r"^[\w+=,.@-]{2,64}$")] = "notifier"
    """The role session's name (``RoleSessionName``), when ``role_arn`` is set."""
    profile: str | None = None
    """A named profile of the shared AWS config files, instead of the default chain (with
    ``role_arn``: the credentials that assume the role)."""


class KerberosConfig(StrictModel):
    """GSSAPI: the broker's service principal is ``service_name@host``. Credentials come from
    the ticket cache (``kinit``) or a client keytab (``KRB5_CLIENT_KTNAME``), as for every
    Kerberos client."""

    service_name: Annotated[str, Field(min_length=1)] = "kafka"
    domain_name: str | None = None
    """The host part of the broker's principal; default: the broker's host name as connected."""


def package_missing(module: str) -> bool:
    """Whether ``module`` cannot be imported (absent, or present without its system library:
    gssapi needs the system's Kerberos)."""
    try:
        importlib.import_module(module)
    except ImportError:
        return True
    return False


def _problem(loc: tuple[str, ...], message: str) -> Any:
    """One problem at ``loc`` (inside the security section), as pydantic reports a field's:
    ``clusters.prod.security.oauth.token_url: required for sasl_mechanism OAUTHBEARER``."""
    # The input is left empty: the message says what was found (a "got ..." would repeat it).
    return {"type": "value_error", "loc": loc, "input": {}, "ctx": {"error": ValueError(message)}}


class SecurityConfig(StrictModel):
    protocol: Literal["PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"] = "PLAINTEXT"
    ssl_cafile: str | None = None
    ssl_certfile: str | None = None
    """The client certificate (PEM) for mutual TLS; it may hold the key as well."""
    ssl_keyfile: str | None = None
    ssl_password: SecretValue | None = None
    """The password of an encrypted ``ssl_keyfile``."""
    sasl_mechanism: Literal["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER", "GSSAPI"] = (
        "PLAIN"
    )
    sasl_username: str | None = None
    sasl_password: SecretValue | None = None
    oauth: OAuthConfig | None = None
    msk_iam: MskIamConfig | None = None
    kerberos: KerberosConfig | None = None

    @property
    def uses_sasl(self) -> bool:
        return self.protocol.startswith("SASL_")

    @property
    def uses_tls(self) -> bool:
        return self.protocol in ("SSL", "SASL_SSL")

    @_model_validator(mode="after")
    def _complete(self) -> SecurityConfig:
        problems = self._problems()
        if problems:
            raise ValidationError.from_exception_data(type(self).__name__, problems)
        return self

    def _problems(self) -> list[Any]:
        mechanism = self.sasl_mechanism
        if not self.uses_sasl:
            problems = self._unused(None)
            if "sasl_mechanism" in self.model_fields_set:
                why = f"sasl_mechanism {mechanism} needs protocol SASL_SSL or SASL_PLAINTEXT"
                problems.append(_problem(("protocol",), f"{why}, not {self.protocol}"))
            return problems
        problems = self._unused(mechanism)
        needed: dict[tuple[str, ...], object] = {}
        if mechanism in ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"):
            needed = {("sasl_username",): self.sasl_username,
                      ("sasl_password",): self.sasl_password}  # fmt: skip
        elif mechanism == "OAUTHBEARER":
            needed, problems = self._token_source(problems)
        elif mechanism == "GSSAPI" and package_missing(KERBEROS_PACKAGE):
            note = "; it builds against the system's Kerberos (Debian: libkrb5-dev)"
            missing = _missing(KERBEROS_PACKAGE, KERBEROS_EXTRA, note)
            problems.append(_problem(("sasl_mechanism",), f"GSSAPI {missing}"))
        problems += [
            _problem(loc, f"required for sasl_mechanism {mechanism}")
            for loc, value in needed.items()
            if not value
        ]
        return problems

    def _token_source(self, problems: list[Any]) -> tuple[dict[tuple[str, ...], object], list[Any]]:
        """OAUTHBEARER's tokens come from exactly one of ``oauth`` and ``msk_iam``: the fields
        that one needs, and the problems found so far with those of the choice itself."""
        oauth, msk_iam = self.oauth, self.msk_iam
        if oauth is not None and msk_iam is not None:
            return {}, [*problems, _problem(("msk_iam",), "set either oauth or msk_iam, not both")]
        if oauth is not None:
            return {("oauth", "token_url"): oauth.token_url,
                    ("oauth", "client_id"): oauth.client_id,
                    ("oauth", "client_secret"): oauth.client_secret}, problems  # fmt: skip
        if msk_iam is not None:
            problems = list(problems)
            if package_missing(MSK_IAM_MODULE):
                missing = _missing(MSK_IAM_PACKAGE, MSK_IAM_EXTRA)
                problems.append(_problem(("msk_iam",), missing))
            return {("msk_iam", "region"): msk_iam.region}, problems
        neither = ("required for sasl_mechanism OAUTHBEARER: an OIDC token endpoint (token_url, "
                   "client_id, client_secret), or msk_iam (region) for Amazon MSK")  # fmt: skip
        return {}, [*problems, _problem(("oauth",), neither)]

    def _unused(self, mechanism: str | None) -> list[Any]:
        """Settings that the chosen mechanism (None: no SASL) would silently ignore."""
        used_by = {"sasl_username": ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"),
                   "sasl_password": ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"),
                   "oauth": ("OAUTHBEARER",), "msk_iam": ("OAUTHBEARER",),
                   "kerberos": ("GSSAPI",)}  # fmt: skip
        problems = []
        for field, mechanisms in used_by.items():
            if getattr(self, field) is None or mechanism in mechanisms:
                continue
            if mechanism is None:
                why = f"only used with SASL (protocol is {self.protocol})"
            else:
                why = f"only used with sasl_mechanism {' or '.join(mechanisms)}, not {mechanism}"
            problems.append(_problem((field,), why))
        return problems

    def file_problems(self) -> list[tuple[str, str]]:
        """``(field, problem)`` for each TLS file that cannot be used: missing, unreadable, not
        PEM, an encrypted key without its password or with a wrong one, a key that is not the
        certificate's; and the token endpoint's CA file. Loaded as the connection will load
        them."""
        problems = self._token_endpoint_ca_problems()
        if not self.uses_tls:
            return problems
        files = {"ssl_cafile": self.ssl_cafile, "ssl_certfile": self.ssl_certfile,
                 "ssl_keyfile": self.ssl_keyfile}  # fmt: skip
        unreadable = [(field, problem) for field, name in files.items()
                      if name is not None and (problem := file_unreadable(Path(name)))]  # fmt: skip
        if unreadable:
            return problems + unreadable
        context = ssl.create_default_context(ssl.Purpose.SERVER_AUTH)
        if self.ssl_cafile is not None:
            try:
                context.load_verify_locations(cafile=self.ssl_cafile)
            except ssl.SSLError:
                problems.append(("ssl_cafile", f"{self.ssl_cafile}: expected PEM CA certificates"))
        if self.ssl_keyfile is not None and self.ssl_certfile is None:
            problems.append(("ssl_certfile", "required with ssl_keyfile (the client certificate)"))
        if self.ssl_certfile is not None:
            problems += _client_certificate_problems(
                context, self.ssl_certfile, self.ssl_keyfile, self.ssl_password
            )
        return problems

    def _token_endpoint_ca_problems(self) -> list[tuple[str, str]]:
        ca_file = self.oauth.ca_file if self.oauth is not None else None
        if ca_file is None:
            return []
        if problem := file_unreadable(Path(ca_file)):
            return [("oauth.ca_file", problem)]
        try:
            ssl.create_default_context(cafile=ca_file)
        except ssl.SSLError:
            return [("oauth.ca_file", f"{ca_file}: expected PEM CA certificates")]
        return []


class _KeyPasswordMissing(Exception):
    """Raised by the password callback: the key is encrypted and no ssl_password is set."""


def _client_certificate_problems(
    context: ssl.SSLContext, certfile: str, keyfile: str | None, password: Any
) -> list[tuple[str, str]]:
    key_field = "ssl_keyfile" if keyfile is not None else "ssl_certfile"
    key_name = keyfile or certfile

    def no_password() -> bytes:
        raise _KeyPasswordMissing

    try:
        context.load_cert_chain(
            certfile, keyfile, password=password.reveal() if password else no_password
        )
    except _KeyPasswordMissing:
        return [("ssl_password", f"required: {key_name} is an encrypted private key")]
    except ssl.SSLError as exc:
        reason = exc.reason or ""
        if password and _is_encrypted_key(key_name):
            # OpenSSL's reason for a wrong password varies (BAD_DECRYPT, PEM_LIB, ...).
            return [("ssl_password", f"does not decrypt {key_name} (the password is wrong)")]
        if reason == "KEY_VALUES_MISMATCH":
            return [(key_field, f"{key_name}: is not the private key of ssl_certfile")]
        if reason in ("NO_START_LINE", "PEM_LIB") and not _looks_like_pem_certificate(certfile):
            return [("ssl_certfile", f"{certfile}: expected a PEM certificate")]
        return [(key_field, f"{key_name}: expected a PEM private key ({reason or exc})")]
    return []


def _is_encrypted_key(path: str) -> bool:
    """PKCS#8 (``ENCRYPTED PRIVATE KEY``) or OpenSSL's traditional ``Proc-Type: 4,ENCRYPTED``."""
    try:
        text = Path(path).read_bytes()
    except OSError:
        return False
    return b"-----BEGIN ENCRYPTED PRIVATE KEY-----" in text or b"Proc-Type: 4,ENCRYPTED" in text


def _looks_like_pem_certificate(path: str) -> bool:
    try:
        return b"-----BEGIN CERTIFICATE-----" in Path(path).read_bytes()
    except OSError:
        return False


def file_unreadable(path: Path) -> str | None:
    """Why ``path`` cannot be read (None: it can), for a problem naming the file."""
    try:
        path.read_bytes()
    except FileNotFoundError:
        return f"no such file: {path}"
    except OSError as exc:
        return f"cannot read {path}: {exc.strerror}"
    return None


def _missing(package: str, extra: str, note: str = "") -> str:
    return (
        f"needs the Python package {package}, which is not installed: "
        f"pip install 'notifier[{extra}]'{note}"
    )
