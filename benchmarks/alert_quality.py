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

The same configurations are also run over the sweep (:mod:`notifier.backtest.sweep`): every
benign pattern of real fleets over a grid of its parameters (zero pages anywhere is the target)
and every incident kind over its own grid (detection delay per cell), simulated on
:mod:`notifier.backtest.kafkasim`, a model of what brokers and clients do written apart from
the rules. Precision, recall and delays are then given on the sweep, the fleet, and both.

Three more corpora are recorded from real brokers (:mod:`notifier.recorder`, committed in
``benchmarks/corpora/kafka-4.4-recorded``, ``kafka-3.9-recorded`` and
``kafka-4.4-rebalance-recorded``): real aiokafka and Java consumers scripted to crash, restart,
roll, pause, stall, stop, fall behind, rewind and lose records on Apache Kafka 4.4 and 3.9 (the
latter with a broker restart), and to crash-loop, be thrown out by their poll timeout, hold a
rebalance while frozen and scale out and in on 4.4, scanned by the service itself, labelled by
the scripts. Each is scored the same way, per kind, with the benign pages per scenario; then
all together, and they count in the figures of all corpora together.

Another corpus is generated apart from the rules (:mod:`notifier.synth.independent`: a fleet
modelled from the domain notes and client defaults by someone who had not read the rules, every
benign pattern at random points of its range, faults of every kind) in the recorded corpora's
format, and any labelled corpus in that format can be given with ``--corpus DIR``. Every
labelled corpus on disk, recorded or not, is scored by :func:`score_labelled` and printed by
:func:`print_labelled`: figures per configuration and kind, false pages per scenario, and every
false page, missed label and label caught later than the p90 target with its scenario, minute
and group (every configuration's on the recorded corpora, the defaults' on the others;
``--details``: every configuration's everywhere). The JSON line holds each corpus under
``corpora`` by name (``kafka-4.4-recorded``, ``kafka-3.9-recorded``,
``kafka-4.4-rebalance-recorded``, ``independent``, each
``--corpus`` path) and the recorded ones pooled under ``recorded``.

    python benchmarks/alert_quality.py            # 3 seeds x 150 groups x 6 h, sweep 2 replicas
    python benchmarks/alert_quality.py --full     # 5 seeds x 300 groups x 12 h, 4 replicas
    python benchmarks/alert_quality.py --report DIR   # also the sweep's heat maps (HTML, PNG)
                                                      # and every labelled corpus's tables
    python benchmarks/alert_quality.py --no-sweep --no-fleet --corpus DIR   # your own corpus

Targets for the defaults (10 s scans, the sweep and the fleet together): precision >= 0.98,
recall >= 0.98 and >= 0.95 for every kind, median delay <= 30 s, p90 <= 120 s, no page in any
benign cell of the sweep, and better than Burrow's rules on precision, recall, median and p90.
Ends with one JSON line (the sweep's figures in it too).
"""

from __future__ import annotations

import argparse
import html
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
from notifier.backtest import sweep as sweeps  # noqa: E402
from notifier.backtest.scoring import labels_frame  # noqa: E402
from notifier.backtest.sweepreport import write_sweep_report  # noqa: E402
from notifier.history import load_incidents, read_history  # noqa: E402
from notifier.recorder import load_corpus  # noqa: E402
from notifier.recorder.corpus import iso_ms  # noqa: E402
from notifier.rules import RulesConfig, load_rules, parse_rules  # noqa: E402
from notifier.synth import synthesize_fleet  # noqa: E402
from notifier.synth.independent import generate as generate_independent  # noqa: E402

INTERVAL_S = 10.0
WARMUP_MS = 30 * 60_000
RECORDED = [
    ROOT / "benchmarks" / "corpora" / "kafka-4.4-recorded",
    ROOT / "benchmarks" / "corpora" / "kafka-3.9-recorded",
    ROOT / "benchmarks" / "corpora" / "kafka-4.4-rebalance-recorded",
]
INDEPENDENT = {"groups": 160, "hours": 4.0, "seed": 1}
INDEPENDENT_FULL = {"groups": 300, "hours": 8.0, "seed": 1}
DELAYS = ("delay_p50_s", "delay_p90_s")

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


@dataclass
class Labelled:
    """A labelled corpus on disk (recorded from a broker, generated apart from the rules, or
    given with ``--corpus``) scored through every configuration by :func:`score_labelled`."""

    name: str
    title: str
    recorded: bool
    figures: dict[str, dict[str, Any]]  # per configuration, with its benign pages per scenario
    labels: pd.DataFrame
    groups: pd.DataFrame
    meta: dict[str, Any]
    started_ms: int


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


def build_recorded(path: Path) -> tuple[Corpus, pd.DataFrame, dict[str, Any]]:
    """The recorded corpus (:func:`notifier.recorder.load_corpus`), replay-ready, with its
    groups (which scenario each is) and how it was recorded."""
    recorded = load_corpus(path)
    if recorded.scan_interval_s != INTERVAL_S:
        raise SystemExit(f"{path}: recorded at {recorded.scan_interval_s:g} s scans, "
                         f"scored at {INTERVAL_S:g} s")  # fmt: skip
    ts = recorded.table.column("ts").cast("int64").to_numpy()
    start, end = int(ts.min()), int(ts.max())
    counted_from = start + round(recorded.warmup_s * 1000)
    labels = labels_frame(recorded.labels)
    labels = labels[labels["end_ms"] >= counted_from].reset_index(drop=True)
    labels["label_id"] = np.arange(len(labels))
    samples = SampleArrays.from_arrow(recorded.table)
    corpus = Corpus(0, samples, labels, len(recorded.groups), counted_from, end)
    return corpus, recorded.groups, recorded.meta


def benign_pages(alerts: pd.DataFrame, groups: pd.DataFrame) -> dict[str, int]:
    """False pages per scenario of the recorded corpus (every scenario listed, 0 if none)."""
    scenario = groups.set_index("group")["scenario"]
    false = alerts[~alerts["matched"].astype(bool)]
    counts = false["group"].map(scenario).value_counts()
    return {name: int(counts.get(name, 0)) for name in groups["scenario"]}


def print_labelled(corpus: Labelled, every_config: bool) -> None:
    """What :func:`score_labelled` found on one corpus: the figures of every configuration,
    the false pages per scenario, and the defaults' false pages, misses and late detections one
    by one, each with its scenario, minute and group (every configuration's with
    ``every_config``)."""
    figures_of, groups, meta = corpus.figures, corpus.groups, corpus.meta
    for name, figures in figures_of.items():
        _print(f"{name} on the {corpus.title}", figures)
    names = list(figures_of)
    print(f"\n{corpus.title} ({meta['broker']}, {len(groups)} groups, "
          f"{meta['duration_s'] / 60:.0f} min at {meta['scan_interval_s']:g} s scans, warm-up "
          f"{meta['warmup_s'] / 60:g} min): false pages per scenario")  # fmt: skip
    per_scenario = groups.groupby("scenario", sort=False).agg(
        kind=("kind", "first"), groups=("group", "size")
    )
    print(f"  {'scenario':<26}{'kind':<16}{'groups':>7}" + "".join(f"{n:>12}" for n in names))
    for scenario, row in per_scenario.iterrows():
        cells = "".join(f"{figures_of[n]['benign_pages'][scenario]:>12}" for n in names)
        print(f"  {scenario:<26}{row.kind or '-':<16}{row.groups:>7}{cells}")
    for name in names:
        if name == "defaults" or every_config:
            _print_details(corpus, name)


def _print_details(corpus: Labelled, name: str) -> None:
    """Every false page, missed label and late detection of one configuration: minute of the
    corpus, UTC, scenario, rule or kind, how long the page stayed open or how late it came, the
    group and what it was set up to do, so that each can be read against what the group did."""
    figures = corpus.figures[name]
    by_group = corpus.groups.set_index("group")
    started = corpus.started_ms

    def when(ms: int) -> str:
        return f"minute {(ms - started) / 60_000:6.1f}  {iso_ms(int(ms))}"

    def who(group: str) -> tuple[str, str]:
        if group not in by_group.index:
            return group, group
        row = by_group.loc[group]
        return str(row["scenario"]), f"{group}: {row['description']}"

    alerts = figures["_alerts"]
    false = alerts[~alerts["matched"].astype(bool)].sort_values(["start", "group"])
    print(f"\n  {name} on the {corpus.title}: {len(false)} false pages "
          "(minute of the corpus, UTC, scenario, rule, how long open)")  # fmt: skip
    for a in false.itertuples():
        scenario, group = who(a.group)
        open_s = "to the end" if a.end < 0 else f"{(a.end - a.start) / 1000:.0f} s"
        print(f"    {when(a.start)}  {scenario:<26} {a.rule:<24} {open_s:>10}  {group}")
    per_label = figures["_labels"].reset_index(drop=True)
    labels = corpus.labels.reset_index(drop=True).assign(
        caught=per_label["caught"].to_numpy(), delay=per_label["delay_s"].to_numpy()
    )
    missed = labels[~labels["caught"].astype(bool)]
    late = labels[labels["delay"] > TARGETS["delay_p90_s"]]
    for title, rows in ((f"{len(missed)} missed labels", missed),
                        (f"{len(late)} labels caught later than {TARGETS['delay_p90_s']:g} s "
                         "after their start", late)):  # fmt: skip
        print(f"  {name} on the {corpus.title}: {title}")
        for lb in rows.itertuples():
            scenario, group = who(lb.group)
            caught = f"caught after {lb.delay:.0f} s" if lb.caught else "missed"
            print(f"    {when(lb.start_ms)}  {scenario:<26} {lb.kind:<24} {caught:>10}  until "
                  f"minute {(lb.end_ms - started) / 60_000:.1f}  {group}")  # fmt: skip


def write_corpora_report(path: Path, title: str, corpora: list[Labelled]) -> None:
    """Labelled corpora's tables as one HTML page: figures, per kind, per scenario, one section
    per corpus."""
    path.write_text(
        f"<!doctype html><meta charset=utf-8><title>{html.escape(title)}</title>"
        "<style>body{font-family:sans-serif;margin:2em}table{border-collapse:collapse}"
        "td,th{border:1px solid #ccc;padding:2px 8px}</style>"
        + "".join(_corpus_section(corpus) for corpus in corpora)
    )


def _corpus_section(corpus: Labelled) -> str:
    figures_of, groups, meta = corpus.figures, corpus.groups, corpus.meta
    names = list(figures_of)
    overall = pd.DataFrame.from_dict(
        {n: {k: figures_of[n][k] for k in ("alerts", "noise", "precision", "recall",
                                           "delay_p50_s", "delay_p90_s")} for n in names},
        orient="index",
    )  # fmt: skip
    kinds = sorted({k for n in names for k in figures_of[n]["kinds"]})
    per_kind = pd.DataFrame(
        {n: {k: _kind_cell(figures_of[n]["kinds"].get(k)) for k in kinds} for n in names}
    )
    scenarios = groups.drop_duplicates("scenario").set_index("scenario")
    pages = pd.DataFrame({n: figures_of[n]["benign_pages"] for n in names})
    pages.insert(0, "kind", scenarios["kind"].reindex(pages.index))
    pages.insert(1, "description", scenarios["description"].reindex(pages.index))
    return (
        f"<h1>The {html.escape(corpus.title)}: {html.escape(str(meta['broker']))}</h1>"
        f"<p>{len(groups)} groups, {meta['duration_s'] / 60:.0f} min at "
        f"{meta['scan_interval_s']:g} s scans, warm-up {meta['warmup_s'] / 60:g} min; "
        f"from {meta.get('started', '')} with <code>{meta.get('command', '')}</code></p>"
        "<h2>Alerts</h2>"
        + overall.to_html()
        + "<h2>Per incident kind: recall, delay p50 / p90 (s)</h2>"
        + per_kind.to_html()
        + "<h2>False pages per scenario</h2>"
        + pages.to_html()
    )


def _kind_cell(k: dict[str, Any] | None) -> str:
    if k is None:
        return "-"
    return f"{k['recall']:.2f} {k['delay_p50_s']:.0f}/{k['delay_p90_s']:.0f} ({k['labels']})"


def score_labelled(
    path: Path, name: str, title: str, configs: dict[str, RulesConfig], recorded: bool = False
) -> Labelled:
    """Score a labelled corpus in the recorded corpus's format (:func:`build_recorded`) through
    every configuration, with the false pages per scenario; :func:`print_labelled` prints it."""
    corpus, groups, meta = build_recorded(path)
    figures_of = score([corpus], configs)
    for figures in figures_of.values():
        figures["benign_pages"] = benign_pages(figures["_alerts"], groups)
    # a corpus that does not say when it began is timed from its first scan
    started = meta.get("started_ms", corpus.counted_from_ms - round(float(meta["warmup_s"]) * 1000))
    return Labelled(name, title, recorded, figures_of, corpus.labels, groups, meta, int(started))


def pooled(parts: list[dict[str, dict[str, Any]]]) -> dict[str, dict[str, Any]]:
    """Figures per configuration of several scored corpora taken as one (their labels, alerts
    and group-days pooled), as :func:`score` gives them for one."""
    figures: dict[str, dict[str, Any]] = {}
    for name in parts[0]:
        labels = pd.concat([p[name]["_labels"] for p in parts], ignore_index=True)
        alerts = pd.concat([p[name]["_alerts"] for p in parts], ignore_index=True)
        days = sum(p[name]["_group_days"] for p in parts)
        figures[name] = _figures(labels, alerts, days) | {
            "_labels": labels,
            "_alerts": alerts,
            "_group_days": days,
        }
    return figures


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
        matches = match_incidents(
            alerts, corpus.labels, round(INTERVAL_S * 1000), notices=output.notices
        )
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
                        "group": label.group,
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
            | {"_labels": labels[labels["config"] == name],
               "_alerts": alerts[alerts["config"] == name], "_group_days": group_days}
            for name in names}  # fmt: skip


def sweep_frames(
    results: list[sweeps.PatternResult], name: str
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The sweep's labels and alerts of one configuration, in :func:`score`'s columns."""
    columns = ["config", "kind", "group", "caught", "delay_s", "from_onset_s"]
    labels = [r.labels[r.labels["config"] == name] for r in results if len(r.labels)]
    if labels:
        frame = pd.concat(labels, ignore_index=True)
        label_rows = frame.assign(from_onset_s=frame["delay_s"])[columns]
    else:  # benign patterns alone: no fault labels, the columns all the same
        empty = {c: pd.Series(dtype=bool if c == "caught" else object) for c in columns}
        label_rows = pd.DataFrame(empty)
    alerts = [r.alerts[r.alerts["config"] == name] for r in results]
    a = pd.concat(alerts, ignore_index=True)
    alert_rows = pd.DataFrame({"config": name, "matched": a["matched"].astype(bool),
                               "rule": a["rule"], "group": a["group"], "start": a["start_ms"],
                               "end": a["end_ms"]})  # fmt: skip
    return label_rows, alert_rows


def write_delays(path: Path, corpora: list[tuple[str, pd.DataFrame]]) -> None:
    """Every label's delay, slowest first, with the corpus it came from."""
    frame = pd.concat([labels.assign(corpus=name) for name, labels in corpora], ignore_index=True)
    frame = frame.sort_values("delay_s", ascending=False)
    frame[["corpus", "kind", "group", "caught", "delay_s"]].to_csv(path, index=False)
    print(f"\nevery label's delay: {path}")


def _figures(labels: pd.DataFrame, alerts: pd.DataFrame, group_days: float) -> dict[str, Any]:
    """Precision, recall, delays and noise of one configuration; with no fault labels (a sweep
    of benign patterns alone) the detection figures are None: there was nothing to detect."""
    if not len(labels):
        labels = pd.DataFrame({"kind": [], "caught": pd.Series(dtype=bool), "delay_s": [],
                               "from_onset_s": []})  # fmt: skip
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
    detected = len(labels) > 0
    return {
        "alerts": len(alerts),
        "noise": len(noise),
        "precision": round(1 - len(noise) / len(alerts), 4) if len(alerts) else 1.0,
        "labels": len(labels),
        "recall": round(float(labels["caught"].mean()), 4) if detected else None,
        "delay_p50_s": _q(caught["delay_s"], 0.5) if detected else None,
        "delay_p90_s": _q(caught["delay_s"], 0.9) if detected else None,
        "from_onset_p50_s": _q(caught["from_onset_s"], 0.5) if detected else None,
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
        f"{figures['precision']:.3f}, {_detection(figures)} (from onset p50 "
        f"{_seconds(figures['from_onset_p50_s'])}), {figures['pages_per_group_day']:.3f} pages "
        f"per group-day, {figures['flaps']} flaps"
    )
    if figures["noise_by_rule"]:
        print(f"  noise by rule: {figures['noise_by_rule']}")
    print(f"  {'kind':<18}{'labels':>7}{'recall':>8}{'p50 s':>8}{'p90 s':>8}{'onset p50':>11}")
    for kind, k in figures["kinds"].items():
        print(
            f"  {kind:<18}{k['labels']:>7}{k['recall']:>8.3f}{k['delay_p50_s']:>8.0f}"
            f"{k['delay_p90_s']:>8.0f}{k['from_onset_p50_s']:>11.0f}"
        )


def _detection(figures: dict[str, Any]) -> str:
    """Recall and delays, or that there was no fault to detect."""
    if figures["recall"] is None:
        return "no fault labels (nothing to detect)"
    return (f"recall {figures['recall']:.3f}, delay p50 {_seconds(figures['delay_p50_s'])} p90 "
            f"{_seconds(figures['delay_p90_s'])}")  # fmt: skip


def _seconds(value: float | None) -> str:
    return "-" if value is None else f"{value:.0f} s"


def _met(figures: dict[str, Any], baselines: dict[str, dict[str, Any]]) -> dict[str, bool]:
    """Which targets the figures meet, and whether they beat each baseline; the detection
    targets only when there were faults to detect."""
    met = {"precision": figures["precision"] >= TARGETS["precision"]}
    detected = figures["recall"] is not None
    if detected:
        kinds = figures["kinds"].values()
        met |= {
            "recall": figures["recall"] >= TARGETS["recall"],
            "recall_every_kind": all(k["recall"] >= TARGETS["recall_every_kind"] for k in kinds),
            "delay_p50_s": figures["delay_p50_s"] <= TARGETS["delay_p50_s"],
            "delay_p90_s": figures["delay_p90_s"] <= TARGETS["delay_p90_s"],
        }
    for name, base in baselines.items():
        met[f"beats_{name}"] = figures["precision"] >= base["precision"] and (
            not detected
            or (
                figures["recall"] >= base["recall"]
                and figures["delay_p50_s"] <= base["delay_p50_s"]
                and figures["delay_p90_s"] <= base["delay_p90_s"]
            )
        )
    return met


def _print_sweep(summary: dict[str, Any], names: list[str]) -> None:
    print("\nbenign patterns: pages (cells with pages / cells), per configuration")
    print(f"  {'pattern':<22}" + "".join(f"{n:>22}" for n in names))
    for pattern in sweeps.BENIGN:
        cells = []
        for n in names:
            p = summary[n]["patterns"].get(pattern.name)
            cells.append(
                "-" if p is None else f"{p['pages']} ({p['cells_with_pages']}/{p['cells']})"
            )
        print(f"  {pattern.name:<22}" + "".join(f"{c:>22}" for c in cells))
    print("\nfault sweep: recall, p50 / p90 delay (s), worst cell's p90, per configuration")
    print(f"  {'kind':<18}" + "".join(f"{n:>34}" for n in names))
    kinds = sorted({k for n in names for k in summary[n]["kinds"]})
    for kind in kinds:
        cells = []
        for n in names:
            k = summary[n]["kinds"].get(kind)
            cells.append(
                "-"
                if k is None
                else f"{k['recall']:.2f} {k['delay_p50_s']:.0f}/"
                f"{k['delay_p90_s']:.0f} worst {k['worst_cell_p90_s']:.0f}"
            )
        print(f"  {kind:<18}" + "".join(f"{c:>34}" for c in cells))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--full", action="store_true", help="5 seeds x 300 groups x 12 h")
    parser.add_argument("--seeds", type=int, nargs="*", help="default 7 8 9 (--full: 7..11)")
    parser.add_argument("--groups", type=int, help="groups per corpus (default 150; --full 300)")
    parser.add_argument("--hours", type=float, help="hours per corpus (default 6; --full 12)")
    parser.add_argument("--rules", type=Path, default=ROOT / "rules.yaml")
    parser.add_argument(
        "--replicas", type=int, help="sweep replicas per cell (default 2; --full 4)"
    )
    parser.add_argument("--patterns", nargs="*", help="sweep only these patterns and faults")
    parser.add_argument("--no-sweep", action="store_true", help="the fleet corpus alone")
    parser.add_argument("--no-fleet", action="store_true", help="the sweep alone")
    parser.add_argument(
        "--recorded",
        type=Path,
        nargs="+",
        default=RECORDED,
        metavar="DIR",
        help="the recorded corpora (default benchmarks/corpora/kafka-4.4-recorded, "
        "kafka-3.9-recorded and kafka-4.4-rebalance-recorded)",
    )
    parser.add_argument("--no-recorded", action="store_true", help="leave the recorded corpora out")
    parser.add_argument(
        "--no-independent",
        action="store_true",
        help="leave out the corpus generated apart from the rules (notifier.synth.independent; "
        "160 groups x 4 h, --full 300 x 8 h)",
    )
    parser.add_argument(
        "--independent-seed",
        type=int,
        default=1,
        metavar="N",
        help="the independent corpus's seed (default 1, the one the README reports): another "
        "seed is a fleet the rules were never looked at on",
    )
    parser.add_argument(
        "--corpus",
        type=Path,
        action="append",
        default=[],
        metavar="DIR",
        help="also score this labelled corpus (the recorded corpus's format: history/, "
        "incidents.csv, groups.csv, corpus.json); repeatable",
    )
    parser.add_argument(
        "--details",
        action="store_true",
        help="list every false page, miss and late detection of every configuration on every "
        "corpus (by default: every configuration's on the recorded corpora, the defaults' on "
        "the others)",
    )
    parser.add_argument("--report", type=Path, help="write the sweep's heat maps (HTML, PNG) here")
    parser.add_argument(
        "--delays",
        type=Path,
        metavar="CSV",
        help="write every label of every corpus with the defaults' delay (corpus, kind, group, "
        "caught, delay_s): which labels make the pooled p90",
    )
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
    sweep_names = ["defaults", "burrow_mc1"]
    labels = 0
    results: dict[str, dict[str, Any]] = {}
    if not args.no_fleet:
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
    labelled: list[Labelled] = []

    def add(corpus: Labelled) -> None:
        labelled.append(corpus)
        print_labelled(corpus, every_config=args.details or corpus.recorded)

    if not args.no_recorded:
        for path in args.recorded:
            add(score_labelled(path, path.name, f"recorded corpus {path.name}", configs, True))
    if not args.no_independent:
        size = (INDEPENDENT_FULL if args.full else INDEPENDENT) | {"seed": args.independent_seed}
        with tempfile.TemporaryDirectory(prefix="independent-") as tmp:
            made = time.perf_counter()
            generated = generate_independent(Path(tmp) / "independent", **size)
            print(f"\nindependent corpus: {size['groups']} groups x {size['hours']:g} h, seed "
                  f"{size['seed']}, {generated.rows} rows, {len(generated.labels)} labels, "
                  f"generated in {time.perf_counter() - made:.0f} s")  # fmt: skip
            add(score_labelled(generated.path, "independent", "independent corpus", configs))
    for path in args.corpus:
        add(score_labelled(path, str(path), f"corpus {path}", configs))
    recorded_corpora = [c for c in labelled if c.recorded]
    recorded: dict[str, dict[str, Any]] = {}
    if recorded_corpora:
        recorded = pooled([c.figures for c in recorded_corpora])
        for name, figures in recorded.items():
            figures["benign_pages"] = {
                f"{c.name}/{scenario}": pages
                for c in recorded_corpora
                for scenario, pages in c.figures[name]["benign_pages"].items()
            }
            if len(recorded_corpora) > 1:
                _print(f"{name} on the recorded corpora together", figures)
    if args.report and labelled:
        args.report.mkdir(parents=True, exist_ok=True)
        pages = {"recorded.html": ("Recorded corpora", recorded_corpora)} | {
            f"{Path(c.name).name}.html": (c.title, [c]) for c in labelled if not c.recorded
        }
        for page, (title, corpora) in pages.items():
            if corpora:
                write_corpora_report(args.report / page, title, corpora)
                print(f"\n{title}'s tables: {args.report / page}")
    sweep_summary: dict[str, Any] = {}
    together: dict[str, dict[str, Any]] = {}
    delays: list[tuple[str, pd.DataFrame]] = []
    if not args.no_sweep:
        replicas = args.replicas or (4 if args.full else 2)
        chosen = [p for p in (*sweeps.BENIGN, *sweeps.FAULTS)
                  if not args.patterns or p.name in args.patterns]  # fmt: skip
        print(f"\nsweep: {len(chosen)} patterns and faults, {replicas} replicas per cell, "
              f"{'every cell meeting every value' if args.full else 'every pair of values'} "
              "of the other axes")  # fmt: skip
        swept = sweeps.run_sweep(
            {n: configs[n] for n in sweep_names},
            chosen,
            replicas=replicas,
            progress=lambda done: print(f"  {done}", flush=True),
            full=args.full,
        )
        sweep_summary = sweeps.summarize_sweep(swept)
        _print_sweep(sweep_summary, sweep_names)
        if args.report:
            args.report.mkdir(parents=True, exist_ok=True)
            pngs = write_sweep_report(
                args.report / "sweep.html",
                swept,
                sweep_names,
                args.report,
                f"rules {args.rules.name}, {replicas} replicas",
            )
            print(f"\nheat maps: {args.report / 'sweep.html'} and {len(pngs)} PNG files")
        all_corpora = ["sweep", *(["fleet"] if results else []),
                       *(Path(c.name).name for c in labelled)]  # fmt: skip
        for name in sweep_names:
            s_labels, s_alerts = sweep_frames(swept, name)
            days = sum(result.group_days for result in swept)
            sweep_figures = _figures(s_labels, s_alerts, days)
            sweep_summary[name] |= {
                k: sweep_figures[k]
                for k in ("alerts", "noise", "precision", "labels", "recall", *DELAYS)
            }
            parts = [corpus[name] for corpus in (results, *(c.figures for c in labelled))
                     if name in corpus]  # fmt: skip
            if name == "defaults":
                delays.append(("sweep", s_labels))
            if parts:
                both_l = pd.concat([*(p["_labels"] for p in parts), s_labels], ignore_index=True)
                both_a = pd.concat([*(p["_alerts"] for p in parts), s_alerts], ignore_index=True)
                together[name] = _figures(both_l, both_a, days)
            print(
                f"\n{name} on the sweep: {sweep_figures['alerts']} alerts, "
                f"{sweep_figures['noise']} false, precision {sweep_figures['precision']:.3f}, "
                f"{_detection(sweep_figures)}"
            )
            if name in together:
                t = together[name]
                print(
                    f"{name} on {' + '.join(all_corpora)}: precision "
                    f"{t['precision']:.3f}, {_detection(t)}, per kind recall "
                    f"{ {k: v['recall'] for k, v in t['kinds'].items()} }"
                )
    if args.delays:
        if "defaults" in results:
            delays.append(("fleet", results["defaults"]["_labels"]))
        delays += [(Path(c.name).name, c.figures["defaults"]["_labels"]) for c in labelled]
        write_delays(args.delays, delays)
    scored = together or results or {n: {**sweep_summary[n], "kinds": sweep_summary[n]["kinds"]}
                                     for n in sweep_names if n in sweep_summary}  # fmt: skip
    if not scored and labelled:
        scored = pooled([c.figures for c in labelled])
        if len(labelled) > 1:
            print("\nall labelled corpora together:")
            for name, figures in scored.items():
                _print(name, figures)
    if not scored:
        raise SystemExit(
            "nothing to score: every corpus was left out (--no-fleet, --no-sweep, "
            "--no-recorded, --no-independent and no --corpus)"
        )
    baselines = {name: scored[name] for name in ("burrow_mc0", "burrow_mc1") if name in scored}
    met = _met(scored["defaults"], baselines)
    if sweep_summary:
        met["zero_benign_pages"] = sweep_summary["defaults"]["benign_pages"] == 0
    headline = ("alerts", "noise", "precision", "recall", "delay_p50_s", "delay_p90_s",
                "pages_per_group_day", "flaps")  # fmt: skip
    print(f"\n{time.perf_counter() - began:.0f} s")
    by_kind = {kind: k["recall"] for kind, k in scored["defaults"]["kinds"].items()}
    sweep_json = {
        n: {k: v for k, v in s.items() if k != "patterns"}
        | {"benign_pages_by_pattern": {p: v["pages"] for p, v in s["patterns"].items()}}
        for n, s in sweep_summary.items()
    }
    print(
        json.dumps(
            {
                "name": "alert_quality",
                "size": {
                    "seeds": seeds,
                    "groups": groups,
                    "hours": hours,
                    "labels": labels,
                    "fleet": not args.no_fleet,
                    "sweep": not args.no_sweep,
                    "recorded": None if args.no_recorded else [str(p) for p in args.recorded],
                    "independent": None
                    if args.no_independent
                    else (INDEPENDENT_FULL if args.full else INDEPENDENT)
                    | {"seed": args.independent_seed},
                    "corpora": [str(c) for c in args.corpus],
                },
                "figures": {k: scored["defaults"].get(k) for k in headline}
                | {"recall_by_kind": by_kind},
                "fleet": {n: {k: r[k] for k in headline} for n, r in results.items()},
                "sweep": sweep_json,
                "recorded": {
                    n: {k: r[k] for k in headline}
                    | {"kinds": r["kinds"], "benign_pages_by_scenario": r["benign_pages"]}
                    for n, r in recorded.items()
                },
                "corpora": {
                    c.name: {
                        n: {k: r[k] for k in headline}
                        | {"kinds": r["kinds"], "benign_pages_by_scenario": r["benign_pages"]}
                        for n, r in c.figures.items()
                    }
                    for c in labelled
                },
                "baseline": {n: {k: b.get(k) for k in headline} for n, b in baselines.items()},
                "targets": TARGETS | {"benign_pages": 0},
                "met": met,
            },
            default=float,
        )
    )


if __name__ == "__main__":
    main()
