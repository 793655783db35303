"""What a rule kind is, and the one registry of them.

A rule kind is one module under this package (or anywhere, for a kind of your own) that ends
with ``KIND = RuleKind(...)``: its config model (a :class:`~notifier.config.rules.KindRule`
whose ``kind`` is a literal), the parameters bound per row, its ``evaluate`` (the pure kernel
over :class:`Rows`, returning a severity code per row) and its finding text (``describe`` for a
partition, ``describe_group`` for a group-level finding). :func:`register` puts it in the
registry that the rules file's discriminated union (:mod:`notifier.rules.rulesfile`), the
parameter grids and the evaluator all read.
"""

from __future__ import annotations

import functools
import math
import operator
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Annotated, Any, Literal, NamedTuple, get_args, get_origin

import numpy as np
from pydantic import Field, GetCoreSchemaHandler

from notifier.config.rules import KindRule, RuleBase
from notifier.rules.habits import ScanTimes, ScanView
from notifier.rules.kernels import SEVERITY_ERR, SEVERITY_NONE, SEVERITY_WARN
from notifier.types import PARTITION_STATUS_CODES

if TYPE_CHECKING:
    from notifier.rules.results import Evaluation
    from notifier.rules.state import RuleState
    from notifier.rules.store import WindowStore

SEVERITY_NAME = {SEVERITY_WARN: "WARN", SEVERITY_ERR: "ERR"}


# --------------------------------------------------------------------------------------------
# What a kind's evaluate sees and returns


@dataclass(slots=True)
class Rows:
    """The windows one evaluation judges, as the evaluator read them from the store: one entry
    per row of ``rows`` (``index`` selects them in the store's columns).

    A kind sees them a chunk of rows at a time (:func:`notifier.rules.evaluate.group_chunks`),
    so that only one chunk's windows are decoded at once; a group's rows are always in the same
    chunk, so what a kind pools over a group's partitions (by ``gids``) is pooled whole. Its
    verdict must not depend on the other rows of the chunk beyond that."""

    store: WindowStore
    now: int
    rows: np.ndarray
    index: slice | np.ndarray
    gids: np.ndarray
    """Each row's group id."""
    n_groups: int
    count: np.ndarray
    """Samples in each window."""
    committed: np.ndarray
    """Committed offsets through the window (rows × window)."""
    log_end: np.ndarray
    group_state: np.ndarray
    members: np.ndarray
    latest_committed: np.ndarray
    latest_leo: np.ndarray
    lag: np.ndarray
    """Current lag, ``-1`` when unknown."""
    lag_seconds: np.ndarray
    """Lag in seconds, NaN when unknown."""
    usual_wait_ms: np.ndarray
    """Each row's group's usual wait before the offset moves (``WindowStore.usual_wait_ms``)."""
    learned_wait_ms: np.ndarray
    """The same as its waits showed it, without the ``assumed_commit_interval`` that stands
    for it until it is trusted (``UsualWait.learned_ms``)."""
    has_members: np.ndarray
    total_lag: np.ndarray
    """Per group id: the sum of its partitions' known lags (every row's, not the chunk's)."""
    status: np.ndarray
    """Each partition's status code under Burrow's rules (``kernels.OK`` ...)."""

    def window_start(self, at: np.ndarray) -> WindowStart:
        """The oldest sample of the windows at positions ``at``: its committed offset, its log
        end, and the seconds from it to the newest sample. Only the rows asked for have their
        sample times read: the times are not among what the evaluator lays out for every row."""
        width = self.committed.shape[1]
        first = np.clip(width - self.count[at].astype(np.int64), 0, width - 1)
        ts = self.store.s_ts[self.rows[at]]
        span_s = (ts[:, -1] - ts[np.arange(at.size), first]) / 1000.0
        return WindowStart(self.committed[at, first], self.log_end[at, first], span_s)


class WindowStart(NamedTuple):
    """The oldest sample of some windows (:meth:`Rows.window_start`)."""

    committed: np.ndarray
    log_end: np.ndarray
    span_s: np.ndarray
    """Seconds from the oldest sample to the newest."""


@dataclass(slots=True)
class RuleRun:
    """One rule being evaluated: its model, its parameters per row (scalars when no selector
    or override makes them differ), the severity code it fires with and its per-group state."""

    rule: Any
    params: Mapping[str, Any]
    severity: Any
    state: RuleState


