"""A backtest shows what the live service would have sent: one recorded history, replayed
through the live coordinator, through ``notifier replay`` / ``test-rules`` and through the
backtest's replay engine, gives the same transitions, to the millisecond.

All three drive the one step in :mod:`notifier.rules.step`; this test keeps it that way.
"""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pytest

from notifier.backtest import GridConfig, ReplayOptions, SampleArrays, replay, synthesize
from notifier.history import read_history
from notifier.rules import RulesConfig, load_rules, replay_table
from notifier.types import Transition

from .scripted import RecordingSink, drive, replayed_service

ROOT = Path(__file__).resolve().parents[1]
INTERVAL_S = 10


def comparable(transitions: list[Transition]) -> list[tuple]:
    return [
        (
            t.cluster,
            t.group,
            t.previous.value,
            t.current.value,
            t.at,
            t.gone,
            sorted((f.rule, f.status) for f in (t.result.findings if t.result else [])),
        )
        for t in transitions
    ]


@pytest.fixture(scope="module")
def history(tmp_path_factory) -> pa.Table:
    """Two hours of a small fleet with labelled faults; one group is deleted halfway, so the
    replay must also agree on groups that vanish."""
    out = tmp_path_factory.mktemp("equivalence") / "h"
    synthesize(out, groups=8, partitions=2, hours=2, seed=11, interval_s=INTERVAL_S)
    table = read_history(out)
    ts = pc.cast(table.column("ts"), pa.int64())
    groups = sorted(set(table.column("group").to_pylist()))
    halfway = (pc.min(ts).as_py() + pc.max(ts).as_py()) // 2
    deleted = pc.and_(pc.equal(table.column("group"), groups[0]), pc.greater(ts, halfway))
    return table.filter(pc.invert(deleted))


@pytest.fixture(scope="module")
def rules() -> RulesConfig:
    return load_rules(ROOT / "rules.yaml")


async def live_transitions(tmp_path: Path, table: pa.Table, rules: RulesConfig) -> list:
    sink = RecordingSink()
    coord, script = replayed_service(tmp_path, table, rules, interval_s=INTERVAL_S, sink=sink)
    await drive(coord, len(script), cluster=script[0].cluster)
    return sink.transitions


def replay_transitions(table: pa.Table, rules: RulesConfig) -> list:
    seen: list[Transition] = []
    replay_table(table, rules, INTERVAL_S, on_transitions=seen.extend)
    return seen


def backtest_transitions(table: pa.Table, rules: RulesConfig) -> list:
    seen: list[Transition] = []
    replay(
        SampleArrays.from_arrow(table),
        [GridConfig(config_id=0, parameters={}, rules=rules)],
        ReplayOptions(scan_interval_s=INTERVAL_S),
        on_transitions=lambda _config, transitions: seen.extend(transitions),
    )
    return seen


async def test_live_replay_and_backtest_send_the_same_transitions(tmp_path, history, rules):
    live = comparable(await live_transitions(tmp_path, history, rules))
    assert live, "the history should make the rules fire"
    assert any(gone for *_, gone, _ in live), "the deleted group should resolve as gone"
    assert comparable(replay_transitions(history, rules)) == live
    assert comparable(backtest_transitions(history, rules)) == live
