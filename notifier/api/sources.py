"""What the API reads from the service, as Protocols: the coordinator with its clusters (and
each cluster's window store, last evaluation and scan metrics), and the notifier.

The API only reads: every member here is a read-only property or a query, and it is all the
API uses (:class:`notifier.service.Coordinator` and :class:`notifier.notify.Notifier` satisfy
them; tests may pass anything that does). The store's sample and offset columns read like
numpy arrays (:class:`notifier.rules.ColumnReader`); the API reads them by row or table index.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from notifier.collect import ClusterLayout
from notifier.config import ClusterConfig, NotifyConfig, ServiceConfig
from notifier.diskfaults import WriteHealth
from notifier.rules import ColumnReader, Evaluation, LeoReset, RulesConfig
from notifier.types import CommitPoint, GroupMember, Incident


class StoreView(Protocol):
    """A cluster's window store (:class:`notifier.rules.WindowStore`)."""

    @property
    def width(self) -> int:
        """Samples in a row's window."""

    @property
    def ring_size(self) -> int:
        """Commits in a row's ring."""

    @property
    def group_key(self) -> Sequence[tuple[str, str] | None]:
        """(cluster, group) of each group id handed out; None for a freed id."""

    def topics(self, cluster: str) -> list[str]:
        """The topics of ``cluster`` with a LEO table, sorted."""

    def topic_tables(self, cluster: str, topic: str) -> dict[int, int]:
        """The LEO table of each partition of ``topic`` in ``cluster`` (empty: unknown)."""

    @property
    def s_committed(self) -> ColumnReader:
        """Committed offset of each row's window samples (rows × width; NULL: none)."""

    @property
    def s_leo(self) -> ColumnReader:
        """Log-end offset of each row's window samples (rows × width)."""

    @property
    def latest_committed(self) -> ColumnReader:
        """Each row's newest committed offset."""

    @property
    def latest_leo(self) -> ColumnReader:
        """Each row's newest log-end offset."""

    @property
    def latest_log_start(self) -> ColumnReader:
        """Each row's newest log-start offset (NULL: unknown)."""

    @property
    def row_table(self) -> np.ndarray:
        """Each row's LEO table."""

    @property
    def t_count(self) -> np.ndarray:
        """Points in each LEO table."""

    @property
    def t_leo(self) -> ColumnReader:
        """Log-end offsets of each LEO table (tables × points, newest last)."""

    def row_key_of(self, row: int) -> tuple[str, str, str, int]: ...

    def group_key_of(self, gid: int) -> tuple[str, str]: ...

    def row(self, cluster: str, group: str, topic: str, partition: int) -> int | None: ...

    def group_id(self, cluster: str, group: str) -> int | None: ...

    def groups(self, cluster: str | None = None) -> list[tuple[str, str]]: ...

    def samples(self, row: int) -> list[dict[str, Any]]: ...

    def ring(self, row: int) -> list[CommitPoint]: ...

    def leo_table(self, row: int) -> list[tuple[int, int]]: ...


class ScanMetricsView(Protocol):
    """A cluster's scan counters (:class:`notifier.service.cluster.ScanMetrics`)."""

    @property
    def scans(self) -> int: ...

    @property
    def failures(self) -> int: ...

    @property
    def consecutive_failures(self) -> int: ...

    @property
    def last_success_ms(self) -> int | None: ...

    @property
    def last_error(self) -> str | None: ...

    @property
    def last_duration_s(self) -> float: ...

    @property
    def last_evaluate_s(self) -> float: ...

    @property
    def last_requests(self) -> Mapping[str, int]: ...

    @property
    def down(self) -> bool: ...


