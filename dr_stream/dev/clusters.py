"""Local single-node KRaft clusters for development, the demo and the tests.

Each cluster is one `kafka.Kafka` JVM started from the jars in `.cache/jars/kafka` (Kafka 4.x;
`compat`: `.cache/jars/kafka-compat`, the last 3.x release), with its
data, logs, config and PID file under one directory. Invariants: `start` is idempotent
(a running cluster is left alone), it returns only once the broker answers metadata
requests, and `stop` signals exactly the PID it started, never a process found by name.
"""

from __future__ import annotations

import base64
import subprocess
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

from dr_stream.core.config import ClusterConfig
from dr_stream.dev.certificates import STORE_PASSWORD, Pki
from dr_stream.dev.processes import loopback_listening, running_pid, stop_pid
from dr_stream.kafka import clients
from dr_stream.runtime.jvm import kafka_classpath, kafka_logs_through_log4j1
from dr_stream.runtime.paths import cache_dir

_BROKER_SETTINGS = {
    "process.roles": "broker,controller",
    "node.id": "1",
    "controller.listener.names": "CONTROLLER",
    "inter.broker.listener.name": "PLAINTEXT",
    "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
    "num.partitions": "1",
    "offsets.topic.replication.factor": "1",
    "offsets.topic.num.partitions": "4",
    "transaction.state.log.replication.factor": "1",
    "transaction.state.log.min.isr": "1",
    "transaction.state.log.num.partitions": "4",
    "group.initial.rebalance.delay.ms": "0",
    # Replication must create its destination topics itself; a typo must not silently create one.
    "auto.create.topics.enable": "false",
    # Retention deletes within seconds of a topic's retention.ms, so the tests of what it takes
    # from a flow run in seconds too (checking a few hundred partitions' segments costs nothing).
    "log.retention.check.interval.ms": "5000",
}

# Kafka 4's share groups keep their state in an internal topic of their own, by default with 3
# replicas and 50 partitions: on one broker it could never be created and every share-group
# request would time out. The 3.x brokers have no share groups.
_SHARE_STATE_SETTINGS = {
    "share.coordinator.state.topic.replication.factor": "1",
    "share.coordinator.state.topic.min.isr": "1",
    "share.coordinator.state.topic.num.partitions": "4",
}


@dataclass(frozen=True)
class Secured:
    """A secured cluster's extra listeners: SASL_SSL with SCRAM-SHA-512 on `port + 2` and TLS
    with client certificates on `port + 3`, the standard authorizer on. The plaintext listener on
    `port` stays for the operator (its anonymous principal is a super user), so tests and the
    demo set up topics and ACLs there while flows go through the secured ones."""

    pki: Pki
    scram_users: tuple[tuple[str, str], ...]

    def settings(self, port: int) -> dict[str, str]:
        tls = {"ssl.keystore.type": "PKCS12", "ssl.keystore.location": str(self.pki.broker_keystore),
               "ssl.keystore.password": STORE_PASSWORD, "ssl.key.password": STORE_PASSWORD,
               "ssl.truststore.type": "PEM", "ssl.truststore.location": str(self.pki.ca_pem)}
        listeners = (f"PLAINTEXT://127.0.0.1:{port},SASL_SSL://127.0.0.1:{port + 2},"
                     f"SSL://127.0.0.1:{port + 3}")
        return {
            **tls,
            "listeners": f"{listeners},CONTROLLER://127.0.0.1:{port + 1}",
            "advertised.listeners": listeners,
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,SASL_SSL:SASL_SSL,SSL:SSL,CONTROLLER:PLAINTEXT",
            "sasl.enabled.mechanisms": "SCRAM-SHA-512",
            "listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config":
                "org.apache.kafka.common.security.scram.ScramLoginModule required;",
            "listener.name.ssl.ssl.client.auth": "required",
            # A client certificate's CN is its principal: CN=drs-client -> User:drs-client.
            "ssl.principal.mapping.rules": "RULE:^CN=([^,]+).*$/$1/,DEFAULT",
            "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
            "super.users": "User:ANONYMOUS",
        }

    def format_arguments(self) -> list[str]:
        return [f"--add-scram=SCRAM-SHA-512=[name={user},password={password}]"
                for user, password in self.scram_users]


