"""The service config (``notifier run --config FILE``): clusters, rules, data dir, history, API
and notifications, validated with pydantic. ``${ENV_VAR}`` anywhere in a string is replaced by
the variable's value (``${VAR:-default}`` gives a default), so secrets stay out of the file.

Errors name the file, the field and what was expected, as for the rules file.
"""

from __future__ import annotations

import ipaddress
import os
import re
import socket
import ssl
from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import (
    Field,
    PlainSerializer,
    PlainValidator,
    ValidationError,
    field_validator,
    model_validator,
)

from notifier import resources
from notifier.config.base import (
    ConfigError,
    Duration,
    StrictModel,
    read_yaml,
    substitute_env,
    validation_problems,
    with_env_problems,
)
from notifier.config.kafka_security import SecurityConfig, file_unreadable
from notifier.config.notify import ChannelSettings, HttpUrl, _to_secret, validate_notify
from notifier.config.secrets import Secret


def _split_servers(value: Any) -> Any:
    if isinstance(value, str):
        return [s.strip() for s in value.split(",") if s.strip()]
    return value


def _check_servers(value: list[str]) -> list[str]:
    if not value:
        raise ValueError("needs at least one host:port")
    for server in value:
        if not re.fullmatch(r"[^\s:]+:\d+", server):
            raise ValueError(f"expected host:port, got {server!r}")
    return value


class ClusterConfig(StrictModel):
    name: Annotated[str, Field(min_length=1, pattern=r"^[A-Za-z0-9._-]+$")]
    bootstrap_servers: list[str]
    client_id: str = "notifier"
    security: SecurityConfig = Field(default_factory=SecurityConfig)
    request_timeout: Duration = 10.0
    scan_timeout: Duration = 60.0
    scan_interval: Duration = 10.0
    metadata_max_age: Duration = 300.0
    describe_batch_size: Annotated[int, Field(ge=1)] = 500
    offset_fetch_batch_size: Annotated[int, Field(ge=1)] = 500
    """Groups per OffsetFetch where the coordinator has v8 (KIP-709)."""
    offset_fetch_concurrency: Annotated[int, Field(ge=1)] = 16
    group_allow: list[str] = Field(default_factory=list)
    group_deny: list[str] = Field(default_factory=list)
    down_after_failures: Annotated[int, Field(ge=1)] = 3
    """Consecutive failed scans after which the cluster counts as down (its groups muted, one
    cluster alert raised)."""

    _split = field_validator("bootstrap_servers", mode="before")(_split_servers)
    _not_empty = field_validator("bootstrap_servers")(_check_servers)

    @field_validator("group_allow", "group_deny", mode="before")
    @classmethod
    def _regexes(cls, value: Any) -> Any:
        patterns = [value] if isinstance(value, str) else value
        for pattern in patterns or []:
            try:
                re.compile(pattern)
            except re.error as exc:
                raise ValueError(f"invalid regular expression {pattern!r}: {exc}") from None
        return patterns

    @field_validator("scan_interval", mode="before")
    @classmethod
    def _interval(cls, value: Any) -> Any:
        from notifier.config.base import parse_duration

        seconds = parse_duration(value)
        if seconds <= 0:
            raise ValueError("must be greater than 0")
        return seconds


class HistoryConfig(StrictModel):
    enabled: bool = True
    roll_interval: Duration = 300.0
    retention_days: Annotated[int, Field(ge=1)] = 14


def is_loopback(host: str) -> bool:
    """Whether only this machine can reach ``host``: 127.0.0.0/8, ::1 or ``localhost``. Any
    other name or address (0.0.0.0 and :: above all) may be reachable from elsewhere."""
    if host.lower().rstrip(".") == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def write_refusal(host: str, token_set: bool) -> str | None:
    """Why the API refuses every writing request when it listens on ``host``; None when it
    does not. Beyond loopback anyone who can reach the port could silence alerts, so writes
    need a token there."""
    if token_set or is_loopback(host):
        return None
    return (
        f"writing endpoints are disabled: the API listens on {host}, which is not loopback, "
        "and no api.token is configured (set api.token, then send "
        "'Authorization: Bearer <token>')"
    )


def _optional_token(value: Any) -> Secret | None:
    # `${NOTIFIER_API_TOKEN:-}` left empty means no token, not a token that is empty.
    if value is None or (isinstance(value, str) and not value.strip()):
        return None
    return _to_secret(value)


OptionalToken = Annotated[
    Secret | None,
    PlainValidator(_optional_token),
    PlainSerializer(lambda s: None if s is None else "***", return_type=str | None),
]


class _EncryptedKey(Exception):
    """Raised by the password callback: the key needs a password, and none is configured."""


