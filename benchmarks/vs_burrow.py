"""Benchmark: notifier and Burrow 1.2.1 watching the same Apache Kafka broker, live, while the
demo's stories run on it.

One Kafka 3.9 broker (Burrow 1.2's sarama needs protocol versions Kafka 4 removed), Debian's
``burrow`` package beside it with its ZooKeeper (tests/burrow.py), and ``notifier demo``'s
scenarios (healthy, lagging, stalled, stopped, rewound, a rebalance loop, retention loss) run by
the demo's own scripts against the real service. Burrow's side is read from its HTTP API
(``/v3/kafka/local/consumer/<group>/status``) twice a second, as a Burrow user's dashboard or
alert would; notifier's from the transitions it made.

Burrow is configured to match the service where the two have a match: its window
(``intervals``) is the service's window in scans, its log-end refresh (``offset-refresh``) the
scan interval, ``min-distance`` 1 s; everything else is Burrow's default.

Per scenario the table shows, for each tool: when it first reported anything after the scenario
started misbehaving, when it first reported what the scenario is (the demo's expected finding;
for Burrow its own status for it: WARN, STALL, STOP, REWIND; Burrow has no rule for a rebalance
loop or retention loss, so there any non-OK counts), the worst status it reached, and any alert
before the misbehaviour or on the healthy group (a false alarm).

    python benchmarks/vs_burrow.py          # demo timings: 2 s scans, 6-scan windows (~3 min)
    python benchmarks/vs_burrow.py --full   # 5 s scans, 10-scan windows, waits x0.5 (~8 min)

Targets: notifier detects every scenario, alerts on nothing healthy, and reports each scenario
that Burrow also reports no later than Burrow does. Ends with one JSON line: name, figures,
baseline (Burrow), targets and whether each is met.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import json
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from notifier.demo import SCENARIOS, DemoSettings, format_summary  # noqa: E402
from notifier.embedded.apache_kafka import CLASSIC_KAFKA_VERSION, ApacheKafkaBroker  # noqa: E402
from notifier.service import logs  # noqa: E402
from tests.burrow import (  # noqa: E402
    BurrowSettings,
    burrow_missing,
    format_table,
    no_later_than_burrow,
    side_by_side,
)

PREFIX = "vs"
MIN_STAGE_SCANS = 15


async def run(settings: DemoSettings, burrow_settings: BurrowSettings, work: Path) -> None:
    print(f"starting Apache Kafka {CLASSIC_KAFKA_VERSION} (Burrow 1.2.1 needs the 3.x protocol)")
    async with ApacheKafkaBroker(CLASSIC_KAFKA_VERSION, data_dir=work / "kafka") as broker:
        print(f"  broker at {broker.bootstrap_servers}, started in {broker.started_in_s:.1f}s")
        print(f"  Burrow 1.2.1 beside it (its logs and ZooKeeper's in {work / 'burrow'})")
        report, rows = await side_by_side(broker.bootstrap_servers, settings, burrow_settings, work)
    print()
    print("notifier demo's own summary:")
    print(format_summary(report))
    print()
    print(
        "notifier vs Burrow 1.2.1 on the same broker (seconds from the misbehaviour's start / "
        "from the stage that should be detected; worst status; alerts before the misbehaviour "
        "or on the healthy group)"
    )
    print(format_table(rows))

    wanted = [r for r in rows if SCENARIOS[r["scenario"]].wanted]
    targets = {
        "notifier_detects_every_scenario": all(
            r["notifier_expected_s"] is not None for r in wanted
        ),
        "notifier_no_false_alarm": all(r["notifier_false_alarms"] == 0 for r in rows),
        "notifier_no_later_than_burrow": all(
            no_later_than_burrow(r, slack_s=settings.scan_interval) for r in wanted
        ),
    }
    print(
        json.dumps(
            {
                "name": "vs_burrow",
                "figures": {
                    r["scenario"]: {
                        "seconds_to_detect": r["notifier_expected_s"],
                        "worst": r["notifier_worst"],
                        "false_alarms": r["notifier_false_alarms"],
                    }
                    for r in rows
                },
                "baseline": {
                    r["scenario"]: {
                        "seconds_to_detect": r["burrow_expected_s"],
                        "worst": r["burrow_worst"],
                        "false_alarms": r["burrow_false_alarms"],
                    }
                    for r in rows
                },
                "targets": {
                    "notifier_detects_every_scenario": True,
                    "notifier_no_false_alarm": True,
                    "notifier_no_later_than_burrow": "within one scan interval",
                },
                "met": targets,
            }
        )
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--full", action="store_true", help="5 s scans, 10-scan windows")
    parser.add_argument("--work", type=Path, help="where the broker, Burrow and demo keep state")
    args = parser.parse_args()
    missing = burrow_missing()
    if missing:
        print(f"vs_burrow: {missing}", file=sys.stderr)
        return 2
    if args.full:
        settings = DemoSettings(duration=900, scan_interval=5.0, intervals=10, time_scale=0.5)
    else:
        settings = DemoSettings(duration=240)
    work = args.work or Path(tempfile.mkdtemp(prefix="notifier-vs-burrow-"))
    # Each stage lasts at least MIN_STAGE_SCANS scans whatever the service reported: the
    # demo moves on once the service has seen a stage, and Burrow must get as long to see it.
    settings = dataclasses.replace(
        settings,
        prefix=PREFIX,
        data_dir=work / "demo",
        min_stage=MIN_STAGE_SCANS * settings.scan_interval,
    )
    (work / "demo").mkdir(parents=True, exist_ok=True)
    log_path = work / "demo" / "service.log"
    print(f"vs_burrow: work in {work}; the service's and clients' logs in {log_path}")
    burrow_settings = BurrowSettings(
        intervals=settings.intervals, offset_refresh=max(1, round(settings.scan_interval))
    )
    with log_path.open("a") as log_file:
        logs.configure("INFO", "keyvalue", stream=log_file)
        asyncio.run(run(settings, burrow_settings, work))
    return 0


if __name__ == "__main__":
    sys.exit(main())