@dataclass(slots=True)
class Verdict:
    """A rule's outcome per row: a severity code (``kernels.SEVERITY_*``), and optionally a
    code per row that its finding text reads back (``PartitionView.detail``)."""

    severity: np.ndarray
    detail: np.ndarray | None = None


# --------------------------------------------------------------------------------------------
# What a kind's finding text sees and returns


class Description(NamedTuple):
    """A finding's status (``WARN``, ``STALL``, ...), sentence and evidence."""

    status: str
    message: str
    evidence: dict[str, Any]


@dataclass(slots=True)
class PartitionView:
    """One firing partition of a group, for a kind's ``describe``."""

    evaluation: Evaluation
    rule_name: str
    rule: Any
    i: int
    """The partition's position in the evaluation's arrays."""
    row: int
    status: str
    """The status the rule's severity gives (``WARN`` or ``ERR``)."""
    window: list[dict[str, Any]]
    """The partition's samples, oldest first (``WindowStore.samples``)."""

    @property
    def store(self) -> WindowStore:
        return self.evaluation.evaluator.store

    @property
    def now(self) -> int:
        return self.evaluation.now

    @property
    def lag(self) -> int:
        return int(self.evaluation.current_lag[self.i])

    @property
    def lag_seconds(self) -> float:
        return float(self.evaluation.lag_seconds[self.i])

    @property
    def partition_status(self) -> str:
        """The partition's status under Burrow's rules (``OK``, ``STALL``, ...)."""
        return PARTITION_STATUS_CODES[int(self.evaluation.status[self.i])].value

    @property
    def detail(self) -> int:
        """The code the kind's :class:`Verdict` gave this row (0 when it gave none)."""
        detail = self.evaluation.detail.get(self.rule_name)
        return 0 if detail is None else int(detail[self.i])

    @property
    def usual_wait_ms(self) -> float:
        return float(self.evaluation.usual_wait_ms[self.i])

    @property
    def waits_learned(self) -> int:
        return int(self.evaluation.waits_learned[self.i])

    def lag_evidence(self) -> dict[str, Any]:
        """The lags of the window and their times: the evidence most findings start from."""
        return {
            "lag": [s["lag"] for s in self.window],
            "timestamps": [s["ts"] for s in self.window],
        }


@dataclass(slots=True)
class GroupView:
    """A group whose partitions fire a group-level rule, for a kind's ``describe_group``."""

    evaluation: Evaluation
    rule_name: str
    rule: Any
    gid: int
    row: int
    """The first firing partition's row: its window is the group's (``window``)."""
    status: str
    window: list[dict[str, Any]]
    partitions: list[str]
    """The firing partitions as ``topic/partition``."""

    @property
    def store(self) -> WindowStore:
        return self.evaluation.evaluator.store

    @property
    def now(self) -> int:
        return self.evaluation.now

    @property
    def total_lag(self) -> int:
        return int(self.evaluation.group_total_lag[self.gid])

    def group_evidence(self) -> dict[str, Any]:
        """The window's times and the firing partitions: the evidence group findings start
        from."""
        return {
            "timestamps": [s["ts"] for s in self.window],
            "partitions": self.partitions[:50],
            "partition_count": len(self.partitions),
        }


# --------------------------------------------------------------------------------------------
# The kind and the registry


def _every_partition(rule: Any) -> bool:
    return False


def every_group(rule: Any) -> bool:
    """``group_level`` of a kind whose every finding is about the whole group."""
    return True


def _no_group_text(view: GroupView) -> Description:
    raise TypeError(f"rule kind of {view.rule_name!r} has no group-level finding text")


def _no_partition_text(view: PartitionView) -> Description:
    raise TypeError(f"rule kind of {view.rule_name!r} has no partition finding text")


