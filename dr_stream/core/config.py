"""Flow configuration: every section's keys declared once, typed, validated, loaded from YAML.

Each section is a table of keys (`config_def.Key`: name, type, default, rule, one-line doc) and
the dataclass it builds. The reader and `docs/reference/config.md` both come from the tables;
a dataclass takes its field defaults from its table, so a default is written once. Durations
are float seconds in fields ending in `_s`.

Invariants: every problem is reported as one `ConfigError` line that names the file and the key
path; unknown keys are errors; `${env:NAME}` is substituted in every string, and error messages
quote the text as written in the file, so a secret from the environment is never printed.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace
from functools import cached_property
from pathlib import Path
from typing import Any

import yaml

from dr_stream.core.capabilities import Capabilities
from dr_stream.core.config_def import (
    DURATION,
    ENV,
    ConfigError,
    Count,
    Derived,
    Flag,
    HostPorts,
    Key,
    Nested,
    OneOf,
    Patterns,
    Period,
    Properties,
    Read,
    Regex,
    Section,
    Text,
    YamlReader,
    default_of,
    milliseconds,
)
from dr_stream.core.contracts import PROVENANCE_HEADER
from dr_stream.core.librdkafka_settings import ClientSettingsError, derive
from dr_stream.core.monitoring_config import DRILL, METRICS, DrillConfig, MetricsConfig
from dr_stream.core.policy import GroupFilter, TopicFilter, TopicRenamer

__all__ = ["DURATION", "ClusterConfig", "ConfigError", "FlowConfig", "load_flow", "milliseconds", "parse_flow"]

REALTIME_MIN_BATCH_S = 5.0  # spark.sql.streaming.realTimeMode.minBatchDuration's default
_SECRET_KEY = re.compile(r"password|secret|jaas|token|credential|key\b|\.key$", re.IGNORECASE)
_NAME = r"[A-Za-z0-9_.-]+"
_NAME_DOC = "may hold only letters, digits, '.', '_' and '-'"


def env_names(text: str) -> list[str]:
    """The environment variables a flow file's text refers to as `${env:NAME}`, in order of first use."""
    return list(dict.fromkeys(ENV.findall(text)))


def sibling(location: str, name: str) -> str:
    """`name` in the same directory as `location`, for local paths and URIs alike."""
    parent, slash, _ = location.rstrip("/").rpartition("/")
    return f"{parent}{slash}{name}" if slash else name


# -- source, destination -------------------------------------------------------------------------

CLUSTER_KEYS = (
    Key("alias", Text(_NAME, _NAME_DOC), "the cluster's name in the flow (provenance, lines, metrics); the two "
        "clusters' aliases differ"),
    Key("bootstrap_servers", HostPorts(), "`host:port,...`"),
    Key("kafka", Properties({"bootstrap.servers": "set bootstrap_servers instead"}),
        "Apache Kafka's Java client properties (`security.protocol`, `sasl.*`, `ssl.*`, ...): passed unchanged to "
        "Spark's source and sink; dr-stream's own clients get settings derived from them "
        "([security](../security.md))", {}),
    Key("librdkafka", Properties({"bootstrap.servers": "set bootstrap_servers instead"}),
        "librdkafka settings for dr-stream's own (Python) clients only, applied after the derived ones", {}),
)


def _derivable(got: Read) -> tuple[str, str] | None:
    """Whether dr-stream's own clients' settings can be derived (files are read when they are built)."""
    try:
        derive(got.values["kafka"], got.values["librdkafka"], read_truststore=lambda *_: "")
    except ClientSettingsError as exc:
        return f"kafka.{exc.key}", exc.message
    return None


