"""The notify section of the service config: receivers and their channels, routes, silences
and delivery settings (Alertmanager's vocabulary: matchers, group_by, group_wait,
group_interval, repeat_interval); the matchers themselves are :mod:`notifier.config.matchers`."""

from __future__ import annotations

import functools
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated, Any, ClassVar

import httpx
from pydantic import (
    AfterValidator,
    BeforeValidator,
    Field,
    PlainSerializer,
    PlainValidator,
    ValidationError,
    ValidationInfo,
    create_model,
    model_validator,
)

from notifier.config.base import (
    SECRET_NOT_SHOWN,
    ConfigError,
    Duration,
    FrozenModel,
    substitute_env,
    validation_problems,
    with_env_problems,
)
from notifier.config.matchers import LABELS, Matcher, Matchers, check_label
from notifier.config.secrets import Secret
from notifier.types import Severity

GROUP_BY_LABELS = ("cluster", "group", "status")


@dataclass(slots=True, frozen=True)
class Rate:
    """``count`` requests per ``per`` seconds; the bucket holds ``count`` tokens (the burst)."""

    count: float
    per: float

    @property
    def per_second(self) -> float:
        return self.count / self.per

    def __str__(self) -> str:
        return f"{self.count:g}/{self.per:g}s"


_RATE_RE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*/\s*(\d+(?:\.\d+)?)?\s*(ms|s|m|h)?\s*$")
_RATE_UNITS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}


def parse_rate(value: Any) -> Rate | None:
    """``"1/s"``, ``"120/m"``, ``"10/5s"`` → a :class:`Rate`; ``"off"``/``None`` → unlimited."""
    if value is None or (isinstance(value, str) and value.strip().lower() in ("off", "none")):
        return None
    if isinstance(value, Rate):
        return value
    if not isinstance(value, str):
        raise ValueError("expected a rate such as 1/s, 120/m or off")
    match = _RATE_RE.match(value)
    if not match:
        raise ValueError(f"expected a rate such as 1/s, 120/m or off, got {value!r}")
    count = float(match.group(1))
    per = float(match.group(2) or 1) * _RATE_UNITS[match.group(3) or "s"]
    if count <= 0 or per <= 0:
        raise ValueError("a rate must be positive (or off)")
    return Rate(count, per)


# --------------------------------------------------------------------------------------------
# ${ENV} substitution and secrets


def _to_secret(value: Any) -> Secret:
    if isinstance(value, Secret):
        return value
    if isinstance(value, Mapping):
        if set(value) != {"file"}:
            raise ValueError("expected a string, ${ENV_VAR} or {file: path}")
        path = Path(str(value["file"])).expanduser()
        try:
            text = path.read_text(encoding="utf-8").strip()
        except OSError as exc:
            raise ValueError(f"cannot read secret file {path}: {exc.strerror}") from None
        if not text:
            raise ValueError(f"secret file {path} is empty")
        return Secret(text)
    if isinstance(value, str):
        if not value:
            raise ValueError("must not be empty")
        return Secret(value)
    raise ValueError("expected a string, ${ENV_VAR} or {file: path}")


SecretValue = Annotated[
    Secret, PlainValidator(_to_secret), PlainSerializer(lambda s: "***", return_type=str)
]
"""A credential: a string (``${ENV_VAR}`` substituted) or ``{file: path}``; masked in repr,
dumps and logs."""

_NOT_A_URL = "expected an http:// or https:// URL with a host"


_UNSET_PLACEHOLDER = re.compile(r"\$\{[A-Za-z_][A-Za-z0-9_]*(:-[^}]*)?\}")


def _is_http_url(value: str) -> bool:
    if _UNSET_PLACEHOLDER.search(value):
        # A variable left unset: an error of its own when the config is read strictly, and
        # fine for a backtest's routes, which send nothing.
        return True
    try:
        url = httpx.URL(value)
    except (httpx.InvalidURL, TypeError):
        return False
    return url.scheme in ("http", "https") and bool(url.host)


def _http_url(value: str) -> str:
    if not _is_http_url(value):
        raise ValueError(_NOT_A_URL)
    return value


def _to_secret_url(value: Any) -> Secret:
    secret = _to_secret(value)
    if not _is_http_url(secret.reveal()):
        # The value is not echoed: a webhook URL is its own credential.
        raise ValueError(f"{_NOT_A_URL} {SECRET_NOT_SHOWN}")
    return secret


