"""What every broker on loopback shares: its process (started with its output appended to a
log, waited on until it serves, stopped with a signal and then SIGKILL, never left behind), a
readiness request over a plain socket, and the sync and async context managers.

:class:`~notifier.embedded.broker.EmbeddedBroker` (Tansu) and
:class:`~notifier.embedded.apache_kafka.ApacheKafkaBroker` differ in what they run and how they
tell that it serves; the rest is here.
"""

from __future__ import annotations

import abc
import asyncio
import contextlib
import os
import signal
import socket
import struct
import subprocess
import time
import weakref
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import IO, Any, Self, TypeVar, cast

from aiokafka.protocol.api import RequestHeader_v1, RequestStruct, Response

__all__ = [
    "BrokerError",
    "BrokerProcess",
    "LoopbackBroker",
    "ask",
]

R = TypeVar("R", bound=Response)


class BrokerError(RuntimeError):
    """A broker could not be found, started or reached."""


def _recv_exactly(sock: socket.socket, size: int) -> bytes:
    chunks = bytearray()
    while len(chunks) < size:
        chunk = sock.recv(size - len(chunks))
        if not chunk:
            raise OSError("connection closed by the broker")
        chunks.extend(chunk)
    return bytes(chunks)


def ask(
    host: str,
    port: int,
    request: RequestStruct,
    response_type: type[R],
    *,
    correlation_id: int,
    timeout: float,
) -> R | None:
    """Send one Kafka request over a plain blocking socket and decode its answer; ``None``
    when none came, or not a valid one.

    A blocking socket (not aiokafka's client) so that readiness can be checked from sync code,
    from inside a running event loop (via a thread) and against a broker that advertises an
    address other than the one it listens on.
    """
    header = RequestHeader_v1(request, correlation_id=correlation_id,
                              client_id="notifier-broker-probe")  # fmt: skip
    message = header.encode() + request.encode()
    try:
        with socket.create_connection((host, port), timeout=timeout) as sock:
            sock.settimeout(timeout)
            sock.sendall(struct.pack(">i", len(message)) + message)
            size = struct.unpack(">i", _recv_exactly(sock, 4))[0]
            body = _recv_exactly(sock, size)
        if struct.unpack(">i", body[:4])[0] != correlation_id:
            return None
        return cast(R, response_type.decode(body[4:]))
    except (OSError, struct.error, ValueError):
        return None


def _kill(process: subprocess.Popen[bytes], wait_s: float) -> None:
    """Finalizer: never leave a broker process behind when its owner is garbage or Python exits."""
    if process.poll() is None:
        process.kill()
        with contextlib.suppress(subprocess.TimeoutExpired):
            process.wait(timeout=wait_s)


