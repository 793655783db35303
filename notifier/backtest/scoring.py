"""Scoring a replay: would-be incidents matched to labelled ones (or to SLO breaches), one summary
row per configuration (incidents, notifications, alert minutes, flaps, recall, delays).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from notifier.backtest.grid import GridConfig
from notifier.backtest.replay import ReplayOutput

MINUTE_MS = 60_000
DAY_MS = 86_400_000


@dataclass(slots=True)
class Matches:
    """How would-be incidents and labelled incidents of the same cluster and group pair up.

    ``alert_matched``: per alert (aligned with the alerts frame), whether it matches a label.
    ``first``: per (config_id, label_id) with a match, the earliest matching open (ms), or
    the earliest notice of news for an incident already open, where notices are given.
    """

    alert_matched: np.ndarray
    first: pd.DataFrame


def match_incidents(
    alerts: pd.DataFrame,
    labels: pd.DataFrame,
    tolerance_ms: int,
    *,
    overlap: bool = False,
    notices: pd.DataFrame | None = None,
) -> Matches:
    """Pair would-be incidents (``config_id, cluster, group, start_ms, end_ms``; ``end_ms`` -1
    while open) with labelled ones (``label_id, cluster, group, start_ms, end_ms``).

    A would-be incident matches a label of the same cluster and group when it opens within
    ``[label start - tolerance, label end]`` (both ends included). Labels may carry an
    ``onset_ms`` (when the fault began, before the moment it is labelled from): the window
    then opens at the onset, since an alert between onset and start caught the fault early.
    One alert may match several labels and one label several alerts; the label's delay is
    measured from the first.
    With ``overlap`` (for SLO breaches, where an alert already open when the lag crossed the
    SLO counts), it matches when it is open at any time in ``[start - tolerance, end]``.

    ``notices`` (``config_id, cluster, group, start_ms``: an open incident escalated, or a rule
    began firing at its status) also catch a label in the same window: the person was told
    then. They are not pages, so they leave ``alert_matched`` alone.
    """
    flags = np.zeros(len(alerts), dtype=bool)
    empty = pd.DataFrame({"config_id": [], "label_id": [], "first_ms": []})
    if alerts.empty or labels.empty:
        return Matches(flags, empty)
    left = alerts[["config_id", "cluster", "group", "start_ms", "end_ms"]].copy()
    left["alert"] = np.arange(len(alerts))
    right = labels[["label_id", "cluster", "group", "start_ms", "end_ms"]].rename(
        columns={"start_ms": "label_start", "end_ms": "label_end"}
    )
    right["opens"] = right["label_start"]
    if "onset_ms" in labels:
        onset = labels["onset_ms"].fillna(labels["start_ms"]).astype(np.int64)
        right["opens"] = np.minimum(right["label_start"], onset)
    pairs = left.merge(right, on=["cluster", "group"], how="inner")
    earliest = pairs["opens"] - tolerance_ms
    if overlap:
        still_open = (pairs["end_ms"] < 0) | (pairs["end_ms"] >= earliest)
        hit = (pairs["start_ms"] <= pairs["label_end"]) & still_open
    else:
        hit = (pairs["start_ms"] >= earliest) & (pairs["start_ms"] <= pairs["label_end"])
    pairs = pairs[hit]
    flags[pairs["alert"].to_numpy()] = True
    caught = pairs[["config_id", "label_id", "start_ms"]]
    if notices is not None and not notices.empty:
        told = notices[["config_id", "cluster", "group", "start_ms"]].merge(
            right, on=["cluster", "group"], how="inner"
        )
        told = told[
            (told["start_ms"] >= told["opens"] - tolerance_ms)
            & (told["start_ms"] <= told["label_end"])
        ]
        caught = pd.concat([caught, told[["config_id", "label_id", "start_ms"]]])
    first = caught.groupby(["config_id", "label_id"])["start_ms"].min().rename("first_ms")
    return Matches(flags, first.reset_index())


def labels_frame(frame: pd.DataFrame) -> pd.DataFrame:
    """Labelled incidents (from :func:`~notifier.history.load_incidents`) in epoch ms."""
    out = pd.DataFrame(
        {
            "cluster": frame["cluster"].astype(str),
            "group": frame["group"].astype(str),
            "start_ms": frame["start"].astype("datetime64[ms, UTC]").astype(np.int64),
            "end_ms": frame["end"].astype("datetime64[ms, UTC]").astype(np.int64),
            "kind": frame["kind"].astype(str) if "kind" in frame else "",
        }
    )
    if "onset" in frame:
        onset = pd.to_datetime(frame["onset"], utc=True, format="ISO8601")
        out["onset_ms"] = onset.astype("datetime64[ms, UTC]").astype(np.int64)
    out.insert(0, "label_id", np.arange(len(out)))
    return out


@dataclass(frozen=True, slots=True)
class HistorySpan:
    """What was replayed: samples, scans, clusters, the first and last scan, and from when
    on incidents count (after the warm-up); times in epoch ms."""

    samples: int
    scans: int
    clusters: int
    start_ms: int
    end_ms: int
    counted_from_ms: int

    @property
    def days(self) -> float:
        """Days counted (at least a minute's worth, so rates stay finite)."""
        return max(self.end_ms - self.counted_from_ms, MINUTE_MS) / DAY_MS


def summarize(
    configs: Sequence[GridConfig],
    output: ReplayOutput,
    span: HistorySpan,
    scan_interval_s: float,
    tolerance_ms: int,
    labels: pd.DataFrame | None = None,
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """One row per configuration, and the alerts with their match flags.

    Columns: ``config_id``, one per grid parameter, ``incidents``, ``notifications``,
    ``alerts_per_day``, ``notifications_per_day``, ``alert_minutes`` (incidents still open at
    the end count up to the last scan), ``flaps`` (incidents opening within one window —
    ``intervals`` × scan interval — of the same group's previous incident closing); with labels
    ``tp, fp, fn, precision, recall, delay_p50_s, delay_p90_s``; always ``slo_breaches,
    slo_missed, slo_delay_p50_s`` against the lag-in-seconds breaches; then the dispatcher's
    ``opens, escalations, repeats, resolves`` and ``transitions``.
    """
    alerts = output.incidents.reset_index(drop=True)
    ids = [c.config_id for c in configs]
    by_config = alerts.groupby("config_id")
    summary = pd.DataFrame({"config_id": ids})
    for name in configs[0].parameters:
        summary[name] = [c.parameters[name] for c in configs]
    summary["incidents"] = by_config.size().reindex(ids, fill_value=0).to_numpy()
    counters = output.counters.set_index("config_id").reindex(ids, fill_value=0)
    summary["notifications"] = counters["notifications"].to_numpy()
    summary["alerts_per_day"] = (summary["incidents"] / span.days).round(3)
    summary["notifications_per_day"] = (summary["notifications"] / span.days).round(3)
    end = np.where(alerts["end_ms"] < 0, span.end_ms, alerts["end_ms"])
    minutes = pd.Series((end - alerts["start_ms"].to_numpy()) / MINUTE_MS, index=alerts.index)
    summary["alert_minutes"] = (
        minutes.groupby(alerts["config_id"]).sum().reindex(ids, fill_value=0.0).round(2).to_numpy()
    )
    summary["flaps"] = _flaps(alerts, configs, scan_interval_s).reindex(ids, fill_value=0).values

    alerts = alerts.copy()
    if labels is not None:
        matches = match_incidents(alerts, labels, tolerance_ms, notices=output.notices)
        alerts["matched"] = matches.alert_matched
        summary = summary.join(_label_scores(ids, alerts, labels, matches), on="config_id")
    else:
        alerts["matched"] = pd.array([pd.NA] * len(alerts), dtype="boolean")
    breaches = output.breaches.reset_index(drop=True).copy()
    breaches.insert(0, "label_id", np.arange(len(breaches)))
    slo = match_incidents(alerts, breaches, tolerance_ms, overlap=True)
    caught = slo.first.groupby("config_id").size().reindex(ids, fill_value=0)
    summary["slo_breaches"] = len(breaches)
    summary["slo_missed"] = (len(breaches) - caught).to_numpy()
    delays = slo.first.merge(breaches[["label_id", "start_ms"]], on="label_id")
    delays["delay_s"] = np.maximum(0, delays["first_ms"] - delays["start_ms"]) / 1000
    summary["slo_delay_p50_s"] = _percentile(delays, ids, 50)
    for name in ("opens", "escalations", "repeats", "resolves", "transitions"):
        summary[name] = counters[name].to_numpy()
    return summary, alerts


def _label_scores(
    ids: list[int], alerts: pd.DataFrame, labels: pd.DataFrame, matches: Matches
) -> pd.DataFrame:
    scores = pd.DataFrame(index=pd.Index(ids, name="config_id"))
    tp = matches.first.groupby("config_id").size().reindex(ids, fill_value=0)
    total = alerts.groupby("config_id").size().reindex(ids, fill_value=0)
    matched = alerts.groupby("config_id")["matched"].sum().reindex(ids, fill_value=0)
    scores["tp"] = tp.astype(np.int64)
    scores["fp"] = (total - matched).astype(np.int64)
    scores["fn"] = (len(labels) - tp).astype(np.int64)
    with np.errstate(invalid="ignore", divide="ignore"):
        scores["precision"] = np.where(total > 0, matched / total.clip(lower=1), np.nan).round(4)
        scores["recall"] = (tp / len(labels)).round(4) if len(labels) else np.nan
    delays = matches.first.merge(labels[["label_id", "start_ms"]], on="label_id")
    delays["delay_s"] = (delays["first_ms"] - delays["start_ms"]) / 1000
    scores["delay_p50_s"] = _percentile(delays, ids, 50)
    scores["delay_p90_s"] = _percentile(delays, ids, 90)
    return scores


def _percentile(delays: pd.DataFrame, ids: list[int], q: float) -> np.ndarray:
    if delays.empty:
        return np.full(len(ids), np.nan)
    values = delays.groupby("config_id")["delay_s"].quantile(q / 100)
    return values.reindex(ids).round(1).to_numpy()


def _flaps(
    alerts: pd.DataFrame, configs: Sequence[GridConfig], scan_interval_s: float
) -> pd.Series:
    """Per configuration, incidents that opened within one window after the same group's
    previous incident closed."""
    if alerts.empty:
        return pd.Series(dtype=np.int64)
    window_ms = pd.Series(
        {c.config_id: c.rules.window.intervals * scan_interval_s * 1000 for c in configs}
    )
    ordered = alerts.sort_values(["config_id", "cluster", "group", "start_ms"])
    same = (
        (ordered["config_id"] == ordered["config_id"].shift())
        & (ordered["cluster"] == ordered["cluster"].shift())
        & (ordered["group"] == ordered["group"].shift())
    )
    previous_end = ordered["end_ms"].shift()
    gap = ordered["start_ms"] - previous_end
    limit = ordered["config_id"].map(window_ms)
    flap = same & (previous_end >= 0) & (gap <= limit)
    return flap.groupby(ordered["config_id"]).sum().astype(np.int64)
