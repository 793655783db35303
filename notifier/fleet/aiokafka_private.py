"""Every use the fleet makes of aiokafka's private attributes, in one place.

aiokafka has no public call for three things the fleet needs of a consumer:

* ``AIOKafkaConsumer._coordinator`` (its ``GroupCoordinator``): the member's ``generation`` and
  ``member_id`` (a member of generation 0 must send its own LeaveGroup, which aiokafka skips),
  and ``request_rejoin()`` (the leader asks for a rebalance of uneven work);
* ``AIOKafkaConsumer._client`` (its ``AIOKafkaClient``): ``get_random_node()``, ``send()`` and
  ``fetch_all_metadata()`` (is the coordination cluster up, with one small request) and
  ``close()`` (a reader whose stop was cut short closes its connections).

A new aiokafka may rename or drop any of them. :func:`check` names the one missing and the
aiokafka version (``tests/test_aiokafka_private.py`` runs it against a real consumer, and
:class:`~notifier.fleet.membership.Membership` when it starts), so such an upgrade fails at once
and says where, rather than when a rebalance or a shutdown first needs the attribute.
"""

from __future__ import annotations

from typing import Any

import aiokafka


class AiokafkaChangedError(RuntimeError):
    """aiokafka no longer has a private attribute the fleet relies on."""


REQUIRED: dict[str, tuple[str, ...]] = {
    "_coordinator": ("generation", "member_id", "request_rejoin"),
    "_client": ("get_random_node", "send", "fetch_all_metadata", "close"),
}
"""Each private attribute of ``AIOKafkaConsumer`` the fleet uses, with what it uses of it."""


def _missing(owner: str, name: str, why: str) -> AiokafkaChangedError:
    return AiokafkaChangedError(
        f"aiokafka {aiokafka.__version__}: {owner} has no attribute {name!r}, which "
        f"notifier.fleet relies on ({why}); adapt notifier/fleet/aiokafka_private.py to this "
        f"aiokafka or pin the version it was written for"
    )


def _get(obj: Any, name: str, owner: str, why: str) -> Any:
    try:
        return getattr(obj, name)
    except AttributeError:
        raise _missing(owner, name, why) from None


def check(consumer: aiokafka.AIOKafkaConsumer) -> None:
    """Raise :class:`AiokafkaChangedError` naming the first private attribute the fleet uses
    that ``consumer`` (started, with a ``group_id``) lacks."""
    for attribute, members in REQUIRED.items():
        inner = _get(consumer, attribute, "AIOKafkaConsumer", "a started group consumer")
        if inner is None:
            raise _missing("AIOKafkaConsumer", attribute, "None on a started group consumer")
        for member in members:
            _get(inner, member, f"AIOKafkaConsumer.{attribute}", f"{type(inner).__name__}")


def member(consumer: aiokafka.AIOKafkaConsumer) -> tuple[int, str] | None:
    """The member's (generation, member id) in its group; None before it started."""
    group = _get(consumer, "_coordinator", "AIOKafkaConsumer", "the group membership")
    if group is None:
        return None
    why = "the member's generation and id"
    generation = _get(group, "generation", "AIOKafkaConsumer._coordinator", why)
    return generation, _get(group, "member_id", "AIOKafkaConsumer._coordinator", why)


def request_rejoin(consumer: aiokafka.AIOKafkaConsumer) -> None:
    """Ask the group for a rebalance (this member rejoins at its next poll)."""
    group = _get(consumer, "_coordinator", "AIOKafkaConsumer", "asking for a rebalance")
    _get(group, "request_rejoin", "AIOKafkaConsumer._coordinator", "asking for a rebalance")()


def client(consumer: aiokafka.AIOKafkaConsumer) -> Any:
    """The consumer's ``AIOKafkaClient`` (its connections and metadata)."""
    return _get(consumer, "_client", "AIOKafkaConsumer", "the consumer's own client")
