"""Reading the notify section with the channel kinds registered: the notify config's models
are :mod:`notifier.config.notify` (what every channel shares, the routes, silences and
inhibit rules); a receiver's entries are validated against the settings model each kind
registered in :mod:`notifier.notify.channels`, which this module hands config.

The loaders of the service config that check its ``notify:`` section with the rest of the file
live here too, for the same reason: ``notifier check --config`` and ``notifier run`` read the
file through them and refuse the same files, naming every problem at once.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from notifier.config import (
    ChannelSettings,
    NotifyConfig,
    ServiceConfig,
    read_yaml,
    validate_notify,
)
from notifier.config import load_service_config as load_service_config_without_notify
from notifier.config import parse_service_config as parse_service_config_without_notify
from notifier.notify.channels import registry


def channel_settings() -> dict[str, type[ChannelSettings]]:
    """Every channel kind a receiver may name, with its settings model, in registration order:
    the built-in ones (each folder under ``notifier/notify/channels/`` registers itself when
    the package is imported) and any registered since."""
    return registry.settings_by_kind()


def parse_notify(
    data: Any,
    source: str = "<notify>",
    *,
    env: Mapping[str, str] | None = None,
    strict_env: bool = True,
) -> NotifyConfig:
    """Validate a parsed notify section; :class:`~notifier.config.ConfigError` names
    ``source`` and each field.

    ``${NAME}`` is substituted from ``env`` (default: the process environment) everywhere;
    an unset variable is an error unless ``strict_env`` is false.
    """
    return validate_notify(data, source, channel_settings(), env=env, strict_env=strict_env)


def load_notify(path: str | Path, **kwargs: Any) -> NotifyConfig:
    """Load and validate a notify config file (YAML)."""
    path = Path(path)
    return parse_notify(read_yaml(path), str(path), **kwargs)


def parse_service_config(
    data: Any, source: str, environ: dict[str, str] | None = None
) -> ServiceConfig:
    """A parsed service config, validated with its ``notify:`` section: every problem of
    the file at once."""
    return parse_service_config_without_notify(data, source, environ, channel_settings())


def load_service_config(path: str | Path, environ: dict[str, str] | None = None) -> ServiceConfig:
    """The service config of ``path`` (TLS files found and loaded as they will be used),
    validated with its ``notify:`` section: every problem of the file at once."""
    return load_service_config_without_notify(path, environ, channel_settings())


def notify_section(service: ServiceConfig, source: str) -> NotifyConfig | None:
    """The service's notify section as the notifier runs it (the API's public URL is the
    status page's when the section names none); None without one."""
    if not service.notify:
        return None
    config = parse_notify(service.notify, f"{source}: notify")
    if service.api.public_url and not config.status_page_url:
        config = config.model_copy(update={"status_page_url": service.api.public_url})
    return config
