"""Structured logs: JSON lines or key=value, with the fields a log call passes in ``extra``."""

from __future__ import annotations

import json
import logging
import sys
import time
from typing import Any

_STANDARD = set(logging.LogRecord("", 0, "", 0, "", None, None).__dict__) | {"message", "asctime"}


def _fields(record: logging.LogRecord) -> dict[str, Any]:
    fields: dict[str, Any] = {
        "ts": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created))
        + f".{int(record.msecs):03d}Z",
        "level": record.levelname.lower(),
        "logger": record.name,
        "msg": record.getMessage(),
    }
    for key, value in record.__dict__.items():
        if key not in _STANDARD and not key.startswith("_"):
            fields[key] = value
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
