"""notifier: Kafka consumer-lag alerting.

The public API, for embedding the service (the ``notifier`` command wires the same pieces):
read the config (:func:`load_service_config`, :func:`load_rules`, :func:`load_notify`), run a
:class:`Coordinator` (scans, the one step, transitions) with a :class:`Notifier` behind it,
serve :func:`create_app` with :class:`ApiServer`; read and write the sample history
(:func:`read_history`, :class:`HistoryWriter`), generate synthetic ones (:func:`synthesize`,
:func:`synthesize_fleet`), backtest rules on them (:func:`run_backtest`), and run an embedded
Kafka-protocol broker for tests and demos (:class:`EmbeddedBroker`). The data every stage
speaks is in :mod:`notifier.types`.

Each name is imported from its package when first used, so ``import notifier`` (and the
command line) stays fast.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

_EXPORTS = {
    # configuration
    "ConfigError": "notifier.config",
    "RulesConfig": "notifier.rules",
    "ServiceConfig": "notifier.config",
    "NotifyConfig": "notifier.config",
    "load_rules": "notifier.rules",
    "parse_rules": "notifier.rules",
    "load_service_config": "notifier.notify.config",
    "parse_service_config": "notifier.notify.config",
    "load_notify": "notifier.notify.config",
    "parse_notify": "notifier.notify.config",
    # the stages
    "ClusterCollector": "notifier.collect",
    "ScanResult": "notifier.collect",
    "ScanError": "notifier.collect",
    "Coordinator": "notifier.service",
    "Reloader": "notifier.service",
    "Notifier": "notifier.notify",
    "create_app": "notifier.api",
    "ApiServer": "notifier.api",
    # history, synthetic histories and the backtest
    "read_history": "notifier.history",
    "load_incidents": "notifier.history",
    "HistoryWriter": "notifier.history",
    "HistoryError": "notifier.history",
    "synthesize": "notifier.synth",
    "synthesize_fleet": "notifier.synth",
    "run_backtest": "notifier.backtest",
    "BacktestRequest": "notifier.backtest",
    # tests and demos
    "EmbeddedBroker": "notifier.embedded",
    # the data every stage speaks
    "SAMPLE_SCHEMA": "notifier.types",
    "Sample": "notifier.types",
    "GroupStatus": "notifier.types",
    "PartitionStatus": "notifier.types",
    "Severity": "notifier.types",
    "Finding": "notifier.types",
    "GroupResult": "notifier.types",
    "Transition": "notifier.types",
    "Incident": "notifier.types",
}

__all__ = [
    "SAMPLE_SCHEMA",
    "ApiServer",
    "BacktestRequest",
    "ClusterCollector",
    "ConfigError",
    "Coordinator",
    "EmbeddedBroker",
    "Finding",
    "GroupResult",
    "GroupStatus",
    "HistoryError",
    "HistoryWriter",
    "Incident",
    "Notifier",
    "NotifyConfig",
    "PartitionStatus",
    "Reloader",
    "RulesConfig",
    "Sample",
    "ScanError",
    "ScanResult",
    "ServiceConfig",
    "Severity",
    "Transition",
    "create_app",
    "load_incidents",
    "load_notify",
    "load_rules",
    "load_service_config",
    "parse_notify",
    "parse_rules",
    "parse_service_config",
    "read_history",
    "run_backtest",
    "synthesize",
    "synthesize_fleet",
]
"""What embedding the service takes, each imported from its module (``_EXPORTS``) when used."""

if TYPE_CHECKING:
    from notifier.api import ApiServer, create_app
    from notifier.backtest import BacktestRequest, run_backtest
    from notifier.collect import ClusterCollector, ScanError, ScanResult
    from notifier.config import ConfigError, NotifyConfig, ServiceConfig
    from notifier.embedded import EmbeddedBroker
    from notifier.history import HistoryError, HistoryWriter, load_incidents, read_history
    from notifier.notify import Notifier
    from notifier.notify.config import (
        load_notify,
        load_service_config,
        parse_notify,
        parse_service_config,
    )
    from notifier.rules import RulesConfig, load_rules, parse_rules
    from notifier.service import Coordinator, Reloader
    from notifier.synth import synthesize, synthesize_fleet
    from notifier.types import (
        SAMPLE_SCHEMA,
        Finding,
        GroupResult,
        GroupStatus,
        Incident,
        PartitionStatus,
        Sample,
        Severity,
        Transition,
    )


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'notifier' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *_EXPORTS])
