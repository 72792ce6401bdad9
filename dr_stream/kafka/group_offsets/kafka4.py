"""Share groups (KIP-932) and Kafka Streams groups (KIP-1071) through Kafka 4's admin API.

Spark's Kafka connector carries Kafka's 3.9 client, which has neither API, and a second client
version on Spark's classpath would clash with it. These calls therefore go to a helper JVM of
their own (`io.drstream.kafka4.Kafka4Groups`, jvm/kafka4/, on Kafka 4's client jars alone), one request
per line over its stdin and stdout. `Kafka4Groups` owns that process: it starts it at the first
request and connects the clusters it was given, and stops it by its PID at `close`. A request the
helper does not answer in time stops it; the next request starts a new one.

`ShareGroupOffsets` puts one cluster's share groups behind the calls `group_sync.GroupSync` makes
of consumer groups (`states`, `committed`, `commit`), so both kinds follow one sync rule;
`StreamsGroupStates` tells the states of its Kafka Streams groups. `BatchedConsumerGroups` reads
and commits many consumer groups' offsets in a few requests for the commands, which have no
Spark JVM to do it (`consumer_groups.ConsumerGroupOffsets` sends them here past `BATCHED_FROM`
groups).

Invariant: constructing either class starts nothing.
"""

from __future__ import annotations

import logging
import os
import queue
import shutil
import subprocess
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from urllib.parse import quote, unquote

from dr_stream.core.config import ClusterConfig, FlowConfig
from dr_stream.kafka.group_offsets.answers import Fetched, GroupOffsetsError, Partition, committed_of, states_of
from dr_stream.kafka.group_offsets.java_admin import commit_failures, refusals_named
from dr_stream.runtime.jvm import KAFKA4_HELPER_MAIN, kafka4_client_classpath

LOG4J2 = Path(__file__).resolve().parent.parent / "runtime" / "log4j2.properties"
# Starting the helper's JVM and its admin clients: a second or two, more on a loaded machine,
# once per helper.
START_GRACE_S = 60.0
_END = "."
_logger = logging.getLogger("dr_stream.kafka4")


class Kafka4GroupsError(RuntimeError):
    """A request the helper could not serve as a whole; the message is the Java client's."""


def request_line(*fields: str) -> str:
    return "\t".join(fields) + "\n"


def connect_line(alias: str, properties: Mapping[str, str]) -> str:
    """The helper's `connect` request: a cluster's Java client properties, values URL-encoded."""
    return request_line("connect", alias, *(f"{k}={quote(str(v), safe='')}" for k, v in sorted(properties.items())))


def group_field(group: str) -> str:
    return quote(group, safe="")


def _decoded(lines: list[list[str]]) -> list[list[str]]:
    return [[unquote(fields[0]), *fields[1:]] for fields in lines]


def parse_states(lines: list[list[str]], groups: Iterable[str]) -> dict[str, tuple[str, int] | Exception]:
    """`describe`'s answer -> per asked group, (state, members) as dr-stream names it (a group the
    cluster does not know is ABSENT) or the error that kept it from being described: the lines of
    the flow's Java client (`group_offsets.states_of`), group ids URL-encoded."""
    return states_of(_decoded(lines), groups)


def parse_share_offsets(lines: list[list[str]], groups: Iterable[str]) -> dict[str, Fetched]:
    """`share-offsets`' answer -> per asked group, its start offset per share-partition (a group
    with none maps to an empty dict) or its error: committed offsets with an empty metadata
    (`group_offsets.committed_of`), group ids URL-encoded."""
    return committed_of(_decoded(lines), groups)


def parse_group_configs(lines: list[list[str]], groups: Iterable[str]) -> dict[str, dict[str, str] | Exception]:
    """`group-configs`' answer -> per asked group, the configs it set itself (key -> value; a group
    with none, or unknown to the cluster, maps to an empty dict) or the error that kept them from
    being read."""
    found: dict[str, dict[str, str] | Exception] = {g: {} for g in groups}
    for fields in _decoded(lines):
        group = fields[0]
        if len(fields) > 1 and fields[1] == "!":
            found[group] = GroupOffsetsError(fields[2] if len(fields) > 2 else "failed")
        elif len(fields) == 3 and isinstance(settings := found.setdefault(group, {}), dict):
            settings[fields[1]] = unquote(fields[2])
    return found


def alter_configs_fields(group: str, set_to: Mapping[str, str], delete: Iterable[str]) -> tuple[str, ...]:
    """`group-configs-alter`'s fields after the alias: values URL-encoded, as keys never need."""
    return (group_field(group), ",".join(f"{k}={quote(v, safe='')}" for k, v in sorted(set_to.items())),
            ",".join(sorted(delete)))


def flow_helper(config: FlowConfig) -> Kafka4Groups | None:
    """The helper a flow shares between its share-group sync and its Streams-group states; None
    when it syncs neither (`offsets.share_groups`, `offsets.streams_groups`)."""
    offsets = config.offsets
    if not offsets.sync_to_destination or not (offsets.share_groups.enabled or offsets.streams_groups):
        return None
    return Kafka4Groups([config.source, config.destination])