HttpUrl = Annotated[str, AfterValidator(_http_url)]
"""An http(s) URL with a host, checked when the config is read (``check`` and ``run`` alike)."""

SecretUrl = Annotated[
    Secret, PlainValidator(_to_secret_url), PlainSerializer(lambda s: "***", return_type=str)
]
"""A URL that is a credential (a Slack webhook's, a webhook's with a token in it)."""


# --------------------------------------------------------------------------------------------
# Config: receivers


RateValue = Annotated[
    Rate | None,
    PlainValidator(parse_rate),
    PlainSerializer(lambda r: "off" if r is None else str(r), return_type=str),
]


class ChannelSettings(FrozenModel):
    """What every channel's settings have: a request timeout and how hard to drive it
    (``rate``: e.g. ``1/s``, ``120/m`` or ``off``; ``concurrency``: lanes in flight at once).

    Each channel kind extends it in its own folder (``notifier/notify/channels/<name>/``) and
    registers it there; a receiver's entry ``{kind: settings}`` is validated against the
    model its kind registered (the notify stage hands config the kinds: :data:`CHANNEL_KINDS`)."""

    timeout: Duration = 10.0
    rate: RateValue = None
    concurrency: Annotated[int, Field(ge=1, le=256)] | None = None

    burrow_class: ClassVar[str] = "http"
    """The Burrow notifier class closest to this channel, as ``GET /v3/config/notifier``
    shows it (Burrow has ``http``, ``slack`` and ``email``)."""

    def burrow_fields(self) -> dict[str, Any]:
        """This channel's own fields in its Burrow notifier module (``/v3/config/notifier``),
        beyond the ones every module has. Never a password, token, routing key or header
        value; a URL whose path is a credential cut to scheme, host and port."""
        return {}


CHANNEL_KINDS = "channel_kinds"
"""The key of the validation context that holds the channel kinds a receiver may name, each
with its settings model (``{name: ChannelSettings subclass}``, in registration order). The
kinds are registered by the notify stage (``notifier/notify/channels/registry.py``), which
imports config: config is handed them by that stage's loaders
(:mod:`notifier.notify.config`), never looks them up."""


@functools.cache
def _entry_model(kind: str, settings: type[ChannelSettings]) -> type[FrozenModel]:
    """``{kind: settings}`` as a model, so that a problem's location names the kind
    (``receivers.oncall[0].pagerduty.routing_key``)."""
    fields: dict[str, Any] = {kind: (settings, ...)}
    return create_model(f"ChannelEntry[{kind}]", __base__=FrozenModel, **fields)


@dataclass(frozen=True, slots=True)
class ChannelEntry:
    """One channel of a receiver: its kind (``slack_webhook``) and its validated settings.

    ``entry.<kind>`` reads as in the config file: the settings when the entry is of that
    kind, None when it is of another kind the config was validated with."""

    kind: str
    config: ChannelSettings
    kinds: tuple[str, ...] = field(default=(), compare=False, repr=False)
    """The kinds the entry was validated against (what ``entry.<kind>`` may name)."""

    def __getattr__(self, name: str) -> ChannelSettings | None:
        if not name.startswith("_") and name in self.kinds:
            return self.config if name == self.kind else None
        raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")


def _channel_entry(data: Any, info: ValidationInfo) -> ChannelEntry:
    if isinstance(data, ChannelEntry):
        return data
    context = info.context if isinstance(info.context, Mapping) else {}
    kinds: Mapping[str, type[ChannelSettings]] | None = context.get(CHANNEL_KINDS)
    if kinds is None:
        raise TypeError(
            "a receiver's entries are validated against the registered channel kinds: read "
            "the notify section with notifier.notify.config (parse_notify, load_notify)"
        )
    if not isinstance(data, Mapping):
        raise ValueError(
            "expected a mapping of one channel kind to its settings; kinds: " + ", ".join(kinds)
        )
    unknown = [k for k in data if k not in kinds]
    if unknown:
        raise ValueError(
            f"unknown channel kind {unknown[0]!r}; expected one of: " + ", ".join(kinds)
        )
    if len(data) != 1:
        raise ValueError("each channel entry names exactly one kind; list several entries instead")
    [(kind, value)] = data.items()
    entry = _entry_model(kind, kinds[kind]).model_validate({kind: value}, context=info.context)
    return ChannelEntry(kind, getattr(entry, kind), tuple(kinds))