@dataclass(frozen=True)
class ClusterConfig:
    """One cluster of a flow. `kafka` holds Apache Kafka's Java client properties (Spark's
    connector takes them unchanged; dr-stream's own clients get settings derived from them);
    `librdkafka` adds or overrides settings of dr-stream's own clients only; `defined_at` says
    where it was written (`<file>: <source|destination>`), for errors."""

    alias: str
    bootstrap_servers: str
    kafka: dict[str, str] = field(default_factory=dict)
    librdkafka: dict[str, str] = field(default_factory=dict)
    defined_at: str = ""

    def fail(self, key: str, message: str) -> ConfigError:
        """An error about one of this cluster's keys, naming the file, the cluster and the key."""
        where = self.defined_at or f"<memory>: {self.alias}"
        return ConfigError(f"{where}.{key}: {message} (cluster {self.alias})")

    def redacted_kafka(self) -> dict[str, str]:
        return _redacted(self.kafka)

    def __repr__(self) -> str:
        # A config object reaches tracebacks, logs and test reports: never with its secrets.
        return (f"ClusterConfig(alias={self.alias!r}, bootstrap_servers={self.bootstrap_servers!r}, "
                f"kafka={_redacted(self.kafka)!r}, librdkafka={_redacted(self.librdkafka)!r}, "
                f"defined_at={self.defined_at!r})")

    def java_properties(self) -> dict[str, str]:
        """What a Java client of this cluster is given: its bootstrap servers and `kafka` as written."""
        return {"bootstrap.servers": self.bootstrap_servers, **self.kafka}


def _redacted(settings: dict[str, str]) -> dict[str, str]:
    return {k: ("***" if _SECRET_KEY.search(k) else v) for k, v in settings.items()}


CLUSTER = Section("source", "A cluster of the flow: `source` and `destination` take the same keys.", CLUSTER_KEYS,
                  (_derivable,), ClusterConfig, located=True)


# -- topics ----------------------------------------------------------------------------------------

TOPICS_KEYS = (
    Key("include", Patterns(), "the source topics copied: whole-name regexes (internal topics only when named "
        "exactly)", [".*"]),
    Key("exclude", Patterns(), "source topics left out, whole-name regexes", []),
    Key("rename", Text(), "the destination topic's name, `${topic}` exactly once (`dc1.${topic}`)", "${topic}"),
    Key("preserve_partitions", Flag(), "the same partition number on the destination (exactly once and exact "
        "translation need it)", True),
    Key("sync_configs", Flag(), "copy topic configs at creation and follow their changes", True),
)


def _valid_rename(got: Read) -> tuple[str, str] | None:
    rename = got.values["rename"]
    if rename.count("${topic}") != 1:
        return "rename", f"{rename!r} must contain ${{topic}} exactly once"
    if not re.fullmatch(r"[A-Za-z0-9._-]*", rename.replace("${topic}", "")):
        return "rename", f"{rename!r} would make an invalid topic name"
    return None


@dataclass(frozen=True)
class TopicsConfig:
    include: tuple[str, ...] = default_of(TOPICS_KEYS, "include")
    exclude: tuple[str, ...] = default_of(TOPICS_KEYS, "exclude")
    rename: str = default_of(TOPICS_KEYS, "rename")
    preserve_partitions: bool = default_of(TOPICS_KEYS, "preserve_partitions")
    sync_configs: bool = default_of(TOPICS_KEYS, "sync_configs")


TOPICS = Section("topics", "Which source topics a flow copies, and their names on the destination.", TOPICS_KEYS,
                 (_valid_rename,), TopicsConfig)


# -- provenance ------------------------------------------------------------------------------------

OVERRIDE_KEYS = (
    Key("cluster", Regex(), "regex of the cluster id in the provenance header"),
    Key("topic", Regex(), "regex of the topic in the provenance header"),
    Key("from_ms", Count(0), "the record's timestamp at least this (epoch ms)", None),
    Key("to_ms", Count(0), "the record's timestamp at most this (epoch ms)", None),
)


def _ordered_range(got: Read) -> tuple[str, str] | None:
    low, high = got.values["from_ms"], got.values["to_ms"]
    if low is not None and high is not None and low > high:
        return "from_ms", f"{low} is after to_ms {high}"
    return None


@dataclass(frozen=True)
class FilterOverride:
    """Lets records through the cycle rule: header cluster and topic match, timestamp in range."""

    cluster: str
    topic: str
    from_ms: int | None = None
    to_ms: int | None = None


OVERRIDE = Section("provenance.filter_overrides[]", "An entry of `provenance.filter_overrides`: records whose "
                   "provenance matches go through the cycle rule (a full restore uses one).", OVERRIDE_KEYS,
                   (_ordered_range,), FilterOverride)