def _no_password() -> bytes:
    raise _EncryptedKey


class TlsConfig(StrictModel):
    """HTTPS for the API: a PEM certificate (chain) and its unencrypted PEM private key, paths
    relative to the config file's directory."""

    cert_file: str
    key_file: str
    client_ca_file: str | None = None
    """When set, clients must present a certificate signed by one of these CAs (mutual TLS)."""

    def resolved(self, base: Path) -> TlsConfig:
        """The same files with relative paths taken from ``base`` (the config's directory)."""

        def absolute(name: str | None) -> str | None:
            return None if name is None else str(base / Path(name).expanduser())

        return self.model_copy(
            update={
                "cert_file": absolute(self.cert_file),
                "key_file": absolute(self.key_file),
                "client_ca_file": absolute(self.client_ca_file),
            }
        )

    def problems(self) -> list[tuple[str, str]]:
        """``(field, problem)`` for each file that cannot serve TLS: missing, unreadable, not
        PEM, or a key that is not the certificate's. Loaded as the server will load them."""
        files = {"cert_file": self.cert_file, "key_file": self.key_file,
                 "client_ca_file": self.client_ca_file}  # fmt: skip
        unreadable = [
            (f"api.tls.{field}", problem)
            for field, name in files.items()
            if name is not None and (problem := file_unreadable(Path(name)))
        ]
        if unreadable:
            return unreadable
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        try:
            context.load_verify_locations(cafile=self.cert_file)
        except ssl.SSLError:
            return [("api.tls.cert_file", f"{self.cert_file}: expected a PEM certificate")]
        problems = []
        try:
            context.load_cert_chain(self.cert_file, self.key_file, password=_no_password)
        except _EncryptedKey:
            problem = "the key is encrypted; expected an unencrypted PEM private key"
            problems.append(("api.tls.key_file", f"{self.key_file}: {problem}"))
        except ssl.SSLError as exc:
            problem = (
                "is not the private key of api.tls.cert_file"
                if exc.reason == "KEY_VALUES_MISMATCH"
                else "expected a PEM private key"
            )
            problems.append(("api.tls.key_file", f"{self.key_file}: {problem}"))
        if self.client_ca_file is not None:
            try:
                context.load_verify_locations(cafile=self.client_ca_file)
            except ssl.SSLError:
                problem = f"{self.client_ca_file}: expected PEM CA certificates"
                problems.append(("api.tls.client_ca_file", problem))
        return problems


class ApiConfig(StrictModel):
    enabled: bool = True
    host: str = "127.0.0.1"
    """Loopback by default; anything else makes writing endpoints need ``token``."""
    port: Annotated[int, Field(ge=0, le=65535)] = 8000
    token: OptionalToken = None
    """Bearer token required by writing endpoints (silences): a string (``${ENV_VAR}``) or
    ``{file: path}``. Unset or empty: writes are open on loopback and refused elsewhere."""
    tls: TlsConfig | None = None
    """Serve HTTPS with this certificate and key."""
    public_url: HttpUrl | None = None
    """How people reach the status page (used in notification links)."""

    @property
    def writes_refused(self) -> str | None:
        """Why every writing request will be refused (see :func:`write_refusal`); None: not."""
        return write_refusal(self.host, self.token is not None)


class LoggingConfig(StrictModel):
    level: Literal["DEBUG", "INFO", "WARNING", "ERROR"] = "INFO"
    format: Literal["json", "keyvalue"] = "json"


ExporterFamily = Literal["burrow", "kafka_exporter", "kafka_lag_exporter"]
EXPORTER_FAMILIES: tuple[ExporterFamily, ...] = ("burrow", "kafka_exporter", "kafka_lag_exporter")
"""The exporters whose metric families ``/metrics`` can offer under their own names and labels."""


class MetricsConfig(StrictModel):
    """What ``/metrics`` offers beside notifier's own ``notifier_*`` families: the families of
    Burrow (``burrow_kafka_consumer_lag_total``, ...), danielqsj/kafka_exporter
    (``kafka_consumergroup_lag``, ...) and Kafka Lag Exporter (``kafka_consumergroup_group_lag``,
    ...), named and labelled as those exporters do, so dashboards and alerts built on them work
    unchanged. All three by default; ``[]`` for none."""

    families: list[ExporterFamily] = Field(default_factory=lambda: list(EXPORTER_FAMILIES))

    @field_validator("families", mode="before")
    @classmethod
    def _one_or_many(cls, value: Any) -> Any:
        return [value] if isinstance(value, str) else value


