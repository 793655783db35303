"""One ``notifier run`` instance of a fleet as a real process, with its API client: what the
fleet tests and ``benchmarks/fleet.py`` read from it (the groups it exports, a group's window,
its counters, its CPU time) and the ways they stop it (SIGKILL, SIGTERM)."""

from __future__ import annotations

import asyncio
import os
import re
import signal
import time
from pathlib import Path

import httpx

from tests.service_process import ServiceProcess

CLOCK_TICK = os.sysconf("SC_CLK_TCK")
_SAMPLE = re.compile(r"^(\w+)\{([^}]*)\} (\S+)$", re.M)
_LABEL = re.compile(r'(\w+)="([^"]*)"')

Sample = tuple[str, dict[str, str], float]
"""A labelled ``/metrics`` sample: family name, labels, value."""


def _now_ms() -> int:
    return int(time.time() * 1000)


class FleetProcess:
    """``name``'s ``notifier run`` on ``config`` (log lines to ``log``), its API on ``port``
    queried with ``api_timeout``; ``cluster`` is the watched cluster its groups are read from."""

    def __init__(
        self, name: str, config: Path, log: Path, port: int, *, cluster: str, api_timeout: float
    ) -> None:
        self.name = name
        self.cluster = cluster
        self.process = ServiceProcess(config, log)
        self.api = httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=api_timeout)

    @property
    def pid(self) -> int:
        assert self.process.process is not None
        return self.process.process.pid

    @property
    def running(self) -> bool:
        process = self.process.process
        return process is not None and process.returncode is None

    async def start(self) -> None:
        """Start it and wait until its API listens."""
        await self.process.__aenter__()

    async def kill(self) -> int:
        """``kill -9``; the wall time of the kill (ms)."""
        assert self.process.process is not None
        killed_at = _now_ms()
        os.kill(self.pid, signal.SIGKILL)
        await self.process.process.wait()
        return killed_at

    async def terminate(self) -> int:
        """SIGTERM and a clean exit; the wall time of the signal (ms)."""
        stopped_at = _now_ms()
        assert await self.process.stop() == 0, self.process.log_path.read_text()[-4000:]
        return stopped_at

    async def close(self) -> None:
        if self.running:
            await self.process.stop()
        await self.api.aclose()

    def cpu_s(self) -> float:
        """User + system CPU seconds of the process so far."""
        fields = Path(f"/proc/{self.pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / CLOCK_TICK  # utime, stime

    async def metrics(self) -> list[Sample]:
        """Its labelled ``/metrics`` samples (raises when it does not answer)."""
        answer = await self.api.get("/metrics")
        answer.raise_for_status()
        return [
            (name, dict(_LABEL.findall(labels)), float(value))
            for name, labels, value in _SAMPLE.findall(answer.text)
        ]

    async def last_scan(self) -> int | None:
        """When its last successful scan of its cluster was (epoch ms, from ``/readyz``: a
        cheap answer, unlike ``/metrics``, for polling while its CPU is measured)."""
        answer = await self.api.get("/readyz")  # 503 while not ready: the same body
        for cluster in answer.json()["clusters"]:
            if cluster["cluster"] == self.cluster:
                return cluster.get("last_scan")
        return None

    async def assignments(self) -> int:
        """How many shard assignments it has taken since it started (``/readyz``)."""
        answer = await self.api.get("/readyz")
        return int(answer.json().get("fleet", {}).get("assignments", 0))

    async def next_scan(self, after: int | None, poll_s: float = 0.5) -> int:
        """Wait until a scan newer than ``after`` has landed; its time."""
        while True:
            found = await self.last_scan()
            if found is not None and found != after:
                return found
            await asyncio.sleep(poll_s)

    async def kafka_requests(self) -> dict[tuple[str, str], int]:
        """``notifier_kafka_requests_total`` so far, by (client, api)."""
        return {
            (labels["client"], labels["api"]): int(value)
            for name, labels, value in await self.metrics()
            if name == "notifier_kafka_requests_total"
        }

    async def groups(self) -> set[str]:
        """The groups it exports on /metrics: those of its shards ({} when it is down)."""
        if not self.running:
            return set()
        try:
            metrics = await self.metrics()
        except httpx.HTTPError:
            return set()
        return {lab["consumergroup"] for n, lab, _ in metrics if n == "notifier_group_status"}

    async def window(self, group: str) -> list[int]:
        """The scan times (ms) in its window of ``group`` ([] if it has none)."""
        try:
            answer = await self.api.get(f"/api/groups/{self.cluster}/{group}")
        except httpx.TransportError:
            return []
        if answer.status_code != 200:
            return []
        partitions = answer.json().get("partitions") or [{}]
        return [sample["ts"] for sample in partitions[0].get("window", [])]
