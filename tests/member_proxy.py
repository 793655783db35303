"""A TCP proxy in front of the embedded broker that describes group members as Apache Kafka does.

Tansu answers DescribeGroups with each member's id but an empty client id, host and assignment.
Apache Kafka fills them from what the member itself sent: the ``client.id`` of its requests'
header, the address its connection comes from (``/127.0.0.1``), and the assignment the group's
leader handed out in SyncGroup. This proxy watches those requests go by and fills the
DescribeGroups answers with them, so the collector's member parsing is tested over the wire with
real consumers; everything else passes through untouched.
"""

from __future__ import annotations

import asyncio
import contextlib
import io
import struct

from aiokafka.protocol.admin import (
    DescribeGroupsResponse_v0,
    DescribeGroupsResponse_v1,
    DescribeGroupsResponse_v2,
    DescribeGroupsResponse_v3,
)
from aiokafka.protocol.group import SyncGroupRequest_v0, SyncGroupRequest_v1, SyncGroupRequest_v3

DESCRIBE_GROUPS, SYNC_GROUP = 15, 14
_DESCRIBE_ANSWERS = {
    0: DescribeGroupsResponse_v0,
    1: DescribeGroupsResponse_v1,
    2: DescribeGroupsResponse_v2,
    3: DescribeGroupsResponse_v3,
}
_SYNC_REQUESTS = {
    0: SyncGroupRequest_v0,
    1: SyncGroupRequest_v1,
    2: SyncGroupRequest_v1,
    3: SyncGroupRequest_v3,
}


class MemberDetailsProxy:
    """Proxies every connection to ``upstream_port``; ``members`` maps each member id seen in
    a SyncGroup to (client id, host as Kafka prints it), ``assignments`` to the assignment
    bytes its leader gave it."""

    def __init__(self) -> None:
        self.upstream_port = 0
        self.port = 0
        self.members: dict[str, tuple[str, str]] = {}
        self.assignments: dict[str, bytes] = {}
        self._server: asyncio.Server | None = None
        self._writers: set[asyncio.StreamWriter] = set()

    async def start(self) -> int:
        self._server = await asyncio.start_server(self._handle, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]
        return self.port

    async def close(self) -> None:
        assert self._server is not None
        self._server.close()
        for writer in list(self._writers):
            writer.close()
        await self._server.wait_closed()

    def _watch(self, body: bytes, peer: str) -> tuple[int, int] | None:
        """Learn from a SyncGroup request; (correlation id, version) of a DescribeGroups."""
        api_key, version, correlation, client_len = struct.unpack(">hhih", body[:10])
        client_id = body[10 : 10 + max(client_len, 0)].decode()
        if api_key == DESCRIBE_GROUPS and version in _DESCRIBE_ANSWERS:
            return correlation, version
        if api_key == SYNC_GROUP and version in _SYNC_REQUESTS:
            request = _SYNC_REQUESTS[version].decode(io.BytesIO(body[10 + max(client_len, 0) :]))
            self.members[request.member_id] = (client_id, f"/{peer}")
            for member_id, assignment in request.group_assignment:
                self.assignments[member_id] = assignment
        return None

    def _describe(self, payload: bytes, version: int) -> bytes:
        answer = _DESCRIBE_ANSWERS[version].decode(io.BytesIO(payload))
        groups = []
        for group in answer.groups:
            fields = list(group)
            members = []
            for member_id, client_id, host, metadata, assignment in fields[5]:
                known_client, known_host = self.members.get(member_id, (client_id, host))
                members.append(
                    (
                        member_id,
                        client_id or known_client,
                        host or known_host,
                        metadata,
                        assignment or self.assignments.get(member_id, b""),
                    )
                )
            fields[5] = members
            groups.append(tuple(fields))
        if version == 0:
            return _DESCRIBE_ANSWERS[0](groups).encode()
        return _DESCRIBE_ANSWERS[version](answer.throttle_time_ms, groups).encode()

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._writers.add(writer)
        peer = writer.get_extra_info("peername")[0]
        up_reader, up_writer = await asyncio.open_connection("127.0.0.1", self.upstream_port)
        self._writers.add(up_writer)
        describing: dict[int, int] = {}

        async def to_broker() -> None:
            while True:
                head = await reader.readexactly(4)
                body = await reader.readexactly(struct.unpack(">i", head)[0])
                watched = self._watch(body, peer)
                if watched is not None:
                    describing[watched[0]] = watched[1]
                up_writer.write(head + body)
                await up_writer.drain()

        async def to_client() -> None:
            while True:
                head = await up_reader.readexactly(4)
                body = await up_reader.readexactly(struct.unpack(">i", head)[0])
                version = describing.pop(struct.unpack(">i", body[:4])[0], None)
                if version is not None:
                    body = body[:4] + self._describe(body[4:], version)
                writer.write(struct.pack(">i", len(body)) + body)
                await writer.drain()

        tasks = [asyncio.create_task(to_broker()), asyncio.create_task(to_client())]
        with contextlib.suppress(Exception):
            await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
        for task in tasks:
            task.cancel()
        for w in (writer, up_writer):
            w.close()
            self._writers.discard(w)
