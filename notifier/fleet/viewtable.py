"""What travels on the fleet-wide view's topic (:mod:`notifier.fleet.view`) and the table an
instance reads it into: pure data, no I/O.

* :class:`Bulletin` (key ``g/<cluster>/<group>``): the owner's latest word on one group, made
  from its cluster's last scan by :func:`build_bulletin`;
* :class:`MemberRecord` (key ``m/<instance>``): an instance's shards, its API's address and
  when it last scanned each cluster;
* silences (key ``s/<id>``), kept as their JSON;
* :class:`ViewTable`: the latest value of every key read so far;
* :class:`RemoteGroup`: a group another instance owns, answered from its bulletin with the
  API's shapes, stale when its owner has gone or stopped refreshing it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import orjson

from notifier.api.burrow import burrow_status
from notifier.api.sources import ClusterView
from notifier.api.views import (
    as_of,
    freshness,
    group_evidence,
    group_result,
    incident_facts,
)
from notifier.service.sharing import STALE_AFTER_INTERVALS


@dataclass(frozen=True, slots=True)
class Bulletin:
    """The owner's latest word on one group."""

    cluster: str
    group: str
    instance: str
    published_at: int
    last_scan: int | None
    """When the owner's last successful scan observed the group's cluster (epoch ms)."""
    scan_interval_s: float
    row: dict[str, Any]
    """The group's ``/api/groups`` row without what changes with the clock."""
    incident: dict[str, Any] | None
    """The open incident's facts (:func:`~notifier.api.views.incident_facts`)."""
    status: dict[str, Any]
    """Burrow's ``/lag`` status of the group (``/status`` is the non-OK part of it)."""
    detail: dict[str, Any]
    """The group detail's evidence and silencing, without what changes with the clock and
    without the partitions' windows, commit rings and LEO tables: those are most of a
    detail's size, and the API asks the owner for the detail while it answers (the bulletin's
    is what is shown when it does not)."""

    def encode(self) -> bytes:
        return orjson.dumps(
            {
                "v": 1,
                "cluster": self.cluster,
                "group": self.group,
                "instance": self.instance,
                "published_at": self.published_at,
                "last_scan": self.last_scan,
                "scan_interval_s": self.scan_interval_s,
                "row": self.row,
                "incident": self.incident,
                "status": self.status,
                "detail": self.detail,
            }
        )

    @classmethod
    def decode(cls, value: bytes) -> Bulletin:
        data = orjson.loads(value)
        return cls(
            cluster=str(data["cluster"]),
            group=str(data["group"]),
            instance=str(data["instance"]),
            published_at=int(data["published_at"]),
            last_scan=None if data["last_scan"] is None else int(data["last_scan"]),
            scan_interval_s=float(data["scan_interval_s"]),
            row=dict(data["row"]),
            incident=data["incident"],
            status=dict(data["status"]),
            detail=dict(data["detail"]),
        )


@dataclass(frozen=True, slots=True)
class MemberRecord:
    """An instance's own record: its shards and where its API answers."""

    instance: str
    shards: tuple[int, ...]
    api: str | None
    seen_at: int
    scanned: Mapping[str, int] = field(default_factory=dict)
    """When this instance's last successful scan of each cluster was (epoch ms)."""

    def encode(self) -> bytes:
        return orjson.dumps(
            {
                "v": 1,
                "instance": self.instance,
                "shards": list(self.shards),
                "api": self.api,
                "seen_at": self.seen_at,
                "scanned": dict(self.scanned),
            }
        )

    @classmethod
    def decode(cls, value: bytes) -> MemberRecord:
        data = orjson.loads(value)
        return cls(
            str(data["instance"]),
            tuple(int(s) for s in data["shards"]),
            data.get("api"),
            int(data["seen_at"]),
            {str(c): int(t) for c, t in (data.get("scanned") or {}).items()},
        )


def group_key(cluster: str, group: str) -> str:
    return f"g/{cluster}/{group}"


@dataclass(slots=True)
class ViewTable:
    """The view topic read so far: the latest value of every key (pure: no I/O).

    A bulletin is kept as it arrived and decoded when first asked for: every instance reads
    every bulletin of the fleet, but answers for another instance's group only when its API
    is asked, so decoding them all on arrival was most of an instance's CPU."""

    _bulletins: dict[tuple[str, str], bytes | Bulletin] = field(default_factory=dict)
    members: dict[str, MemberRecord] = field(default_factory=dict)
    silences: dict[str, dict[str, Any]] = field(default_factory=dict)
    on_unreadable: Callable[[str, Exception], None] | None = None
    """Told the key of a bulletin found unreadable when first asked for, and why (the
    bulletin is dropped: the group is answered as if its owner had not published it)."""

    def apply(self, key: str, value: bytes | None) -> None:
        """One record; raises ValueError (or KeyError) for a value that cannot be read (a
        bulletin's value is read when first asked for, see :meth:`bulletin`)."""
        kind, _, rest = key.partition("/")
        if kind == "g":
            cluster, _, group = rest.partition("/")
            if value is None:
                self._bulletins.pop((cluster, group), None)
            else:
                self._bulletins[(cluster, group)] = value
        elif kind == "m":
            if value is None:
                self.members.pop(rest, None)
            else:
                self.members[rest] = MemberRecord.decode(value)
        elif kind == "s":
            if value is None:
                self.silences.pop(rest, None)
            else:
                self.silences[rest] = dict(orjson.loads(value))
        else:
            raise ValueError(f"unknown key {key!r}")

    def bulletin(self, cluster: str, group: str) -> Bulletin | None:
        """The latest bulletin of a group; None when there is none or it cannot be read (see
        :attr:`on_unreadable`)."""
        key = (cluster, group)
        held = self._bulletins.get(key)
        if held is None or isinstance(held, Bulletin):
            return held
        try:
            bulletin = Bulletin.decode(held)
        except (ValueError, KeyError, TypeError) as exc:
            del self._bulletins[key]
            if self.on_unreadable is not None:
                self.on_unreadable(group_key(cluster, group), exc)
            return None
        self._bulletins[key] = bulletin
        return bulletin

    def bulletins(self, cluster: str | None = None) -> list[Bulletin]:
        """Every readable bulletin (of ``cluster`` only, when given), by cluster and group."""
        keys = sorted(k for k in self._bulletins if cluster is None or k[0] == cluster)
        return [b for key in keys if (b := self.bulletin(*key)) is not None]


