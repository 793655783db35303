"""JSON on the delivery path: orjson, agreeing with the standard library where both apply."""

from __future__ import annotations

import json
import math
from enum import StrEnum

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from notifier.config import Secret
from notifier.notify import jsonenc
from notifier.types import Finding, Severity

json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**63), max_value=2**64 - 1)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4)
    ),
    max_leaves=20,
)


@given(json_values)
def test_it_decodes_to_what_the_standard_library_would_have_encoded(value):
    assert json.loads(jsonenc.dumps(value)) == json.loads(json.dumps(value))


def test_evidence_from_the_evaluator_encodes_numpy_values_as_plain_numbers():
    evidence = {"lag_end": np.int64(48_000), "rate": np.float32(0.5), "lags": np.arange(3)}
    assert json.loads(jsonenc.dumps(evidence)) == {
        "lag_end": 48_000,
        "rate": 0.5,
        "lags": [0, 1, 2],
    }


def test_enums_dataclasses_sets_and_non_ascii_text():
    class Colour(StrEnum):
        RED = "red"

    finding = Finding(rule="burrow", kind="stall", severity=Severity.ERR, status="STALL")
    document = {"colour": Colour.RED, "finding": finding, "tags": {"a"}, "note": "lag → 5 min"}
    text = jsonenc.dumps(document)

    assert "lag → 5 min" in text  # kept readable, not \\u-escaped
    decoded = json.loads(text)
    assert decoded["colour"] == "red"
    assert decoded["finding"]["severity"] == str(Severity.ERR)
    assert decoded["tags"] == ["a"]


def test_secrets_encode_masked():
    assert "hunter2hunter2" not in jsonenc.dumps({"token": Secret("hunter2hunter2")})


def test_what_json_cannot_hold_becomes_null_and_big_integers_still_encode():
    assert json.loads(jsonenc.dumps({"x": math.nan, "y": math.inf})) == {"x": None, "y": None}
    assert json.loads(jsonenc.dumps({"offset": 2**70})) == {"offset": 2**70}
    assert json.loads(jsonenc.dumps({"offset": 2**70, "x": math.nan})) == {
        "offset": 2**70,
        "x": None,
    }


def test_indented_output_for_people():
    assert jsonenc.dumps({"a": [1]}, indent=2) == '{\n  "a": [\n    1\n  ]\n}'
