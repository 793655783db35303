"""notify"""

from notifier.notify.notifier import (
    CLUSTER_GROUP,
    Dispatcher,
    Notifier,
    Route,
    SilenceError,
    build_channels,
    channel_policies,
    make_silence,
)
from notifier.notify.outbox import (
    Deliverer,
    NotifyStore,
    OutboxEntry,
    RetryPolicy,
    TokenBucket,
    backoff_delay,
    notification_from_dict,
    notification_to_dict,
)

__all__ = [
    "CLUSTER_GROUP",
    "Deliverer",
    "Dispatcher",
    "Notifier",
    "NotifyStore",
    "OutboxEntry",
    "RetryPolicy",
    "Route",
    "SilenceError",
    "TokenBucket",
    "backoff_delay",
    "build_channels",
    "channel_policies",
    "make_silence",
    "notification_from_dict",
    "notification_to_dict",
]
