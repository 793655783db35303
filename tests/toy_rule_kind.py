"""A rule kind that lives in the tests folder alone: ``few_members``, a group with fewer live
members than it should have, keeping evidence of its own (the fewest members each partition's
group has had). It is written the way README, "How to add a rule kind", says, and
``tests/test_rule_kind_seam.py`` registers it and runs it end to end, so the seam stays one
module plus one registration: no edit of the window store, the checkpoint or the evaluator."""

from __future__ import annotations

from typing import Annotated, ClassVar, Literal

import numpy as np
from pydantic import Field

from notifier.config import KindRule, RuleBase
from notifier.rules.habits import ScanTimes, ScanView
from notifier.rules.kernels import SEVERITY_NONE
from notifier.rules.kinds import (
    Description,
    GroupView,
    KindEvidence,
    Rows,
    RuleKind,
    RuleRun,
    Verdict,
    every_group,
)
from notifier.types import Severity


class FewMembersRule(KindRule):
    """Fewer than ``at_least`` members in the group's latest scan."""

    kind: Literal["few_members"]
    name: str
    severity: Severity = Severity.WARN
    at_least: Annotated[int, Field(ge=1)] = 2
    TUNABLE: ClassVar[tuple[str, ...]] = (*RuleBase.TUNABLE, "at_least")


def members_below(
    members: np.ndarray, count: np.ndarray, at_least: np.ndarray | float, severity: np.ndarray | int
) -> np.ndarray:
    """Rows whose latest sample lists fewer than ``at_least`` members (rows with no sample
    never fire)."""
    hit = (count > 0) & (members[:, -1] < at_least)
    return np.where(hit, severity, SEVERITY_NONE).astype(np.int8)


def evaluate(rows: Rows, run: RuleRun) -> Verdict:
    return Verdict(members_below(rows.members, rows.count, run.params["at_least"], run.severity))


NEVER_SEEN = np.iinfo(np.int32).max


def follow_fewest(
    columns: dict[str, np.ndarray], index: slice | np.ndarray, scan: ScanView, times: ScanTimes
) -> None:
    """The fewest members any scan has listed for the row's group."""
    columns["e_fewest_members"][index] = np.minimum(
        columns["e_fewest_members"][index], scan.members
    )


def describe_group(view: GroupView) -> Description:
    members = view.window[-1]["members"]
    at_least = view.rule.at_least
    evidence = view.group_evidence()
    fewest = int(view.store.evidence["e_fewest_members"][view.row])
    evidence.update(members=members, at_least=at_least, fewest_members=fewest)
    message = f"{members} member{'' if members == 1 else 's'}, fewer than {at_least}"
    return Description(view.status, message, evidence)


KIND = RuleKind(
    name="few_members",
    model=FewMembersRule,
    params=("at_least",),
    evaluate=evaluate,
    describe_group=describe_group,
    group_level=every_group,
    evidence=KindEvidence(
        columns=(("e_fewest_members", np.int32, NEVER_SEEN),), update=follow_fewest
    ),
)