PROVENANCE_KEYS = (
    Key("enabled", Flag(), "add and honour the provenance header (loop prevention, exactly once, translation)", True),
    Key("header", Text(), "the header's key", PROVENANCE_HEADER),
    Key("filter_overrides", Nested(OVERRIDE, many=True), "records the cycle rule lets through (below)", []),
    Key("forward", Flag(), "copy what the source received from other clusters (records, and group positions "
        "dr-stream synced there): a hop of a chain. `false` in a full mesh: only the source's own records and "
        "consumers' positions ([topologies](../topologies.md))", True),
)


@dataclass(frozen=True)
class ProvenanceConfig:
    enabled: bool = default_of(PROVENANCE_KEYS, "enabled")
    header: str = default_of(PROVENANCE_KEYS, "header")
    filter_overrides: tuple[FilterOverride, ...] = ()
    forward: bool = default_of(PROVENANCE_KEYS, "forward")


PROVENANCE = Section("provenance", "The `__replicator_id` header: where a record has been, so it never loops.",
                     PROVENANCE_KEYS, (), ProvenanceConfig)


# -- offsets ---------------------------------------------------------------------------------------

GROUPS_KEYS = (
    Key("include", Patterns(), "groups translated (Spark's, Connect's and dr-stream's own never are)", [".*"]),
    Key("exclude", Patterns(), "groups left out", []),
)


@dataclass(frozen=True)
class GroupsConfig:
    include: tuple[str, ...] = default_of(GROUPS_KEYS, "include")
    exclude: tuple[str, ...] = default_of(GROUPS_KEYS, "exclude")


GROUPS = Section("offsets.groups", "The consumer groups whose positions a flow translates.", GROUPS_KEYS, (),
                 GroupsConfig)

SHARE_GROUPS_KEYS = (
    Key("include", Patterns(), "share groups (KIP-932) whose start offsets and `share.*` settings are set on the "
        "destination; none: off", []),
    Key("exclude", Patterns(), "share groups left out", []),
    Key("interval", Period(1.0, "each round lists the source's share groups and reads their offsets"),
        "how often the source's share groups are read and the destination's set", "5s"),
)


@dataclass(frozen=True)
class ShareGroupsConfig:
    """Share groups synced: off unless `include` names some (a Kafka 4 feature, served by a helper
    JVM of its own, `kafka/group_offsets/kafka4`)."""

    include: tuple[str, ...] = default_of(SHARE_GROUPS_KEYS, "include")
    exclude: tuple[str, ...] = default_of(SHARE_GROUPS_KEYS, "exclude")
    interval_s: float = default_of(SHARE_GROUPS_KEYS, "interval")

    @property
    def enabled(self) -> bool:
        return bool(self.include)

    @property
    def filter(self) -> GroupFilter:
        return GroupFilter(self.include, self.exclude)


SHARE_GROUPS = Section("offsets.share_groups", "Share groups (KIP-932) whose start offsets are translated and set "
                       "on the destination ([consumer offsets](../consumer-offsets.md)).", SHARE_GROUPS_KEYS, (),
                       ShareGroupsConfig)

OFFSETS_KEYS = (
    Key("translate", Flag(), "run the translate query and the committed-offset poller", True),
    Key("groups", Nested(GROUPS), "the groups translated", {}),
    Key("sync_to_destination", Flag(), "write translations to inactive destination groups, within seconds", True),
    Key("positions_from", OneOf(("__consumer_offsets", "admin")),
        "where the poller reads committed offsets: `__consumer_offsets` (follows the internal topic; needs `READ` on "
        "it) or `admin` (asks the group coordinators each round; needs `DESCRIBE` on the groups). A refused `READ` "
        "falls back to `admin` and says so", "__consumer_offsets"),
    Key("gone_after", Period(), "how long a group's position may be missing from the source's committed offsets "
        "(the group deleted or expired, its topic deleted) before the flow forgets it: its state in the driver, its "
        "metric series and its translation log rows. Only a read the source answered counts, so a source that is "
        "down never makes a flow forget what failover needs", "10m"),
    Key("share_groups", Nested(SHARE_GROUPS), "share groups synced", {}),
    Key("streams_groups", Flag(), "describe destination groups the consumer-group describe calls absent as Kafka "
        "Streams groups (Kafka 4's admin API, a helper JVM), so a Streams application running there is skipped "
        "rather than refused by the broker", False),
)


