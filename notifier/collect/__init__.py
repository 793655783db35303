"""collect: the pipeline's first stage, a scan of a Kafka cluster turned into a table of samples.

* ``collector``: :class:`ClusterCollector`, one scan with a fixed, batched request pattern.
* ``protocol``: API names, error codes, the DescribeGroups request, answer parsers and records.
* ``samples``: the sample table of a scan, member fingerprints, group states.
* ``results``: :class:`ScanResult` and :class:`ScanError`, what the coordinator receives, and
  :class:`Owner`, the member a partition is assigned to.
* ``broker``: :class:`EmbeddedBroker`, a Tansu broker process for tests and the demo.
* ``readonly``: ``ReadOnly``, the read-only attributes of the collector and the broker.

Imports only :mod:`notifier.types` from notifier.
"""

from notifier.collect.broker import BrokerError, EmbeddedBroker
from notifier.collect.collector import ClusterCollector
from notifier.collect.protocol import Group, decode_member
from notifier.collect.results import Owner, ScanError, ScanResult
from notifier.collect.samples import build_samples, member_hash, normalize_group_state

__all__ = [
    "BrokerError",
    "ClusterCollector",
    "EmbeddedBroker",
    "Group",
    "Owner",
    "ScanError",
    "ScanResult",
    "build_samples",
    "decode_member",
    "member_hash",
    "normalize_group_state",
]
