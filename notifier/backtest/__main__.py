"""The backtest's command line for spark-submit: ``spark-submit notifier/backtest/__main__.py
--history ... --grid ... --out ...`` (or ``python -m notifier.backtest``); ``notifier backtest``
takes the same options.
"""

from __future__ import annotations

import os
import sys

if __name__ == "__main__" and not __package__:
    # Run as a script (`spark-submit notifier/backtest/__main__.py`): import the package from the
    # folder above it, and keep this folder off the path (its modules, such as spark.py and
    # report.py, would shadow top-level modules of the same name).
    _HERE = os.path.dirname(os.path.abspath(__file__))
    sys.path[:] = [p for p in sys.path if os.path.abspath(p or os.curdir) != _HERE]
    sys.path.insert(0, os.path.dirname(os.path.dirname(_HERE)))

import argparse
from collections.abc import Sequence

from notifier.backtest.job import request_from_options, run_backtest, summary_text
from notifier.config import ConfigError
from notifier.history import HistoryError


def build_parser() -> argparse.ArgumentParser:
    """The options of ``notifier backtest`` (a test checks that the two sets agree)."""
    parser = argparse.ArgumentParser(
        prog="notifier/backtest/__main__.py",
        description="Backtest rule thresholds on stored history (see `notifier backtest -h`).",
    )
    parser.add_argument("--history", required=True, help="history dataset or file (any URI)")
    parser.add_argument(
        "--rules", help="the rules file, configuration 0 (default: ./rules.yaml, else the default)"
    )
    parser.add_argument("--grid", required=True, help="grid.yaml: dotted parameters → values")
    parser.add_argument("--incidents", help="labelled incidents (CSV or Parquet)")
    parser.add_argument("--out", required=True, help="output directory")
    parser.add_argument("--master", help="Spark master (default local[*] or spark-submit's)")
    parser.add_argument("--from", dest="start", help="first time to replay (ISO 8601)")
    parser.add_argument("--to", dest="end", help="replay up to this time (exclusive)")
    parser.add_argument("--groups", help="only groups matching this regex")
    parser.add_argument("--interval", default="10s", help="scan interval of the history")
    parser.add_argument("--routes", help="notify config with the routes (default: one route)")
    parser.add_argument("--recall-target", type=float, default=0.95)
    parser.add_argument("--slo", default="300s", help="lag in seconds that breaches the SLO")
    parser.add_argument("--slo-for", help="how long a breach must last (default: rules' for)")
    parser.add_argument("--tolerance", help="matching tolerance (default: one scan interval)")
    parser.add_argument("--warmup", help="replayed but not counted (default 30m)")
    parser.add_argument("--buckets", type=int, help="group buckets (default: one task a core)")
    parser.add_argument("--engine", choices=("spark", "local"), default="spark")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """``spark-submit notifier/backtest/__main__.py --history ... --grid ... --out ...``"""
    args = build_parser().parse_args(argv)
    try:
        request = request_from_options(vars(args))
        result = run_backtest(request, echo=lambda line: print(line, flush=True))
    except (ConfigError, HistoryError) as exc:
        print(str(exc), file=sys.stderr)
        return 2
    print(summary_text(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
