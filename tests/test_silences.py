"""Silences in the dispatcher: what they hold back and release, resolves that still go out,
validation that names the field, and silences from the config file.
"""

from __future__ import annotations

import dataclasses
import json
import time
from typing import Any

import pytest

from notifier.config import SilenceLimits
from notifier.notify import SilenceError, make_silence, silences_page

from .notify_helpers import ERR, OK, T0, H, M, dispatcher, events, finding, move


def silence(matchers: Any, ends_at: int, *, starts_at: int | None = None, now: int = T0):
    return make_silence(
        matchers, ends_at=ends_at, starts_at=starts_at, author="me", comment="maintenance", now=now
    )


def test_a_silenced_incident_is_tracked_marked_and_notified_when_the_silence_expires():
    d = dispatcher({"group_interval": "1m"})
    d.add_silence(silence(['group="orders"'], T0 + 10 * M), T0)
    d.handle([move("orders", OK, ERR, T0), move("billing", OK, ERR, T0)], T0)

    assert events(d.tick(T0)) == [("oncall", "open", "billing")]
    [orders] = [i for i in d.incidents(T0) if i.group == "orders"]
    assert orders.silenced
    assert d.counters.held["silenced"] == 1
    assert d.next_due() == T0 + 10 * M  # the silence's end wakes the group

    assert events(d.tick(T0 + 10 * M)) == [("oncall", "open", "orders")]
    assert not next(i for i in d.incidents(T0 + 10 * M) if i.group == "orders").silenced


def test_a_silence_on_a_rule_holds_only_incidents_with_that_finding():
    d = dispatcher()
    d.add_silence(silence(['rule="retention"'], T0 + H), T0)
    d.handle(
        [
            move("a", OK, ERR, T0, findings=[finding(ERR, rule="retention")]),
            move("b", OK, ERR, T0),
        ],
        T0,
    )
    assert events(d.tick(T0)) == [("oncall", "open", "b")]


def test_deleting_a_silence_releases_what_it_held():
    d = dispatcher({"group_interval": "1m"})
    s = silence(["cluster=prod"], T0 + 24 * H)
    d.add_silence(s, T0)
    d.handle([move("orders", OK, ERR, T0)], T0)
    assert d.tick(T0) == []
    d.delete_silence(s.id, T0 + 5 * M)
    assert events(d.tick(T0 + 5 * M)) == [("oncall", "open", "orders")]


def test_a_silence_ended_early_releases_what_it_held_and_is_kept():
    d = dispatcher({"group_interval": "1m"})
    s = silence(["cluster=prod"], T0 + 24 * H)
    d.add_silence(s, T0)
    d.handle([move("orders", OK, ERR, T0)], T0)
    assert d.tick(T0) == []
    d.add_silence(dataclasses.replace(s, ends_at=T0 + 5 * M), T0 + 5 * M)  # expired now
    assert events(d.tick(T0 + 5 * M)) == [("oncall", "open", "orders")]
    assert d.silences[s.id].state(T0 + 5 * M) == "expired"


def test_a_silence_in_the_future_does_not_hold_yet():
    d = dispatcher()
    d.add_silence(silence(["cluster=prod"], T0 + 2 * H, starts_at=T0 + H), T0)
    d.handle([move("orders", OK, ERR, T0)], T0)
    assert events(d.tick(T0)) == [("oncall", "open", "orders")]


def test_a_resolve_is_sent_even_while_silenced():
    d = dispatcher()
    d.handle([move("orders", OK, ERR, T0)], T0)
    d.tick(T0)
    d.add_silence(silence(["cluster=prod"], T0 + H), T0 + M)
    d.handle([move("orders", ERR, OK, T0 + 2 * M)], T0 + 2 * M)
    assert events(d.tick(T0 + 2 * M)) == [("oncall", "resolve", "orders")]


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"matchers": []}, "matchers"),
        ({"matchers": ['group=~"("']}, "matchers[0]"),
        ({"matchers": ["9shape=round"]}, "matchers"),
        ({"ends_at": T0 - 1}, "ends_at"),
        ({"starts_at": T0 + H, "ends_at": T0 + M}, "ends_at"),
        ({"author": " "}, "author"),
        ({"comment": ""}, "comment"),
    ],
)
def test_silence_validation_names_the_field(kwargs, field):
    request = {
        "matchers": ["cluster=prod"],
        "ends_at": T0 + H,
        "author": "me",
        "comment": "why",
        **kwargs,
    }

    with pytest.raises(SilenceError) as exc:
        make_silence(now=T0, **request)
    assert field in dict(exc.value.problems)