class ClusterView(Protocol):
    """One cluster of the coordinator (:class:`notifier.service.cluster.ClusterState`)."""

    @property
    def config(self) -> ClusterConfig: ...

    @property
    def store(self) -> StoreView: ...

    @property
    def evaluation(self) -> Evaluation | None:
        """The last evaluation; None before the first scan was evaluated."""

    @property
    def metrics(self) -> ScanMetricsView: ...

    @property
    def groups(self) -> Mapping[str, str]:
        """Every group the last scan listed, with its state (groups without partitions too)."""

    @property
    def not_evaluated(self) -> Mapping[str, str]:
        """Groups the last scan listed but left out, and why."""

    @property
    def group_members(self) -> Mapping[str, int]:
        """Each group's number of members in the last scan."""

    @property
    def leo_resets(self) -> Mapping[tuple[str, int], LeoReset]:
        """The latest log-end offset reset of each (topic, partition) seen since the start."""

    @property
    def owners(self) -> Mapping[str, Mapping[tuple[str, int], GroupMember]]:
        """Per group, the member that owns each assigned partition as of the last scan."""

    @property
    def layout(self) -> ClusterLayout | None:
        """The brokers and topics (leaders, replicas, in-sync replicas) of the last scan's
        metadata; None before the first scan."""

    def stale(self, now_ms: int) -> bool:
        """Whether the cluster's data is too old to show as current (no recent successful
        scan: the same test as readiness)."""


class HistoryView(Protocol):
    """The history writer (:class:`notifier.history.HistoryWriter`): where it writes (the
    status page reads a group's last hours from there, :mod:`~notifier.api.series`) and whether
    writing works."""

    @property
    def root(self) -> Path: ...

    @property
    def failing(self) -> bool:
        """Some write failed and nothing has succeeded since."""

    @property
    def failing_since_ms(self) -> int | None: ...

    @property
    def last_error_text(self) -> str | None: ...

    @property
    def errors(self) -> int: ...

    @property
    def queued_rows(self) -> int: ...

    @property
    def dropped_rows(self) -> int: ...


class CoordinatorView(Protocol):
    """The coordinator (:class:`notifier.service.Coordinator`)."""

    @property
    def clusters(self) -> Mapping[str, ClusterView]: ...

    def write_health(self) -> Sequence[WriteHealth]:
        """The state files it writes (checkpoints) that the disk refused lately."""

    @property
    def config(self) -> ServiceConfig:
        """The service config (Burrow's ``/v3/config`` shows it, secrets left out)."""

    @property
    def rules(self) -> RulesConfig: ...

    def forget_group(self, cluster: str, group: str, topic: str | None = None) -> bool:
        """Drop a group's state (with ``topic``, its partitions of that topic) and resolve its
        incident as removed (Burrow's DELETE of a consumer); False when the cluster knows no
        such group."""

    @property
    def history(self) -> HistoryView | None:
        """None when history is disabled (or before the service started)."""

    @property
    def scanning(self) -> bool:
        """Whether a scan is under way (requests give way to it)."""

    def add_scan_listener(self, listener: Callable[[str], None]) -> None:
        """Have ``listener(cluster)`` called after each successful scan (a bound method,
        held weakly)."""


class SilenceView(Protocol):
    """A silence as the API returns it."""

    @property
    def id(self) -> str: ...

    @property
    def starts_at(self) -> int:
        """When it starts (epoch ms)."""

    @property
    def ends_at(self) -> int:
        """When it ends (epoch ms)."""

    def to_dict(self, now: int | None = None) -> dict[str, Any]: ...

    def active(self, now: int) -> bool: ...

    def matches(self, incident: Incident) -> bool:
        """Whether the silence holds back alerts of ``incident`` (its cluster, group and any
        one of its findings), as the notifier decides it."""


class NotifyStoreView(Protocol):
    """The notifier's SQLite store (:class:`notifier.notify.outbox.NotifyStore`). The page
    reads its outbox and incident history through a read-only connection of its own, in a
    worker thread (:mod:`~notifier.api.notifylog`)."""

    @property
    def path(self) -> Path: ...