class BrokerProcess:
    """A broker's OS process, one run at a time.

    ``stop_signal`` asks it to stop, SIGKILL follows after ``stop_timeout_s`` (unless
    :meth:`stop` is given another); ``kill_wait_s`` is how long the finalizer waits after
    SIGKILL; ``log_tail_bytes`` how much of the log an error message quotes.
    """

    def __init__(
        self,
        *,
        stop_signal: signal.Signals,
        stop_timeout_s: float,
        kill_wait_s: float,
        log_tail_bytes: int,
    ) -> None:
        self._stop_signal = stop_signal
        self._stop_timeout_s = stop_timeout_s
        self._kill_wait_s = kill_wait_s
        self._log_tail_bytes = log_tail_bytes
        self._process: subprocess.Popen[bytes] | None = None
        self._finalizer: weakref.finalize[..., Any] | None = None
        self._log_file: IO[bytes] | None = None
        self._log_path: Path | None = None

    @property
    def running(self) -> bool:
        return self._process is not None and self._process.poll() is None

    @property
    def pid(self) -> int | None:
        return self._process.pid if self._process is not None else None

    def launch(
        self,
        command: Sequence[str],
        log_path: Path,
        *,
        cwd: str | os.PathLike[str] | None = None,
    ) -> None:
        """Start ``command``, its output appended to ``log_path`` after a line naming it;
        raises OSError when it cannot be run."""
        self._log_path = log_path
        log_path.parent.mkdir(parents=True, exist_ok=True)
        log_file = open(log_path, "ab")  # noqa: SIM115 - lives as long as the process
        log_file.write(f"\n==== {' '.join(command)}\n".encode())
        log_file.flush()
        try:
            process = subprocess.Popen(
                list(command),
                stdin=subprocess.DEVNULL,
                stdout=log_file,
                stderr=subprocess.STDOUT,
                cwd=cwd,
            )
        except OSError:
            log_file.close()
            raise
        self._log_file = log_file
        self._process = process
        self._finalizer = weakref.finalize(self, _kill, process, self._kill_wait_s)

    def wait_until_serving(
        self,
        serves: Callable[[], bool],
        *,
        started: float,
        timeout: float,
        poll_s: float,
        what: str,
        serving: str,
        serve: str,
    ) -> None:
        """Block until ``serves()`` (true when the broker answers as it should), checked every
        ``poll_s`` seconds until ``timeout`` after ``started`` (:func:`time.monotonic`).

        Raises BrokerError, with the log's tail, when the process exits first (``"{what}
        exited with code N before {serving}"``) or the time is up (``"{what} did not {serve}
        within T s"``); the process is stopped then.
        """
        process = self._process
        assert process is not None, "launch first"
        deadline = started + timeout
        while True:
            if process.poll() is not None:
                code = process.returncode
                self.stop()
                raise BrokerError(
                    f"{what} exited with code {code} before {serving}; "
                    f"log {self._log_path}:\n{self.log_tail()}"
                )
            if serves():
                return
            if time.monotonic() > deadline:
                self.stop()
                raise BrokerError(
                    f"{what} did not {serve} within {timeout:.0f}s; "
                    f"log {self._log_path}:\n{self.log_tail()}"
                )
            time.sleep(poll_s)

    def stop(self, timeout: float | None = None) -> None:
        """The stop signal, then SIGKILL after ``timeout`` seconds; closes the log."""
        if timeout is None:
            timeout = self._stop_timeout_s
        process, self._process = self._process, None
        if self._finalizer is not None:
            self._finalizer.detach()
            self._finalizer = None
        if process is not None and process.poll() is None:
            process.send_signal(self._stop_signal)
            try:
                process.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(timeout=timeout)
        if self._log_file is not None:
            self._log_file.close()
            self._log_file = None

    def log_tail(self) -> str:
        """The end of the broker's log, for an error message."""
        if self._log_path is None:
            return "(no log)"
        try:
            data = self._log_path.read_bytes()
        except OSError:
            return "(no log)"
        return data[-self._log_tail_bytes :].decode(errors="replace")


class LoopbackBroker(abc.ABC):
    """A broker on loopback whose process is :attr:`_broker` (a :class:`BrokerProcess`):
    :meth:`start`, :meth:`stop`, :meth:`restart` and :meth:`close` (stop, and remove what the
    broker made), their async forms, and use as a sync or async context manager."""

    _broker: BrokerProcess

    @abc.abstractmethod
    def start(self) -> Self:
        """Start the broker and block until it serves."""

    @abc.abstractmethod
    def stop(self) -> None:
        """Stop the broker."""

    @abc.abstractmethod
    def restart(self) -> Self:
        """Stop and start again."""

    def close(self) -> None:
        """Stop the broker; a broker with files of its own removes them too."""
        self.stop()

    @property
    def running(self) -> bool:
        return self._broker.running

    @property
    def pid(self) -> int | None:
        return self._broker.pid

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    async def astart(self) -> Self:
        """:meth:`start` without blocking the event loop."""
        return await asyncio.to_thread(self.start)

    async def astop(self) -> None:
        """:meth:`stop` without blocking the event loop."""
        await asyncio.to_thread(self.stop)

    async def arestart(self) -> Self:
        """:meth:`restart` without blocking the event loop."""
        return await asyncio.to_thread(self.restart)

    async def __aenter__(self) -> Self:
        return await self.astart()

    async def __aexit__(self, *exc_info: object) -> None:
        await asyncio.to_thread(self.close)