def streams_groups_on(config: FlowConfig) -> list[str]:
    """The source's Kafka Streams groups when the flow handles them (`offsets.streams_groups`),
    which librdkafka's group listing leaves out: the commands add them to the groups they list.
    A helper of its own, stopped before this returns."""
    if not config.offsets.streams_groups:
        return []
    helper = Kafka4Groups([config.source])
    try:
        return sorted(StreamsGroupStates(helper, config.source).listed())
    finally:
        helper.close()


def _java() -> str:
    home = os.environ.get("JAVA_HOME")
    found = os.path.join(home, "bin", "java") if home else shutil.which("java")
    if not found:
        raise RuntimeError("share and Streams groups need a JDK (java on PATH or JAVA_HOME): none found")
    return found


class Kafka4Groups:
    """The helper JVM and its admin clients, one per cluster given, for the requests of any thread."""

    def __init__(self, clusters: Iterable[ClusterConfig], timeout_s: float = 15.0) -> None:
        self.clusters = {c.alias: c for c in clusters}
        self.timeout_s = timeout_s
        self._process: subprocess.Popen[str] | None = None
        self._answers: queue.Queue[str | None] = queue.Queue()
        self._lock = threading.Lock()

    def ask(self, *fields: str) -> list[list[str]]:
        """One request; its answer's lines split into fields. A request that failed as a whole
        raises Kafka4GroupsError."""
        with self._lock:
            fresh = self._process is None
            if fresh:
                self._start()
            return self._ask(request_line(*fields), self.timeout_s * 2 + (START_GRACE_S if fresh else 5))

    def _start(self) -> None:
        # C1 alone: a helper answers a few requests a minute, and a command's waits on its start.
        command = [_java(), f"-Dlog4j2.configurationFile={LOG4J2}", "-XX:+UseSerialGC", "-Xmx192m",
                   "-XX:TieredStopAtLevel=1",
                   "-cp", kafka4_client_classpath(), KAFKA4_HELPER_MAIN, str(int(self.timeout_s * 1000))]
        self._answers = queue.Queue()
        self._process = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                         stderr=subprocess.PIPE, text=True, encoding="utf-8", bufsize=1)
        threading.Thread(target=_forward, args=(self._process.stdout, self._answers.put), daemon=True,
                         name="kafka4-answers").start()
        threading.Thread(target=_forward, args=(self._process.stderr, _said), daemon=True,
                         name="kafka4-log").start()
        for alias, cluster in self.clusters.items():
            try:
                self._ask(connect_line(alias, cluster.java_properties()), START_GRACE_S)
            except Kafka4GroupsError as exc:
                self._stop()
                raise cluster.fail("kafka", f"Kafka 4's admin client refused the properties: {exc}") from None

    def start_soon(self) -> None:
        """Starts the helper on a thread of its own, so the request that needs it finds it
        running (a JVM's start overlaps the caller's own work); a start that fails here is
        tried again, and raised, by that request."""

        def start() -> None:
            with self._lock:
                if self._process is None:
                    try:
                        self._start()
                    except Exception:  # raised again by the request that needs the helper
                        self._stop()

        threading.Thread(target=start, name="kafka4-start", daemon=True).start()

    def _ask(self, line: str, timeout_s: float) -> list[list[str]]:
        process = self._process
        assert process is not None and process.stdin is not None
        try:
            process.stdin.write(line)
            process.stdin.flush()
        except OSError as exc:
            self._stop()
            raise Kafka4GroupsError(f"the Kafka 4 helper is gone ({exc})") from None
        deadline = time.monotonic() + timeout_s
        lines: list[list[str]] = []
        while True:
            try:
                answer = self._answers.get(timeout=max(0.0, deadline - time.monotonic()))
            except queue.Empty:
                self._stop()
                raise TimeoutError(f"the Kafka 4 helper did not answer {line.split(chr(9))[0]} within "
                                   f"{timeout_s:g} s; it is started again at the next request") from None
            if answer is None:
                self._stop()
                raise Kafka4GroupsError("the Kafka 4 helper stopped; it is started again at the next request")
            if answer == _END:
                break
            lines.append(answer.split("\t"))
        if lines and lines[0][0] == "!":
            raise Kafka4GroupsError(lines[0][1] if len(lines[0]) > 1 else "failed")
        return lines

    def _stop(self) -> None:
        process, self._process = self._process, None
        if process is None:
            return
        try:
            if process.stdin is not None:
                process.stdin.close()  # the helper closes its clients and ends
            process.wait(timeout=10)
        except (OSError, subprocess.TimeoutExpired):
            process.kill()
            process.wait(timeout=10)

    def close(self) -> None:
        with self._lock:
            self._stop()


def _forward(stream: Iterable[str], to: Callable[[str | None], None]) -> None:
    for line in stream:
        to(line.rstrip("\n"))
    to(None)


def _said(line: str | None) -> None:
    # Kafka's client logs at WARN and above through log4j 2 (dr-stream's Spark configuration): one
    # line each, passed on to Python's logging.
    if line and not line.startswith("SLF4J"):
        _logger.warning(line)