@dataclass(frozen=True)
class OffsetsConfig:
    translate: bool = default_of(OFFSETS_KEYS, "translate")
    groups: GroupsConfig = field(default_factory=GroupsConfig)
    sync_to_destination: bool = default_of(OFFSETS_KEYS, "sync_to_destination")
    positions_from: str = default_of(OFFSETS_KEYS, "positions_from")
    gone_after_s: float = default_of(OFFSETS_KEYS, "gone_after")
    share_groups: ShareGroupsConfig = field(default_factory=ShareGroupsConfig)
    streams_groups: bool = default_of(OFFSETS_KEYS, "streams_groups")


OFFSETS = Section("offsets", "Consumer-group positions: translated through the offset index and written to the "
                  "destination.", OFFSETS_KEYS, (), OffsetsConfig)


# -- streaming -------------------------------------------------------------------------------------

def _state(name: str) -> Derived:
    return Derived(lambda _values, context: f".cache/flows/{context['name']}/{name}", f"`.cache/flows/<name>/{name}`")


def _beside_index(name: str) -> Derived:
    return Derived(lambda values, _context: sibling(values["offset_index"], name), f"beside `offset_index`, `{name}`")


STREAMING_KEYS = (
    Key("checkpoint_dir", Text(), "Spark checkpoint root (`replicate/`, `translate/` under it); a path or a URI "
        "(`hdfs://`, `s3a://`, `abfss://`, `file:`); a relative path is refused in cluster deploy mode, as for the "
        "tables below", _state("checkpoints")),
    Key("offset_index", Text(), "the offset index's Delta table", _state("offset-index")),
    Key("translations", Text(), "the Delta table of recorded translations (`status`, `failover` with the source "
        "gone, notebooks)", _beside_index("translations")),
    Key("losses", Text(), "the Delta table of source records the flow could no longer copy (`dr-stream losses`, "
        "`drill`)", _beside_index("losses")),
    Key("mode", OneOf(("microbatch", "realtime")), "`microbatch`, or `realtime`: Spark's real-time mode, one "
        "long-running task per source partition copying each record as it arrives", "microbatch"),
    Key("trigger", Period(), "micro-batch: the replicate query's interval; realtime: the length of a batch (how "
        "often progress is checkpointed), at least `5s`",
        Derived(lambda values, _context: "5m" if values["mode"] == "realtime" else "1s", "`1s` (`5m` in realtime)")),
    Key("max_trigger", Period(), "micro-batch: how wide the trigger may grow when batches take longer than it for a "
        "few records per partition; `trigger`'s value keeps the trigger fixed. Not used in realtime mode",
        Derived(lambda values, _context: f"{max(30.0, values['trigger_s']):g}s", "`30s`, or `trigger` if longer")),
    Key("max_records_per_batch", Count(1), "Spark's `maxOffsetsPerTrigger` (micro-batch only)", 200_000),
    Key("starting_offsets", OneOf(("earliest", "latest")), "where a flow without a checkpoint starts", "earliest"),
    Key("resume_scan_timeout", Period(), "the longest a (re)start reads the destination past the offset index; past "
        "it those partitions resume at-least-once, and the flow says so", "60s"),
    Key("old_versions_retention", Period(60.0, "a command or a notebook reading an older version needs time to finish"),
        "how long the flow's Delta tables keep what their upkeep replaced (data files and log entries) for readers of "
        "an older version before deleting it: what a table holds on disk is its live rows plus this long of replaced "
        "files", "1h"),
)


def _realtime_batch(got: Read) -> tuple[str, str] | None:
    if got.values["mode"] == "realtime" and got.values["trigger_s"] < REALTIME_MIN_BATCH_S:
        return "trigger", (f"{got.written['trigger']!r}: in realtime mode the trigger is the length of a batch, at "
                           f"least {REALTIME_MIN_BATCH_S:g}s (Spark's minimum)")
    return None


