"""Benchmark: alert quality of the default rules against Burrow's, on a labelled fleet corpus.

Each seed's corpus is a synthetic production fleet (``notifier history synth --profile fleet``:
benign habits — bursts, idle topics, rare and batch committers, restarts, rolling deploys, scan
gaps — and labelled incidents of every kind, see :mod:`notifier.synth.production`). It is replayed
through the backtest's engine (the service's own store, evaluator, transitions and dispatcher)
with three configurations in the same run:

* ``defaults``: the rules file (default ``rules.yaml``);
* ``burrow_mc0``: Burrow's rules alone with minimum_complete 0 (Burrow's default);
* ``burrow_mc1``: Burrow's rules alone with minimum_complete 1.0.

An alert is one would-be incident (a group leaving OK until it is OK again). It matches a label
when it opens within ``[start - one scan, end]`` (the backtest's own matching; a label's
``onset``, when the fault began, opens the window earlier: an alert between onset and start
caught it early). Precision is matched alerts over all alerts; recall is caught labels over all
labels; the delay is from the label's start to the first matching alert (0 when earlier), also
printed from the onset. Alerts opened in the warm-up (the first 30 minutes) do not count.

    python benchmarks/alert_quality.py            # 3 seeds x 150 groups x 6 h (a few minutes)
    python benchmarks/alert_quality.py --full     # 5 seeds x 300 groups x 12 h

Targets for the defaults (10 s scans): precision >= 0.98, recall >= 0.98 and >= 0.95 for every
kind, median delay <= 30 s, p90 <= 120 s, and better than both Burrow baselines on precision,
recall, median and p90. Ends with one JSON line.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

from notifier.backtest import (  # noqa: E402
    GridConfig,
    ReplayOptions,
    SampleArrays,
    match_incidents,
    replay,
)
from notifier.backtest.scoring import labels_frame  # noqa: E402
from notifier.history import load_incidents, read_history  # noqa: E402
from notifier.rules import RulesConfig, load_rules, parse_rules  # noqa: E402
from notifier.synth import synthesize_fleet  # noqa: E402

INTERVAL_S = 10.0
WARMUP_MS = 30 * 60_000
TARGETS = {
    "precision": 0.98,
    "recall": 0.98,
    "recall_every_kind": 0.95,
    "delay_p50_s": 30.0,
    "delay_p90_s": 120.0,
}


@dataclass
class Corpus:
    """One seed's labelled history, replay-ready."""

    seed: int
    samples: SampleArrays
    labels: pd.DataFrame
    groups: int
    counted_from_ms: int
    end_ms: int


def build_corpus(seed: int, groups: int, hours: float, workdir: Path) -> Corpus:
    out = workdir / f"fleet-{seed}"
    synthesize_fleet(
        out, groups=groups, partitions=4, hours=hours, seed=seed, interval_s=INTERVAL_S
    )
    table = read_history(out)
    ts = table.column("ts").cast("int64").to_numpy()
    start, end = int(ts.min()), int(ts.max())
    labels = labels_frame(load_incidents(out / "incidents.csv"))
    labels = labels[labels["end_ms"] >= start + WARMUP_MS].reset_index(drop=True)
    labels["label_id"] = np.arange(len(labels))
    samples = SampleArrays.from_arrow(table)
    shutil.rmtree(out)
    return Corpus(seed, samples, labels, groups, start + WARMUP_MS, end)


def burrow_only(rules: RulesConfig, minimum_complete: float) -> RulesConfig:
    """Burrow's rule set alone, on the same window settings."""
    return parse_rules(
        {
            "window": rules.window.model_dump(),
            "burrow": {"minimum_complete": minimum_complete},
        },
        f"burrow minimum_complete {minimum_complete}",
    )