@dataclass(frozen=True)
class RuleKind:
    """One rule kind: everything the rules file, the evaluator and the findings need of it."""

    name: str
    """What ``kind:`` says in the rules file."""
    model: type[RuleBase]
    """Its config model (a :class:`KindRule` with ``kind: Literal[name]``)."""
    params: tuple[str, ...]
    """The model's fields bound per row (selectors and overrides may vary them)."""
    evaluate: Callable[[Rows, RuleRun], Verdict]
    """The rule over every row at once: pure, no I/O."""
    describe: Callable[[PartitionView], Description] = _no_partition_text
    """A firing partition's finding."""
    describe_group: Callable[[GroupView], Description] = _no_group_text
    """A firing group's finding, for kinds whose ``group_level`` says so."""
    group_level: Callable[[Any], bool] = field(default=_every_partition)
    """Whether a rule of this kind reports one finding per group (not per partition)."""
    evidence: KindEvidence | None = None
    """Per-row state this kind keeps from scan to scan: a window store built after the kind is
    registered allocates, checkpoints and hands over its columns (``store.evidence``)."""
    chart_line: Callable[[Any], ChartLine | None] | None = None
    """The threshold a rule of this kind draws on a group's charts, given the rule as resolved
    for a topic (None from it: no line for that rule); None: its rules draw none
    (:func:`notifier.api.series.thresholds`)."""
    sets_slo_wait: bool = False
    """Its rules page on lag in seconds, the measure the backtest's SLO is stated in: the
    SLO's default ``for`` is the shortest ``for`` of their enabled rules
    (:func:`notifier.backtest.job.default_slo_for`)."""
    pages_from_partial_windows: bool = False
    """Its verdict needs no whole window: two consecutive samples show it (a rewind). Its
    findings pass the complete-flag gate, so what happened while the service could not scan
    (an offset reset during a broker restart) pages at the first scan after the gap. They can
    only raise a partial group's status: nothing else pages from a partial window, and nothing
    resolves from one (:class:`~notifier.rules.transitions.TransitionTracker`)."""


@dataclass(frozen=True, slots=True)
class ChartLine:
    """A threshold drawn across a group's charts on the status page."""

    metric: Literal["lag", "lag_seconds"]
    """The chart it is drawn on: lag in records or lag in seconds."""
    scope: Literal["partition", "group"]
    """Whether it is a partition's lag or the group's total it is compared with."""
    value: float
    clear_below: float | None
    severity: str


def threshold_line(
    rule: Any,
    metric: Literal["lag", "lag_seconds"],
    scope: Literal["partition", "group"] = "partition",
) -> ChartLine:
    """The ``chart_line`` of a rule that fires above its ``threshold`` and, once firing, holds
    until below ``clear_below``."""
    clear_below = None if rule.clear_below is None else float(rule.clear_below)
    return ChartLine(metric, scope, float(rule.threshold), clear_below, rule.severity.value)


@dataclass(frozen=True)
class KindEvidence:
    """Evidence only one kind reads: its store columns and how a scan advances them."""

    columns: tuple[tuple[str, type, float], ...]
    """``(name, dtype, value of a new row)``; names start with ``e_`` and are unique."""
    update: Callable[[dict[str, np.ndarray], slice | np.ndarray, ScanView, ScanTimes], None]
    """Advance the columns of the rows at ``index`` by one scan, in place (pure numpy)."""
    per_group: bool = False
    """Its columns hold one value per group, not per partition: state the group's members
    and state make (runs of rebalances, the members it settled with). ``update`` then sees one
    entry per group the scan saw (``index``: group ids), whose ``ts``, ``state``, ``members``
    and ``previous_ts`` are the group's, ``member_changed`` and ``had_sample`` whether any of
    its partitions showed them; it must read nothing else of the scan. A group of a hundred
    partitions holds such state once, not a hundred times, and reads give each row its
    group's value (``store.evidence[name][rows]``)."""
    upgrade: Callable[[dict[str, np.ndarray]], None] | None = None
    """Given the per-row arrays of a checkpoint or hand-over written with an older layout of
    this kind's columns (by name), add the current ones it can derive, in place: a renamed or
    re-encoded column keeps what the older one knew."""


_KINDS: dict[str, RuleKind] = {}
_LISTENERS: list[Callable[[], None]] = []


def register(kind: RuleKind) -> None:
    """Make ``kind`` known to the rules file, the parameter grids and the evaluator."""
    if kind.name in _KINDS and _KINDS[kind.name] is not kind:
        raise ValueError(f"rule kind {kind.name!r} is already registered")
    if not issubclass(kind.model, KindRule):
        raise TypeError(f"rule kind {kind.name!r}: its model must be a KindRule")
    tag = kind.model.model_fields["kind"].annotation
    if get_origin(tag) is not Literal or get_args(tag) != (kind.name,):
        raise TypeError(
            f"rule kind {kind.name!r}: its model's `kind` must be Literal[{kind.name!r}], "
            f"got {tag!r}"
        )
    if kind.name == "burrow":
        raise ValueError("the kind name 'burrow' is Burrow's own section of the rules file")
    _KINDS[kind.name] = kind
    _changed()


