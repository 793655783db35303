"""Write examples/sample-history.csv: ten minutes of 10-second scans of seven scripted groups.

Each group plays one scenario (healthy, lagging, stalled, stopped, rewound, stuck rebalance,
retention loss) so that `notifier replay --history examples/sample-history.csv` shows every
rule at work. Deterministic: run it again and the file is the same.
"""

from __future__ import annotations

import csv
import random
from pathlib import Path

START_MS = 1_795_219_200_000  # 2026-11-21T00:00:00Z
SCANS = 60
INTERVAL_MS = 10_000
COLUMNS = [
    "ts",
    "cluster",
    "group",
    "topic",
    "partition",
    "committed_offset",
    "log_end_offset",
    "log_start_offset",
    "group_state",
    "members",
    "member_hash",
]


def scenario_rows(name: str, rng: random.Random) -> list[list]:
    rows = []
    for partition in range(2):
        leo, committed, log_start = 10_000, 10_000, 0
        for scan in range(SCANS):
            ts = START_MS + scan * INTERVAL_MS
            produced = 20 + rng.randint(0, 10)
            leo += produced
            state, members, member_hash = "Stable", 2, 1111
            if name == "healthy":
                committed = leo - rng.randint(0, 10)
            elif name == "lagging":
                committed += 15  # consumes slower than produced
            elif name == "stalled":
                if scan < 20:
                    committed = leo - rng.randint(0, 10)
            elif name == "stopped":
                if scan < 20:
                    committed = leo - rng.randint(0, 10)
                else:
                    state, members, member_hash = "Empty", 0, 0
            elif name == "rewound":
                if scan < 30:
                    committed = leo - rng.randint(0, 10)
                elif scan == 30:
                    committed -= 2_000
                else:
                    committed += produced
            elif name == "rebalancing":
                if scan < 25:
                    committed = leo - rng.randint(0, 10)
                else:
                    state = "PreparingRebalance" if scan % 2 else "CompletingRebalance"
                    members, member_hash = 1 + scan % 2, 2000 + scan // 4
            elif name == "retention":
                committed += 10
                log_start = max(log_start, leo - 600)  # retention keeps ~20 scans of data
            rows.append(
                [
                    ts,
                    "demo",
                    name,
                    f"{name}-events",
                    partition,
                    committed,
                    leo,
                    log_start,
                    state,
                    members,
                    member_hash,
                ]
            )
    return rows


def main() -> None:
    rng = random.Random(7)
    rows = []
    for name in ("healthy", "lagging", "stalled", "stopped", "rewound", "rebalancing", "retention"):
        rows += scenario_rows(name, rng)
    rows.sort(key=lambda r: (r[0], r[2], r[4]))
    out = Path(__file__).with_name("sample-history.csv")
    with out.open("w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(COLUMNS)
        writer.writerows(rows)
    print(f"wrote {len(rows)} samples to {out}")


if __name__ == "__main__":
    main()