class RemoteGroup:
    """A group another instance owns, answered from its bulletin as of ``now``: the same
    shapes the owner's API gives, plus ``instance`` (the owner) and the age of the bulletin's
    figures.

    Stale when the owner is gone (its member record ``owner`` missing or older than
    ``stale_after_ms``), when its last scan of the group's cluster is older than
    :data:`STALE_AFTER_INTERVALS` scan intervals, or when the bulletin has missed its
    refresh (due every ``refresh_every`` scans: its owner no longer publishes the group,
    say because it moved and its new owner has not published it yet)."""

    def __init__(
        self,
        bulletin: Bulletin,
        owner: MemberRecord | None,
        now: int,
        stale_after_ms: int,
        refresh_every: int,
    ):
        self.bulletin = bulletin
        self.now = now
        b = bulletin
        owner_gone = owner is None or now - owner.seen_at > stale_after_ms
        interval_ms = b.scan_interval_s * 1000
        last_scan = b.last_scan
        if owner is not None and last_scan is not None:
            last_scan = max(last_scan, owner.scanned.get(b.cluster, last_scan))
        self.stale = (
            owner_gone
            or last_scan is None
            or now - last_scan > STALE_AFTER_INTERVALS * interval_ms
            or b.last_scan is None
            or now - b.last_scan > (refresh_every + STALE_AFTER_INTERVALS) * interval_ms
        )
        self.age = None if b.last_scan is None else round(max(0, now - b.last_scan) / 1000, 1)
        self.owner_gone = owner_gone

    @property
    def group(self) -> str:
        return self.bulletin.group

    def _incident(self) -> dict[str, Any] | None:
        facts = self.bulletin.incident
        if facts is None:
            return None
        duration = round(max(0, self.now - int(facts["opened_at"])) / 1000, 1)
        return {**facts, "duration_seconds": duration}

    def _fleet_members(self) -> dict[str, Any]:
        return {"instance": self.bulletin.instance, "owner_gone": self.owner_gone}

    def row(self) -> dict[str, Any]:
        """The group's ``/api/groups`` row."""
        row = dict(self.bulletin.row)
        if self.stale:  # no window covers the present
            row["complete"] = 0.0
            row["partial"] = True
        return {
            **row,
            "incident": self._incident(),
            "stale": self.stale,
            "data_age_seconds": self.age,
            **self._fleet_members(),
        }

    def detail(self) -> dict[str, Any]:
        """The group detail (``/api/groups/{cluster}/{group}``) as the bulletin has it (no
        windows: see :attr:`Bulletin.detail`); partial when stale."""
        return {
            **self.bulletin.detail,
            **({"partial": True} if self.stale else {}),
            "incident": self._incident(),
            **self.freshness(),
            **self._fleet_members(),
        }

    def freshness(self) -> dict[str, Any]:
        return {
            "last_scan": self.bulletin.last_scan,
            "data_age_seconds": self.age,
            "stale": self.stale,
        }

    def burrow_status(self, show_all: bool) -> dict[str, Any]:
        """Burrow's ``/lag`` (``show_all``) or ``/status`` body of the group."""
        status = dict(self.bulletin.status)
        if not show_all:
            status["partitions"] = [p for p in status["partitions"] if p["status"] != "OK"]
        return {**status, **self.freshness(), **self._fleet_members()}


def build_bulletin(
    state: ClusterView,
    cluster: str,
    row: Mapping[str, Any],
    incident: Any,
    instance: str,
    now: int,
) -> Bulletin:
    """The bulletin of a group this instance owns, from its cluster's last scan."""
    group = str(row["group"])
    fresh = freshness(state, now)
    result = group_result(state, cluster, group)
    detail = group_evidence(state, cluster, group, fresh, result, windows=False)
    silencing = {
        k: row.get(k) for k in ("incident_id", "silenced", "silenced_until", "silence_ids")
    }
    return Bulletin(
        cluster=cluster,
        group=group,
        instance=instance,
        published_at=now,
        last_scan=state.metrics.last_success_ms,
        scan_interval_s=float(state.config.scan_interval),
        row=dict(row),
        incident=None if incident is None else incident_facts(incident),
        status=burrow_status(as_of(result, fresh), True),
        detail={**detail, **silencing},
    )


__all__ = [
    "Bulletin",
    "MemberRecord",
    "RemoteGroup",
    "ViewTable",
    "build_bulletin",
    "group_key",
]
