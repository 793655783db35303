"""Shard state that travels with the shard: what the next owner of a shard needs to resume its
groups as if it had watched them all along, on the fleet's state topic (partition p = shard p).

Per group, keyed so that compaction keeps what a new owner needs:

* ``snap/<cluster>/<group>``: the group's whole state: its windows, commit rings and evidence,
  the LEO tables of its partitions, its rules' ``for`` state and its tracker status. Written on
  the group's first scan here, every ``snapshot_every`` scans after (each group at its own
  point of the cycle, so snapshots spread over the scans), and when the shard is revoked
  (:meth:`ShardState.snapshot`).
* ``chg/<cluster>/<group>/<slot>``: one scan's samples of the group with its rules' state and
  status after that scan, numbered (``seq``) from the snapshot; ``slot`` cycles over
  ``snapshot_every``, so the changes since the latest snapshot are never overwritten before
  the next snapshot makes them unnecessary.
* ``inc/<cluster>/<group>``: the group's open incident and its notification log; a tombstone
  once it closes (or the group is gone).

:meth:`ShardState.load` installs the snapshot, replays the changes after it through the store
exactly as the scans went in (the LEO tables of partitions several groups read are fed once per
scan), and continues the incident: the next transition of the group updates or resolves the
same incident id, and a status that stays does not open another. A record that cannot be
decoded is skipped with a log line naming topic, partition, offset and key; a gap in a group's
changes stops its replay there (the windows show the gap, as after any missed scan).

Records use the checkpoint's array format (:func:`notifier.packed.pack_arrays`). The coordinator
is reached through :class:`notifier.service.sharing.ShareHost` only.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
import time
from collections import defaultdict
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from notifier.config.kafka_security import SecurityConfig
from notifier.fleet.statetopic import StateReader, StateRecord, StateWriter
from notifier.packed import PackedArrays, pack_arrays, unpack_arrays
from notifier.rules import GroupRows, ScanColumns, WindowStore, evidence
from notifier.rules.store import TABLE_COLUMN_NAMES
from notifier.service.sharing import GroupHandover, ShareHost
from notifier.types import GroupStatus

if TYPE_CHECKING:
    from notifier.notify import Notifier

log = logging.getLogger("notifier.fleet.state")

FORMAT = 1
_SCAN_FIELDS = ("committed", "log_end", "log_start", "state", "members", "member_hash")
GroupKey = tuple[str, str]


class StatePublishError(Exception):
    """Some shards' records were not acknowledged (the broker is unreachable or refused)."""


class RecordError(ValueError):
    """A state record that cannot be used (damaged, foreign, or for other window settings)."""


@dataclass
class PublishReport:
    """What one :meth:`ShardState.publish_scan` or :meth:`ShardState.snapshot` wrote."""

    records: int = 0
    bytes: int = 0
    snapshots: int = 0
    changes: int = 0
    incidents: int = 0
    tombstones: int = 0
    seconds: float = 0.0


@dataclass
class LoadReport:
    """What :meth:`ShardState.load` found in a shard and installed."""

    shard: int
    records: int = 0
    groups: int = 0
    changes: int = 0
    incidents: int = 0
    skipped: list[str] = field(default_factory=list)
    """Each record or group left out, and why."""
    seconds: float = 0.0
    """Installing the shard, plus its share of the read when shards were read together."""


@dataclass
class _Decoded:
    record: StateRecord
    meta: dict[str, Any]
    arrays: PackedArrays


def _phase(key: GroupKey, every: int) -> int:
    """Where in the cycle of ``every`` scans a group's snapshot falls: spread over the cycle,
    so that no scan carries the snapshots of every group; the same on every instance."""
    digest = hashlib.blake2b(f"{key[0]}\0{key[1]}".encode(), digest_size=4).digest()
    return int.from_bytes(digest, "big") % every


def _previous_ts(store: WindowStore, rows: np.ndarray, ts: int) -> int | None:
    """The scan before ``ts`` in a group's windows (None: ``ts`` is its first)."""
    seen = rows[store.s_ts[rows, -1] == ts]
    if seen.size == 0:
        return None
    before = store.s_ts[seen, -2][store.s_count[seen] >= 2]
    return int(before.max()) if before.size else None


