"""The HTML report: one self-contained page with the summary table and plots inline as PNG.

Plots use matplotlib's object API (no pyplot, no GUI backend), imported only when a report is
drawn, so that importing the backtest stays cheap.
"""

from __future__ import annotations

import base64
import html
import io
import math
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from notifier.backtest.recommend import Recommendation, show_parameter, show_value
from notifier.backtest.scoring import DAY_MS, MINUTE_MS, HistorySpan, match_incidents
from notifier.rules import RulesConfig

_STATUS_COLOURS = {"WARN": "#e8a33d", "ERR": "#d9534f"}
_LABEL_COLOUR = "#9db4d3"


def _png(figure: Any) -> str:
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=96, bbox_inches="tight")
    return base64.b64encode(buffer.getvalue()).decode("ascii")


def _figure(width: float, height: float) -> Any:
    # The object API, not pyplot: no global state, no GUI backend, safe in any process.
    from matplotlib.figure import Figure

    return Figure(figsize=(width, height))


def _time_axis(axes: Any) -> None:
    import matplotlib.dates as mdates

    locator = mdates.AutoDateLocator()
    axes.xaxis.set_major_locator(locator)
    axes.xaxis.set_major_formatter(mdates.ConciseDateFormatter(locator))


def _plot_parameters(
    summary: pd.DataFrame, parameters: list[str], show: Callable[[str, Any], str]
) -> str | None:
    """Alerts (and notifications) per day against each grid parameter."""
    grid = summary[summary["config_id"] > 0]
    if not parameters or grid.empty:
        return None
    columns = min(3, len(parameters))
    rows = math.ceil(len(parameters) / columns)
    figure = _figure(4.6 * columns, 3.4 * rows)
    base = summary[summary["config_id"] == 0].iloc[0]
    for index, name in enumerate(parameters):
        axes = figure.add_subplot(rows, columns, index + 1)
        values = sorted(grid[name].unique(), key=_sort_key)
        position = {value: i for i, value in enumerate(values)}
        x = grid[name].map(position).to_numpy(dtype=float)
        jitter = (grid["config_id"].to_numpy() % 7 - 3) * 0.03
        for column, marker, colour in (
            ("alerts_per_day", "o", "#3b6ea8"),
            ("notifications_per_day", "s", "#c0504d"),
        ):
            axes.scatter(x + jitter, grid[column], marker=marker, s=18, alpha=0.6, color=colour)
            means = grid.groupby(name)[column].mean()
            axes.plot(
                [position[v] for v in values],
                [means[v] for v in values],
                color=colour,
                label=column.replace("_", " "),
            )
            axes.axhline(base[column], color=colour, linestyle=":", linewidth=1)
        axes.set_xticks(range(len(values)), [show(name, v) for v in values])
        axes.set_xlabel(name)
        axes.set_ylabel("per day")
        axes.grid(alpha=0.3)
        if index == 0:
            axes.legend(fontsize=8, title="dotted: config 0", title_fontsize=7)
    figure.tight_layout()
    return _png(figure)


def _sort_key(value: Any) -> tuple[int, Any]:
    return (0, value) if isinstance(value, int | float) else (1, str(value))


def _pareto(x: np.ndarray, y: np.ndarray, higher_is_better: bool) -> np.ndarray:
    """Indexes of the configurations no other beats on both noise (x, lower) and y."""
    score = y if higher_is_better else -y
    order = np.lexsort((-score, x))
    best = -np.inf
    front = []
    for i in order.tolist():
        if not np.isnan(score[i]) and score[i] > best:
            front.append(i)
            best = score[i]
    return np.asarray(front, dtype=np.int64)


def _plot_frontier(summary: pd.DataFrame, labelled: bool, chosen: int, recall_target: float) -> str:
    """Noise (notifications) against recall, or against the SLO detection delay."""
    figure = _figure(7.5, 4.6)
    axes = figure.add_subplot(1, 1, 1)
    x = summary["notifications"].to_numpy(dtype=float)
    if labelled:
        y = summary["recall"].to_numpy(dtype=float)
        axes.set_ylabel("recall (labelled incidents caught)")
        axes.axhline(recall_target, color="grey", linestyle="--", linewidth=1)
        axes.set_ylim(-0.05, 1.05)
        colour = summary["delay_p50_s"].to_numpy(dtype=float)
        front = _pareto(x, y, higher_is_better=True)
    else:
        y = summary["slo_delay_p50_s"].to_numpy(dtype=float)
        axes.set_ylabel("median delay after an SLO breach (s)")
        colour = summary["slo_missed"].to_numpy(dtype=float)
        front = _pareto(x, y, higher_is_better=False)
    points = axes.scatter(x, y, c=colour, cmap="viridis", s=36, zorder=3)
    colourbar = figure.colorbar(points, ax=axes)
    colourbar.set_label("median delay (s)" if labelled else "SLO breaches missed")
    if front.size:
        axes.plot(x[front], y[front], color="#555", linewidth=1, zorder=2, label="frontier")
    for config_id, xi, yi in zip(summary["config_id"], x, y):
        if not np.isnan(yi):
            axes.annotate(
                str(config_id), (xi, yi), fontsize=7, xytext=(3, 3), textcoords="offset points"
            )
    picked = summary["config_id"].to_numpy() == chosen
    axes.scatter(x[picked], y[picked], marker="*", s=260, facecolor="none", edgecolor="#d9534f",
                 linewidth=1.5, zorder=4, label=f"recommended ({chosen})")  # fmt: skip
    if x.size and x.max() > 50 * max(1.0, x.min()):
        axes.set_xscale("symlog")
    axes.set_xlabel("notifications (noise)")
    axes.grid(alpha=0.3)
    axes.legend(fontsize=8, loc="lower right" if labelled else "upper right")
    figure.tight_layout()
    return _png(figure)


