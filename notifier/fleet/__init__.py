"""Several ``notifier run`` instances as one fleet, coordinated through Kafka's group protocol
(issue 10): shards, membership, shard state and the fleet-wide view."""
