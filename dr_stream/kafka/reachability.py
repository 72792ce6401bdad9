"""Can dr-stream reach a cluster, and if not, why: one line an operator can act on.

librdkafka retries a failing connection for as long as a request may wait and tells why only
through its error events: an authentication failure, a TLS handshake that could not verify the
broker, a refused connection. `probe` opens a dedicated admin client that listens for those
events and asks for the cluster's id; `cause` (pure) turns the first decisive event into the
reason, so a wrong password is reported in about a second instead of after a timeout.

Two situations differ: a cluster that does not answer may simply be down (failover expects
that of the source, and falls back to recorded positions), while a cluster that refuses the
credentials or whose certificate is not trusted is a mistake to report, never to work around.
"""

from __future__ import annotations

import os
import re
import subprocess
import tempfile
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from enum import Enum

from confluent_kafka import KafkaError

from dr_stream.core.config import ClusterConfig
from dr_stream.kafka import clients
from dr_stream.runtime.jvm import connection_check_classpath

# librdkafka's local error codes (negative), by what they mean to an operator.
_AUTHENTICATION = {KafkaError._AUTHENTICATION}
_TLS = {KafkaError._SSL}
_DECISIVE = _AUTHENTICATION | _TLS
_BROKER_PREFIX = re.compile(r"^\S+/\S+: ")


class ClusterAccessError(RuntimeError):
    """One line: the cluster's alias, why it could not be used, its bootstrap servers and the
    file and key to look at."""


class Refusal(Enum):
    """What a cluster that answered would not take: the words a cause begins with, and the key of
    the cluster's configuration to look at."""

    CREDENTIALS = ("authentication failed", "kafka.sasl.jaas.config")
    TLS = ("TLS handshake failed", "kafka.ssl.truststore.location")
    JAVA_SETTINGS = ("Java client settings refused", "kafka")  # the Java client's own check of its settings

    def __init__(self, words: str, key: str) -> None:
        self.words = words
        self.key = key


@dataclass(frozen=True)
class Cause:
    """Why a cluster was not reached: the line an operator reads, and (when it answered but
    refused) what it refused, which code decides on."""

    text: str
    refusal: Refusal | None = None

    def __str__(self) -> str:
        return self.text

    @classmethod
    def refused(cls, refusal: Refusal, detail: str) -> Cause:
        return cls(f"{refusal.words}: {detail}", refusal)


@dataclass(frozen=True)
class Reachability:
    alias: str
    bootstrap: str
    cluster_id: str | None
    cause: Cause | None  # None when reached
    seconds: float
    # Where the cluster is written (`ClusterConfig.defined_at`: `<file>: <source|destination>`)
    defined_at: str = ""

    @classmethod
    def of(cls, cluster: ClusterConfig, cluster_id: str | None, cause: Cause | None, seconds: float) -> Reachability:
        return cls(cluster.alias, cluster.bootstrap_servers, cluster_id, cause, seconds, cluster.defined_at)

    @property
    def ok(self) -> bool:
        return self.cluster_id is not None

    @property
    def refused(self) -> bool:
        """It answered, but would not let dr-stream in (credentials or TLS trust)."""
        return self.cause is not None and self.cause.refusal in (Refusal.CREDENTIALS, Refusal.TLS)

    def line(self) -> str:
        if self.ok:
            return f"{self.alias}: ok (cluster.id {self.cluster_id}, {self.bootstrap}, {self.seconds:.1f}s)"
        cause = self.cause or Cause("not reached")
        where = f"; {self.defined_at}.{key_to_check(cause)}" if self.defined_at else ""
        return f"{self.alias}: {cause.text} ({self.bootstrap}{where})"


def key_to_check(cause: Cause) -> str:
    """The key of a cluster's configuration that a failure points at: what it refused (the
    credentials, the trust settings, the Java client's settings), else the bootstrap servers."""
    return cause.refusal.key if cause.refusal is not None else "bootstrap_servers"


def _detail(message: str) -> str:
    """librdkafka's message without its broker prefix (`sasl_ssl://host:9093/1: `) and state suffix."""
    return _BROKER_PREFIX.sub("", message).split(" (after ")[0].strip()


def cause(errors: Sequence[tuple[int, str]], timeout_s: float) -> Cause:
    """The reason a cluster was not reached, from librdkafka's (code, message) error events."""
    for codes, refusal in ((_AUTHENTICATION, Refusal.CREDENTIALS), (_TLS, Refusal.TLS)):
        for code, message in errors:
            if code in codes:
                return Cause.refused(refusal, _detail(message))
    for code, message in errors:
        if code in (KafkaError._TRANSPORT, KafkaError._RESOLVE):
            return Cause(f"unreachable: {_detail(message)}")
    if any(code == KafkaError._ALL_BROKERS_DOWN for code, _ in errors):
        return Cause("unreachable: the broker closed every connection (a listener of another security.protocol, "
                     "or not a Kafka broker)")
    return Cause(f"no answer within {timeout_s:.0f}s")


def decisive(errors: Sequence[tuple[int, str]], refusal_is_final: bool = False) -> bool:
    """Whether waiting longer cannot help: credentials or trust are wrong, or (`refusal_is_final`)
    every bootstrap broker refused the connection, which is what a datacenter that is gone answers
    when its machines are up but Kafka is not."""
    if any(code in _DECISIVE for code, _ in errors):
        return True
    return refusal_is_final and any(code == KafkaError._ALL_BROKERS_DOWN for code, _ in errors) and any(
        code == KafkaError._TRANSPORT and "refused" in message.lower() for code, message in errors)


