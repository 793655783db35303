"""The sweep's pictures: one heat map per pattern, side by side per configuration.

Benign patterns show pages per group-day in each cell of their grid (white: none, the
target); faults show the p90 detection delay per cell (a cross where a fault was missed).
:func:`write_sweep_report` writes them as PNG files and one self-contained HTML page in the
backtest report's style.
"""

from __future__ import annotations

import base64
import html
import math
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pandas as pd

from notifier.backtest.report import _PAGE, _figure
from notifier.backtest.sweep import PatternResult


def _grid(cells: pd.DataFrame, result: PatternResult, column: str) -> np.ndarray:
    xs, ys = list(result.pattern.x_values), list(result.pattern.y_values)
    grid = np.full((len(ys), len(xs)), np.nan)
    for row in cells.itertuples():
        grid[ys.index(row.y), xs.index(row.x)] = getattr(row, column)
    return grid


def heat_map(result: PatternResult, configs: Sequence[str]) -> bytes:
    """One pattern's heat maps, a panel per configuration, as PNG bytes."""
    import io

    from matplotlib.colors import LinearSegmentedColormap

    pattern = result.pattern
    benign = pattern.benign
    figure = _figure(3.6 * len(configs) + 0.6, 0.42 * len(pattern.y_values) + 1.9)
    colours = (
        LinearSegmentedColormap.from_list("pages", ["#ffffff", "#f5c26b", "#d9534f", "#7a1f1d"])
        if benign
        else LinearSegmentedColormap.from_list(
            "delay", ["#e8f5e9", "#a5d6a7", "#f5c26b", "#d9534f"]
        )
    )
    column = "pages_per_group_day" if benign else "delay_p90_s"
    grids = {c: _grid(result.cells[result.cells["config"] == c], result, column) for c in configs}
    top = max([float(np.nanmax(g)) if np.isfinite(g).any() else 0.0 for g in grids.values()])
    top = max(top, 1.0 if benign else 240.0)
    for i, name in enumerate(configs):
        axes = figure.add_subplot(1, len(configs), i + 1)
        grid = grids[name]
        image = axes.imshow(
            np.nan_to_num(grid, nan=0.0),
            cmap=colours,
            vmin=0,
            vmax=top,
            aspect="auto",
            origin="lower",
        )
        for (yi, xi), value in np.ndenumerate(grid):
            if benign:
                text = "" if value == 0 else f"{value:.0f}" if value >= 10 else f"{value:.1f}"
            else:
                text = "✕" if math.isnan(value) else f"{value:.0f}"
            axes.text(xi, yi, text, ha="center", va="center", fontsize=7)
        axes.set_xticks(
            range(len(pattern.x_values)), [str(v) for v in pattern.x_values], fontsize=7
        )
        axes.set_yticks(
            range(len(pattern.y_values)), [str(v) for v in pattern.y_values], fontsize=7
        )
        axes.set_xlabel(pattern.x_name, fontsize=8)
        if i == 0:
            axes.set_ylabel(pattern.y_name, fontsize=8)
        cells = result.cells[result.cells["config"] == name]
        if benign:
            note = f"{int(cells['pages'].sum())} pages, {int((cells['pages'] > 0).sum())} cells"
        else:
            note = f"caught {int(cells['caught'].sum())}/{int(cells['labels'].sum())}"
        axes.set_title(f"{name}: {note}", fontsize=8)
    bar = figure.colorbar(image, ax=figure.axes, fraction=0.03)
    bar.set_label("pages per group-day" if benign else "p90 delay (s)", fontsize=8)
    figure.suptitle(f"{pattern.name}: {pattern.description}", fontsize=9)
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=90, bbox_inches="tight")
    return buffer.getvalue()


def write_sweep_report(
    path: Path,
    results: Sequence[PatternResult],
    configs: Sequence[str],
    png_dir: Path | None = None,
    facts: str = "",
) -> list[Path]:
    """The HTML page at ``path`` (images inline); with ``png_dir``, each heat map also as
    ``<pattern>.png`` there. Returns the PNG files written."""
    body = [
        "<h1>notifier sweep: benign patterns and faults over their grids</h1>",
        f"<p>{html.escape(facts)}</p>",
    ]
    written = []
    for section, benign in (
        ("Benign patterns: pages per group-day (target: none)", True),
        ("Faults: p90 detection delay per cell (✕: missed)", False),
    ):
        body.append(f"<h2>{html.escape(section)}</h2>")
        for result in results:
            if result.pattern.benign != benign:
                continue
            png = heat_map(result, configs)
            if png_dir is not None:
                png_dir.mkdir(parents=True, exist_ok=True)
                target = png_dir / f"{result.pattern.name}.png"
                target.write_bytes(png)
                written.append(target)
            data = base64.b64encode(png).decode("ascii")
            caption = html.escape(f"{result.pattern.name}: {result.pattern.description}")
            body.append(
                f'<figure><img alt="{caption}" src="data:image/png;base64,{data}">'
                f"<figcaption>{caption}</figcaption></figure>"
            )
    path.write_text(
        _PAGE.format(body="\n".join(body)).replace(
            "<title>notifier backtest</title>", "<title>notifier sweep</title>"
        ),
        encoding="utf-8",
    )
    return written