def _key_of(record_key: str) -> GroupKey:
    """(cluster, group) of an ``inc/<cluster>/<group>`` key (a cluster name has no ``/``)."""
    cluster, _, group = record_key.partition("/")[2].partition("/")
    return cluster, group


def snap_key(cluster: str, group: str) -> str:
    return f"snap/{cluster}/{group}"


def change_key(cluster: str, group: str, slot: int) -> str:
    return f"chg/{cluster}/{group}/{slot}"


def incident_key(cluster: str, group: str) -> str:
    return f"inc/{cluster}/{group}"


class ShardState:
    """Publishes the state of the groups of owned shards after every scan, and loads a shard's
    state when it is assigned here; :meth:`drop` forgets a shard's groups after revoke.

    One instance per process and state topic, made and called in the event loop's thread (its
    Kafka clients need the running loop). With a notifier, it publishes an incident's
    notification log as soon as a notification is planned (:attr:`Notifier.on_logged`)."""

    def __init__(
        self,
        bootstrap_servers: str | Sequence[str],
        topic: str,
        coordinator: ShareHost,
        notifier: Notifier | None = None,
        *,
        security: SecurityConfig | None = None,
        snapshot_every: int = 10,
        client_id: str = "notifier-fleet",
    ) -> None:
        if snapshot_every < 1:
            raise ValueError("snapshot_every must be at least 1")
        self.topic = topic
        self.coordinator = coordinator
        self.notifier = notifier
        self.snapshot_every = snapshot_every
        self._writer = StateWriter(bootstrap_servers, topic, security=security, client_id=client_id)
        self._reader = StateReader(bootstrap_servers, topic, security=security, client_id=client_id)
        self._seq: dict[GroupKey, int] = {}
        """The number of the latest scan published (or loaded) of each group."""
        self._groups: dict[int, set[GroupKey]] = defaultdict(set)
        """The groups published (or loaded) in each shard."""
        self._incidents: dict[GroupKey, str] = {}
        """What was last published of each group's open incident (its JSON)."""
        self._shard_of: dict[GroupKey, int] = {}
        self._published_ts: dict[GroupKey, int] = {}
        """The scan time of each group's latest state published (or loaded)."""
        self._sending: set[asyncio.Task[None]] = set()
        if notifier is not None:
            notifier.on_logged = self._logged

    async def start(self) -> None:
        await self._writer.start()
        await self._reader.start()

    async def stop(self) -> None:
        await self.flush()
        if self.notifier is not None and self.notifier.on_logged == self._logged:
            self.notifier.on_logged = None
        await self._reader.stop()
        await self._writer.stop()

    async def flush(self) -> None:
        """Wait until the incident records published as notifications were planned are
        acknowledged."""
        while self._sending:
            await asyncio.gather(*self._sending, return_exceptions=True)

    def _logged(self, keys: list[GroupKey]) -> None:
        """The notifier planned notifications for these groups' incidents: publish their
        notification log now, not at the next scan (a new owner must not send them again)."""
        by_shard: dict[int, list[tuple[str, bytes | None]]] = defaultdict(list)
        report = PublishReport()
        for key in keys:
            shard = self._shard_of.get(key)
            if shard is not None:
                by_shard[shard] += self._incident_records(self.notifier, key, report)
        for shard, records in by_shard.items():
            if records:
                task = asyncio.get_running_loop().create_task(self._send_logged(shard, records))
                self._sending.add(task)
                task.add_done_callback(self._sending.discard)

    async def _send_logged(self, shard: int, records: list[tuple[str, bytes | None]]) -> None:
        try:
            await self._writer.send_many(shard, records)
        except Exception as exc:  # the next scan's publish carries it again
            for key in {_key_of(k) for k, _ in records}:
                self._incidents.pop(key, None)
            log.warning(
                "shard %d: the notification log of %d incidents could not be published (%s); "
                "the next scan publishes it",
                shard, len(records), exc,
                extra={"event": "state_publish_failed", "shard": shard},
            )  # fmt: skip

    async def __aenter__(self) -> ShardState:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    def groups(self, shard: int) -> frozenset[GroupKey]:
        """The groups this instance holds state of in ``shard``."""
        return frozenset(self._groups.get(shard, ()))

    # ------------------------------------------------------------------------ publishing

    async def publish_scan(
        self,
        cluster: str,
        groups_by_shard: Mapping[int, Collection[str]],
        coordinator: ShareHost | None = None,
        notifier: Notifier | None = None,
    ) -> PublishReport:
        """After a scan of ``cluster``: one change record per group of the scan (a snapshot
        when one is due), its incident when that changed, and tombstones for the groups of
        these shards the scan no longer has. Returns once the broker has acknowledged all."""
        started = time.perf_counter()
        coordinator = coordinator or self.coordinator
        notifier = notifier if notifier is not None else self.notifier
        report = PublishReport()
        store = coordinator.store(cluster)
        if store is None:
            raise KeyError(f"cluster {cluster} is not watched here")
        ts = store.last_scan_ts.get(cluster)
        by_group = store.rows_by_group(cluster)
        # Shards whose groups of this cluster all left it get their tombstones too.
        emptied = {s for s, keys in self._groups.items() if any(k[0] == cluster for k in keys)}
        batches: list[tuple[int, list[tuple[str, bytes | None]], set[GroupKey]]] = []
        for shard in sorted(set(groups_by_shard) | emptied):
            groups = groups_by_shard.get(shard, ())
            records: list[tuple[str, bytes | None]] = []
            present: set[GroupKey] = set()
            for group in groups:
                rows = by_group.get(group)
                if rows is None or ts is None:
                    continue
                key = (cluster, group)
                present.add(key)
                self._shard_of[key] = shard
                seq = self._seq.get(key, -1) + 1
                self._seq[key] = seq
                due = (seq + _phase(key, self.snapshot_every)) % self.snapshot_every == 0
                # A change only continues the scan published before it: after a scan that was
                # not published (a failed send, a skipped publish) the next is a snapshot.
                follows = self._published_ts.get(key) == _previous_ts(store, rows, ts)
                self._published_ts[key] = ts
                if seq == 0 or due or not follows:
                    value = self._snapshot_value(coordinator, cluster, group, seq, ts)
                    if value is not None:
                        records.append((snap_key(cluster, group), value))
                        report.snapshots += 1
                else:
                    scan = store.latest_scan(cluster, {group: rows}, ts)
                    records.append(
                        (
                            change_key(cluster, group, seq % self.snapshot_every),
                            self._change_value(coordinator, scan, group, seq),
                        )
                    )
                    report.changes += 1
                records += self._incident_records(notifier, key, report)
            known = self._groups[shard]
            for key in sorted(k for k in known if k[0] == cluster and k not in present):
                records += self._tombstones(key)
                report.tombstones += 1
            known -= {k for k in known if k[0] == cluster}
            known |= present
            batches.append((shard, records, present))
        # Shards in parallel: their partitions may lead on different brokers. A shard with
        # nothing to say costs no task.
        batches = [batch for batch in batches if batch[1]]
        sent = await asyncio.gather(
            *(self._send(shard, records, report) for shard, records, _ in batches),
            return_exceptions=True,
        )
        failed = [(b, e) for b, e in zip(batches, sent, strict=True) if e is not None]
        for (_, _, present), _ in failed:
            for key in present:  # their next publish is a snapshot
                self._published_ts.pop(key, None)
                self._incidents.pop(key, None)
        report.seconds = time.perf_counter() - started
        if failed:
            (shard, _, _), error = failed[0]
            raise StatePublishError(
                f"{len(failed)} of {len(batches)} shards not published (shard {shard}: "
                f"{error}); their groups' next publish is a snapshot"
            ) from error
        return report

    async def snapshot(self, shard: int) -> PublishReport:
        """A snapshot of every group of ``shard`` held here (periodically, and when the shard
        is revoked: the next owner then reads one record per group)."""
        started = time.perf_counter()
        report = PublishReport()
        records: list[tuple[str, bytes | None]] = []
        for key in sorted(self._groups.get(shard, ())):
            cluster, group = key
            store = self.coordinator.store(cluster)
            ts = None if store is None else store.last_scan_ts.get(cluster)
            seq = self._seq.get(key)
            if ts is None or seq is None:
                continue
            value = self._snapshot_value(self.coordinator, cluster, group, seq, ts)
            if value is not None:
                records.append((snap_key(cluster, group), value))
                report.snapshots += 1
            self._incidents.pop(key, None)  # published again with the snapshot
            records += self._incident_records(self.notifier, key, report)
        await self._send(shard, records, report)
        report.seconds = time.perf_counter() - started
        return report

    async def _send(
        self, shard: int, records: list[tuple[str, bytes | None]], report: PublishReport
    ) -> None:
        if records:
            await self._writer.send_many(shard, records)
        report.records += len(records)
        report.bytes += sum(len(k) + len(v or b"") for k, v in records)

    def _snapshot_value(
        self, coordinator: ShareHost, cluster: str, group: str, seq: int, ts: int
    ) -> bytes | None:
        handover = coordinator.export_group(cluster, group)
        if handover is None:
            return None
        rows = handover.rows
        store = coordinator.store(cluster)
        assert store is not None  # it just exported the group
        meta = {
            "format": FORMAT,
            "kind": "snap",
            "cluster": cluster,
            "group": group,
            "seq": seq,
            "ts": ts,
            "width": store.width,
            "points": store.points,
            "partitions": [list(p) for p in rows.partitions],
            "rules": dict(handover.rule_state),
            "status": handover.status.value,
        }
        arrays = {f"row:{name}": values for name, values in rows.columns.items()}
        arrays |= {f"table:{name}": values for name, values in rows.tables.items()}
        return pack_arrays(meta, arrays, compress=True)

    def _change_value(
        self, coordinator: ShareHost, scan: ScanColumns, group: str, seq: int
    ) -> bytes:
        cluster = scan.cluster
        rule_state, status = coordinator.group_verdict(cluster, group)
        meta = {
            "format": FORMAT,
            "kind": "chg",
            "cluster": cluster,
            "group": group,
            "seq": seq,
            "ts": scan.ts,
            "partitions": [[t, int(p)] for t, p in zip(scan.topic, scan.partition.tolist())],
            "rules": rule_state,
            "status": status.value,
        }
        return pack_arrays(
            meta, {name: getattr(scan, name) for name in _SCAN_FIELDS}, compress=True
        )

    def _incident_records(
        self, notifier: Notifier | None, key: GroupKey, report: PublishReport
    ) -> list[tuple[str, bytes | None]]:
        if notifier is None:
            return []
        exported = notifier.export_incident(*key)
        if exported is None:
            if self._incidents.pop(key, None) is None:
                return []
            report.tombstones += 1
            return [(incident_key(*key), None)]
        text = json.dumps(exported, sort_keys=True, default=str)
        if self._incidents.get(key) == text:
            return []
        self._incidents[key] = text
        report.incidents += 1
        meta = {"format": FORMAT, "kind": "inc", "cluster": key[0], "group": key[1], **exported}
        return [(incident_key(*key), pack_arrays(meta, {}))]

    def _tombstones(self, key: GroupKey) -> list[tuple[str, bytes | None]]:
        """Every key a group may have written: it is gone from its cluster."""
        self._seq.pop(key, None)
        self._incidents.pop(key, None)
        self._shard_of.pop(key, None)
        self._published_ts.pop(key, None)
        return [
            (snap_key(*key), None),
            *((change_key(*key, slot), None) for slot in range(self.snapshot_every)),
            (incident_key(*key), None),
        ]

    # ------------------------------------------------------------------------ loading

    async def load(self, shard: int) -> LoadReport:
        """Read ``shard`` up to its end and install its groups (snapshot, then the changes
        after it) into the coordinator, and their open incidents into the notifier, in place
        of whatever was held of them here."""
        return (await self.load_many([shard]))[0]

    async def load_many(self, shards: Iterable[int]) -> list[LoadReport]:
        """:meth:`load` of several shards, read together (one offsets request for all, the
        ones with records fetched at once): what taking shards over costs scales with their
        records, not their number. Reports in the order of ``shards``."""
        wanted = list(dict.fromkeys(shards))
        started = time.perf_counter()
        read = await self._reader.read_partitions(wanted)
        read_s = (time.perf_counter() - started) / max(1, len(wanted))
        return [self._install(shard, read[shard], read_s) for shard in wanted]

    def _install(self, shard: int, records: list[StateRecord], read_s: float) -> LoadReport:
        started = time.perf_counter() - read_s
        report = LoadReport(shard)
        report.records = len(records)
        snaps: dict[GroupKey, _Decoded] = {}
        changes: dict[GroupKey, dict[int, _Decoded]] = defaultdict(dict)
        incidents: dict[GroupKey, _Decoded] = {}
        for record in records:
            decoded = self._decode(shard, record, report)
            if decoded is None:
                continue
            meta = decoded.meta
            key = (meta["cluster"], meta["group"])
            if meta["kind"] == "snap":
                snaps[key] = decoded
            elif meta["kind"] == "chg":
                changes[key][int(meta["seq"])] = decoded
            else:
                incidents[key] = decoded
        batches: dict[tuple[str, int], list[_Decoded]] = defaultdict(list)
        for key, snap in sorted(snaps.items()):
            if not self._install_snapshot(snap, report):
                continue
            seq, last_ts = int(snap.meta["seq"]), int(snap.meta["ts"])
            while (change := changes.get(key, {}).get(seq + 1)) is not None:
                seq, last_ts = seq + 1, int(change.meta["ts"])
                batches[(key[0], last_ts)].append(change)
            later = [s for s in changes.get(key, {}) if s > seq]
            if later:
                report.skipped.append(
                    f"{key[0]}/{key[1]}: changes after seq {seq} missing; "
                    f"{len(later)} later changes not replayed"
                )
                log.warning(
                    "shard %d: group %s of cluster %s: the change after scan %d is missing; "
                    "%d later changes are not replayed (its windows show a gap)",
                    shard, key[1], key[0], seq, len(later),
                    extra={"event": "state_changes_gap", "cluster": key[0], "group": key[1]},
                )  # fmt: skip
            self._seq[key] = seq
            self._groups[shard].add(key)
            self._shard_of[key] = shard
            self._published_ts[key] = last_ts
            report.groups += 1
        for cluster, ts in sorted(batches, key=lambda b: (b[1], b[0])):
            self._replay(cluster, ts, batches[(cluster, ts)])
            report.changes += len(batches[(cluster, ts)])
        for key in sorted(set(changes) - set(snaps)):
            report.skipped.append(f"{key[0]}/{key[1]}: changes without a snapshot")
        for key, decoded in sorted(incidents.items()):
            if self.notifier is None or key not in snaps:
                continue
            data = {k: decoded.meta[k] for k in ("incident", "result", "log")}
            self.notifier.import_incident(data)
            self._incidents[key] = json.dumps(data, sort_keys=True, default=str)
            report.incidents += 1
        report.seconds = time.perf_counter() - started
        log.info(
            "shard %d loaded: %d groups, %d changes replayed, %d incidents, %d skipped",
            shard, report.groups, report.changes, report.incidents, len(report.skipped),
            extra={"event": "shard_loaded", "shard": shard, "groups": report.groups,
                   "seconds": round(report.seconds, 3)},
        )  # fmt: skip
        return report

    def _decode(self, shard: int, record: StateRecord, report: LoadReport) -> _Decoded | None:
        try:
            meta, arrays = unpack_arrays(record.value)
            if meta.get("format") != FORMAT:
                raise RecordError(f"format {meta.get('format')!r}, expected {FORMAT}")
            kind = meta.get("kind")
            if kind not in ("snap", "chg", "inc"):
                raise RecordError(f"unknown kind {kind!r}")
            if not isinstance(meta.get("cluster"), str) or not isinstance(meta.get("group"), str):
                raise RecordError("no cluster or group")
            if kind != "inc" and not isinstance(meta.get("seq"), int):
                raise RecordError("no seq")
        except ValueError as exc:  # RecordError too
            report.skipped.append(f"offset {record.offset} key {record.key}: {exc}")
            log.warning(
                "topic %s partition %d offset %d key %s: the state record cannot be used (%s); "
                "skipped",
                self.topic, shard, record.offset, record.key, exc,
                extra={"event": "state_record_skipped", "topic": self.topic, "partition": shard,
                       "offset": record.offset, "key": record.key},
            )  # fmt: skip
            return None
        return _Decoded(record, meta, arrays)

    def _install_snapshot(self, snap: _Decoded, report: LoadReport) -> bool:
        meta, arrays = snap.meta, snap.arrays
        cluster, group = meta["cluster"], meta["group"]
        store = self.coordinator.store(cluster)
        problem = None
        if store is None:
            problem = f"cluster {cluster} is not in this instance's config"
        elif (meta.get("width"), meta.get("points")) != (store.width, store.points):
            problem = (
                f"written with intervals={meta.get('width')} lag_time_points="
                f"{meta.get('points')}, this instance has {store.width} and "
                f"{store.points}"
            )
        else:
            by_row = {n[4:]: a for n, a in arrays.items() if n.startswith("row:")}
            evidence.upgrade(by_row, store.evidence_kinds)
            try:
                rows = GroupRows(
                    cluster=cluster,
                    group=group,
                    partitions=[(str(t), int(p)) for t, p in meta["partitions"]],
                    # Evidence an older instance did not keep starts at its initial value
                    # here (a rolling upgrade), as a checkpoint's does; the rest must be there.
                    columns={
                        n: by_row[n]
                        for n in store.portable_row_columns
                        if n in by_row or not n.startswith("e_")
                    },
                    tables={n: arrays[f"table:{n}"] for n in TABLE_COLUMN_NAMES},
                )
                status = GroupStatus(meta["status"])
            except (KeyError, ValueError, TypeError) as exc:
                problem = f"the snapshot lacks {exc}"
        if problem is not None:
            report.skipped.append(f"{cluster}/{group}: {problem}")
            log.warning(
                "topic %s offset %d key %s: group %s not taken over: %s",
                self.topic, snap.record.offset, snap.record.key, group, problem,
                extra={"event": "state_group_skipped", "cluster": cluster, "group": group},
            )  # fmt: skip
            return False
        self.coordinator.import_group(GroupHandover(rows, meta.get("rules", {}), status))
        return True

    def _replay(self, cluster: str, ts: int, changes: list[_Decoded]) -> None:
        """One scan's changes of the groups taken over, as one scan: a LEO table several of
        them share gets that scan's point once."""
        groups: list[str] = []
        topics: list[str] = []
        for change in changes:
            partitions = change.meta["partitions"]
            groups += [change.meta["group"]] * len(partitions)
            topics += [str(t) for t, _ in partitions]
        parts = [np.asarray([p for _, p in c.meta["partitions"]], dtype=np.int32) for c in changes]
        columns = {name: np.concatenate([c.arrays[name] for c in changes]) for name in _SCAN_FIELDS}
        scan = ScanColumns(
            cluster=cluster,
            ts=ts,
            group=groups,
            topic=topics,
            partition=np.concatenate(parts),
            **columns,
        )
        self.coordinator.replay_group_scan(
            scan,
            {c.meta["group"]: c.meta.get("rules", {}) for c in changes},
            {c.meta["group"]: GroupStatus(c.meta["status"]) for c in changes},
        )

    # ------------------------------------------------------------------------ revoke

    def drop(self, shard: int) -> list[GroupKey]:
        """Forget the groups of ``shard`` here (it was revoked; :meth:`snapshot` first): their
        windows and statuses, and their open incidents without a resolve. Returns them."""
        keys = sorted(self._groups.pop(shard, ()))
        by_cluster: dict[str, list[str]] = defaultdict(list)
        for key in keys:
            by_cluster[key[0]].append(key[1])
            self._seq.pop(key, None)
            self._incidents.pop(key, None)
            self._shard_of.pop(key, None)
            self._published_ts.pop(key, None)
        for cluster, groups in by_cluster.items():
            self.coordinator.drop_groups(cluster, set(groups))
        if self.notifier is not None and keys:
            self.notifier.drop_incidents(set(keys))
        return keys
