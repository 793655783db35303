"""A labelled fleet written apart from the rules (issue 28): an independent corpus generator.

The project's other generators were written beside its rules and share their assumptions. This
one was written from the domain notes (``DOMAIN.md`` §1-§4, §9) and what Kafka clients do by
default, without reading the rules: every benign habit of real fleets drawn at a random point of
its whole parameter range, and faults of every kind the project labels, each labelled from when
a person would want to know.

It models, second by second, each group's traffic (per-partition rates with skew, daily drift,
bursts, idle spells, transactional markers, retention by time or bytes in segments deleted at
the broker's 5-minute check), its consumer processes (start, graceful stop with a commit on the
way out, ``kill -9`` with none, pauses, stalls, hung poll loops, slowdowns, seeks back), how the
coordinator turns those into group states, member sets and assignments (classic eager,
cooperative-sticky, static membership, the KIP-848 consumer protocol, standalone ``assign()``),
what is committed when, and what the service's scans saw (jittered scan times, missed scans,
outages, ListOffsets failing for a restarted broker's partitions, a coordinator not answering).

The corpus is written in the recorded corpus's format (:func:`notifier.recorder.write_corpus`,
read by :func:`notifier.recorder.load_corpus`): history Parquet, ``incidents.csv``,
``groups.csv`` (the scenario is the pattern's name, the description its parameters) and
``corpus.json``; and ``events.csv`` beside them, every benign event and fault with its
parameters, so that a false page can be traced to what caused it.

    python -m notifier.synth.independent --out DIR [--groups 200] [--hours 6] [--seed 1]

The package, in the order data flows: :mod:`.model` (a group's second-by-second world),
:mod:`.setup` (set-ups drawn from client defaults), :mod:`.script` (what a pattern scripts with),
:mod:`.benign` and :mod:`.faults` (the patterns), :mod:`.cluster` (broker restarts, the service's
gaps and what its scans saw) and :mod:`.fleet` (the mix of patterns and the corpus on disk).
"""

from __future__ import annotations

from notifier.synth.independent.benign import BENIGN
from notifier.synth.independent.faults import FAULTS
from notifier.synth.independent.fleet import GeneratedCorpus, generate, main
from notifier.synth.independent.model import CLUSTER, FAULT_KINDS, Event, Group, GroupSpec
from notifier.synth.independent.script import Script

__all__ = [
    "BENIGN",
    "CLUSTER",
    "FAULTS",
    "FAULT_KINDS",
    "Event",
    "GeneratedCorpus",
    "Group",
    "GroupSpec",
    "Script",
    "generate",
    "main",
]