def _channel_list(value: Any) -> Any:
    """A receiver is a list of ``{kind: settings}`` entries, or one mapping of kind → settings."""
    if isinstance(value, Mapping):
        return [{kind: config} for kind, config in value.items()]
    return value


ChannelEntryValue = Annotated[
    ChannelEntry,
    PlainValidator(_channel_entry),
    PlainSerializer(lambda entry: {entry.kind: entry.config}, return_type=dict[str, Any]),
]

Receiver = Annotated[list[ChannelEntryValue], BeforeValidator(_channel_list), Field(min_length=1)]


# --------------------------------------------------------------------------------------------
# Config: routes and silences


def _repeat_interval(value: Any) -> Any:
    if isinstance(value, str) and value.strip().lower() == "never":
        return math.inf
    return value


RepeatInterval = Annotated[Duration, BeforeValidator(_repeat_interval)]


def _group_by(value: Any) -> Any:
    if value is None:
        return None
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list):
        raise ValueError("expected a list of labels, or [...] for one group per incident")
    labels = ["..." if v is Ellipsis else v for v in value]
    if "..." in labels:
        if len(labels) != 1:
            raise ValueError("'...' (one group per incident) cannot be combined with labels")
        return ("...",)
    for label in labels:
        if label not in GROUP_BY_LABELS:
            raise ValueError(
                f"cannot group by {label!r}; expected labels from: {', '.join(GROUP_BY_LABELS)}"
                " or '...'"
            )
    return tuple(dict.fromkeys(labels))


GroupBy = Annotated[tuple[str, ...], BeforeValidator(_group_by)]


def _severity(value: Any) -> Any:
    return value.lower() if isinstance(value, str) else value


class RouteConfig(FrozenModel):
    """One node of the routing tree; unset parameters are inherited from the parent.

    A notification for an incident walks the tree from the root: the first child whose
    matchers match takes it (and its subtree), unless that child says ``continue: true``, in
    which case later siblings are tried too. A node none of whose children match handles the
    incident itself.
    """

    name: str | None = None
    receiver: str | None = None
    matchers: Matchers = ()
    continue_: bool = Field(default=False, alias="continue")
    threshold: Annotated[Severity, BeforeValidator(_severity)] | None = None
    send_resolved: bool | None = None
    repeat_interval: RepeatInterval | None = None
    group_by: GroupBy | None = None
    group_wait: Duration | None = None
    group_interval: Duration | None = None
    routes: list[RouteConfig] = Field(default_factory=list)


class SilenceConfig(FrozenModel):
    """A static silence: alerts matching all matchers are held back from ``starts_at`` (default:
    always) until ``ends_at``."""

    matchers: Annotated[Matchers, Field(min_length=1)]
    starts_at: datetime | None = None
    ends_at: datetime
    author: Annotated[str, Field(min_length=1)]
    comment: Annotated[str, Field(min_length=1)]

    @model_validator(mode="after")
    def _order(self) -> SilenceConfig:
        if self.starts_at is not None and _epoch_ms(self.ends_at) <= _epoch_ms(self.starts_at):
            raise ValueError("ends_at must be after starts_at")
        return self

    @property
    def starts_at_ms(self) -> int:
        """Epoch ms (0: always); a time without a zone is UTC."""
        return 0 if self.starts_at is None else _epoch_ms(self.starts_at)

    @property
    def ends_at_ms(self) -> int:
        return _epoch_ms(self.ends_at)


def _epoch_ms(value: datetime) -> int:
    if value.tzinfo is None:
        value = value.replace(tzinfo=UTC)
    return round(value.timestamp() * 1000)


def _label_names(value: Any) -> Any:
    if value is None:
        return ()
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list | tuple):
        raise ValueError("expected a list of label names, e.g. [cluster, group]")
    for label in value:
        check_label(str(label))
    return tuple(dict.fromkeys(str(label) for label in value))


LabelNames = Annotated[tuple[str, ...], BeforeValidator(_label_names)]


