"""A corpus recorded from a real broker (issue 28): scripted groups of real consumers on Apache
Kafka — aiokafka members as processes and Kafka's own Java console consumer — that crash,
restart, roll, rebalance, stall, fall behind, rewind and lose records, scanned by the service
itself into its history, with labels written by the scripts.

Modules: ``member`` (the aiokafka member process, steered by signals), ``stage`` (what a script
works with: timeline, plans, consumers, labels), ``scenarios`` (the scripts, :data:`SCENARIOS`
for Kafka 4.4, and the scenario sets, ``SETS``: ``kafka-4.4`` and the classic-only ``kafka-3.9``),
``recording`` (:func:`record`: topics, traffic, the service, the scripts, a broker restart),
``corpus`` (the corpus on disk: :func:`write_corpus`, :func:`load_corpus`).
``benchmarks/record_corpus.py`` records one; ``benchmarks/alert_quality.py`` scores the
committed ones.

Each name is imported from its module when first used: every consumer process the recorder starts
runs ``python -m notifier.recorder.member``, which imports this package first, and forty of them
must not each load pandas and pyarrow.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

_EXPORTS = {
    "BY_NAME": "notifier.recorder.scenarios",
    "CLUSTER": "notifier.recorder.corpus",
    "SCENARIOS": "notifier.recorder.scenarios",
    "Label": "notifier.recorder.stage",
    "Plan": "notifier.recorder.stage",
    "RecordedCorpus": "notifier.recorder.corpus",
    "Recording": "notifier.recorder.recording",
    "Scenario": "notifier.recorder.scenarios",
    "Stage": "notifier.recorder.stage",
    "Timeline": "notifier.recorder.stage",
    "load_corpus": "notifier.recorder.corpus",
    "record": "notifier.recorder.recording",
    "write_corpus": "notifier.recorder.corpus",
}

__all__ = [
    "BY_NAME",
    "CLUSTER",
    "SCENARIOS",
    "Label",
    "Plan",
    "RecordedCorpus",
    "Recording",
    "Scenario",
    "Stage",
    "Timeline",
    "load_corpus",
    "record",
    "write_corpus",
]

if TYPE_CHECKING:
    from notifier.recorder.corpus import CLUSTER, RecordedCorpus, load_corpus, write_corpus
    from notifier.recorder.recording import Recording, record
    from notifier.recorder.scenarios import BY_NAME, SCENARIOS, Scenario
    from notifier.recorder.stage import Label, Plan, Stage, Timeline


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)