class NotifierView(Protocol):
    """The notification pipeline (:class:`notifier.notify.Notifier`): incidents, silences and
    delivery metrics. Optional: without ``notify:`` in the config there is none."""

    @property
    def clock(self) -> Callable[[], int]:
        """Now, in epoch ms."""

    @property
    def store(self) -> NotifyStoreView: ...

    def incidents(self, open_only: bool = True, limit: int = 1000) -> list[Incident]:
        """The open incidents, or (``open_only=False``) the latest ``limit``, newest first."""

    def open_incidents(self) -> Mapping[tuple[str, str], Incident]:
        """Open incidents by (cluster, group), ``silenced`` as of now; the same mapping object
        as long as they stay the same."""

    def waiting(self, incident_id: str) -> list[dict[str, Any]]:
        """What each route that took a live incident waits for before notifying it, and
        until when (:meth:`notifier.notify.Dispatcher.waiting`)."""

    def list_silences(self) -> Sequence[SilenceView]: ...

    def add_silence(
        self,
        matchers: Any,
        *,
        ends_at: int,
        starts_at: int | None = None,
        author: str,
        comment: str,
    ) -> SilenceView:
        """Raises :class:`notifier.config.ConfigError` naming each bad field."""

    def expire_silence(self, silence_id: str) -> SilenceView:
        """End a silence now, keeping its record; raises :class:`notifier.config.ConfigError`
        for a silence the API cannot expire (from the config file, or expired already)."""

    def metrics(self) -> Mapping[str, Any]:
        """Delivery counters by channel (``sent``, ``failed``, ``retried``), ``outbox_depth``,
        ``oldest_pending_age_seconds``."""

    @property
    def config(self) -> NotifyConfig:
        """The ``notify:`` section (Burrow's ``/v3/config/notifier`` shows it, secrets left
        out)."""


class RemoteGroupView(Protocol):
    """A group another instance of the fleet owns, as the fleet-wide view has it
    (:class:`notifier.fleet.viewtable.RemoteGroup`): the owner's answers as of now, each with
    ``instance`` (the owner) and the data's age."""

    @property
    def group(self) -> str: ...

    @property
    def owner_gone(self) -> bool:
        """Whether its owner has left the fleet (its member record is gone or too old)."""

    def row(self) -> dict[str, Any]:
        """Its ``/api/groups`` row."""

    def detail(self) -> dict[str, Any]:
        """Its group detail."""

    def burrow_status(self, show_all: bool) -> dict[str, Any]:
        """Burrow's ``/lag`` (``show_all``) or ``/status`` body."""


class FleetSource(Protocol):
    """The fleet-wide view (:class:`notifier.fleet.view.FleetView`): which groups are this
    instance's, the others' as their owners published them, and where silences go so that
    every instance applies them. Optional: without ``coordination:`` there is none."""

    @property
    def instance(self) -> str:
        """This instance's name (the ``instance`` label)."""

    @property
    def owned(self) -> frozenset[int]:
        """The shards this instance owns (a new set whenever they change)."""

    def owns(self, cluster: str, group: str) -> bool: ...

    def remote_group(self, cluster: str, group: str, now: int) -> RemoteGroupView | None: ...

    def remote_groups(self, cluster: str, now: int) -> Sequence[RemoteGroupView]: ...

    def fleet(self, now: int) -> dict[str, Any]:
        """``/api/fleet``: the instances, their shards and when each was last seen."""

    def owner_api(self, cluster: str, group: str) -> tuple[str, str | None] | None:
        """The instance the view says owns a group this instance does not, with the base URL
        of its API (None: it gave none); None when the view has no such group."""

    @property
    def available(self) -> bool:
        """Whether the view has been read: until then only this instance's groups answer."""

    @property
    def unavailable_reason(self) -> str | None:
        """Why the view is not available (None when it is)."""

    def incident_owner(self, incident_id: str) -> tuple[str, str | None] | None:
        """The other instance whose group has the open incident ``incident_id``, with the base
        URL of its API; None when the view knows of none."""

    def other_members(self) -> list[tuple[str, str | None]]:
        """Every other instance of the fleet, with the base URL of its API."""

    def publish_silence(self, silence: SilenceView) -> None: ...

    def retract_silence(self, silence_id: str) -> None: ...