def probe(cluster: ClusterConfig, timeout_s: float = 10.0, refusal_is_final: bool = False) -> Reachability:
    """Connects to `cluster` and reads its cluster.id, or says why it could not."""
    errors: list[tuple[int, str]] = []
    started = time.monotonic()
    client = clients.probe_admin(cluster, lambda e: errors.append((e.code(), e.str())))
    try:
        future = client.describe_cluster(request_timeout=timeout_s)
        while not future.done() and time.monotonic() - started < timeout_s and not decisive(errors, refusal_is_final):
            client.poll(0.1)  # serves the error events (and the client's log lines)
        elapsed = time.monotonic() - started
        if future.done() and future.exception() is None:
            return Reachability.of(cluster, future.result().cluster_id, None, elapsed)
        failure = future.exception() if future.done() else None
        if failure is not None and not errors:
            errors.append((failure.args[0].code(), failure.args[0].str()))
        return Reachability.of(cluster, None, cause(errors, timeout_s), elapsed)
    finally:
        client.__exit__(None, None, None)  # destroyed here, in the caller's thread


def reachable_cluster_id(cluster: ClusterConfig, timeout_s: float = 5.0) -> str | None:
    """The cluster.id, or None when the cluster does not answer (it may be down: a refused
    connection says so at once); raises ClusterAccessError when it answers but refuses dr-stream."""
    return reachable_cluster_ids([cluster], timeout_s)[0]


def reachable_cluster_ids(clusters: Sequence[ClusterConfig], timeout_s: float = 5.0) -> list[str | None]:
    """Each cluster's cluster.id, or None where it does not answer, probed at once; raises
    ClusterAccessError when one answers but refuses dr-stream."""
    with ThreadPoolExecutor(max_workers=len(clusters)) as pool:
        found = list(pool.map(lambda c: probe(c, timeout_s, refusal_is_final=True), clusters))
    for result in found:
        if result.refused:
            raise ClusterAccessError(result.line())
    return [result.cluster_id for result in found]


def require_cluster_id(cluster: ClusterConfig, timeout_s: float = 10.0) -> str:
    """The cluster.id of a cluster the command cannot do without; ClusterAccessError otherwise."""
    found = probe(cluster, timeout_s)
    if found.cluster_id is None:
        raise ClusterAccessError(found.line())
    return found.cluster_id


def java_cause(line: str, timeout_s: float) -> Cause:
    """The reason in the Java check's one-line answer (`error <exception>: <message>`)."""
    kind, _, message = line.removeprefix("error ").partition(": ")
    if "SaslAuthentication" in kind or kind == "AuthenticationException":
        return Cause.refused(Refusal.CREDENTIALS, message)
    if "SslAuthentication" in kind or "SSLHandshake" in kind:
        return Cause.refused(Refusal.TLS, message)
    if "Timeout" in kind:
        return Cause(f"no answer within {timeout_s:.0f}s")
    return Cause.refused(Refusal.JAVA_SETTINGS, f"{kind}: {message}")


def probe_java(cluster: ClusterConfig, timeout_s: float = 10.0) -> Reachability:
    """What Spark's connector will meet: Apache Kafka's Java admin client, given the cluster's
    `kafka:` properties unchanged, connects and reads the cluster.id. The properties (they may
    hold secrets) go through a file only this user can read, deleted afterwards."""
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="dr-stream-check-") as private:
        path = os.path.join(private, "client.properties")
        with os.fdopen(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600), "w") as out:
            for key, value in cluster.java_properties().items():
                out.write(f"{_escaped(key)}={_escaped(value)}\n")
        command = ["java", "-Dorg.apache.logging.log4j.level=OFF", "-cp", connection_check_classpath(),
                   "io.drstream.kafka.ConnectionCheck", path, str(timeout_s)]
        try:
            result = subprocess.run(command, capture_output=True, text=True, timeout=timeout_s + 20)
            answer = (result.stdout.strip().splitlines() or ["error NoAnswer: the Java check printed nothing"])[-1]
        except subprocess.TimeoutExpired:
            answer = "error TimeoutException: the Java check did not finish"
    elapsed = time.monotonic() - started
    if answer.startswith("ok "):
        return Reachability.of(cluster, answer[3:].strip(), None, elapsed)
    return Reachability.of(cluster, None, java_cause(answer, timeout_s), elapsed)


def _escaped(text: str) -> str:
    """A value as java.util.Properties reads it back unchanged."""
    return text.replace("\\", "\\\\").replace("\n", "\\n").replace("=", "\\=").replace(":", "\\:")


def check_line(python: Reachability, java: Reachability | None) -> tuple[bool, str]:
    """(ok, one line) for a cluster: both client families reached it, or the first reason one did not."""
    if not python.ok:
        return False, f"{python.line()} [dr-stream's clients]"
    if java is not None and not java.ok:
        return False, f"{java.line()} [Spark's Java clients]"
    if java is not None and java.cluster_id != python.cluster_id:
        return False, (f"{python.alias}: the two client families reached different clusters ({python.cluster_id} "
                       f"and {java.cluster_id}); check bootstrap_servers")
    seen = f"{python.seconds:.1f}s" + (f", Java clients {java.seconds:.1f}s" if java is not None else "")
    return True, f"{python.alias}: ok (cluster.id {python.cluster_id}, {python.bootstrap}, {seen})"


def check_clusters(clusters: Sequence[ClusterConfig], java: bool = True,
                   timeout_s: float = 10.0) -> list[tuple[bool, str]]:
    """`check_line` for each cluster, every probe running at once (bounded by `timeout_s` plus a JVM start)."""
    with ThreadPoolExecutor(max_workers=2 * len(clusters)) as pool:
        python = [pool.submit(probe, c, timeout_s) for c in clusters]
        jvm = [pool.submit(probe_java, c, timeout_s) if java else None for c in clusters]
        return [check_line(p.result(), j.result() if j else None) for p, j in zip(python, jvm, strict=True)]