def test_config_silences_are_loaded():
    d = dispatcher(
        silences=[
            {
                "matchers": ['group="batch"'],
                "ends_at": "2100-01-01T00:00:00Z",
                "author": "ops",
                "comment": "lags by design",
            }
        ]
    )
    d.handle([move("batch", OK, ERR, T0)], T0)
    assert d.tick(T0) == []
    assert [s.source for s in d.silences.values()] == ["config"]


@pytest.mark.parametrize(
    ("pattern", "problem"),
    [
        ("(a+)+$", "nested quantifier"),  # the classic: 2^n ways to split a run of a's
        ("(.*)*x", "nested quantifier"),
        (r"(\w+\s?)+$", "nested quantifier"),
        ("(x+x+)+y", "nested quantifier"),
        ("(a|a)*b", "alternation"),  # branches that can start alike, under a repeat
        ("(a|aa)+$", "alternation"),
        (r"(a)\1", "backreference"),
        ("a" * 1001, "longer than 1000 characters"),
    ],
)
def test_regexes_that_could_match_for_minutes_are_refused_before_they_run(pattern, problem):
    started = time.perf_counter()
    with pytest.raises(SilenceError) as exc:
        silence([f"group=~{json.dumps(pattern)}"], T0 + H)
    assert problem in dict(exc.value.problems)["matchers[0]"]
    assert time.perf_counter() - started < 0.1


@pytest.mark.parametrize(
    "pattern",
    ["orders-.*", "(orders|billing)-.*", "batch-[0-9]+", "(eu|us)-(orders|billing)-v[0-9]{1,3}",
     "(ab)+", ".*-dlq", "a{2,5}b*", "(?i)orders"],
)  # fmt: skip
def test_ordinary_regexes_are_accepted(pattern):
    assert silence([f"group=~{json.dumps(pattern)}"], T0 + H).matchers[0].value == pattern


def test_a_silence_has_at_most_32_matchers():
    assert len(silence(["cluster=prod"] * 32, T0 + H).matchers) == 32
    with pytest.raises(SilenceError) as exc:
        silence(["cluster=prod"] * 33, T0 + H)
    assert dict(exc.value.problems)["matchers"] == "at most 32 matchers, got 33"


D = 24 * H


def test_a_silence_ending_further_ahead_than_the_limit_is_refused_naming_it():
    limits = SilenceLimits(max_silence_ends_in="30d")
    request = {"matchers": ["cluster=prod"], "author": "me", "comment": "why", "now": T0}
    assert make_silence(ends_at=T0 + 30 * D, limits=limits, **request).ends_at == T0 + 30 * D
    with pytest.raises(SilenceError) as exc:
        make_silence(ends_at=T0 + 30 * D + 1, limits=limits, **request)
    assert dict(exc.value.problems)["ends_at"] == (
        "is more than 30d ahead (notify.silence_limits.max_silence_ends_in)"
    )
    # The default: a year and a day; 9999-12-31 is not a silence, it is a group_deny.
    with pytest.raises(SilenceError, match="366d ahead"):
        make_silence(ends_at=253_402_214_400_000, limits=SilenceLimits(), **request)


def test_a_silence_larger_than_the_limit_is_refused_with_its_size():
    limits = SilenceLimits(max_silence_size_bytes=2048)
    request = {"matchers": ["cluster=prod"], "author": "me", "ends_at": T0 + H, "now": T0}
    assert make_silence(comment="x" * 1500, limits=limits, **request)
    with pytest.raises(SilenceError) as exc:
        make_silence(comment="x" * 62_000, limits=limits, **request)
    problem = dict(exc.value.problems)["silence"]
    assert problem.startswith("takes 62") and problem.endswith(
        "bytes (matchers, author and comment), more than 2048 "
        "(notify.silence_limits.max_silence_size_bytes)"
    )


def test_pages_of_silences_follow_each_other_whatever_is_added_meanwhile():
    made = [silence([f"group=g{i}"], T0 + H, starts_at=T0 + (i % 3)) for i in range(7)]
    ordered = sorted(made, key=lambda s: (s.starts_at, s.id))
    first, cursor = silences_page(ordered, 3)
    assert first == ordered[:3] and cursor is not None
    # A silence added before the cursor's place does not shift the next page.
    earlier = silence(["group=new"], T0 + H, starts_at=T0 - M)
    ordered = sorted([*ordered, earlier], key=lambda s: (s.starts_at, s.id))
    second, cursor = silences_page(ordered, 3, cursor)
    third, last = silences_page(ordered, 3, cursor)
    assert [*first, *second, *third] == sorted(made, key=lambda s: (s.starts_at, s.id))
    assert last is None
    assert silences_page([], 3) == ([], None)
    with pytest.raises(ValueError, match="not a cursor"):
        silences_page(ordered, 3, "page-2")
