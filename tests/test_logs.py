"""The service's structured logs as an operator's log pipeline reads them."""

from __future__ import annotations

import io
import json
import logging
from collections.abc import Iterator

import pytest
from fastapi import FastAPI

from notifier.api import ApiServer
from notifier.service import logs


@pytest.fixture
def json_logs() -> Iterator[io.StringIO]:
    """The service's JSON log configuration, writing to a buffer; the logging setup of the
    test session is put back afterwards."""
    root = logging.getLogger()
    saved = (root.handlers[:], root.level)
    stream = io.StringIO()
    logs.configure("INFO", "json", stream=stream)
    yield stream
    root.handlers[:], level = saved
    root.setLevel(level)


async def test_json_lines_from_the_api_server_carry_no_terminal_colours(json_logs):
    server = ApiServer(FastAPI(), "127.0.0.1", 0)
    await server.start()
    await server.stop()

    lines = [json.loads(line) for line in json_logs.getvalue().splitlines()]
    started = [line for line in lines if line["msg"].startswith("Started server process")]
    assert len(started) == 1 and started[0]["logger"] == "uvicorn.error"
    for line in lines:
        assert "color_message" not in line
        assert not any("\x1b" in str(value) for value in line.values()), line


def test_ansi_escapes_in_a_message_are_removed(json_logs):
    library = logging.getLogger("some.library")
    library.warning("\x1b[31mdisk\x1b[0m almost full", extra={"path": "\x1b[1m/data\x1b[0m"})

    (line,) = [json.loads(line) for line in json_logs.getvalue().splitlines()]
    assert (line["level"], line["msg"], line["path"]) == ("warning", "disk almost full", "/data")
