"""``notifier test-rules``: unit tests for rules, as ``promtool test rules`` gives Prometheus users.

The file format is a public contract (see the README): ``rules`` (a path relative to the test
file, or an inline mapping), and ``tests``, each with an ``interval``, ``input`` series per
group-partition in promtool's series notation, and ``expect`` entries checked at given times.

The inputs are replayed scan by scan through the same store and evaluator as the live service,
evaluating after every scan, so ``for`` and ``keep_firing_for`` behave as they would live.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from notifier.config import ConfigError, Duration, read_yaml, validation_problems
from notifier.rules.replay import replay_table
from notifier.rules.rulesfile import RulesConfig, load_rules, parse_rules
from notifier.types import GROUP_STATES, GroupResult, Sample, samples_to_table

# --------------------------------------------------------------------------------------------
# Series notation


def expand_series(text: str | int | None, kind: type = int) -> list[Any]:
    """Expand promtool series notation: ``"1 2 3"``, ``"10x9"`` (ten 10s), ``"0+5x4"``
    (0 5 10 15 20), ``"100-10x2"`` (100 90 80), ``"_"`` (a missing sample), ``"_x3"`` (three
    missing samples), and for strings ``"Stablex4"``. ``None`` stands for a missing sample."""
    if text is None:
        return []
    if isinstance(text, int | float) and not isinstance(text, bool):
        return [kind(text)]
    values: list[Any] = []
    for token in str(text).split():
        if token == "_":
            values.append(None)
            continue
        if token.startswith("_x"):
            count = token[2:]
            if not count.isdigit():
                raise ValueError(f"bad series token {token!r}: expected _xN")
            values.extend([None] * int(count))
            continue
        if kind is str:
            match = re.fullmatch(r"(?P<value>[A-Za-z]+)(?:x(?P<times>\d+))?", token)
            if not match:
                raise ValueError(f"bad series token {token!r}: expected Name or NamexN")
            values.extend([match["value"]] * (int(match["times"] or 0) + 1))
            continue
        match = re.fullmatch(
            r"(?P<base>-?\d+)(?:(?P<sign>[+-])(?P<step>\d+))?(?:x(?P<times>\d+))?", token
        )
        if not match:
            raise ValueError(f"bad series token {token!r}: expected N, NxK, N+SxK or N-SxK")
        base = int(match["base"])
        times = int(match["times"] or 0)
        if match["step"] is not None and match["times"] is None:
            raise ValueError(f"bad series token {token!r}: a step needs a count, e.g. 0+5x4")
        step = int(match["step"] or 0) * (-1 if match["sign"] == "-" else 1)
        values.extend(kind(base + i * step) for i in range(times + 1))
    return values


# --------------------------------------------------------------------------------------------
# The file format


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True)


class InputSeries(_Strict):
    cluster: str = "local"
    group: str
    topic: str
    partition: int = 0
    committed: str | int
    log_end: str | int
    log_start: str | int | None = None
    group_state: str | None = None
    members: str | int | None = None
    member_hash: str | int | None = None

    @field_validator("group_state")
    @classmethod
    def _states(cls, value: str | None) -> str | None:
        if value is not None:
            for state in expand_series(value, str):
                if state is not None and state not in GROUP_STATES:
                    raise ValueError(
                        f"unknown group state {state!r}; expected one of {GROUP_STATES}"
                    )
        return value


class ExpectedFinding(_Strict):
    rule: str
    status: str | None = None
    severity: str | None = None
    topic: str | None = None
    partition: int | None = None


class Expectation(_Strict):
    at: Duration
    cluster: str = "local"
    group: str
    status: str | None = None
    """Like every other field, asserted only when written."""
    complete: float | None = None
    partial: bool | None = None
    total_lag: int | None = None
    partitions: dict[str, str] = Field(default_factory=dict)
    findings: list[ExpectedFinding] = Field(default_factory=list)


class RuleTest(_Strict):
    name: str
    interval: Duration = 60.0
    input: list[InputSeries]
    expect: list[Expectation]


class RuleTestFile(_Strict):
    rules: str | dict[str, Any] | None = None
    tests: list[RuleTest]


# --------------------------------------------------------------------------------------------
# Running


@dataclass
class TestOutcome:
    name: str
    failures: list[str] = field(default_factory=list)

    @property
    def passed(self) -> bool:
        return not self.failures


def load_test_file(path: Path) -> tuple[RuleTestFile, RulesConfig]:
    data = read_yaml(path)
    try:
        spec = RuleTestFile.model_validate(data)
    except ValidationError as exc:
        raise ConfigError(str(path), validation_problems(exc, data)) from None
    if spec.rules is None:
        rules = RulesConfig()
    elif isinstance(spec.rules, str):
        rules = load_rules((path.parent / spec.rules).resolve())
    else:
        rules = parse_rules(spec.rules, f"{path}: rules")
    return spec, rules


def series_samples(test: RuleTest, source: str) -> list[Sample]:
    """Expand every input series into samples; the first sample is at t=0."""
    interval_ms = int(test.interval * 1000)
    samples: list[Sample] = []
    for index, series in enumerate(test.input):
        where = f"{source}: tests[{test.name!r}].input[{index}]"
        try:
            committed = expand_series(series.committed)
            log_end = expand_series(series.log_end)
            columns = {
                "log_start": expand_series(series.log_start),
                "group_state": expand_series(series.group_state, str),
                "members": expand_series(series.members),
                "member_hash": expand_series(series.member_hash),
            }
        except ValueError as exc:
            raise ConfigError(where, [("", str(exc))]) from None
        length = len(log_end)
        if len(committed) != length:
            raise ConfigError(
                where, [("committed", f"has {len(committed)} samples but log_end has {length}")]
            )
        for name, values in columns.items():
            if values and len(values) != length:
                raise ConfigError(
                    where, [(name, f"has {len(values)} samples but log_end has {length}")]
                )
        for i in range(length):
            if log_end[i] is None:
                continue  # a scan gap for this partition
            samples.append(
                Sample(
                    ts=i * interval_ms,
                    cluster=series.cluster,
                    group=series.group,
                    topic=series.topic,
                    partition=series.partition,
                    committed_offset=committed[i],
                    log_end_offset=log_end[i],
                    log_start_offset=_at(columns["log_start"], i, None),
                    group_state=_at(columns["group_state"], i, "Stable"),
                    members=_at(columns["members"], i, 1),
                    member_hash=_at(columns["member_hash"], i, 0),
                )
            )
    return samples


def _at(values: list[Any], i: int, default: Any) -> Any:
    if not values or values[i] is None:
        return default
    return values[i]


def run_test(test: RuleTest, rules: RulesConfig, source: str) -> TestOutcome:
    samples = series_samples(test, source)
    at_times = sorted({int(e.at * 1000) for e in test.expect})
    evaluations = replay_table(samples_to_table(samples), rules, test.interval, at_times)
    outcome = TestOutcome(test.name)
    for expect in test.expect:
        at = int(expect.at * 1000)
        evaluation = evaluations.get(at)
        if evaluation is None:
            outcome.failures.append(f"at {expect.at:g}s: nothing to evaluate yet (no samples)")
            continue
        result = evaluation.result(expect.cluster, expect.group)
        outcome.failures.extend(_compare(expect, result))
    return outcome


def _compare(expect: Expectation, result: GroupResult) -> list[str]:
    where = f"at {expect.at:g}s, {expect.cluster}/{expect.group}"
    diffs: list[str] = []
    if expect.status is not None and result.status.value != expect.status:
        diffs.append(f"status: expected {expect.status}, got {result.status.value}")
    if expect.complete is not None and abs(result.complete - expect.complete) > 1e-9:
        diffs.append(f"complete: expected {expect.complete:g}, got {result.complete:g}")
    if expect.partial is not None and result.partial != expect.partial:
        diffs.append(f"partial: expected {expect.partial}, got {result.partial}")
    if expect.total_lag is not None and result.total_lag != expect.total_lag:
        diffs.append(f"total_lag: expected {expect.total_lag}, got {result.total_lag}")
    actual_partitions = {f"{p.topic}/{p.partition}": p.status.value for p in result.partitions}
    for name, status in expect.partitions.items():
        got = actual_partitions.get(name)
        if got != status:
            diffs.append(f"partition {name}: expected {status}, got {got or 'absent'}")
    for wanted in expect.findings:
        if not any(_finding_matches(wanted, f) for f in result.findings):
            diffs.append(f"finding missing: {_show(wanted.model_dump(exclude_none=True))}")
    if not diffs:
        return []
    lines = [f"{where}:"] + [f"  - {d}" for d in diffs]
    lines.append("  got:")
    lines.append(
        f"    status={result.status.value} complete={result.complete:g} partial={result.partial} "
        f"total_lag={result.total_lag}"
    )
    for p in result.partitions:
        lines.append(
            f"    {p.topic}/{p.partition}: {p.status.value} lag={p.current_lag} "
            f"complete={p.complete:g}"
        )
    for f in result.findings:
        where_f = f" {f.topic}/{f.partition}" if f.topic is not None else ""
        lines.append(f"    finding {f.rule} {f.status}{where_f}: {f.message}")
    return ["\n".join(lines)]


def _finding_matches(wanted: ExpectedFinding, finding: Any) -> bool:
    for name in ("rule", "status", "topic", "partition"):
        value = getattr(wanted, name)
        if value is not None and getattr(finding, name) != value:
            return False
    return wanted.severity is None or finding.severity.value == wanted.severity.lower()


def _show(data: dict[str, Any]) -> str:
    return "{" + ", ".join(f"{k}: {v}" for k, v in data.items()) + "}"


def run_file(path: Path) -> list[TestOutcome]:
    spec, rules = load_test_file(path)
    return [run_test(test, rules, str(path)) for test in spec.tests]
