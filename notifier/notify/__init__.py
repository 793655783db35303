"""Notifications, the Alertmanager way: transitions in, messages delivered, one stage per module.

The pipeline's last stage: it takes the transitions :mod:`notifier.rules` emits.

- ``matchers``: whether label matchers select an incident
- ``routes``: the route tree (who hears about an incident, how alerts are grouped)
- ``silences``: silences from the config file and the API
- ``incidents``: the incident book (open, escalate, close; cluster-down incidents)
- ``dispatcher``: the pure, clock-free planning core (aggregation groups, notification log)
- ``codec``: results, incidents and notifications as JSON-able dicts
- ``outbox``: the SQLite store (incidents, the notification log, silences, the outbox)
- ``policy``: per-channel rate limits, concurrency and retry back-off
- ``delivery``: the per-channel workers and the Deliverer
- ``notifier``: the Notifier service, and the channels built from the config
- ``jsonenc``: fast JSON for the delivery path
- ``channels``: the senders (Slack, e-mail, webhook, PagerDuty) and their templates

May import :mod:`notifier.types` and :mod:`notifier.config`.
"""

from notifier.notify.codec import (
    notification_from_dict,
    notification_to_dict,
    result_from_dict,
    result_to_dict,
)
from notifier.notify.delivery import Deliverer, DeliveryMetrics
from notifier.notify.dispatcher import CoreChanges, DispatchCounters, Dispatcher, Planned
from notifier.notify.incidents import CLUSTER_GROUP, IncidentBook, IncidentChange, incident_id
from notifier.notify.matchers import matches_incident
from notifier.notify.notifier import Notifier, build_channels, channel_policies, check_templates
from notifier.notify.outbox import LogEntry, NotifyStore, OutboxEntry, OutboxRow
from notifier.notify.policy import (
    ChannelPolicy,
    RetryPolicy,
    TokenBucket,
    backoff_delay,
    default_policy,
)
from notifier.notify.routes import Route
from notifier.notify.silences import (
    Silence,
    SilenceError,
    SilenceLimitError,
    make_silence,
    silences_page,
)

__all__ = [
    "CLUSTER_GROUP",
    "ChannelPolicy",
    "CoreChanges",
    "Deliverer",
    "DeliveryMetrics",
    "DispatchCounters",
    "Dispatcher",
    "IncidentBook",
    "IncidentChange",
    "LogEntry",
    "Notifier",
    "NotifyStore",
    "OutboxEntry",
    "OutboxRow",
    "Planned",
    "RetryPolicy",
    "Route",
    "Silence",
    "SilenceError",
    "SilenceLimitError",
    "TokenBucket",
    "backoff_delay",
    "build_channels",
    "channel_policies",
    "check_templates",
    "default_policy",
    "incident_id",
    "make_silence",
    "matches_incident",
    "notification_from_dict",
    "notification_to_dict",
    "result_from_dict",
    "result_to_dict",
    "silences_page",
]