def _plot_timelines(
    title: str,
    rows: list[tuple[str, pd.DataFrame, pd.DataFrame]],
    span: HistorySpan,
) -> str:
    """One line per (cluster/group): labelled spans behind, would-be incidents on top."""
    figure = _figure(11, 0.42 * max(len(rows), 1) + 1.4)
    axes = figure.add_subplot(1, 1, 1)
    for y, (_, incidents, labels) in enumerate(rows):
        for start, end in zip(labels["start_ms"], labels["end_ms"]):
            axes.broken_barh([(start / DAY_MS, max(end - start, MINUTE_MS) / DAY_MS)],
                             (y - 0.4, 0.8), color=_LABEL_COLOUR, alpha=0.7)  # fmt: skip
        for start, end, status in zip(
            incidents["start_ms"], incidents["end_ms"], incidents["status"]
        ):
            stop = span.end_ms if end < 0 else end
            width = max(stop - start, MINUTE_MS / 2) / DAY_MS
            colour = _STATUS_COLOURS.get(status, "#777")
            axes.broken_barh([(start / DAY_MS, width)], (y - 0.25, 0.5), color=colour)
    axes.set_yticks(range(len(rows)), [name for name, _, _ in rows], fontsize=8)
    axes.set_ylim(-0.8, max(len(rows), 1) - 0.2)
    axes.invert_yaxis()
    axes.set_xlim(span.start_ms / DAY_MS, span.end_ms / DAY_MS)
    if span.counted_from_ms > span.start_ms:
        axes.axvspan(span.start_ms / DAY_MS, span.counted_from_ms / DAY_MS, color="#eee", zorder=0)
    _time_axis(axes)
    axes.set_title(title, fontsize=10)
    axes.grid(axis="x", alpha=0.3)
    from matplotlib.patches import Patch

    axes.legend(
        handles=[
            Patch(color=_LABEL_COLOUR, label="labelled / SLO breach"),
            Patch(color=_STATUS_COLOURS["WARN"], label="would-be WARN"),
            Patch(color=_STATUS_COLOURS["ERR"], label="would-be ERR"),
            Patch(color="#eee", label="warm-up (not counted)"),
        ],
        fontsize=7,
        loc="upper right",
        bbox_to_anchor=(1.0, 1.12),
        ncol=4,
    )
    figure.tight_layout()
    return _png(figure)


def _noisiest(
    alerts: pd.DataFrame, truth: pd.DataFrame, config_id: int, limit: int = 12
) -> list[tuple[str, pd.DataFrame, pd.DataFrame]]:
    mine = alerts[alerts["config_id"] == config_id]
    if mine.empty:
        return []
    counts = mine.groupby(["cluster", "group"]).size().sort_values(ascending=False).head(limit)
    return [
        (
            f"{cluster}/{group} ({count})",
            mine[(mine["cluster"] == cluster) & (mine["group"] == group)],
            truth[(truth["cluster"] == cluster) & (truth["group"] == group)],
        )
        for (cluster, group), count in zip(counts.index.tolist(), counts.tolist())
    ]


def _missed(
    alerts: pd.DataFrame, truth: pd.DataFrame, caught: set[int], config_id: int, limit: int = 15
) -> list[tuple[str, pd.DataFrame, pd.DataFrame]]:
    mine = alerts[alerts["config_id"] == config_id]
    missed = truth[~truth["label_id"].isin(caught)].head(limit)
    rows = []
    for _, label in missed.iterrows():
        same = (mine["cluster"] == label["cluster"]) & (mine["group"] == label["group"])
        kind = f" {label['kind']}" if label.get("kind") else ""
        rows.append((f"{label['cluster']}/{label['group']}{kind}", mine[same], label.to_frame().T))
    return rows