@dataclass(frozen=True)
class LocalCluster:
    """One single-node KRaft cluster on loopback: broker on `port`, controller on `port + 1`
    (and, when `secured`, SASL_SSL on `port + 2` and mutual TLS on `port + 3`); `overrides` are
    broker settings on top of the defaults, written at each start."""

    alias: str
    port: int
    home: Path
    secured: Secured | None = None
    overrides: tuple[tuple[str, str], ...] = ()
    # the last 3.x broker (`kafka-broker-compat`) instead of the current one
    compat: bool = False
    # a node of a cluster of several (`replicated_cluster`): its id, and every node's (id,
    # controller port); one node alone is node 1 and the whole quorum
    node_id: int = 1
    voters: tuple[tuple[int, int], ...] = ()

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def sasl_ssl_bootstrap(self) -> str:
        return f"127.0.0.1:{self.port + 2}"

    @property
    def ssl_bootstrap(self) -> str:
        return f"127.0.0.1:{self.port + 3}"

    @property
    def config(self) -> ClusterConfig:
        """The cluster as a flow's config names it, for clients and flows."""
        return ClusterConfig(self.alias, self.bootstrap)

    @property
    def pid_file(self) -> Path:
        return self.home / "kafka.pid"

    @property
    def log_file(self) -> Path:
        return self.home / "logs" / "server.out"

    def pid(self) -> int | None:
        return running_pid(self.pid_file)

    def is_running(self) -> bool:
        return self.pid() is not None

    def cluster_id(self) -> str:
        """The KRaft cluster.id this directory was formatted with (stable across restarts)."""
        path = self.home / "cluster.id"
        if not path.exists():
            self.home.mkdir(parents=True, exist_ok=True)
            path.write_text(base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=") + "\n")
        return path.read_text().strip()

    def _write_config(self) -> Path:
        data = self.home / "data"
        settings = {
            **_BROKER_SETTINGS,
            **({} if self.compat else _SHARE_STATE_SETTINGS),
            "node.id": str(self.node_id),
            "controller.quorum.voters": ",".join(f"{node}@127.0.0.1:{port}"
                                                 for node, port in self.voters or ((1, self.port + 1),)),
            "listeners": f"PLAINTEXT://127.0.0.1:{self.port},CONTROLLER://127.0.0.1:{self.port + 1}",
            "advertised.listeners": f"PLAINTEXT://127.0.0.1:{self.port}",
            "log.dirs": str(data),
            **(self.secured.settings(self.port) if self.secured else {}),
            **dict(self.overrides),
        }
        config = self.home / "server.properties"
        config.write_text("".join(f"{k}={v}\n" for k, v in settings.items()))
        log = self.home / "logs" / "server.log"
        if kafka_logs_through_log4j1(self.compat):
            self._log_config().write_text(
                "log4j.rootLogger=INFO, file\n"
                "log4j.appender.file=org.apache.log4j.RollingFileAppender\n"
                f"log4j.appender.file.File={log}\n"
                "log4j.appender.file.MaxFileSize=20MB\n"
                "log4j.appender.file.MaxBackupIndex=2\n"
                "log4j.appender.file.layout=org.apache.log4j.PatternLayout\n"
                "log4j.appender.file.layout.ConversionPattern=[%d] %p %m (%c)%n\n"
                "log4j.logger.kafka=INFO\nlog4j.logger.org.apache.kafka=INFO\n"
            )
        else:  # Kafka 4 logs through log4j 2: the same file, size and pattern
            self._log_config().write_text(
                "rootLogger.level=INFO\nrootLogger.appenderRef.file.ref=file\n"
                f"appender.file.type=RollingFile\nappender.file.name=file\nappender.file.fileName={log}\n"
                f"appender.file.filePattern={log}.%i\n"
                "appender.file.layout.type=PatternLayout\nappender.file.layout.pattern=[%d] %p %m (%c)%n\n"
                "appender.file.policies.type=Policies\nappender.file.policies.size.type=SizeBasedTriggeringPolicy\n"
                "appender.file.policies.size.size=20MB\n"
                "appender.file.strategy.type=DefaultRolloverStrategy\nappender.file.strategy.max=2\n"
            )
        return config

    def _log_config(self) -> Path:
        """The broker's logging configuration: log4j 1's before Kafka 4, log4j 2's from it."""
        return self.home / ("log4j.properties" if kafka_logs_through_log4j1(self.compat) else "log4j2.properties")

    def _java(self, main: str, *args: str) -> list[str]:
        logging = (f"-Dlog4j.configuration=file:{self._log_config()}" if kafka_logs_through_log4j1(self.compat)
                   else f"-Dlog4j2.configurationFile={self._log_config()}")
        return ["java", "-Xms256m", "-Xmx512m", "-XX:+UseG1GC", logging,
                "-cp", kafka_classpath(self.compat), main, *args]

    def start(self, timeout: float = 90.0) -> None:
        self.launch()
        self.wait_ready(timeout)

    def launch(self) -> None:
        """Starts the broker unless it runs, without waiting for it: a node of a quorum answers
        only once enough of the others have started too."""
        if self.is_running():
            return
        for port in range(self.port, self.port + (4 if self.secured else 2)):
            if loopback_listening(port):
                raise RuntimeError(f"{self.alias}: port {port} is already in use by another process")
        (self.home / "logs").mkdir(parents=True, exist_ok=True)
        config = self._write_config()
        if not (self.home / "data" / "meta.properties").exists():
            subprocess.run(
                # `--cluster-id=` form: a base64 id may begin with '-', which argparse would read as a flag
                self._java("kafka.tools.StorageTool", "format", f"--cluster-id={self.cluster_id()}",
                           "--config", str(config), *(self.secured.format_arguments() if self.secured else [])),
                check=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
            )
        with open(self.log_file, "ab") as out:
            proc = subprocess.Popen(
                self._java("kafka.Kafka", str(config)),
                stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                start_new_session=True,  # a Ctrl-C in the caller's terminal must not kill the broker
            )
        self.pid_file.write_text(f"{proc.pid}\n")

    def _first_error(self) -> str:
        """The first ERROR or FATAL line of the broker's output, for the one-line start-up failure."""
        try:
            lines = self.log_file.read_text(errors="replace").splitlines()
        except OSError:
            return "no output"
        found = [line for line in lines if " ERROR " in line or " FATAL " in line or "Exception" in line]
        return found[0].strip()[:300] if found else "no error line in its output"

    def wait_ready(self, timeout: float = 90.0) -> None:
        deadline = time.monotonic() + timeout
        last_error: Exception | None = None
        while time.monotonic() < deadline:
            if not self.is_running():
                raise RuntimeError(f"{self.alias}: broker exited during start-up ({self._first_error()}); "
                                   f"see {self.log_file}")
            try:
                # Probe the port first: a client pointed at a closed port logs every retry.
                if not loopback_listening(self.port):
                    raise ConnectionError(f"port {self.port} not open yet")
                clients.admin(self.config).list_topics(timeout=5)
                return
            except Exception as exc:  # the broker is still starting
                last_error = exc
                time.sleep(0.3)
        raise TimeoutError(f"{self.alias}: no answer on {self.bootstrap} after {timeout:.0f}s ({last_error})")

    def stop(self, timeout: float = 30.0) -> bool:
        """SIGTERM the broker we started, SIGKILL after `timeout`; False when it was not running."""
        return stop_pid(self.pid_file, timeout)


DEV_PORTS = (19092, 29092)


def dev_clusters(root: Path | None = None, ports: tuple[int, int] = DEV_PORTS) -> list[LocalCluster]:
    """The two development clusters: dc1 on 19092 and dc2 on 29092, under `.cache/dev/` (or on
    `ports`, under `root`)."""
    base = root or cache_dir() / "dev"
    return [LocalCluster("dc1", ports[0], base / "dc1"), LocalCluster("dc2", ports[1], base / "dc2")]