class _GroupsOfKind:
    """One cluster's groups of one kind (`share` or `streams`) as the helper lists and describes them."""

    kind = ""

    def __init__(self, groups: Kafka4Groups, cluster: ClusterConfig) -> None:
        self.groups, self.cluster = groups, cluster

    def listed(self) -> dict[str, str]:
        """Every group of this kind on the cluster, and its state."""
        return {unquote(f[0]): f[1] for f in self.groups.ask("list", self.cluster.alias, self.kind) if len(f) == 2}

    def states(self, groups: list[str]) -> dict[str, tuple[str, int] | Exception]:
        if not groups:
            return {}
        return parse_states(self.groups.ask("describe", self.cluster.alias, self.kind, *map(group_field, groups)),
                            groups)


class ShareGroupOffsets(_GroupsOfKind):
    """One cluster's share groups, answering as `group_sync.GroupSync` asks of consumer groups: a
    share-partition's start offset stands for a committed offset. Share groups carry no commit
    metadata, so `commit` drops it."""

    kind = "share"

    def committed(self, groups: list[str], partitions: Iterable[Partition] | None = None) -> dict[str, Fetched]:
        if not groups:
            return {}
        found = parse_share_offsets(self.groups.ask("share-offsets", self.cluster.alias, *map(group_field, groups)),
                                    groups)
        if partitions is None:
            return found
        wanted = set(partitions)
        return {g: f if isinstance(f, Exception) else {k: c for k, c in f.items() if k in wanted}
                for g, f in found.items()}

    def commit(self, offsets: Mapping[str, Mapping[Partition, int]], metadata: str) -> dict[str, Exception]:
        failed: dict[str, Exception] = {}
        for group, wanted in sorted(offsets.items()):
            if not wanted:
                continue
            items = ",".join(f"{t}:{p}={o}" for (t, p), o in sorted(wanted.items()))
            try:
                answer = self.groups.ask("share-alter", self.cluster.alias, group_field(group), items)
            except (Kafka4GroupsError, TimeoutError) as exc:
                failed[group] = exc
                continue
            if answer:
                failed[group] = GroupOffsetsError(answer[0][-1])
        return failed

    def configs(self, groups: list[str]) -> dict[str, dict[str, str] | Exception]:
        """The group configs (Kafka 4's `share.auto.offset.reset`, ...) each group set itself."""
        if not groups:
            return {}
        return parse_group_configs(self.groups.ask("group-configs", self.cluster.alias, *map(group_field, groups)),
                                   groups)

    def alter_configs(self, group: str, set_to: Mapping[str, str], delete: Iterable[str]) -> Exception | None:
        """Sets `set_to` and deletes `delete` of a group's configs in one request; the error, if
        the broker refused it."""
        try:
            answer = self.groups.ask("group-configs-alter", self.cluster.alias,
                                     *alter_configs_fields(group, set_to, delete))
        except (Kafka4GroupsError, TimeoutError) as exc:
            return exc
        return GroupOffsetsError(answer[0][-1]) if answer else None

    def expect(self, groups: int) -> None:
        """Nothing to start: the helper is the caller's, started with it."""

    def close(self) -> None:
        """The helper is the caller's: it serves both clusters."""


class StreamsGroupStates(_GroupsOfKind):
    """One cluster's Kafka Streams groups: their states, which the consumer-group describe of
    librdkafka and of Spark's 3.9 client does not give."""

    kind = "streams"


class BatchedConsumerGroups:
    """One cluster's consumer groups, their committed offsets read in one fetch per coordinator
    and their commits all in flight at once, by the flow's own Java client code
    (`io.drstream.kafka.GroupOffsets`) in the helper. The answers are `java_admin.GroupOffsets`':
    a group's offsets on all its partitions (a superset of those asked), a refusal by the
    authorizer as the one line naming cluster, group and grant."""

    def __init__(self, groups: Kafka4Groups, cluster: ClusterConfig) -> None:
        self.groups, self.cluster = groups, cluster

    def committed(self, groups: list[str], partitions: Iterable[Partition] | None = None) -> dict[str, Fetched]:
        if not groups:
            return {}
        lines = self.groups.ask("consumer-offsets", self.cluster.alias, *map(group_field, groups))
        return refusals_named(self.cluster, committed_of(_decoded(lines), groups), "reading its committed offsets")

    def commit(self, offsets: Mapping[str, Mapping[Partition, int]], metadata: str) -> dict[str, Exception]:
        wanted = {g: o for g, o in sorted(offsets.items()) if o}
        if not wanted:
            return {}
        fields = [f for g, o in wanted.items()
                  for f in (group_field(g), ",".join(f"{t}:{p}={n}" for (t, p), n in sorted(o.items())))]
        lines = self.groups.ask("consumer-commit", self.cluster.alias, quote(metadata, safe=""), *fields)
        return commit_failures(self.cluster, ((f[0], f[2] if len(f) > 2 else "failed") for f in _decoded(lines)))