class CoordinationKafka(StrictModel):
    """A Kafka cluster used only to coordinate the fleet (``coordination.kafka``)."""

    bootstrap_servers: list[str]
    client_id: str = "notifier-fleet"
    security: SecurityConfig = Field(default_factory=SecurityConfig)
    request_timeout: Duration = 10.0

    _split = field_validator("bootstrap_servers", mode="before")(_split_servers)
    _not_empty = field_validator("bootstrap_servers")(_check_servers)


def default_instance(environ: dict[str, str] | None = None) -> str:
    """The instance name when ``coordination.instance`` is unset: ``$HOSTNAME`` (a Kubernetes
    pod's name), else ``<hostname>-<pid>`` so two processes on one machine never share one."""
    env = os.environ if environ is None else environ
    return env.get("HOSTNAME") or f"{socket.gethostname()}-{os.getpid()}"


_FLEET_NAME = r"^[A-Za-z0-9._-]+$"


class CoordinationConfig(StrictModel):
    """Run as one instance of a fleet (README, "Running several instances"): the instances with
    the same ``name`` join the consumer group ``notifier-fleet.<name>`` on the coordination
    cluster; the partitions of ``state_topic`` they are assigned are the shards they own, and
    each watched (cluster, group) belongs to one shard by a stable hash. Exactly one of
    ``cluster`` (a watched cluster's name) and ``kafka`` (a cluster used only for this)."""

    name: Annotated[str, Field(min_length=1, pattern=_FLEET_NAME)]
    """The fleet: instances with the same name share the work."""
    cluster: str | None = None
    """The watched cluster (``clusters[].name``) to coordinate through ..."""
    kafka: CoordinationKafka | None = None
    """... or another cluster, with its own connection settings."""
    state_topic: Annotated[str | None, Field(pattern=_FLEET_NAME, max_length=249)] = None
    """The compacted topic whose partitions are the shards and carry their state; default
    ``notifier-fleet.<name>.state`` (created if missing)."""
    partitions: Annotated[int, Field(ge=1)] = 32
    """The number of shards: the most instances that can share the work. Changing it moves
    almost every group to another shard; keep it for the fleet's life."""
    session_timeout: Duration = 10.0
    """How long a silent instance keeps its shards before the others take them over."""
    heartbeat_interval: Duration = 3.0
    instance: Annotated[str | None, Field(min_length=1)] = None
    """This instance's name (the ``instance`` label); default ``$HOSTNAME``, else
    ``<hostname>-<pid>``."""

    @model_validator(mode="after")
    def _one_cluster(self) -> CoordinationConfig:
        if (self.cluster is None) == (self.kafka is None):
            raise ValueError(
                "expected exactly one of cluster (a watched cluster's name) and kafka "
                "(bootstrap_servers of a cluster used only for coordination)"
            )
        if self.session_timeout <= 0:
            raise ValueError("session_timeout must be greater than 0")
        if not 0 < self.heartbeat_interval < self.session_timeout:
            raise ValueError(
                f"heartbeat_interval ({self.heartbeat_interval:g}s) must be greater than 0 and "
                f"less than session_timeout ({self.session_timeout:g}s)"
            )
        return self

    @property
    def topic(self) -> str:
        """The state topic: its partitions are the shards."""
        return self.state_topic or f"notifier-fleet.{self.name}.state"

    @property
    def view_topic(self) -> str:
        """The fleet-wide view topic (one partition, compact)."""
        return f"{self.topic}.view"

    @property
    def group_id(self) -> str:
        """The consumer group the instances join."""
        return f"notifier-fleet.{self.name}"

    def instance_name(self, environ: dict[str, str] | None = None) -> str:
        return self.instance or default_instance(environ)