class InhibitRuleConfig(FrozenModel):
    """Alertmanager's inhibit rule: while an alert matching ``source_matchers`` fires, alerts
    matching ``target_matchers`` with the same values of the ``equal`` labels are muted. An
    alert here is one finding of an incident (its labels: cluster, group, topic, rule,
    severity and its rule's own); an alert never mutes itself, and one matching both sides
    is not muted by another that matches both sides too."""

    name: str | None = None
    source_matchers: Annotated[Matchers, Field(min_length=1)]
    target_matchers: Matchers = ()
    equal: LabelNames = ()

    @property
    def label(self) -> str:
        """How logs and counters name the rule."""
        if self.name:
            return self.name
        source = ",".join(str(m) for m in self.source_matchers)
        target = ",".join(str(m) for m in self.target_matchers)
        return f"{{{source}}} mutes {{{target}}} on [{','.join(self.equal)}]"


CLUSTER_DOWN_INHIBIT_RULE = InhibitRuleConfig.model_validate(
    {
        "name": "cluster-down",
        "source_matchers": ['rule="cluster_down"'],
        "target_matchers": ['rule!="cluster_down"'],
        "equal": ["cluster"],
    }
)
"""A cluster that cannot be scanned mutes every alert of its groups (it raises one of its own)."""

ERR_MUTES_WARN_INHIBIT_RULE = InhibitRuleConfig.model_validate(
    {
        "name": "err-mutes-warn",
        "source_matchers": ['severity="err"'],
        "target_matchers": ['severity="warn"'],
        "equal": ["cluster", "group"],
    }
)
"""A group's ERR finding mutes its WARN findings (a stalled consumer is also falling behind)."""


class DeliveryConfig(FrozenModel):
    """Retries: exponential backoff with full jitter from ``retry_initial`` up to ``retry_max``,
    honouring Retry-After; a notification still failing after ``give_up_after`` is marked
    failed and reported. ``outbox_retention``: how long finished rows and closed incidents
    are kept."""

    retry_initial: Duration = 1.0
    retry_max: Duration = 300.0
    give_up_after: Duration = 86400.0
    stop_timeout: Duration = 5.0
    outbox_retention: Duration = 7 * 86400.0


class SilenceLimits(FrozenModel):
    """What the API accepts in silences, as Alertmanager's ``--silences.max-silences`` and
    ``--silences.max-silence-size-bytes`` (plus how far ahead a silence may end): every silence
    is checked against every incident and kept in the outbox, so a script gone wrong must not
    be able to store thousands, megabytes each, or one that outlives everybody's memory of
    it. A request beyond a limit is refused with the limit's name. Silences from the config
    file are the operator's own: neither counted nor checked."""

    max_silences: Annotated[int, Field(ge=1)] = 1000
    """Active and pending API silences at once (expired ones are not counted: they are kept,
    listed as expired, until ``delivery.outbox_retention``)."""
    max_silence_size_bytes: Annotated[int, Field(ge=1024)] = 8192
    """One silence as stored (its JSON: matchers, author, comment)."""
    max_silence_ends_in: Annotated[Duration, Field(gt=0)] = 366 * 86400.0
    """How far after now a silence may end. A group nobody should hear of for longer belongs
    in the cluster's ``group_deny``."""


