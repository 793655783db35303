"""Channels: the last step of notify, turning one notification into one delivery attempt.

Each channel renders a message, sends it once and reports a :class:`Delivery` (ok, or a
retryable or final failure); the retry loop belongs to the caller (:mod:`notifier.notify`).

A channel kind is one folder holding its channel, its settings model and its registration
(:mod:`~notifier.notify.channels.registry`); nothing outside the folder names it:

- ``slack/`` (``slack_webhook``, ``slack_bot``), ``email/``, ``webhook/``, ``pagerduty/``

What they share:

- ``registry``: :class:`ChannelKind`, :func:`register`, the kinds by name.
- ``base``: the abstract :class:`Channel` (with its defaults: rate policy, template checks,
  message refs) and the HTTP channel base (proxies, basic auth).
- ``delivery``: :class:`Delivery`, HTTP status classification, ``Retry-After``.
- ``format``: humanized values, status emoji/colour, clipping: the template filters.
- ``templates``: the Jinja2 loader, :class:`Templates`, template checks, sample data.
- ``transport``: the httpx transport on asyncio streams under the HTTP channels.

Imports only :mod:`notifier.types`, :mod:`notifier.config`, :mod:`notifier.notify.jsonenc`,
:mod:`notifier.resources` and ``notifier.__version__``.
"""

import importlib

from notifier.notify.channels.base import Channel, ChannelPolicy, MessageRef, environment_proxy
from notifier.notify.channels.delivery import Delivery, parse_retry_after
from notifier.notify.channels.format import humanize_lag, humanize_seconds
from notifier.notify.channels.registry import (
    ChannelKind,
    channel_kind,
    channel_kinds,
    register,
    unregister,
)
from notifier.notify.channels.templates import TemplateProblem, Templates, sample_notification
from notifier.notify.channels.transport import AsyncioTransport

BUILTIN_KINDS = ("slack", "email", "webhook", "pagerduty")
"""The folders of the built-in channel kinds, imported (each registers itself) in this order,
the order config errors list the kinds in. Adding a channel adds its folder here."""

for _folder in BUILTIN_KINDS:
    importlib.import_module(f"{__name__}.{_folder}")

__all__ = [
    "BUILTIN_KINDS",
    "AsyncioTransport",
    "Channel",
    "ChannelKind",
    "ChannelPolicy",
    "Delivery",
    "MessageRef",
    "TemplateProblem",
    "Templates",
    "channel_kind",
    "channel_kinds",
    "environment_proxy",
    "humanize_lag",
    "humanize_seconds",
    "parse_retry_after",
    "register",
    "sample_notification",
    "unregister",
]
