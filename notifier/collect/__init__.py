"""collect: the pipeline's first stage, a scan of a Kafka cluster turned into a table of samples.

* ``collector``: :class:`ClusterCollector`, one scan with a fixed, batched request pattern,
  assembled from one reader per kind of request:
* ``session``: pooled connections, the cluster metadata, group coordinators, the requests sent;
* ``groups``: ListGroups, DescribeGroups, ConsumerGroupDescribe and share groups' describes;
* ``commits``: committed offsets (OffsetFetch, many groups per request where v8);
* ``logoffsets``: log-end and log-start offsets (ListOffsets per leader);
* ``batching``: many groups per request, batches split in halves when a broker drops one.
* ``protocol``: API names, error codes, the DescribeGroups request, answer parsers and records.
* ``grouptypes``: group types (KIP-848): ListGroups v5, ConsumerGroupDescribe, and what a
  consumer-protocol group's state means to the rules; streams groups are not evaluated.
* ``sharegroups``: share groups (KIP-932): ShareGroupDescribe, DescribeShareGroupOffsets.
* ``samples``: the sample table of a scan, member fingerprints, group states.
* ``results``: :class:`ScanResult`, :class:`ScanError` and :class:`ClusterUnreachableError`,
  what the coordinator receives.
* ``readonly``: ``ReadOnly``, read-only attributes (the collector's, and the embedded broker's
  in :mod:`notifier.embedded`).
* ``security``: SASL settings for aiokafka and the OAUTHBEARER token providers (OIDC client
  credentials, Amazon MSK IAM), renewed before they expire.

Imports :mod:`notifier.types` and, for the security settings, :mod:`notifier.config`.
"""

from notifier.collect.collector import ClusterCollector
from notifier.collect.protocol import Group, decode_member
from notifier.collect.results import (
    ClusterLayout,
    ClusterUnreachableError,
    PartitionLayout,
    ScanError,
    ScanResult,
)
from notifier.collect.samples import build_samples, member_hash, normalize_group_state
from notifier.collect.security import (
    CredentialsError,
    MskIamTokenProvider,
    OidcTokenProvider,
    RefreshingTokenProvider,
    client_security,
    collector_security,
)

__all__ = [
    "ClusterCollector",
    "ClusterLayout",
    "ClusterUnreachableError",
    "CredentialsError",
    "Group",
    "MskIamTokenProvider",
    "OidcTokenProvider",
    "PartitionLayout",
    "RefreshingTokenProvider",
    "ScanError",
    "ScanResult",
    "build_samples",
    "client_security",
    "collector_security",
    "decode_member",
    "member_hash",
    "normalize_group_state",
]