def kinds_with_evidence() -> tuple[RuleKind, ...]:
    """The kinds that keep evidence of their own (a window store allocates the columns of
    those registered when it is built)."""
    return tuple(kind for kind in _KINDS.values() if kind.evidence is not None)


def unregister(name: str) -> None:
    """Forget a kind (a test's own, once the test is done)."""
    _KINDS.pop(name, None)
    _changed()


def _changed() -> None:
    for listener in _LISTENERS:
        listener()


def on_change(listener: Callable[[], None]) -> None:
    """Call ``listener`` whenever a kind is registered or forgotten (the rules file rebuilds its
    union)."""
    _LISTENERS.append(listener)


def kind_of(name: str) -> RuleKind:
    """The registered kind called ``name``."""
    try:
        return _KINDS[name]
    except KeyError:
        raise KeyError(
            f"unknown rule kind {name!r}; expected one of: {', '.join(_KINDS)}"
        ) from None


def kind_names() -> tuple[str, ...]:
    """The registered kinds' names, in registration order."""
    return tuple(_KINDS)


def kinds() -> Iterator[RuleKind]:
    return iter(tuple(_KINDS.values()))


class AnyRegisteredKind:
    """Pydantic annotation: a rule of any registered kind, told apart by its ``kind`` (a
    discriminated union built from the registry whenever the schema is built)."""

    # The schema is pydantic-core's CoreSchema, which pydantic does not re-export (and
    # pydantic-core is pydantic's dependency, not ours).
    def __get_pydantic_core_schema__(self, source: Any, handler: GetCoreSchemaHandler) -> Any:
        models = [kind.model for kind in _KINDS.values()]
        if len(models) == 1:
            return handler.generate_schema(models[0])
        union = functools.reduce(operator.or_, models)
        return handler.generate_schema(Annotated[union, Field(discriminator="kind")])


# --------------------------------------------------------------------------------------------
# Helpers kinds share


def as_int(value: Any) -> Any:
    """A severity or count parameter as integers (bound parameters are floats)."""
    if isinstance(value, np.ndarray):
        return value.astype(np.int64)
    return int(value)


def human_seconds(seconds: float) -> str:
    if seconds < 120:
        return f"{seconds:.0f}s"
    if seconds < 7200:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"


def with_hysteresis(
    above: Callable[..., np.ndarray], values: np.ndarray, rows: Rows, run: RuleRun
) -> np.ndarray:
    """``above(values, threshold)``; rows of groups already firing this rule keep to the
    (lower) ``clear_below`` level, which is only looked at when some group is firing."""
    params = run.params
    fires = above(values, params["threshold"], run.severity)
    firing = run.state.firing[rows.gids]
    if not firing.any() or np.array_equal(params["clear_below"], params["threshold"]):
        return fires
    holds = above(values, params["clear_below"], run.severity)
    return np.where(firing, np.maximum(fires, holds), fires).astype(np.int8)


def position_evidence(view: PartitionView) -> tuple[dict[str, Any], str]:
    """Where the consumer is (committed, log end, lag, lag in seconds) and how far behind in
    words: what the rules on per-scan evidence start their findings from."""
    store = view.store
    seconds = view.lag_seconds
    behind = human_seconds(seconds) if not math.isnan(seconds) else "an unknown time"
    evidence: dict[str, Any] = {
        "committed_offset": int(store.latest_committed[view.row]),
        "log_end_offset": int(store.latest_leo[view.row]),
        "current_lag": view.lag,
        "lag_seconds": None if math.isnan(seconds) else seconds,
    }
    return evidence, behind


__all__ = [
    "SEVERITY_NONE",
    "AnyRegisteredKind",
    "ChartLine",
    "Description",
    "GroupView",
    "KindEvidence",
    "PartitionView",
    "Rows",
    "RuleKind",
    "RuleRun",
    "Verdict",
    "as_int",
    "every_group",
    "human_seconds",
    "kind_names",
    "kind_of",
    "kinds",
    "kinds_with_evidence",
    "on_change",
    "position_evidence",
    "register",
    "threshold_line",
    "unregister",
    "with_hysteresis",
]
