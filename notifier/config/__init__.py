"""Configuration: the service config, its notify section, what every rule shares, and the pieces
they all use. (The rules file, which lists rules of the registered kinds, is
:mod:`notifier.rules.rulesfile`: it lives with the kinds. The notify section is read through
:mod:`notifier.notify.config`, which hands :func:`validate_notify` the registered channel kinds.)

Every model is a :class:`StrictModel` (unknown fields are errors); every loader raises
:class:`ConfigError`, which names the file, the field and what was expected. ``${ENV}`` in the
service config is substituted by :func:`substitute_env`, and secrets are :class:`Secret`.

Imports only :mod:`notifier.types` and :mod:`notifier.resources` (where the shipped default rules
are): every stage may import config, config imports no stage.
"""

from notifier.config.annotations import unknown_labels
from notifier.config.base import (
    ConfigError,
    Duration,
    Fraction,
    NonNegativeInt,
    Patterns,
    StrictModel,
    duration_fields,
    format_duration,
    parse_duration,
    read_yaml,
    substitute_env,
    validation_problems,
)
from notifier.config.kafka_security import (
    KerberosConfig,
    MskIamConfig,
    OAuthConfig,
    SecurityConfig,
)
from notifier.config.matchers import MAX_SILENCE_MATCHERS, Matcher, parse_matchers
from notifier.config.notify import (
    CHANNEL_KINDS,
    ChannelEntry,
    ChannelSettings,
    DeliveryConfig,
    HttpUrl,
    InhibitRuleConfig,
    NotifyConfig,
    Rate,
    RateValue,
    RouteConfig,
    SecretUrl,
    SecretValue,
    SilenceConfig,
    SilenceLimits,
    parse_rate,
    validate_notify,
)
from notifier.config.rules import (
    Hysteresis,
    KindRule,
    RuleBase,
    Selector,
    WindowSettings,
)
from notifier.config.secrets import Scrubber, Secret, optional_secret, redact_url, secret_fragments
from notifier.config.service import (
    EXPORTER_FAMILIES,
    ApiConfig,
    ClusterConfig,
    CoordinationConfig,
    CoordinationKafka,
    HistoryConfig,
    LoggingConfig,
    MetricsConfig,
    ServiceConfig,
    TlsConfig,
    is_loopback,
    load_service_config,
    parse_service_config,
    write_refusal,
)

__all__ = [
    "CHANNEL_KINDS",
    "EXPORTER_FAMILIES",
    "MAX_SILENCE_MATCHERS",
    "ApiConfig",
    "ChannelEntry",
    "ChannelSettings",
    "ClusterConfig",
    "ConfigError",
    "CoordinationConfig",
    "CoordinationKafka",
    "DeliveryConfig",
    "Duration",
    "Fraction",
    "HistoryConfig",
    "HttpUrl",
    "Hysteresis",
    "InhibitRuleConfig",
    "KerberosConfig",
    "KindRule",
    "LoggingConfig",
    "Matcher",
    "MetricsConfig",
    "MskIamConfig",
    "NonNegativeInt",
    "NotifyConfig",
    "OAuthConfig",
    "Patterns",
    "Rate",
    "RateValue",
    "RouteConfig",
    "RuleBase",
    "Scrubber",
    "Secret",
    "SecretUrl",
    "SecretValue",
    "SecurityConfig",
    "Selector",
    "ServiceConfig",
    "SilenceConfig",
    "SilenceLimits",
    "StrictModel",
    "TlsConfig",
    "WindowSettings",
    "duration_fields",
    "format_duration",
    "is_loopback",
    "load_service_config",
    "optional_secret",
    "parse_duration",
    "parse_matchers",
    "parse_rate",
    "parse_service_config",
    "read_yaml",
    "redact_url",
    "secret_fragments",
    "substitute_env",
    "unknown_labels",
    "validate_notify",
    "validation_problems",
    "write_refusal",
]
