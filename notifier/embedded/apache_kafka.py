"""Apache Kafka itself, for the tests, the demo and the benchmarks: its jars resolved from Maven
Central, a single-node KRaft broker on loopback ports, and Kafka's own command-line tools.

:func:`kafka_jars` puts one release's broker, tools and dependencies into one folder, with Maven
and the project's ``tests/kafka/pom.xml``, cached outside the work tree
(``~/.cache/notifier/kafka/<version>``, or ``$NOTIFIER_KAFKA_CACHE/<version>``) so that it
downloads once per machine. :class:`ApacheKafkaBroker` formats a storage directory and runs
``kafka.Kafka`` as a combined broker and controller (``process.roles=broker,controller``) with
replication factor 1 for its internal topics, waits until it answers a Metadata request naming
itself as a broker, and stops it. :class:`KafkaTools` runs what the ``bin/*.sh`` scripts of a
Kafka download run (``kafka-consumer-groups``, the console producer and consumer, ...) as
``java -cp 'DIR/*' <main class>``.

It lives in the package, not under ``tests/``, because the demo and the benchmarks start it too.
Resolving jars needs a checkout (the pom is not in the wheel); an installed service is given a
folder of jars instead (``jars=``).
"""

from __future__ import annotations

import base64
import fcntl
import os
import re
import shutil
import signal
import subprocess
import tempfile
import time
import uuid
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import IO

from aiokafka.protocol.metadata import MetadataRequest_v1, MetadataResponse_v1

from notifier.embedded.process import BrokerError, BrokerProcess, LoopbackBroker, ask
from notifier.netutil import free_port

__all__ = [
    "CLASSIC_KAFKA_VERSION",
    "KAFKA_VERSION",
    "ApacheKafkaBroker",
    "KafkaTools",
    "KafkaUnavailable",
    "kafka_jars",
]

KAFKA_VERSION = "4.4.0"
"""The newest Apache Kafka on Maven Central: consumer-protocol groups (KIP-848, GA since 4.0)
and share groups (KIP-932, production-ready since 4.2)."""
CLASSIC_KAFKA_VERSION = "3.9.2"
"""The last release line with the old protocol versions Kafka 4 removed (KIP-896), which
Burrow 1.2's client still speaks; its groups are classic only."""

POM = Path(__file__).resolve().parents[2] / "tests" / "kafka" / "pom.xml"
_CACHE_ENV = "NOTIFIER_KAFKA_CACHE"
_COMPLETE = ".complete"
_LOG_TAIL_BYTES = 6000
_MVN_TIMEOUT_S = 900.0

_TOOLS_4 = {
    "kafka": "kafka.Kafka",
    "storage": "kafka.tools.StorageTool",
    "consumer-groups": "org.apache.kafka.tools.consumer.group.ConsumerGroupCommand",
    "share-groups": "org.apache.kafka.tools.consumer.group.ShareGroupCommand",
    "console-consumer": "org.apache.kafka.tools.consumer.ConsoleConsumer",
    "console-share-consumer": "org.apache.kafka.tools.consumer.ConsoleShareConsumer",
    "console-producer": "org.apache.kafka.tools.ConsoleProducer",
    "configs": "org.apache.kafka.tools.ConfigCommand",
    "topics": "org.apache.kafka.tools.TopicCommand",
    "features": "org.apache.kafka.tools.FeatureCommand",
    "delete-records": "org.apache.kafka.tools.DeleteRecordsCommand",
    "get-offsets": "org.apache.kafka.tools.GetOffsetShell",
}
"""Each ``bin/kafka-<tool>.sh`` of a Kafka 4 download and the main class it runs."""
_TOOLS_3 = {
    **{k: v for k, v in _TOOLS_4.items() if "share" not in k},
    "console-producer": "kafka.tools.ConsoleProducer",
    "configs": "kafka.admin.ConfigCommand",
}
"""Kafka 3.9 had no share groups, and two tools still in the Scala core."""


_SECURITY_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
_RESERVED_LISTENERS = ("PLAINTEXT", "CONTROLLER")
"""The broker's own listeners: inter-broker traffic (and the readiness probe), and KRaft's."""


class KafkaUnavailable(BrokerError):
    """Apache Kafka cannot be run here: Java or Maven is missing, or a jar does not resolve."""


