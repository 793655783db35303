"""Running as a fleet (issue 10): several ``notifier run`` instances share the watched clusters
through Kafka's group protocol.

* ``shards``: which shard each (cluster, group) belongs to (a stable hash);
* ``membership``: the shards this instance owns, hand-over on rebalance, coordination outages;
* ``statetopic`` and ``state``: each shard's state on the compacted state topic, so the next
  owner resumes warm;
* ``view`` and ``viewtable``: the fleet-wide view every instance's API answers from (the process
  that publishes and tails it; its records and the table they are read into);
* ``share``: what the coordinator knows of all this (the service's ``sharing`` seam, the only
  part of :mod:`notifier.service` the fleet imports);
* ``aiokafka_private``: every aiokafka internal the fleet relies on, checked in one place.
"""

from notifier.fleet.membership import Membership
from notifier.fleet.shards import by_shard, shard_of

__all__ = ["Membership", "by_shard", "shard_of"]
