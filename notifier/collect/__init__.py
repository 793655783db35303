"""collect"""

from notifier.collect.broker import BrokerError, EmbeddedBroker
from notifier.collect.scan import (
    ClusterCollector,
    ScanError,
    ScanResult,
    _build_samples,
    _decode_member,
    _Group,
    member_hash,
    normalize_group_state,
)

__all__ = [
    "BrokerError",
    "ClusterCollector",
    "EmbeddedBroker",
    "ScanError",
    "ScanResult",
    "_Group",
    "_build_samples",
    "_decode_member",
    "member_hash",
    "normalize_group_state",
]
