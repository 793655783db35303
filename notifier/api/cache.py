"""Answers worked out once per scan, and JSON encoded once.

The API shares the coordinator's event loop, so every millisecond a request costs is a
millisecond a scan waits. What the read endpoints return changes only when a scan lands: the
coordinator then replaces the cluster's evaluation and its list of groups (it never changes
them in place). :class:`ScanCache` keeps values per cluster until that happens, so 200 clients
asking for the same group between two scans cost one evaluation of it. What changes with the
clock (the data's age, and whether it is stale) is added per request: values are cached
without it and merged in with :func:`with_members`, on the encoded bytes.

Bodies go out as :class:`JSONBytes`, encoded with orjson (numpy scalars and arrays included;
NaN and infinities as null), pre-encoded parts embedded as ``orjson.Fragment``.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Mapping
from dataclasses import dataclass, field
from typing import Any, TypeVar

import orjson
from fastapi.responses import Response

from notifier.api.sources import ClusterView

T = TypeVar("T")

_OPTIONS = orjson.OPT_NON_STR_KEYS | orjson.OPT_SERIALIZE_NUMPY


def encode(value: Any) -> bytes:
    """Compact JSON (UTF-8), as the API's other answers are."""
    return orjson.dumps(value, option=_OPTIONS)


def with_members(encoded: bytes, members: Mapping[str, Any]) -> bytes:
    """The encoded JSON object ``encoded`` with ``members`` added at its end."""
    if not members:
        return encoded
    tail = encode(members)
    if encoded == b"{}":
        return tail
    return encoded[:-1] + b"," + tail[1:]


def joined_with_members(objects: list[bytes], members: Mapping[str, Any]) -> bytes:
    """Encoded JSON objects (none of them empty), each with ``members`` added at its end,
    joined by commas: the inside of a JSON array."""
    tail = b"," + encode(members)[1:]
    return b",".join(encoded[:-1] + tail for encoded in objects)


class JSONBytes(Response):
    """A JSON answer whose body is encoded already (or is encoded here with orjson)."""

    media_type = "application/json"

    def render(self, content: Any) -> bytes:
        return content if isinstance(content, bytes) else encode(content)


@dataclass(slots=True)
class _Scan:
    evaluation: object
    groups: object
    values: dict[Hashable, Any] = field(default_factory=dict)


class ScanCache:
    """Values computed from one cluster's last scan, kept until the coordinator replaces the
    cluster's evaluation or its group list (which every scan does); at most ``limit`` values
    per cluster and scan (beyond that, values are computed and not kept)."""

    def __init__(self, limit: int = 50_000) -> None:
        self.limit = limit
        self._scans: dict[str, _Scan] = {}

    def _scan(self, cluster: str, state: ClusterView) -> _Scan:
        scan = self._scans.get(cluster)
        if (
            scan is None
            or scan.evaluation is not state.evaluation
            or scan.groups is not state.groups
        ):
            scan = self._scans[cluster] = _Scan(state.evaluation, state.groups)
        return scan

    def get(self, cluster: str, state: ClusterView, key: Hashable, compute: Callable[[], T]) -> T:
        """The value kept under ``key`` for the cluster's last scan, computed (and kept) when
        there is none; what ``compute`` raises is raised, and nothing is kept."""
        scan = self._scan(cluster, state)
        try:
            value: T = scan.values[key]
        except KeyError:
            value = compute()
            if len(scan.values) < self.limit:
                scan.values[key] = value
        return value

    def put(self, cluster: str, state: ClusterView, key: Hashable, value: Any) -> None:
        """Keep ``value`` under ``key`` for the cluster's last scan (replacing what was)."""
        scan = self._scan(cluster, state)
        if key in scan.values or len(scan.values) < self.limit:
            scan.values[key] = value