class ServiceConfig(StrictModel):
    clusters: list[ClusterConfig]
    rules: str | None = None
    """The rules file, relative to this file's directory. Unset: ``rules.yaml`` beside this file
    when there is one, else the default rules shipped with notifier."""
    data_dir: str = "data"
    checkpoint_interval: Duration = 60.0
    history: HistoryConfig = Field(default_factory=HistoryConfig)
    api: ApiConfig = Field(default_factory=ApiConfig)
    logging: LoggingConfig = Field(default_factory=LoggingConfig)
    metrics: MetricsConfig = Field(default_factory=MetricsConfig)
    notify: dict[str, Any] | None = None
    """Receivers, routes and silences (see the README's notification section)."""
    coordination: CoordinationConfig | None = None
    """Share the watched clusters with other instances (see :class:`CoordinationConfig`).
    Unset: this process watches every group alone, with its SQLite checkpoint."""

    @field_validator("clusters")
    @classmethod
    def _unique(cls, clusters: list[ClusterConfig]) -> list[ClusterConfig]:
        if not clusters:
            raise ValueError("needs at least one cluster")
        names = [c.name for c in clusters]
        duplicates = sorted({n for n in names if names.count(n) > 1})
        if duplicates:
            raise ValueError(f"cluster names must be unique: {', '.join(duplicates)} repeated")
        return clusters

    def coordination_kafka(self) -> CoordinationKafka | None:
        """Where the fleet coordinates: ``coordination.kafka``, or the settings of the watched
        cluster ``coordination.cluster`` names; None without coordination."""
        fleet = self.coordination
        if fleet is None:
            return None
        if fleet.kafka is not None:
            return fleet.kafka
        cluster = next(c for c in self.clusters if c.name == fleet.cluster)
        return CoordinationKafka(
            bootstrap_servers=cluster.bootstrap_servers,
            client_id=cluster.client_id,
            security=cluster.security,
            request_timeout=cluster.request_timeout,
        )

    def rules_path(self, base: Path) -> Path:
        if self.rules is None:
            return resources.rules_or_default(None, cwd=base)
        path = Path(self.rules)
        return path if path.is_absolute() else base / path

    def data_path(self, base: Path) -> Path:
        path = Path(self.data_dir)
        return path if path.is_absolute() else base / path


def coordination_cluster_problem(config: ServiceConfig) -> tuple[str, str] | None:
    """``coordination.cluster`` naming no configured cluster, as ``(field, problem)``."""
    fleet = config.coordination
    names = [c.name for c in config.clusters]
    if fleet is None or fleet.cluster is None or fleet.cluster in names:
        return None
    return (
        "coordination.cluster",
        f"{fleet.cluster!r} is not a configured cluster; expected one of {', '.join(names)} "
        "(or coordination.kafka for a cluster used only for coordination)",
    )


def parse_service_config(
    data: Any,
    source: str,
    environ: dict[str, str] | None = None,
    channel_kinds: Mapping[str, type[ChannelSettings]] | None = None,
) -> ServiceConfig:
    """Validate a parsed service config, reporting every problem of the file at once:
    ``notifier check --config`` and ``notifier run`` accept and reject the same files.

    Given the channel kinds a receiver may name (the notify stage's
    :func:`notifier.notify.config.load_service_config` passes the registered ones), the
    ``notify:`` section is validated with the rest and its problems are among the file's;
    without them the section is kept as read, for the notify stage to validate."""
    if not isinstance(data, dict):
        raise ConfigError(source, [("", "expected a mapping with clusters, rules, data_dir, ...")])
    # The notify section is substituted when it is parsed (once: a second pass would undo
    # its $${ escapes).
    rest, unset = substitute_env({k: v for k, v in data.items() if k != "notify"}, environ)
    data = {**rest, "notify": data["notify"]} if "notify" in data else rest
    config = None
    problems = unset
    try:
        config = ServiceConfig.model_validate(data)
    except ValidationError as exc:
        problems = with_env_problems(unset, validation_problems(exc, data))
    if config is not None and (where := coordination_cluster_problem(config)):
        problems = [*problems, where]
    if channel_kinds is not None and isinstance(data.get("notify"), dict):
        try:
            validate_notify(data["notify"], source, channel_kinds, env=environ)
        except ConfigError as exc:
            problems = problems + [
                (f"notify.{where}" if where else "notify", message)
                for where, message in exc.problems
            ]
    if problems or config is None:
        raise ConfigError(source, problems)
    return config


def load_service_config(
    path: str | Path,
    environ: dict[str, str] | None = None,
    channel_kinds: Mapping[str, type[ChannelSettings]] | None = None,
) -> ServiceConfig:
    """The service config of ``path``, with the API's TLS files (relative to the file's
    directory) and the clusters' TLS files found and loaded as they will be used; the
    ``notify:`` section checked too when given ``channel_kinds`` (see
    :func:`parse_service_config`)."""
    path = Path(path)
    config = parse_service_config(read_yaml(path), str(path), environ, channel_kinds)
    tls_problems = [
        (f"clusters.{cluster.name}.security.{field}", problem)
        for cluster in config.clusters
        for field, problem in cluster.security.file_problems()
    ]
    if config.coordination is not None and config.coordination.kafka is not None:
        tls_problems += [
            (f"coordination.kafka.security.{field}", problem)
            for field, problem in config.coordination.kafka.security.file_problems()
        ]
    if tls_problems:
        raise ConfigError(str(path), tls_problems)
    if config.api.enabled and config.api.tls is not None:
        tls = config.api.tls.resolved(path.parent)
        problems = tls.problems()
        if problems:
            raise ConfigError(str(path), problems)
        config.api = config.api.model_copy(update={"tls": tls})
    return config