class NotifyConfig(FrozenModel):
    """The ``notify:`` section: receivers, the route tree, silences and delivery settings."""

    receivers: dict[str, Receiver] = Field(default_factory=dict)
    route: RouteConfig
    silences: list[SilenceConfig] = Field(default_factory=list)
    templates: Path | None = None
    status_page_url: HttpUrl | None = None
    inhibit_rules: list[InhibitRuleConfig] | None = None
    """Alertmanager's inhibit rules; unset: :attr:`effective_inhibit_rules`' defaults."""
    inhibit_cluster_down: bool = True
    """Without ``inhibit_rules``: whether the built-in cluster-down rule is among the
    defaults (``false`` keeps a down cluster's groups alerting)."""
    extras: dict[str, Any] = Field(default_factory=dict)
    """Passed to every template as ``extras`` (Burrow's notifier extras)."""
    delivery: DeliveryConfig = Field(default_factory=DeliveryConfig)
    silence_limits: SilenceLimits = Field(default_factory=SilenceLimits)
    cluster_down_wait: Duration = 0.0
    """How long a cluster-down alert waits before it is sent. It has an aggregation group of
    its own (``{cluster="prod",alert="cluster-down"}``), so it never waits behind the
    ``group_interval`` of the cluster's group alerts, nor their ``group_wait``: the outage is
    confirmed already (``down_after_failures`` failed scans in a row), and the alert mutes
    every group of the cluster, so until it is sent nobody hears of anything there. Default 0:
    at once."""

    @model_validator(mode="after")
    def _check_routes(self) -> NotifyConfig:
        root = self.route
        if root.receiver is None:
            raise ValueError("route.receiver: the root route needs a receiver")
        if root.matchers:
            raise ValueError("route.matchers: the root route matches everything; move them")
        if root.continue_:
            raise ValueError("route.continue: not allowed on the root route")

        names: set[str] = set()

        def walk(node: RouteConfig, where: str) -> None:
            if node.receiver is not None and node.receiver not in self.receivers:
                known = ", ".join(sorted(self.receivers)) or "none defined"
                raise ValueError(
                    f"{where}.receiver: unknown receiver {node.receiver!r} (receivers: {known})"
                )
            if node.name is not None:
                if node.name in names:
                    raise ValueError(
                        f"{where}.name: route name {node.name!r} is used twice; names identify"
                        " routes in the notification log and must be unique"
                    )
                names.add(node.name)
            for index, child in enumerate(node.routes):
                walk(child, f"{where}.routes[{index}]")

        walk(root, "route")
        if self.inhibit_rules is not None and "inhibit_cluster_down" in self.model_fields_set:
            raise ValueError(
                "inhibit_cluster_down: give either inhibit_rules (list the cluster-down rule "
                "there, or leave it out) or inhibit_cluster_down, not both"
            )
        return self

    @property
    def effective_inhibit_rules(self) -> list[InhibitRuleConfig]:
        """The configured inhibit rules; without any, the built-in ones: a down cluster mutes
        its groups (unless ``inhibit_cluster_down: false``) and a group's ERR mutes its WARN."""
        if self.inhibit_rules is not None:
            return list(self.inhibit_rules)
        defaults = [CLUSTER_DOWN_INHIBIT_RULE] if self.inhibit_cluster_down else []
        return [*defaults, ERR_MUTES_WARN_INHIBIT_RULE]

    def matcher_labels(self) -> list[tuple[str, str]]:
        """``(where, label)`` for every label the routes, config silences and inhibit rules
        name beyond the built-in ones (to be checked against the labels rules set)."""
        found: list[tuple[str, str]] = []

        def collect(matchers: tuple[Matcher, ...], where: str) -> None:
            for index, matcher in enumerate(matchers):
                if matcher.label not in LABELS:
                    found.append((f"{where}[{index}]", matcher.label))

        def walk(node: RouteConfig, where: str) -> None:
            collect(node.matchers, f"{where}.matchers")
            for index, child in enumerate(node.routes):
                walk(child, f"{where}.routes[{index}]")

        walk(self.route, "route")
        for index, silence in enumerate(self.silences):
            collect(silence.matchers, f"silences[{index}].matchers")
        for index, rule in enumerate(self.inhibit_rules or []):
            collect(rule.source_matchers, f"inhibit_rules[{index}].source_matchers")
            collect(rule.target_matchers, f"inhibit_rules[{index}].target_matchers")
            for label in rule.equal:
                if label not in LABELS:
                    found.append((f"inhibit_rules[{index}].equal", label))
        return found


def validate_notify(
    data: Any,
    source: str,
    channel_kinds: Mapping[str, type[ChannelSettings]],
    *,
    env: Mapping[str, str] | None = None,
    strict_env: bool = True,
) -> NotifyConfig:
    """Validate a parsed mapping, a receiver's entries against ``channel_kinds`` (each kind
    with its settings model; the notify stage's :func:`notifier.notify.config.parse_notify`
    passes the registered ones); :class:`ConfigError` names ``source`` and each field.

    ``${NAME}`` is substituted from ``env`` (default: the process environment) everywhere;
    an unset variable is an error unless ``strict_env`` is false.
    """
    if not isinstance(data, Mapping):
        raise ConfigError(source, [("", "expected a mapping with receivers and route")])
    data, unset = substitute_env(dict(data), env, strict=strict_env)
    try:
        config = NotifyConfig.model_validate(data, context={CHANNEL_KINDS: channel_kinds})
    except ValidationError as exc:
        found = validation_problems(exc, data)
        # Errors raised by the cross-field check carry their own path at the front.
        fixed = []
        for where, message in found:
            head, sep, rest = message.partition(": ")
            if where == "" and sep and head.startswith(("route", "inhibit_cluster_down")):
                fixed.append((head, rest))
            else:
                fixed.append((where, message))
        raise ConfigError(source, with_env_problems(unset, fixed)) from None
    if unset:
        raise ConfigError(source, unset)
    return config
