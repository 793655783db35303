"""benchmarks/alert_quality.py on a sweep of benign patterns alone: there is no fault label, so
there is nothing to detect; it prints the benign figures and a JSON line that says so, instead
of failing for want of detection figures."""

from __future__ import annotations

import dataclasses
import importlib.util
import json
import sys
from pathlib import Path
from types import ModuleType

import pandas as pd
import pytest

from notifier.backtest import sweep

ROOT = Path(__file__).resolve().parents[1]


def _alert_quality() -> ModuleType:
    if "alert_quality" in sys.modules:
        return sys.modules["alert_quality"]
    spec = importlib.util.spec_from_file_location(
        "alert_quality", ROOT / "benchmarks" / "alert_quality.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["alert_quality"] = module  # its dataclasses look their module up
    spec.loader.exec_module(module)
    return module


def test_a_sweep_of_benign_patterns_alone_prints_its_pages_and_says_there_was_no_fault(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # The broker-restart pattern on one cell of one replica, 50 minutes: a second or two.
    (restart,) = [p for p in sweep.BENIGN if p.name == "broker-restart"]
    small = dataclasses.replace(restart, x_values=(2,), y_values=(30,), duration_s=3000)
    monkeypatch.setattr(sweep, "BENIGN", (small,))
    monkeypatch.setattr(sys, "argv", [
        "alert_quality.py", "--no-fleet", "--no-recorded", "--no-independent",
        "--patterns", "broker-restart", "--replicas", "1",
    ])  # fmt: skip

    _alert_quality().main()

    out = capsys.readouterr().out
    assert "defaults on the sweep: 0 alerts, 0 false, precision 1.000, no fault labels" in out
    line = json.loads(out.strip().splitlines()[-1])
    assert line["name"] == "alert_quality"
    defaults = line["sweep"]["defaults"]
    assert defaults["benign_pages_by_pattern"] == {"broker-restart": 0}
    assert defaults["labels"] == 0 and defaults["kinds"] == {}
    assert defaults["recall"] is None and defaults["delay_p90_s"] is None
    assert line["figures"]["recall"] is None and line["figures"]["recall_by_kind"] == {}
    # Burrow's rules page on this pattern: false pages, counted as such.
    burrow = line["sweep"]["burrow_mc1"]
    assert burrow["noise"] == burrow["alerts"] == burrow["benign_pages"]
    # Only the targets that mean something without faults are judged.
    assert line["met"]["zero_benign_pages"] is True
    assert line["met"]["precision"] is True
    assert not {"recall", "recall_every_kind", "delay_p50_s", "delay_p90_s"} & set(line["met"])


def test_figures_with_no_label_give_no_detection_figures_but_count_the_false_pages() -> None:
    aq = _alert_quality()
    alerts = pd.DataFrame(
        {
            "config": "defaults",
            "matched": [False, False],
            "rule": ["lag", "lag"],
            "group": ["g", "g"],
            "start": [0, 60_000],
            "end": [30_000, -1],
        }
    )

    figures = aq._figures(pd.DataFrame(), alerts, group_days=2.0)

    assert figures["labels"] == 0
    assert figures["recall"] is None and figures["delay_p50_s"] is None
    assert (figures["alerts"], figures["noise"], figures["precision"]) == (2, 2, 0.0)
    assert figures["pages_per_group_day"] == 1.0
    assert figures["noise_by_rule"] == {"lag": 2}
    assert aq._met(figures, {}) == {"precision": False}
