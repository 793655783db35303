"""Serving the app: uvicorn inside the service's own event loop, next to the scans."""

from __future__ import annotations

import asyncio

from fastapi import FastAPI


class ApiServer:
    """uvicorn inside the service's event loop."""

    def __init__(self, app: FastAPI, host: str, port: int):
        import uvicorn

        self.config = uvicorn.Config(app, host=host, port=port, log_config=None, lifespan="off",
                                     access_log=False)  # fmt: skip
        self.server = uvicorn.Server(self.config)
        self.task: asyncio.Task | None = None

    @property
    def port(self) -> int:
        servers = getattr(self.server, "servers", [])
        for server in servers:
            for sock in server.sockets:
                return sock.getsockname()[1]
        return self.config.port

    async def start(self) -> None:
        self.task = asyncio.create_task(self.server.serve())
        while not self.server.started:
            if self.task.done():
                self.task.result()
            await asyncio.sleep(0.02)

    async def stop(self) -> None:
        self.server.should_exit = True
        if self.task is not None:
            await self.task
