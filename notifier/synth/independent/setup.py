"""Group set-ups drawn from what clients default to and what teams configure."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np

from notifier.synth.independent.model import (
    GroupSpec,
)

PARTITION_CHOICES = np.array([1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64])
PARTITION_WEIGHTS = np.array([8, 6, 8, 10, 8, 10, 8, 8, 5, 4, 2, 2], dtype=float)
CLIENTS = {
    # client: (weight, protocols with weights, session timeout s, auto-commit interval s)
    "java": (50, {"eager": 3, "cooperative": 3, "consumer": 3}, 45, 5),
    "librdkafka": (20, {"eager": 3, "cooperative": 2}, 45, 5),
    "aiokafka": (15, {"eager": 1}, 10, 5),
    "sarama": (15, {"eager": 1}, 10, 1),
}


def draw_spec(rng: np.random.Generator, name: str, pattern: str, kind: str = "",
              min_rate: float = 0.05, **overrides: Any) -> GroupSpec:  # fmt: skip
    """A group's set-up: partitions, traffic, client, protocol, session, commits."""
    partitions = int(rng.choice(PARTITION_CHOICES, p=PARTITION_WEIGHTS / PARTITION_WEIGHTS.sum()))
    rate = max(min_rate, float(10 ** rng.uniform(-1.3, 3.7)))
    names = list(CLIENTS)
    weights = np.array([CLIENTS[c][0] for c in names], dtype=float)
    client = str(rng.choice(names, p=weights / weights.sum()))
    _, protocols, session, auto = CLIENTS[client]
    protocol = str(rng.choice(list(protocols), p=np.array(list(protocols.values()))
                              / sum(protocols.values())))  # fmt: skip
    if rng.random() < 0.2:  # teams do change it
        session = int(rng.choice([10, 20, 30, 60, 120]))
    max_poll = 300 if rng.random() < 0.8 else int(rng.choice([60, 600, 900, 1800]))
    style = rng.random()
    if style < 0.4:
        commit = f"auto:{auto}"
    elif style < 0.6:
        commit = "batch:1"  # commitSync after every poll's batch
    elif style < 0.9:
        commit = f"every:{int(rng.choice([2, 5, 10, 15, 20, 30, 45, 60, 90]))}"
    else:
        commit = f"every:{int(rng.choice([120, 180, 300]))}"
    params = {
        "headroom": round(float(10 ** rng.uniform(math.log10(1.3), math.log10(20))), 2),
        "commit_on_revoke": commit.startswith("auto") or bool(rng.random() < 0.6),
        "members": int(min(partitions, rng.choice([1, 1, 2, 2, 3, 4, 6, 8]))),
    }
    spec = GroupSpec(name, pattern, kind, partitions, round(rate, 3), client, protocol,
                     session, max_poll, commit, params)  # fmt: skip
    for key, value in overrides.items():
        if hasattr(spec, key):
            setattr(spec, key, value)
        else:
            spec.params[key] = value
    return spec


def _at_least_two(spec: GroupSpec, rng: np.random.Generator) -> None:
    """Patterns about several members need partitions for them."""
    if spec.partitions < 2:
        spec.partitions = int(rng.choice([2, 3, 4, 6]))
    spec.params["members"] = max(2, min(spec.partitions, int(spec.params["members"])))
    if spec.protocol == "standalone":
        spec.protocol = "eager"


SET_UP: dict[str, Callable[[GroupSpec, np.random.Generator], None]] = {
    "dead-member": _at_least_two,
    "rolling-deploy": _at_least_two,
    "autoscale": _at_least_two,
    "stuck_rebalance": _at_least_two,
    "rebalance_storm": _at_least_two,
}