def write_report(
    path: Path,
    summary: pd.DataFrame,
    alerts: pd.DataFrame,
    labels: pd.DataFrame | None,
    breaches: pd.DataFrame,
    recommendation: Recommendation,
    span: HistorySpan,
    context: Mapping[str, str],
    tolerance_ms: int,
    recall_target: float,
    rules: RulesConfig | None = None,
    notices: pd.DataFrame | None = None,
) -> int:
    """One self-contained HTML page (plots inline as base64 PNG); returns how many images.
    ``rules`` (configuration 0) lets duration parameters read as ``5m``; ``notices`` (news for
    incidents already open) catch labels as the summary counts them."""
    parameters = [c for c in summary.columns if "." in c]
    labelled = labels is not None
    chosen = recommendation.config_id
    truth = labels if labelled else breaches.assign(label_id=np.arange(len(breaches)), kind="")
    truth = truth if truth is not None else pd.DataFrame()
    images: list[tuple[str, str]] = []

    def show(name: str, value: Any) -> str:
        return show_value(value) if rules is None else show_parameter(rules, name, value)

    parameter_plot = _plot_parameters(summary, parameters, show)
    if parameter_plot:
        images.append(("Alerts per day against each parameter", parameter_plot))
    frontier = "noise versus recall" if labelled else "noise versus detection delay"
    images.append(
        (
            f"The {frontier} frontier (numbers are config ids)",
            _plot_frontier(summary, labelled, chosen, recall_target),
        )
    )
    noisiest = _noisiest(alerts, truth, chosen)
    images.append(
        (
            f"The noisiest groups under config {chosen} (incident count in brackets)",
            _plot_timelines("noisiest groups", noisiest, span),
        )
    )
    if not truth.empty:
        mine = alerts[alerts["config_id"] == chosen]
        told = None if notices is None or not labelled else notices
        matches = match_incidents(mine, truth, tolerance_ms, overlap=not labelled, notices=told)
        caught = set(matches.first["label_id"].tolist())
    else:
        caught = set()
    missed = _missed(alerts, truth, caught, chosen) if not truth.empty else []
    what = "labelled incidents" if labelled else "SLO breaches"
    images.append(
        (
            f"{what.capitalize()} missed by config {chosen}" + ("" if missed else ": none"),
            _plot_timelines(f"missed {what}", missed, span),
        )
    )
    body = [
        "<h1>notifier backtest</h1>",
        '<table class="facts">',
        *(
            f"<tr><th>{html.escape(k)}</th><td>{html.escape(v)}</td></tr>"
            for k, v in context.items()
        ),
        "</table>",
        f'<p class="pick"><b>Recommended: config {chosen}</b> — '
        f"{html.escape(recommendation.reason)}. "
        "Its rules are in <code>recommended-rules.yaml</code>.</p>",
    ]
    for caption, data in images:
        body.append(
            f'<figure><img alt="{html.escape(caption)}" src="data:image/png;base64,{data}">'
            f"<figcaption>{html.escape(caption)}</figcaption></figure>"
        )
    body.append("<h2>Summary</h2>")
    body.append(_html_table(summary, chosen))
    body.append(
        '<p class="note">A would-be incident matches a labelled one of the same cluster and '
        "group when it opens within [start − tolerance, end]; delay = open − labelled start. "
        "An SLO breach counts as caught when an incident of the group is open at any time "
        "within it. Flaps: incidents reopening within one window of the previous one closing."
        "</p>"
    )
    page = _PAGE.format(body="\n".join(body))
    path.write_text(page, encoding="utf-8")
    return len(images)


def _html_table(summary: pd.DataFrame, chosen: int) -> str:
    head = "".join(f"<th>{html.escape(str(c))}</th>" for c in summary.columns)
    lines = [f'<table class="summary"><thead><tr>{head}</tr></thead><tbody>']
    for _, row in summary.iterrows():
        css = ' class="chosen"' if int(row["config_id"]) == chosen else ""
        cells = "".join(f"<td>{html.escape(_cell(v))}</td>" for v in row.tolist())
        lines.append(f"<tr{css}>{cells}</tr>")
    lines.append("</tbody></table>")
    return "\n".join(lines)


def _cell(value: Any) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "–"
    if isinstance(value, float):
        return f"{value:,.4g}" if abs(value) < 1e6 else f"{value:,.0f}"
    if isinstance(value, bool | np.bool_):
        return "yes" if value else "no"
    return str(value)


_PAGE = """<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>notifier backtest</title>
<style>
body {{ font: 14px/1.45 system-ui, sans-serif; margin: 2em auto; max-width: 1200px; color: #222; }}
h1 {{ font-size: 1.6em; }} figure {{ margin: 1.5em 0; }} img {{ max-width: 100%; }}
figcaption {{ color: #555; font-size: 0.9em; }}
table {{ border-collapse: collapse; }} th, td {{ padding: 2px 8px; text-align: right; }}
table.facts th {{ text-align: left; color: #555; font-weight: normal; }}
table.facts td {{ text-align: left; }}
table.summary {{ font-size: 12px; }} table.summary th {{ border-bottom: 1px solid #999; }}
table.summary tr:nth-child(even) {{ background: #f4f6f8; }}
table.summary tr.chosen {{ background: #fdebd0; font-weight: bold; }}
.pick {{ background: #eef6ee; padding: 0.6em 1em; border-left: 4px solid #5cb85c; }}
.note {{ color: #555; font-size: 0.9em; }}
</style></head><body>
{body}
</body></html>
"""
