"""Record a labelled corpus from a real broker (issue 28): scripted groups of real consumers on a
single-node Apache Kafka, scanned by the service itself every 10 s into its history.

Starts Apache Kafka (the scenario set's version, 4.4 by default; its jars from Maven Central,
cached), creates one topic per scenario of the set (:data:`notifier.recorder.scenarios.SETS`:
healthy groups at several commit cadences, the benign patterns of ../shared/DOMAIN.md §9, and
faults of every kind a real client can be made to show), produces their traffic, starts
``notifier run`` on the broker with its history on, runs every script at once (aiokafka members
as processes that are killed, stopped, frozen, paused, slowed and rewound, and Kafka's console
consumer with the consumer and the classic protocols; the ``kafka-3.9`` set also restarts the
broker once), then stops the service and writes the corpus: the service's history files, the
labels the scripts wrote (``incidents.csv``), the groups (``groups.csv``) and how it was recorded
(``corpus.json``, with the machine's load average). ``benchmarks/alert_quality.py`` scores it.

    python benchmarks/record_corpus.py --out benchmarks/corpora/kafka-4.4-recorded   # ~27 min
    python benchmarks/record_corpus.py --set kafka-3.9 \
        --out benchmarks/corpora/kafka-3.9-recorded                                 # ~47 min
    python benchmarks/record_corpus.py --set kafka-4.4-rebalance \
        --out benchmarks/corpora/kafka-4.4-rebalance-recorded                       # ~27 min
    python benchmarks/record_corpus.py --out /tmp/c --minutes 3 --scenarios healthy-auto5 \
        stalled-auto5

Ends with one JSON line: what was recorded and how long it took.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import json
import logging
import os
import shlex
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from notifier.embedded.apache_kafka import ApacheKafkaBroker, kafka_jars  # noqa: E402
from notifier.recorder import BY_NAME, Timeline, record  # noqa: E402
from notifier.recorder.scenarios import SETS  # noqa: E402


def timeline_for(default: Timeline, minutes: float) -> Timeline:
    """The set's timeline, or one scaled to ``minutes``."""
    if abs(minutes * 60 - default.duration_s) < 1:
        return default
    scale = minutes * 60 / default.duration_s
    restart = default.broker_restart_s
    return dataclasses.replace(
        default,
        duration_s=default.duration_s * scale,
        warmup_s=default.warmup_s * scale,
        first_event_s=default.first_event_s * scale,
        event_every_s=max(40.0, default.event_every_s * scale),
        onset_s=(default.onset_s[0] * scale, default.onset_s[1] * scale),
        fault_length_s=(default.fault_length_s[0] * scale, default.fault_length_s[1] * scale),
        start_spread_s=min(default.start_spread_s, 10 * scale),
        fault_every_s=default.fault_every_s * scale,
        broker_restart_s=None if restart is None else restart * scale,
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, required=True, help="the corpus folder to write")
    sets = "; ".join(f"{s.name}: {s.description}" for s in SETS.values())
    parser.add_argument("--set", dest="scenario_set", choices=sorted(SETS), default="kafka-4.4",
                        help=f"the scenario set, its broker and timeline: {sets}")  # fmt: skip
    parser.add_argument("--minutes", type=float,
                        help="how long to record (default: the set's, 26 for kafka-4.4 and "
                        "kafka-4.4-rebalance, 46 for kafka-3.9); the timeline is scaled to "
                        "it")  # fmt: skip
    parser.add_argument("--scenarios", nargs="*", choices=sorted(BY_NAME), metavar="NAME",
                        help="only these scenarios (default: all of the set)")  # fmt: skip
    parser.add_argument("--scan-interval", type=float, default=10.0, help="seconds")
    parser.add_argument("--kafka-version", help="the broker (default: the set's)")
    parser.add_argument("--no-broker-restart", action="store_true",
                        help="no broker restart even if the set's timeline has one")  # fmt: skip
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--workdir", type=Path, help="keep the service's data and client logs")
    args = parser.parse_args()
    chosen = SETS[args.scenario_set]
    if args.kafka_version is None:
        args.kafka_version = chosen.kafka_version
    scenarios = [BY_NAME[n] for n in args.scenarios] if args.scenarios else list(chosen.scenarios)
    timeline = timeline_for(chosen.timeline, args.minutes or chosen.timeline.duration_s / 60)
    if args.no_broker_restart:
        timeline = dataclasses.replace(timeline, broker_restart_s=None)
    command = "python benchmarks/record_corpus.py " + shlex.join(sys.argv[1:])
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(levelname)s %(message)s")
    # The broker restart makes the producer's client retry every partition: a line each.
    logging.getLogger("aiokafka").setLevel(logging.ERROR)
    print(f"load average before: {' '.join(f'{x:.2f}' for x in os.getloadavg())} "
          f"on {os.cpu_count()} cores", flush=True)  # fmt: skip

    began = time.perf_counter()
    jars = kafka_jars(args.kafka_version)
    with tempfile.TemporaryDirectory(prefix="record-kafka-") as data:
        # A restart reloads every partition's log: on a loaded 2-core machine (load 18) that
        # took Kafka 3.9 over the default 120 s; wait as long as a supervisor would.
        broker = ApacheKafkaBroker(
            args.kafka_version, jars=jars, data_dir=Path(data), heap="1g", startup_timeout=600.0
        ).start()
        try:
            print(f"Apache Kafka {args.kafka_version} on {broker.bootstrap_servers}, started in "
                  f"{broker.started_in_s:.0f} s; {len(scenarios)} scenarios, "
                  f"{timeline.duration_s / 60:g} min", flush=True)  # fmt: skip
            done = asyncio.run(
                record(
                    broker.bootstrap_servers,
                    broker.tools,
                    args.out,
                    scenarios,
                    kafka_version=args.kafka_version,
                    timeline=timeline,
                    scan_interval_s=args.scan_interval,
                    seed=args.seed,
                    command=command,
                    workdir=args.workdir,
                    restart_broker=broker.restart,
                    progress=lambda line: print(line, flush=True),
                )
            )
        finally:
            broker.close()
    elapsed = time.perf_counter() - began
    size = sum(f.stat().st_size for f in args.out.rglob("*") if f.is_file())
    print(f"\n{args.out}: {done.groups} groups, {done.labels} labels, {done.rows} rows in "
          f"{done.scans} scans, {size / 1e6:.2f} MB, {elapsed / 60:.1f} min")  # fmt: skip
    print(json.dumps({
        "name": "record_corpus",
        "figures": {"groups": done.groups, "labels": done.labels, "rows": done.rows,
                    "scans": done.scans, "bytes": size, "elapsed_s": round(elapsed, 1)},
        "size": {"minutes": timeline.duration_s / 60, "scenarios": len(scenarios),
                 "set": args.scenario_set, "kafka_version": args.kafka_version,
                 "scan_interval_s": args.scan_interval},
        "baseline": None,
        "targets": {"bytes_at_most": 5_000_000},
        "met": {"bytes_at_most": size <= 5_000_000},
    }))  # fmt: skip


if __name__ == "__main__":
    main()
