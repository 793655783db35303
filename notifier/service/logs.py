"""Structured logs: JSON lines or key=value, with the fields a log call passes in ``extra``.

Lines are for machines as much as for people, so no terminal colour reaches them: uvicorn's
``color_message`` extra (its message again, with ANSI colour codes) is dropped, and any ANSI
escape sequence another library puts in a message is removed.
"""

from __future__ import annotations

import json
import logging
import re
import sys
import time
from typing import Any

_STANDARD = set(logging.LogRecord("", 0, "", 0, "", None, None).__dict__) | {"message", "asctime"}

_TERMINAL_ONLY = {"color_message"}
"""Extras that repeat the message for a colour terminal (uvicorn's)."""

_ANSI_ESCAPE = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")


def _plain(value: Any) -> Any:
    return _ANSI_ESCAPE.sub("", value) if isinstance(value, str) and "\x1b" in value else value


def _fields(record: logging.LogRecord) -> dict[str, Any]:
    fields: dict[str, Any] = {
        "ts": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created))
        + f".{int(record.msecs):03d}Z",
        "level": record.levelname.lower(),
        "logger": record.name,
        "msg": _plain(record.getMessage()),
    }
    for key, value in record.__dict__.items():
        if key not in _STANDARD and key not in _TERMINAL_ONLY and not key.startswith("_"):
            fields[key] = _plain(value)
    if record.exc_info:
        fields["error"] = logging.Formatter().formatException(record.exc_info)
    return fields


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        return json.dumps(_fields(record), default=str)


class KeyValueFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        parts = []
        for key, value in _fields(record).items():
            text = value if isinstance(value, str) else json.dumps(value, default=str)
            parts.append(f"{key}={json.dumps(text) if (' ' in text or not text) else text}")
        return " ".join(parts)


def configure(level: str = "INFO", fmt: str = "json", stream: Any = None) -> None:
    """Route every logger through one handler with the chosen format."""
    handler = logging.StreamHandler(stream or sys.stderr)
    handler.setFormatter(JsonFormatter() if fmt == "json" else KeyValueFormatter())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level)
    for noisy in ("aiokafka", "apscheduler", "httpx", "httpcore", "uvicorn.access", "py4j"):
        logging.getLogger(noisy).setLevel(max(logging.WARNING, logging.getLevelName(level)))