def score(corpora: list[Corpus], configs: dict[str, RulesConfig]) -> dict[str, dict[str, Any]]:
    """Replay every corpus through every configuration; figures per configuration."""
    names = list(configs)
    grid = [GridConfig(i, {}, configs[name]) for i, name in enumerate(names)]
    per_label: list[dict[str, Any]] = []
    per_alert: list[dict[str, Any]] = []
    group_days = 0.0
    for corpus in corpora:
        output = replay(
            corpus.samples,
            grid,
            ReplayOptions(scan_interval_s=INTERVAL_S, count_from_ms=corpus.counted_from_ms),
        )
        alerts = output.incidents.reset_index(drop=True)
        matches = match_incidents(alerts, corpus.labels, round(INTERVAL_S * 1000))
        alerts = alerts.assign(matched=matches.alert_matched, seed=corpus.seed)
        group_days += corpus.groups * (corpus.end_ms - corpus.counted_from_ms) / 86_400_000
        first = matches.first.set_index(["config_id", "label_id"])["first_ms"]
        for config_id, name in enumerate(names):
            for label in corpus.labels.itertuples():
                at = first.get((config_id, label.label_id))
                per_label.append(
                    {
                        "config": name,
                        "kind": label.kind,
                        "caught": at is not None,
                        "delay_s": np.nan if at is None else max(0, at - label.start_ms) / 1000,
                        "from_onset_s": np.nan
                        if at is None
                        else max(0, at - getattr(label, "onset_ms", label.start_ms)) / 1000,
                    }
                )
            mine = alerts[alerts["config_id"] == config_id]
            per_alert += [
                {"config": name, "matched": bool(m), "rule": r, "group": g, "start": s, "end": e}
                for m, r, g, s, e in zip(
                    mine["matched"], mine["rule"], mine["group"], mine["start_ms"], mine["end_ms"]
                )
            ]
    labels = pd.DataFrame(per_label)
    alerts = pd.DataFrame(per_alert, columns=["config", "matched", "rule", "group", "start", "end"])
    return {name: _figures(labels[labels["config"] == name],
                           alerts[alerts["config"] == name], group_days)
            for name in names}  # fmt: skip


def _figures(labels: pd.DataFrame, alerts: pd.DataFrame, group_days: float) -> dict[str, Any]:
    caught = labels[labels["caught"]]
    kinds = {}
    for kind, rows in labels.groupby("kind"):
        hit = rows[rows["caught"]]
        kinds[kind] = {
            "labels": len(rows),
            "recall": round(float(rows["caught"].mean()), 3),
            "delay_p50_s": _q(hit["delay_s"], 0.5),
            "delay_p90_s": _q(hit["delay_s"], 0.9),
            "from_onset_p50_s": _q(hit["from_onset_s"], 0.5),
        }
    noise = alerts[~alerts["matched"]]
    ordered = alerts.sort_values(["group", "start"])
    reopened = (
        (ordered["group"] == ordered["group"].shift())
        & (ordered["end"].shift() >= 0)
        & (ordered["start"] - ordered["end"].shift() <= 5 * 60_000)
    )
    return {
        "alerts": len(alerts),
        "noise": len(noise),
        "precision": round(1 - len(noise) / len(alerts), 4) if len(alerts) else 1.0,
        "recall": round(float(labels["caught"].mean()), 4) if len(labels) else 1.0,
        "delay_p50_s": _q(caught["delay_s"], 0.5),
        "delay_p90_s": _q(caught["delay_s"], 0.9),
        "from_onset_p50_s": _q(caught["from_onset_s"], 0.5),
        "pages_per_group_day": round(len(alerts) / group_days, 4) if group_days else 0.0,
        "flaps": int(reopened.sum()),
        "noise_by_rule": noise["rule"].value_counts().to_dict(),
        "kinds": kinds,
    }


def _q(values: pd.Series, q: float) -> float:
    return round(float(values.quantile(q)), 1) if len(values) else float("nan")


