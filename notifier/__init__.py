"""notifier: Kafka consumer-lag alerting."""

__version__ = "0.1.0"
