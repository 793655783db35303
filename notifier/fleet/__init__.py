"""Several ``notifier run`` instances sharing the watched clusters (issue 10): shards of the
(cluster, group) space are partitions of a state topic, assigned by Kafka's group protocol, and
a shard's state travels with it through that topic."""
