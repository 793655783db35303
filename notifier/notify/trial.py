"""Trying the receivers before an incident does (``notifier notify test``): one clearly marked
test notification through every configured channel, sent by the same channel code the
service uses, and what each channel answered.

The test is an ``open`` of a WARN incident for the made-up group ``TEST-notification`` on the
cluster ``notifier-test``, whose one finding says it is a test and nothing is wrong. Nothing
goes through the outbox, so a failure is reported at once rather than retried. A channel that
would keep an incident open for it (PagerDuty's ``resolve_after_test``) is sent the resolve
at once, so that nobody is left with an open page.
"""

from __future__ import annotations

import asyncio
from collections.abc import Collection
from dataclasses import dataclass

from notifier.config import NotifyConfig
from notifier.notify.channels import Channel, Delivery
from notifier.notify.notifier import build_channels
from notifier.types import (
    Alert,
    Event,
    Finding,
    GroupResult,
    GroupStatus,
    Incident,
    Notification,
    Severity,
)

TEST_CLUSTER = "notifier-test"
TEST_GROUP = "TEST-notification"


@dataclass(frozen=True, slots=True)
class ChannelTrial:
    """What one channel made of the test notification."""

    receiver: str
    channel: str
    """The channel's name, as the service's logs and metrics name it (``oncall/slack_webhook``)."""
    worked: bool
    detail: str
    """``HTTP 200``, ``accepted by the SMTP server``, or why it failed (no secret in it)."""


def trial_notification(receiver: str, now_ms: int, origin: str, *, resolved: bool = False,
                       status_page_url: str | None = None) -> Notification:  # fmt: skip
    """The test notification for ``receiver``: a WARN incident opened (or, ``resolved``,
    closed) at ``now_ms`` for :data:`TEST_GROUP`, saying where it was sent from."""
    finding = Finding(
        rule="notifier-test",
        kind="test",
        severity=Severity.WARN,
        status="WARN",
        message=(
            f"TEST notification sent by `notifier notify test` from {origin}: nothing is wrong. "
            f"It reached you through the receiver {receiver!r}."
        ),
    )
    incident = Incident(
        id=f"{TEST_CLUSTER}/{receiver}/{now_ms}",
        cluster=TEST_CLUSTER,
        group=TEST_GROUP,
        opened_at=now_ms,
        status=GroupStatus.WARN,
        peak_status=GroupStatus.WARN,
        closed_at=now_ms if resolved else None,
        close_reason="test over" if resolved else None,
        findings=[finding],
    )
    status = GroupStatus.OK if resolved else GroupStatus.WARN
    result = GroupResult(
        cluster=TEST_CLUSTER,
        group=TEST_GROUP,
        status=status,
        complete=1.0,
        burrow_complete=1.0,
        partial=False,
        evaluated_at=now_ms,
        findings=[] if resolved else [finding],
        max_lag_seconds=0.0,
        group_state="Stable",
    )
    event = Event.RESOLVE if resolved else Event.OPEN
    return Notification(
        id=f"{incident.id}/{event.value}",
        receiver=receiver,
        group_key=f'{{cluster="{TEST_CLUSTER}"}}',
        alerts=[Alert(event=event, incident=incident, result=result)],
        created_at=now_ms,
        status_page_url=status_page_url,
        extras={"test": True},
    )


async def try_receivers(
    config: NotifyConfig, now_ms: int, origin: str, receivers: Collection[str] = ()
) -> list[ChannelTrial]:
    """Send the test notification through every channel of ``receivers`` (default: all), all
    at once; one :class:`ChannelTrial` per channel, in the config's order."""
    channels = build_channels(config)
    chosen = [name for name in channels if not receivers or name in receivers]

    async def one(receiver: str, channel: Channel) -> ChannelTrial:
        def notification(resolved: bool) -> Notification:
            return trial_notification(receiver, now_ms, origin, resolved=resolved,
                                      status_page_url=config.status_page_url)  # fmt: skip

        async with channel:
            delivery = await _send(channel, notification(resolved=False))
            detail = _detail(channel, delivery)
            if delivery.ok and channel.resolve_after_test:
                closed = await _send(channel, notification(resolved=True))
                detail += "; resolved again at once" if closed.ok else (
                    f"; resolving it failed, resolve it by hand: {closed.error}"
                )  # fmt: skip
        return ChannelTrial(receiver, channel.name, delivery.ok, detail)

    return list(await asyncio.gather(*(one(r, channel) for r in chosen for channel in channels[r])))


async def _send(channel: Channel, notification: Notification) -> Delivery:
    # Each request has the channel's own timeout; this bounds a channel making several.
    limit = 3 * getattr(channel, "timeout", 10.0) + 5
    try:
        return await asyncio.wait_for(channel.send(notification), limit)
    except TimeoutError:
        return Delivery.failure(f"no answer within {limit:g} s", retryable=True)


def _detail(channel: Channel, delivery: Delivery) -> str:
    if not delivery.ok:
        return delivery.error or "failed without a reason"
    return channel.accepted_detail(delivery)
