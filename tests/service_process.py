"""`notifier run` as a real subprocess: started on a config file, its JSON log lines (stderr)
written to a file and read back, stopped with SIGTERM as a supervisor would."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]


class ServiceProcess:
    """``async with ServiceProcess(config, log_path, env) as service:`` — ``service.url`` is
    where the API answers (read from its ``api_listening`` log line)."""

    def __init__(self, config: Path, log_path: Path, env: dict[str, str] | None = None) -> None:
        self.config = config
        self.log_path = log_path
        self.env = {**os.environ, "PYTHONPATH": str(ROOT), **(env or {})}
        self.process: asyncio.subprocess.Process | None = None
        self.url = ""

    async def __aenter__(self) -> ServiceProcess:
        with self.log_path.open("wb") as log:
            self.process = await asyncio.create_subprocess_exec(
                sys.executable, "-m", "notifier.cli", "run", "--config", str(self.config),
                cwd=ROOT, env=self.env, stdout=log, stderr=log,
            )  # fmt: skip
        listening = await self.wait_for_log(lambda line: line.get("event") == "api_listening")
        self.url = listening["url"]
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.stop()

    async def stop(self) -> int:
        """SIGTERM, then wait for a clean exit; the exit code."""
        assert self.process is not None
        if self.process.returncode is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                await asyncio.wait_for(self.process.wait(), 60)
            except TimeoutError:
                self.process.kill()
                await self.process.wait()
        assert self.process.returncode is not None
        return self.process.returncode

    def log_lines(self) -> list[dict[str, Any]]:
        """Every JSON log line so far (other lines, such as a traceback, as ``{"text": ...}``)."""
        lines = []
        for raw in self.log_path.read_text(errors="replace").splitlines():
            try:
                lines.append(json.loads(raw))
            except ValueError:
                lines.append({"text": raw})
        return lines

    async def wait_for_log(self, matches: Any, timeout: float = 60) -> dict[str, Any]:
        """The first log line ``matches`` accepts, waiting for it; fails if the service exits."""
        assert self.process is not None
        deadline = time.monotonic() + timeout
        while True:
            for line in self.log_lines():
                if matches(line):
                    return line
            if self.process.returncode is not None:
                raise AssertionError(f"the service exited:\n{self.log_path.read_text()}")
            if time.monotonic() > deadline:
                raise AssertionError(f"no such log line:\n{self.log_path.read_text()}")
            await asyncio.sleep(0.1)
