"""The channel kinds: what a receiver's entry may name, and how each becomes a channel.

A channel kind is one folder under ``notifier/notify/channels/`` holding its channel (a
:class:`~notifier.notify.channels.base.Channel`: how it renders and sends, its rate policy),
its settings model (a :class:`~notifier.config.ChannelSettings`) and one :func:`register` call
with a :class:`ChannelKind`. Everything else iterates this registry: the notify config
validates ``{kind: settings}`` against the registered model, :func:`build_channels
<notifier.notify.notifier.build_channels>` builds through ``build``, template checks apply
``check_message``, and the Burrow view reads the settings' own fields. The built-in kinds are
registered when :mod:`notifier.notify.channels` is imported.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from notifier.config import ChannelSettings

if TYPE_CHECKING:
    from notifier.notify.channels.base import Channel
    from notifier.notify.channels.templates import Templates

S = TypeVar("S", bound=ChannelSettings)

_KIND_NAME = re.compile(r"^[a-z][a-z0-9_]*$")


@dataclass(frozen=True, slots=True)
class ChannelKind(Generic[S]):
    """One kind of channel, as a receiver's entry names it."""

    name: str
    """The key of a receiver's entry in the notify config (``slack_webhook``); also the
    middle of the channel's name in logs and metrics (``oncall/slack_webhook``)."""
    settings: type[S]
    """The model its entry is validated against (errors name the file and the field)."""
    build: Callable[[S, str, Templates], Channel]
    """``(settings, channel name, templates)`` → the channel; called at start and reload."""
    templates: str | None = None
    """The folder under ``templates/`` its messages come from (a user's override directory
    is laid out the same way), None when it renders none."""
    check_message: Callable[[str, Any], None] | None = None
    """Checks a rendered JSON template of that folder (raising ``TemplateError``) when
    templates are checked: what the receiver refuses that JSON alone allows."""


_KINDS: dict[str, ChannelKind[Any]] = {}


def register(kind: ChannelKind[S]) -> ChannelKind[S]:
    """Make ``kind`` a channel kind receivers may name; a name is registered once."""
    if not _KIND_NAME.match(kind.name):
        raise ValueError(
            f"channel kind {kind.name!r}: expected lower-case letters, digits and _ "
            "(it is a key of the notify config)"
        )
    if kind.name in _KINDS and _KINDS[kind.name] != kind:
        raise ValueError(f"channel kind {kind.name!r} is registered already")
    _KINDS[kind.name] = kind
    return kind


def unregister(name: str) -> None:
    """Forget a kind (a plug-in unloaded, a test done with its own kind)."""
    _KINDS.pop(name, None)


def channel_kinds() -> Mapping[str, ChannelKind[Any]]:
    """Every registered kind by name, in registration order."""
    return MappingProxyType(_KINDS)


def channel_kind(name: str) -> ChannelKind[Any]:
    """The kind called ``name``; a config validated against the registry names only these."""
    try:
        return _KINDS[name]
    except KeyError:
        known = ", ".join(_KINDS) or "none registered"
        raise KeyError(f"unknown channel kind {name!r} (kinds: {known})") from None


def settings_by_kind() -> dict[str, type[ChannelSettings]]:
    """Each kind's settings model: what the notify config validates a receiver's entry with."""
    return {name: kind.settings for name, kind in _KINDS.items()}


def message_checks() -> dict[str, Callable[[str, Any], None]]:
    """Template folder → the check its rendered JSON messages must pass."""
    return {
        kind.templates: kind.check_message
        for kind in _KINDS.values()
        if kind.templates is not None and kind.check_message is not None
    }