def _widens_only(got: Read) -> tuple[str, str] | None:
    # Real-time mode's trigger is a batch length, which never widens: there the key is not used.
    if got.values["mode"] != "realtime" and got.values["max_trigger_s"] < got.values["trigger_s"]:
        return "max_trigger", (f"{got.written['max_trigger']!r} is not a duration at least as long as the trigger "
                               f"({got.written['trigger']}): the trigger widens up to it, never narrows")
    return None


@dataclass(frozen=True)
class StreamingConfig:
    checkpoint_dir: str
    offset_index: str
    translations: str
    losses: str
    trigger_s: float
    max_trigger_s: float
    mode: str = default_of(STREAMING_KEYS, "mode")
    max_records_per_batch: int = default_of(STREAMING_KEYS, "max_records_per_batch")
    starting_offsets: str = default_of(STREAMING_KEYS, "starting_offsets")
    resume_scan_timeout_s: float = default_of(STREAMING_KEYS, "resume_scan_timeout")
    old_versions_retention_s: float = default_of(STREAMING_KEYS, "old_versions_retention")

    @property
    def realtime(self) -> bool:
        return self.mode == "realtime"

    @property
    def trigger_interval(self) -> str:
        """The trigger as Spark's processingTime string ("1000 milliseconds")."""
        return f"{round(self.trigger_s * 1000)} milliseconds"


STREAMING = Section("streaming", "How the replicate query runs, and where the flow keeps its state: in the "
                    "destination datacenter, on storage every node reaches.", STREAMING_KEYS,
                    (_realtime_batch, _widens_only), StreamingConfig)


# -- acls ----------------------------------------------------------------------------------------------

ACLS_KEYS = (
    Key("enabled", Flag(), "copy the replicated topics' and the translated groups' ACLs to the destination", False),
    Key("write", Flag(), "also copy ALLOW of the operations that change a topic (`WRITE`, `CREATE`, `DELETE`, "
        "`ALTER`, `ALTER_CONFIGS`, `ALL`): for active-active", False),
    Key("interval", Period(1.0), "how often the ACLs are compared and copied", "30s"),
    Key("principal", Text(r"[A-Za-z][A-Za-z0-9_]*:.+", "is not a principal like User:dr-stream"),
        "the flow's own principal on the destination, as its broker names it (`User:CN=dr-stream` for a TLS "
        "certificate): no copied DENY may name it; default: `User:<username>` of a SASL PLAIN or SCRAM login",
        None),
)


@dataclass(frozen=True)
class AclsConfig:
    """ACL sync (`acl_mapping`): off unless `enabled`; `write` for an active-active destination."""

    enabled: bool = default_of(ACLS_KEYS, "enabled")
    write: bool = default_of(ACLS_KEYS, "write")
    interval_s: float = default_of(ACLS_KEYS, "interval")
    principal: str | None = default_of(ACLS_KEYS, "principal")


ACLS = Section("acls", "ACL sync ([security](../security.md)).", ACLS_KEYS, (), AclsConfig)


# -- the flow --------------------------------------------------------------------------------------

FLOW_KEYS = (
    Key("source", Nested(CLUSTER), "the cluster copied from"),
    Key("destination", Nested(CLUSTER), "the cluster copied to"),
    Key("name", Text(_NAME, _NAME_DOC), "the flow's name: its queries' names, its default state paths, its "
        "metrics' `flow` label",
        Derived(lambda values, _context: f"{values['source'].alias}-to-{values['destination'].alias}",
                "`<source.alias>-to-<destination.alias>`")),
    Key("topics", Nested(TOPICS), "the topics copied", {}),
    Key("provenance", Nested(PROVENANCE), "the provenance header", {}),
    Key("offsets", Nested(OFFSETS), "consumer-group positions", {}),
    Key("streaming", Nested(STREAMING), "the queries and the flow's state", {}),
    Key("metrics", Nested(METRICS), "`/metrics` and `/healthz`", {}),
    Key("drill", Nested(DRILL), "the readiness drill", {}),
    Key("acls", Nested(ACLS), "ACL sync", {}),
)


def _two_clusters(got: Read) -> tuple[str, str] | None:
    source, destination = got.values["source"].alias, got.values["destination"].alias
    if source == destination:
        return "destination.alias", f"is the same as source.alias ({source!r})"
    return None