def _major(version: str) -> int:
    head = version.split(".", 1)[0]
    if not head.isdigit():
        raise ValueError(f"Kafka version {version!r}: expected <major>.<minor>.<patch>")
    return int(head)


def cache_root() -> Path:
    """Where resolved releases are kept, one folder per version, shared by every work tree."""
    configured = os.environ.get(_CACHE_ENV)
    if configured:
        return Path(configured).expanduser()
    xdg = os.environ.get("XDG_CACHE_HOME")
    base = Path(xdg).expanduser() if xdg else Path.home() / ".cache"
    return base / "notifier" / "kafka"


def java_missing() -> str | None:
    """Why Java cannot run Kafka here, or None when ``java`` is on the PATH."""
    if shutil.which("java") is None:
        return "no `java` on the PATH (Apache Kafka needs a JDK 17, e.g. Debian's openjdk-17)"
    return None


def kafka_jars(
    version: str = KAFKA_VERSION, *, cache: str | os.PathLike[str] | None = None
) -> Path:
    """The folder holding every jar of Apache Kafka ``version`` (broker, tools, dependencies).

    Resolved with Maven on first use and kept in ``cache`` (default :func:`cache_root`); later
    calls, from any process or work tree, return the folder without running Maven. Raises
    :class:`KafkaUnavailable` naming what is missing, or the artifact that did not resolve.
    """
    _major(version)
    folder = Path(cache).expanduser() if cache is not None else cache_root()
    target = folder / version
    if (target / _COMPLETE).is_file():
        return target
    folder.mkdir(parents=True, exist_ok=True)
    # Two test sessions on one machine may resolve the same release at once: one does it.
    with open(folder / f"{version}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if (target / _COMPLETE).is_file():
            return target
        staging = Path(tempfile.mkdtemp(prefix=f".{version}-", dir=folder))
        try:
            _resolve(version, staging)
            if target.exists():
                shutil.rmtree(target)
            staging.rename(target)
        finally:
            shutil.rmtree(staging, ignore_errors=True)
        (target / _COMPLETE).write_text(f"Apache Kafka {version}, resolved from {POM}\n")
    return target


def _resolve(version: str, into: Path) -> None:
    missing = java_missing()
    if missing:
        raise KafkaUnavailable(missing)
    mvn = shutil.which("mvn")
    if mvn is None:
        raise KafkaUnavailable(
            "no `mvn` on the PATH: Apache Kafka's jars are resolved with Maven "
            "(Debian's maven package)"
        )
    if not POM.is_file():
        raise KafkaUnavailable(
            f"{POM} is not there (it is in a checkout of the repository, not in the wheel): "
            "give the broker a folder of Kafka jars instead"
        )
    command = [
        mvn,
        "-B",
        "-q",
        "-Dstyle.color=never",
        "-f",
        str(POM),
        f"-Dkafka.version={version}",
        "-P",
        f"kafka-{_major(version)}",
        "dependency:copy-dependencies",
        f"-DoutputDirectory={into}",
    ]
    try:
        done = subprocess.run(
            command,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=_MVN_TIMEOUT_S,
            check=False,
        )
    except subprocess.TimeoutExpired as err:
        raise KafkaUnavailable(
            f"Maven did not resolve Apache Kafka {version} within {_MVN_TIMEOUT_S:.0f}s: "
            f"{' '.join(command)}"
        ) from err
    if done.returncode != 0:
        output = (done.stdout + done.stderr).strip()
        raise KafkaUnavailable(
            f"Apache Kafka {version} did not resolve from Maven: {_failed_artifacts(output)} "
            f"(command: {' '.join(command)})\n{output[-_LOG_TAIL_BYTES:]}"
        )
    if not any(into.glob(f"kafka_2.13-{version}.jar")):
        raise KafkaUnavailable(
            f"Maven ran but left no kafka_2.13-{version}.jar in {into} (command: "
            f"{' '.join(command)})"
        )


def _failed_artifacts(maven_output: str) -> str:
    """The artifacts Maven names as unresolvable, e.g. ``org.apache.kafka:kafka_2.13:jar:9.9``."""
    listed = re.search(r"artifacts could not be resolved: (.+)", maven_output)
    if listed:
        # "g:a:jar:v, g:a:jar:v: why": coordinates hold no spaces, the reason follows ": ".
        return f"unresolved artifacts {listed.group(1).split(': ', 1)[0]}"
    single = re.search(
        r"Could not (?:find|transfer|resolve) artifact ([\w.\-]+:[\w.\-]+:[\w.\-]+:[\w.\-]+)",
        maven_output,
    )
    if single:
        return f"unresolved artifact {single.group(1)}"
    return "see Maven's output below"


class KafkaTools:
    """Kafka's command-line tools from a folder of jars: ``run("consumer-groups", ...)`` is
    ``bin/kafka-consumer-groups.sh ...``. Tools log warnings only, to stderr."""

    def __init__(self, jars: str | os.PathLike[str], version: str) -> None:
        self.jars = Path(jars)
        self.version = version
        self._mains = _TOOLS_3 if _major(version) < 4 else _TOOLS_4
        self._log_config: Path | None = None

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(self._mains)

    def java_command(
        self, tool: str, *args: str, heap: str = "256m", log_level: str = "warn"
    ) -> list[str]:
        """The ``java`` command line that runs ``tool`` (a key of :attr:`names`)."""
        try:
            main = self._mains[tool]
        except KeyError:
            raise ValueError(
                f"Kafka {self.version} has no tool {tool!r}; it has {', '.join(self._mains)}"
            ) from None
        return [
            "java",
            f"-Xmx{heap}",
            "-XX:+UseSerialGC",
            "-XX:TieredStopAtLevel=1",
            "-Djava.awt.headless=true",
            *self._logging(log_level),
            "-cp",
            f"{self.jars}/*",
            main,
            *args,
        ]

    def run(
        self, tool: str, *args: str, timeout: float = 120.0, check: bool = True, stdin: str = ""
    ) -> subprocess.CompletedProcess[str]:
        """Run ``tool`` to completion and return what it printed; a failure (``check``) raises
        :class:`BrokerError` with its output."""
        command = self.java_command(tool, *args)
        try:
            done = subprocess.run(
                command, input=stdin, capture_output=True, text=True, timeout=timeout, check=False
            )
        except subprocess.TimeoutExpired as err:
            raise BrokerError(f"kafka {tool} {' '.join(args)} ran over {timeout:g}s") from err
        if check and done.returncode != 0:
            raise BrokerError(
                f"kafka {tool} {' '.join(args)} exited with {done.returncode}:\n"
                f"{done.stdout[-_LOG_TAIL_BYTES:]}{done.stderr[-_LOG_TAIL_BYTES:]}"
            )
        return done

    def popen(
        self,
        tool: str,
        *args: str,
        stdin: int | IO[bytes] | None = subprocess.DEVNULL,
        stdout: int | IO[bytes] | None = subprocess.DEVNULL,
        stderr: int | IO[bytes] | None = subprocess.DEVNULL,
    ) -> subprocess.Popen[bytes]:
        """Start ``tool`` (a console consumer, say) and leave it running."""
        return subprocess.Popen(
            self.java_command(tool, *args), stdin=stdin, stdout=stdout, stderr=stderr
        )

    def _logging(self, level: str) -> list[str]:
        if _major(self.version) >= 4:  # slf4j-simple (tests/kafka/pom.xml, profile kafka-4)
            return [
                f"-Dorg.slf4j.simpleLogger.defaultLogLevel={level}",
                "-Dorg.slf4j.simpleLogger.showDateTime=true",
            ]
        # Kafka 3 logs through reload4j, which says nothing without a configuration.
        if self._log_config is None:
            self._log_config = Path(tempfile.mkdtemp(prefix="notifier-kafka-log4j-")) / "l.prop"
        config = self._log_config.with_name(f"log4j-{level}.properties")
        if not config.is_file():
            config.write_text(
                f"log4j.rootLogger={level.upper()}, stderr\n"
                "log4j.appender.stderr=org.apache.log4j.ConsoleAppender\n"
                "log4j.appender.stderr.Target=System.err\n"
                "log4j.appender.stderr.layout=org.apache.log4j.PatternLayout\n"
                "log4j.appender.stderr.layout.ConversionPattern=[%d] %p %m (%c)%n\n"
            )
        return [f"-Dlog4j.configuration=file:{config}"]


def _serves_as_broker(host: str, port: int, node_id: int, timeout: float) -> bool:
    """Whether the broker answers a Metadata request naming itself among the brokers: in KRaft
    the listener accepts connections before the broker is registered and unfenced, and until
    then it lists no broker and cannot create a topic."""
    answer = ask(host, port, MetadataRequest_v1([]), MetadataResponse_v1, correlation_id=11,
                 timeout=timeout)  # fmt: skip
    return answer is not None and any(broker[0] == node_id for broker in answer.brokers)


class ApacheKafkaBroker(LoopbackBroker):
    """One Apache Kafka broker, also its own KRaft controller, on two free loopback ports.

    ``jars`` is a folder of Kafka jars (default: :func:`kafka_jars` of ``version``, resolved
    on first start). ``properties`` add to or override the broker's configuration. The data,
    the configuration and the broker's log (:attr:`log_path`) live in ``data_dir`` (a fresh
    temp directory by default, removed by :meth:`close` when it made it).

    The ``PLAINTEXT`` listener (:attr:`bootstrap_servers`) carries the inter-broker traffic and
    the readiness probe. ``listeners`` adds more, each on its own free loopback port: name →
    security protocol, e.g. ``{"SCRAM": "SASL_PLAINTEXT", "MTLS": "SSL"}``, reached at
    :meth:`bootstrap` ``(name)``; their settings go in ``properties`` with Kafka's per-listener
    prefix (``listener.name.scram.sasl.enabled.mechanisms``,
    ``listener.name.scram.scram-sha-256.sasl.jaas.config``, ``listener.name.mtls.ssl.…``).
    ``format_options`` are added to ``kafka-storage format`` (``--add-scram`` creates SCRAM
    users before the first start), ``jvm_options`` to the broker's ``java`` command (system
    properties such as ``-Dorg.apache.kafka.sasl.oauthbearer.allowed.urls=…``).

    :meth:`restart` keeps the ports and the data: topics, records, groups and committed
    offsets survive it, as on a real cluster. Usable as a sync or async context manager.
    """

    NODE_ID = 1

    def __init__(
        self,
        version: str = KAFKA_VERSION,
        *,
        jars: str | os.PathLike[str] | None = None,
        data_dir: str | os.PathLike[str] | None = None,
        properties: Mapping[str, str] | None = None,
        listeners: Mapping[str, str] | None = None,
        format_options: Sequence[str] = (),
        jvm_options: Sequence[str] = (),
        host: str = "127.0.0.1",
        heap: str = "768m",
        startup_timeout: float = 120.0,
    ) -> None:
        _major(version)
        extra_listeners = dict(listeners or {})
        for name, protocol in extra_listeners.items():
            if not re.fullmatch(r"[A-Z][A-Z0-9_]*", name) or name in _RESERVED_LISTENERS:
                raise ValueError(
                    f"listener name {name!r}: expected upper-case letters, digits and _, "
                    f"other than {' and '.join(_RESERVED_LISTENERS)}"
                )
            if protocol not in _SECURITY_PROTOCOLS:
                raise ValueError(
                    f"listener {name}: security protocol {protocol!r}, expected one of "
                    f"{', '.join(_SECURITY_PROTOCOLS)}"
                )
        self._listeners = extra_listeners
        self._listener_ports: dict[str, int] = {}
        self._format_options = tuple(format_options)
        self._jvm_options = tuple(jvm_options)
        self.version = version
        self.host = host
        self._jars = Path(jars) if jars is not None else None
        self._own_data_dir = data_dir is None
        self._data_dir = Path(data_dir) if data_dir is not None else None
        self._extra = dict(properties or {})
        self._heap = heap
        self._startup_timeout = startup_timeout
        self._port = 0
        self._controller_port = 0
        self._formatted = False
        # SIGTERM: a controlled shutdown that flushes the broker's logs.
        self._broker = BrokerProcess(
            stop_signal=signal.SIGTERM,
            stop_timeout_s=30.0,
            kill_wait_s=10.0,
            log_tail_bytes=_LOG_TAIL_BYTES,
        )
        self.started_in_s: float | None = None
        """How long the last start took, from launching Java to the first good answer."""

    # ----------------------------------------------------------------------------------------
    # What clients and tests need

    @property
    def jars(self) -> Path:
        if self._jars is None:
            self._jars = kafka_jars(self.version)
        return self._jars

    @property
    def tools(self) -> KafkaTools:
        return KafkaTools(self.jars, self.version)

    @property
    def port(self) -> int:
        return self._port

    @property
    def bootstrap_servers(self) -> str:
        return f"{self.host}:{self._port}"

    def listener_port(self, name: str) -> int:
        """The port of listener ``name`` (one of ``listeners``; picked on the first start)."""
        if name == "PLAINTEXT":
            return self._port
        if name not in self._listeners:
            known = ", ".join(["PLAINTEXT", *self._listeners])
            raise KeyError(f"no listener {name!r} on this broker; it has {known}")
        return self._listener_ports.get(name, 0)

    def bootstrap(self, name: str = "PLAINTEXT") -> str:
        """``host:port`` of listener ``name``, for a client's ``bootstrap_servers``."""
        return f"{self.host}:{self.listener_port(name)}"

    @property
    def data_dir(self) -> Path:
        if self._data_dir is None:
            self._data_dir = Path(tempfile.mkdtemp(prefix=f"notifier-kafka-{self.version}-"))
        return self._data_dir

    @property
    def log_path(self) -> Path:
        return self.data_dir / "broker.log"

    def server_properties(self) -> dict[str, str]:
        """The broker's configuration (ports are picked on the first start)."""
        advertised = [f"PLAINTEXT://{self.host}:{self._port}"] + [
            f"{name}://{self.host}:{self.listener_port(name)}" for name in self._listeners
        ]
        protocols = ["PLAINTEXT:PLAINTEXT", "CONTROLLER:PLAINTEXT"] + [
            f"{name}:{protocol}" for name, protocol in self._listeners.items()
        ]
        base = {
            "process.roles": "broker,controller",
            "node.id": str(self.NODE_ID),
            "controller.quorum.voters": f"{self.NODE_ID}@{self.host}:{self._controller_port}",
            "listeners": ",".join(
                [*advertised, f"CONTROLLER://{self.host}:{self._controller_port}"]
            ),
            "advertised.listeners": ",".join(advertised),
            "controller.listener.names": "CONTROLLER",
            "inter.broker.listener.name": "PLAINTEXT",
            "listener.security.protocol.map": ",".join(protocols),
            "log.dirs": str(self.data_dir / "logs"),
            "num.partitions": "1",
            "offsets.topic.replication.factor": "1",
            "offsets.topic.num.partitions": "10",
            "transaction.state.log.replication.factor": "1",
            "transaction.state.log.min.isr": "1",
            "group.initial.rebalance.delay.ms": "0",
            # Retention is enforced within a second or two, not every five minutes, so a test
            # sees a slow consumer overtaken while it watches.
            "log.retention.check.interval.ms": "1000",
            "log.segment.delete.delay.ms": "1000",
            # Consumer-protocol members reconcile within a second (the default heartbeat is 5 s).
            "group.consumer.min.heartbeat.interval.ms": "500",
            "group.consumer.heartbeat.interval.ms": "1000",
        }
        if _major(self.version) >= 4:
            base.update(
                {
                    "share.coordinator.state.topic.replication.factor": "1",
                    "share.coordinator.state.topic.min.isr": "1",
                    "share.coordinator.state.topic.num.partitions": "3",
                    "group.share.min.heartbeat.interval.ms": "500",
                    "group.share.heartbeat.interval.ms": "1000",
                }
            )
        base.update(self._extra)
        return base

    # ----------------------------------------------------------------------------------------
    # Lifecycle

    def start(self) -> ApacheKafkaBroker:
        """Format the storage (first start only), start the broker and block until it serves."""
        if self.running:
            return self
        jars = self.jars
        if not self._port:
            taken: set[int] = set()
            for name in ["PLAINTEXT", "CONTROLLER", *self._listeners]:
                port = free_port(self.host)
                while port in taken:
                    port = free_port(self.host)
                taken.add(port)
                if name == "PLAINTEXT":
                    self._port = port
                elif name == "CONTROLLER":
                    self._controller_port = port
                else:
                    self._listener_ports[name] = port
        self.data_dir.mkdir(parents=True, exist_ok=True)
        config = self.data_dir / "server.properties"
        config.write_text(
            "".join(
                f"{_escape_property(key, key=True)}={_escape_property(value)}\n"
                for key, value in self.server_properties().items()
            )
        )
        tools = KafkaTools(jars, self.version)
        if not self._formatted:
            tools.run(
                "storage",
                "format",
                "-t",
                _cluster_id(),
                "-c",
                str(config),
                *self._format_options,
                timeout=120,
            )
            self._formatted = True
        self._launch(tools, config)
        return self

    def stop(self, timeout: float = 30.0) -> None:
        """Stop the broker: SIGTERM (a controlled shutdown that flushes its logs), SIGKILL
        after ``timeout`` seconds."""
        self._broker.stop(timeout)

    def restart(self) -> ApacheKafkaBroker:
        """Stop and start again on the same ports, with the same data."""
        self.stop()
        return self.start()

    def close(self) -> None:
        """Stop the broker and remove its data directory if this object made it."""
        self.stop()
        if self._own_data_dir and self._data_dir is not None:
            shutil.rmtree(self._data_dir, ignore_errors=True)
            self._data_dir = None

    def _launch(self, tools: KafkaTools, config: Path) -> None:
        command = tools.java_command("kafka", str(config), heap=self._heap, log_level="info")
        # The broker is long-lived and busy: the full JIT and G1, not the tools' quick start.
        command = [
            part for part in command if part not in ("-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1")
        ]
        command[1:1] = ["-Xms128m", "-XX:+UseG1GC", "-XX:MaxGCPauseMillis=20", *self._jvm_options]
        started = time.monotonic()
        try:
            self._broker.launch(command, self.log_path, cwd=self.data_dir)
        except OSError as err:
            raise KafkaUnavailable(
                f"cannot run java for Apache Kafka {self.version}: {err}"
            ) from err
        self._broker.wait_until_serving(
            lambda: _serves_as_broker(self.host, self._port, self.NODE_ID, timeout=2.0),
            started=started,
            timeout=self._startup_timeout,
            poll_s=0.2,
            what=f"Apache Kafka {self.version}",
            serving=f"serving on {self.bootstrap_servers}",
            serve=f"serve on {self.bootstrap_servers}",
        )
        self.started_in_s = time.monotonic() - started

    # ----------------------------------------------------------------------------------------
    # Kafka's own answers

    def consumer_groups(self, *args: str, timeout: float = 120.0) -> str:
        """``kafka-consumer-groups --bootstrap-server <this broker> ARGS``: what it printed."""
        done = self.tools.run(
            "consumer-groups",
            "--bootstrap-server",
            self.bootstrap_servers,
            *args,
            timeout=timeout,
        )
        return done.stdout

    def describe_lag(self, group: str) -> dict[tuple[str, int], int | None]:
        """Kafka's own lag per partition of ``group`` (``kafka-consumer-groups --describe``);
        None where it prints ``-`` (no committed offset)."""
        lags: dict[tuple[str, int], int | None] = {}
        for row in parse_describe(self.consumer_groups("--describe", "--group", group)):
            lag = row["LAG"]
            lags[(row["TOPIC"], int(row["PARTITION"]))] = None if lag == "-" else int(lag)
        return lags

    def __repr__(self) -> str:
        state = "running" if self.running else "stopped"
        return f"<ApacheKafkaBroker {self.version} {self.bootstrap_servers} {state}>"


def _escape_property(text: str, *, key: bool = False) -> str:
    """``text`` as a key or a value of a Java properties file: backslashes and line breaks (a
    PEM in a value) read as themselves, and in a key the separators too."""
    escaped = (
        text.replace("\\", "\\\\").replace("\n", "\\n").replace("\r", "\\r").replace("\t", "\\t")
    )
    if key:
        escaped = re.sub(r"([=: #!])", r"\\\1", escaped)
    elif escaped.startswith(" "):
        escaped = "\\" + escaped
    return escaped


def _cluster_id() -> str:
    """A cluster id as ``kafka-storage random-uuid`` makes one: 16 random bytes, base64url,
    never starting with "-" (the tool would read it as an option)."""
    while True:
        cluster_id = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        if not cluster_id.startswith("-"):
            return cluster_id


def parse_describe(output: str) -> list[dict[str, str]]:
    """The table rows ``kafka-consumer-groups --describe`` prints, keyed by its column names
    (GROUP, TOPIC, PARTITION, CURRENT-OFFSET, LOG-END-OFFSET, LAG, CONSUMER-ID, HOST,
    CLIENT-ID)."""
    rows: list[dict[str, str]] = []
    header: Sequence[str] | None = None
    for line in output.splitlines():
        fields = line.split()
        if not fields:
            header = None
            continue
        if fields[0] == "GROUP":
            header = fields
            continue
        if header is not None and len(fields) == len(header):
            rows.append(dict(zip(header, fields)))
    return rows
