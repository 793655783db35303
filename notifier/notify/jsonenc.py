"""JSON for the delivery path: outbox rows, request bodies, template output.

Every notification is encoded several times on its way out (its outbox row, the incident's
row, the request body), which at a thousand deliveries a second made the standard library's
encoder a tenth of the notifier's CPU; orjson does the same work in a fraction of the time.
Values neither encoder knows go through one :func:`_default`: numpy scalars and arrays from
the evaluator's evidence, sets, paths, and anything else as its ``str`` (a
:class:`~notifier.config.Secret` prints masked). Output is compact UTF-8 with non-ASCII kept
as is; NaN and infinities become ``null`` (JSON has no such numbers).
"""

from __future__ import annotations

import dataclasses
import enum
import json
import math
from datetime import datetime
from pathlib import Path
from typing import Any

import orjson

_OPTIONS = orjson.OPT_NON_STR_KEYS | orjson.OPT_SERIALIZE_NUMPY


def _default(value: Any) -> Any:
    if hasattr(value, "tolist"):  # numpy arrays and scalars orjson's numpy support skips
        return value.tolist()
    if hasattr(value, "item"):
        return value.item()
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: getattr(value, f.name) for f in dataclasses.fields(value)}
    if isinstance(value, enum.Enum):
        return value.value
    if isinstance(value, set | frozenset | tuple):
        return list(value)
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, Path):
        return str(value)
    return str(value)


def _finite(value: Any) -> Any:
    """``value`` with non-finite floats as None (for the standard library's encoder)."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_finite(v) for v in value]
    return value


def dumps_bytes(value: Any) -> bytes:
    """Compact JSON as UTF-8 bytes (what an HTTP body or a BLOB wants)."""
    try:
        return orjson.dumps(value, default=_default, option=_OPTIONS)
    except orjson.JSONEncodeError:
        # What orjson refuses but JSON allows: integers beyond 64 bits, exotic dict keys.
        return json.dumps(
            _finite(value), default=_default, ensure_ascii=False, separators=(",", ":")
        ).encode("utf-8")


def dumps(value: Any, indent: int | None = None) -> str:
    """JSON text: compact, or indented by ``indent`` spaces for people to read."""
    if indent is None:
        return dumps_bytes(value).decode("utf-8")
    return json.dumps(_finite(value), default=_default, ensure_ascii=False, indent=indent)
