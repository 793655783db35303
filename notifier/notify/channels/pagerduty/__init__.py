"""PagerDuty Events API v2 (``pagerduty``): one event per alert, deduplicated on the incident
id, its summary from ``templates/pagerduty/``.

- ``channel``: :class:`PagerDuty`, :func:`pagerduty_events`
- ``settings``: its settings in a receiver's entry
"""

from __future__ import annotations

from notifier.notify.channels.pagerduty.channel import (
    TEMPLATE_FOLDER,
    PagerDuty,
    pagerduty_dedup_key,
    pagerduty_events,
)
from notifier.notify.channels.pagerduty.settings import PAGERDUTY_SEVERITIES, PagerDutyConfig
from notifier.notify.channels.registry import ChannelKind, register
from notifier.notify.channels.templates import Templates


def build(settings: PagerDutyConfig, name: str, templates: Templates) -> PagerDuty:
    return PagerDuty(
        settings.routing_key,
        url=settings.url,
        # items(): the config's keys are Literals, PagerDuty takes any str
        severity_map=dict(settings.severity_map.items()),
        name=name,
        templates=templates,
        timeout=settings.timeout,
    )


PAGERDUTY = register(ChannelKind("pagerduty", PagerDutyConfig, build, templates=TEMPLATE_FOLDER))

__all__ = [
    "PAGERDUTY",
    "PAGERDUTY_SEVERITIES",
    "PagerDuty",
    "PagerDutyConfig",
    "pagerduty_dedup_key",
    "pagerduty_events",
]
