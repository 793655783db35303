"""The fleet: which pattern each group follows, and the corpus written to disk."""

from __future__ import annotations

import argparse
import csv
import json
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import numpy as np
import pyarrow as pa

from notifier.recorder.corpus import write_corpus
from notifier.recorder.stage import Label, Plan
from notifier.synth.independent.benign import (
    BENIGN,
)
from notifier.synth.independent.cluster import (
    apply_cluster,
    draw_cluster,
    scan_rows,
)
from notifier.synth.independent.faults import (
    FAULTS,
)
from notifier.synth.independent.model import (
    CLUSTER,
    SCAN_INTERVAL_S,
    WARMUP_S,
    Event,
    Group,
    _ms,
)
from notifier.synth.independent.script import (
    Script,
)
from notifier.synth.independent.setup import (
    SET_UP,
    draw_spec,
)


@dataclass
class GeneratedCorpus:
    path: Path
    groups: int
    rows: int
    labels: list[Label]
    events: list[Event]


def fleet_mix(groups: int, rng: np.random.Generator) -> list[tuple[str, str]]:
    """(pattern, kind) per group: a fifth faults (every kind), two thirds benign patterns
    (every one), the rest healthy."""
    benign = [p for p in BENIGN if p != "healthy"]
    faults = list(FAULTS)
    n_faults = max(len(faults), round(groups * 0.2))
    n_benign = max(len(benign), round(groups * 0.65))
    n_healthy = max(0, groups - n_faults - n_benign)
    mix = [("healthy", "")] * n_healthy
    mix += [(benign[i % len(benign)], "") for i in range(n_benign)]
    mix += [(faults[i % len(faults)], faults[i % len(faults)]) for i in range(n_faults)]
    order = rng.permutation(len(mix))
    return [mix[i] for i in order]


def generate(out: Path, groups: int = 200, hours: float = 6.0, seed: int = 1) -> GeneratedCorpus:
    """Write a labelled corpus of ``groups`` groups over ``hours`` at 10 s scans into ``out``
    (replacing one there), deterministic for ``seed``."""
    out = Path(out)
    rng = np.random.default_rng(seed)
    horizon = int(hours * 3600)
    cluster = draw_cluster(rng, horizon)
    tables: list[pa.Table] = []
    plans: list[Plan] = []
    labels: list[Label] = []
    events: list[Event] = list(cluster.events)
    for n, (pattern, kind) in enumerate(fleet_mix(groups, rng)):
        group_rng = np.random.default_rng([seed, n])
        name = f"{pattern}-{n:03d}"
        spec = draw_spec(group_rng, name, pattern, kind, min_rate=1.0 if kind else 0.05)
        if pattern in SET_UP:
            SET_UP[pattern](spec, group_rng)
        g = Group(spec, horizon, group_rng)
        script = Script(g)
        (FAULTS.get(pattern) or BENIGN[pattern])(script)
        apply_cluster(g, cluster)
        g.coordinate()
        g.consume()
        for step in script.after:
            step()
        table = scan_rows(g, cluster)
        if table is not None:
            tables.append(table)
        plans.append(Plan(pattern, kind, spec.client, name, name, g.P, spec.rate,
                          spec.commit, describe(g)))  # fmt: skip
        labels += g.labels
        events += g.events
    history = pa.concat_tables(tables)
    meta = {
        "broker": "generated: notifier.synth.independent (a model of Kafka clients and brokers "
        "written apart from the rules)",
        "scan_interval_s": SCAN_INTERVAL_S,
        "warmup_s": WARMUP_S,
        "duration_s": float(horizon),
        "started_ms": _ms(0),
        "ended_ms": _ms(horizon),
        "seed": seed,
        "command": f"python -m notifier.synth.independent --out {out} --groups {groups} "
        f"--hours {hours:g} --seed {seed}",
    }
    write_corpus(out, history, plans, labels, meta, cluster=CLUSTER)
    with open(out / "events.csv", "w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["group", "pattern", "what", "at", "params"])
        for e in sorted(events, key=lambda e: (e.at_s, e.group)):
            writer.writerow([e.group, e.pattern, e.what, _iso(e.at_s),
                             json.dumps(e.params, sort_keys=True)])  # fmt: skip
    return GeneratedCorpus(out, groups, history.num_rows, labels, events)


def describe(g: Group) -> str:
    """The group's set-up in words: what a reader of a false page needs."""
    spec = g.spec
    extra = {k: v for k, v in spec.params.items() if k not in ("members",)}
    return (
        f"{spec.client} {spec.protocol}, {spec.params['members']} member(s), "
        f"{g.P} partitions at {spec.rate:g} rec/s, commit {spec.commit}, session "
        f"{spec.session_s} s, max.poll {spec.max_poll_s} s; "
        + ", ".join(f"{k} {v}" for k, v in sorted(extra.items()))
    )


def _iso(second: float) -> str:
    return datetime.fromtimestamp(_ms(second) / 1000, UTC).isoformat(
        timespec="milliseconds").replace("+00:00", "Z")  # fmt: skip


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        prog="python -m notifier.synth.independent",
        description="Write a labelled fleet corpus generated apart from the rules (issue 28).",
    )
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--groups", type=int, default=200)
    parser.add_argument("--hours", type=float, default=6.0)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args(argv)
    corpus = generate(args.out, args.groups, args.hours, args.seed)
    kinds: dict[str, int] = {}
    for lb in corpus.labels:
        kinds[lb.kind] = kinds.get(lb.kind, 0) + 1
    print(f"{corpus.path}: {corpus.groups} groups, {corpus.rows} rows, {len(corpus.labels)} "
          f"labels {kinds}, {len(corpus.events)} events")  # fmt: skip