@dataclass(frozen=True)
class FlowConfig:
    name: str
    source: ClusterConfig
    destination: ClusterConfig
    topics: TopicsConfig
    provenance: ProvenanceConfig
    offsets: OffsetsConfig
    streaming: StreamingConfig
    path: str = "<memory>"
    metrics: MetricsConfig = field(default_factory=MetricsConfig)
    drill: DrillConfig = field(default_factory=DrillConfig)
    acls: AclsConfig = field(default_factory=AclsConfig)

    # The filters and the renamer are built once per config; every part of the flow asks for
    # these instead of rebuilding them from the raw patterns.
    @cached_property
    def topic_filter(self) -> TopicFilter:
        return TopicFilter(self.topics.include, self.topics.exclude)

    @cached_property
    def renamer(self) -> TopicRenamer:
        return TopicRenamer(self.topics.rename)

    @cached_property
    def remote_topic_filter(self) -> TopicFilter:
        """The destination topics this flow writes: the topic filter seen through the rename."""
        return self.renamer.remote_filter(self.topic_filter)

    @cached_property
    def group_filter(self) -> GroupFilter:
        return GroupFilter(self.offsets.groups.include, self.offsets.groups.exclude)

    @cached_property
    def capabilities(self) -> Capabilities:
        """What this flow can promise (indexed, exactly once, translating), decided once."""
        return Capabilities.of(self.provenance.enabled, self.topics.preserve_partitions, self.offsets.translate)

    @property
    def replicate_query(self) -> str:
        """`replicate-<flow>`: the replication query's name, unique within a Spark session."""
        return f"replicate-{self.name}"

    @property
    def clusters_record(self) -> str:
        """The Delta table recording the cluster.ids the flow's state belongs to (`recorded_clusters`)."""
        return f"{self.streaming.checkpoint_dir.rstrip('/')}/clusters"

    @property
    def releases_record(self) -> str:
        """The Delta table recording the dr-stream releases that wrote the flow's state (`state_releases`)."""
        return f"{self.streaming.checkpoint_dir.rstrip('/')}/releases"

    @property
    def adopted_record(self) -> str:
        """Where `adopt` recorded what it took over from another replicator and where copying resumes."""
        return f"{self.streaming.checkpoint_dir.rstrip('/')}/adopted.json"

    @property
    def replicate_checkpoint(self) -> str:
        """Where the replication query keeps its Spark checkpoint."""
        return f"{self.streaming.checkpoint_dir.rstrip('/')}/replicate"

    @property
    def translate_query(self) -> str:
        """`translate-<flow>`: the translate query's name."""
        return f"translate-{self.name}"

    @property
    def translate_checkpoint(self) -> str:
        """Where the translate query keeps its Spark checkpoint, beside the replication query's."""
        return f"{self.streaming.checkpoint_dir.rstrip('/')}/translate"


FLOW = Section("", "A flow file: one direction of replication between two clusters. `${env:NAME}` in any string "
               "is replaced from the environment.", FLOW_KEYS, (_two_clusters,), FlowConfig)

# The reference page's sections, in the file's order; a cluster's keys once for both clusters.
SECTIONS: tuple[tuple[str, Section], ...] = (
    ("", FLOW), ("source, destination", CLUSTER), ("topics", TOPICS), ("provenance", PROVENANCE),
    ("provenance.filter_overrides[]", OVERRIDE), ("offsets", OFFSETS), ("offsets.groups", GROUPS),
    ("offsets.share_groups", SHARE_GROUPS), ("streaming", STREAMING), ("metrics", METRICS), ("drill", DRILL),
    ("acls", ACLS),
)


def parse_flow(raw: Any, path: str = "<memory>") -> FlowConfig:
    flow: FlowConfig = FLOW.read(YamlReader(path), raw, "")
    return replace(flow, path=path)


def load_flow(path: str | Path) -> FlowConfig:
    path = str(path)
    try:
        text = Path(path).read_text()
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read: {exc.strerror}") from None
    try:
        raw = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"line {mark.line + 1}" if mark else "<yaml>"
        raise ConfigError(f"{path}: {where}: not valid YAML ({getattr(exc, 'problem', exc)})") from None
    return parse_flow(raw, path)

