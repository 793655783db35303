"""Writes ``old-layout.checkpoint`` and ``old-layout.json`` next to this file: a checkpoint in
the layout the service wrote before the store's narrow columns (every offset and time an int64
array, the newest sample copied in ``latest_*``), and what that store read back and evaluated.

Run once with the code of that layout first on the path (main at b44ae27):

    git archive b44ae27 | tar -x -C /tmp/old
    PYTHONPATH=/tmp/old python tests/checkpoints/make_old_layout.py

``tests/test_store_narrow.py`` restores it with today's store and expects the same.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from notifier.rules import ClusterPipeline, ScanColumns, load_rules
from notifier.service import checkpoint

HERE = Path(__file__).resolve().parent
RULES = HERE.parents[1] / "rules.yaml"
KEYS = [("g1", "t", 0), ("g1", "t", 1), ("g2", "t", 0), ("g2", "u", 0), ("g3", "u", 1)]
START = 1_800_000_000_000


def scans() -> list[ScanColumns]:
    """Twelve scans: ordinary offsets, a partition past 2^40 that resets to 0, one near 2^63,
    a commit-less (NULL) partition, and a gap of 30 days before the last scan."""
    out = []
    for i in range(12):
        ts = START + i * 10_000 + (30 * 86_400_000 if i == 11 else 0)
        committed = [1_000 + 7 * i, 2_000 + 3 * i, 2**40 + 5 * i if i < 8 else 2 * i,
                     2**63 - 1_000 + i, -1]  # fmt: skip
        log_end = [1_010 + 9 * i, 2_005 + 3 * i, 2**40 + 9 * i if i < 8 else 3 * i,
                   2**63 - 990 + i, 50 + i]  # fmt: skip
        out.append(
            ScanColumns(
                cluster="c",
                ts=ts,
                group=[k[0] for k in KEYS],
                topic=[k[1] for k in KEYS],
                partition=np.asarray([k[2] for k in KEYS], dtype=np.int32),
                committed=np.asarray(committed, dtype=np.int64),
                log_end=np.asarray(log_end, dtype=np.int64),
                log_start=np.asarray([0, 0, -1, 2**62, 0], dtype=np.int64),
                state=np.full(len(KEYS), 3, dtype=np.int8),
                members=np.asarray([1, 1, 2, 0, 40_000], dtype=np.int32),
                member_hash=np.full(len(KEYS), i // 4, dtype=np.int64),
            )
        )
    return out


def read_back(pipeline: ClusterPipeline, now: int) -> dict:
    """What a store holds and evaluates, by group-partition, as plain JSON."""
    store = pipeline.store
    out: dict = {"rows": {}}
    with np.errstate(all="ignore"):
        evaluation = pipeline.evaluator.evaluate(now)
    status = dict(zip(evaluation.rows.tolist(), evaluation.status.tolist(), strict=True))
    for row in store.alive_rows().tolist():
        key = "/".join(map(str, store.row_key_of(row)))
        out["rows"][key] = {
            "samples": store.samples(row),
            "ring": [[c.offset, c.timestamp, c.lag] for c in store.ring(row)],
            "table": [list(p) for p in store.leo_table(row)],
            "evidence": {name: store.evidence[name][row].item() for name in sorted(store.evidence)},
            "status": status[row],
        }
    return out


def main() -> None:
    pipeline = ClusterPipeline(load_rules(RULES), 10.0)
    for scan in scans():
        pipeline.step(scan)
    now = scans()[-1].ts
    path = HERE / "old-layout.checkpoint"
    path.unlink(missing_ok=True)
    checkpoint.save(path, pipeline.store, pipeline.evaluator, pipeline.tracker)
    expected = read_back(pipeline, now) | {"now": now}
    (HERE / "old-layout.json").write_text(json.dumps(expected, indent=1, sort_keys=True) + "\n")


if __name__ == "__main__":
    main()