def _print(name: str, figures: dict[str, Any]) -> None:
    print(
        f"\n{name}: {figures['alerts']} alerts, {figures['noise']} noise, precision "
        f"{figures['precision']:.3f}, recall {figures['recall']:.3f}, delay p50 "
        f"{figures['delay_p50_s']:.0f} s p90 {figures['delay_p90_s']:.0f} s (from onset p50 "
        f"{figures['from_onset_p50_s']:.0f} s), {figures['pages_per_group_day']:.3f} pages per "
        f"group-day, {figures['flaps']} flaps"
    )
    if figures["noise_by_rule"]:
        print(f"  noise by rule: {figures['noise_by_rule']}")
    print(f"  {'kind':<18}{'labels':>7}{'recall':>8}{'p50 s':>8}{'p90 s':>8}{'onset p50':>11}")
    for kind, k in figures["kinds"].items():
        print(
            f"  {kind:<18}{k['labels']:>7}{k['recall']:>8.3f}{k['delay_p50_s']:>8.0f}"
            f"{k['delay_p90_s']:>8.0f}{k['from_onset_p50_s']:>11.0f}"
        )


def _met(figures: dict[str, Any], baselines: dict[str, dict[str, Any]]) -> dict[str, bool]:
    kinds = figures["kinds"].values()
    met = {
        "precision": figures["precision"] >= TARGETS["precision"],
        "recall": figures["recall"] >= TARGETS["recall"],
        "recall_every_kind": all(k["recall"] >= TARGETS["recall_every_kind"] for k in kinds),
        "delay_p50_s": figures["delay_p50_s"] <= TARGETS["delay_p50_s"],
        "delay_p90_s": figures["delay_p90_s"] <= TARGETS["delay_p90_s"],
    }
    for name, base in baselines.items():
        met[f"beats_{name}"] = (
            figures["precision"] >= base["precision"]
            and figures["recall"] >= base["recall"]
            and figures["delay_p50_s"] <= base["delay_p50_s"]
            and figures["delay_p90_s"] <= base["delay_p90_s"]
        )
    return met


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--full", action="store_true", help="5 seeds x 300 groups x 12 h")
    parser.add_argument("--seeds", type=int, nargs="*", help="default 7 8 9 (--full: 7..11)")
    parser.add_argument("--groups", type=int, help="groups per corpus (default 150; --full 300)")
    parser.add_argument("--hours", type=float, help="hours per corpus (default 6; --full 12)")
    parser.add_argument("--rules", type=Path, default=ROOT / "rules.yaml")
    args = parser.parse_args()
    seeds = args.seeds or ([7, 8, 9, 10, 11] if args.full else [7, 8, 9])
    groups = args.groups or (300 if args.full else 150)
    hours = args.hours or (12.0 if args.full else 6.0)

    began = time.perf_counter()
    rules = load_rules(args.rules)
    configs = {
        "defaults": rules,
        "burrow_mc0": burrow_only(rules, 0.0),
        "burrow_mc1": burrow_only(rules, 1.0),
    }
    with tempfile.TemporaryDirectory(prefix="alert-quality-") as tmp:
        corpora = [build_corpus(seed, groups, hours, Path(tmp)) for seed in seeds]
    labels = sum(len(c.labels) for c in corpora)
    print(
        f"alert quality: seeds {seeds}, {groups} groups x 4 partitions x {hours:g} h at "
        f"{INTERVAL_S:g} s scans, {labels} labelled incidents, warm-up 30 min, "
        f"rules {args.rules.name}"
    )
    results = score(corpora, configs)
    for name, figures in results.items():
        _print(name, figures)
    baselines = {name: results[name] for name in ("burrow_mc0", "burrow_mc1")}
    met = _met(results["defaults"], baselines)
    headline = ("alerts", "noise", "precision", "recall", "delay_p50_s", "delay_p90_s",
                "pages_per_group_day", "flaps")  # fmt: skip
    print(f"\n{time.perf_counter() - began:.0f} s")
    by_kind = {kind: k["recall"] for kind, k in results["defaults"]["kinds"].items()}
    print(
        json.dumps(
            {
                "name": "alert_quality",
                "size": {"seeds": seeds, "groups": groups, "hours": hours, "labels": labels},
                "figures": {k: results["defaults"][k] for k in headline}
                | {"recall_by_kind": by_kind},
                "baseline": {n: {k: b[k] for k in headline} for n, b in baselines.items()},
                "targets": TARGETS,
                "met": met,
            }
        )
    )


if __name__ == "__main__":
    main()
