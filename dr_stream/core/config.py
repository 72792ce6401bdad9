"""Flow configuration: typed, validated, loaded from YAML.

Invariants: every problem is reported as one `ConfigError` line that names the file and
the key path; unknown keys are errors; `${env:NAME}` is substituted in every string, and
error messages quote the text as written in the file, so a secret from the environment is
never printed.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

import yaml

from dr_stream.core.config_reader import DURATION, ENV, ConfigError, YamlReader, duration_parts, milliseconds
from dr_stream.core.contracts import PROVENANCE_HEADER
from dr_stream.core.librdkafka_settings import ClientSettingsError, derive
from dr_stream.core.monitoring_config import DrillConfig, MetricsConfig, read_drill, read_metrics
from dr_stream.core.policy import GroupFilter, TopicFilter, TopicRenamer
from dr_stream.core.share_groups_config import ShareGroupsConfig, read_share_groups

MODES = ("microbatch", "realtime")
REALTIME_MIN_BATCH_MS = 5000  # spark.sql.streaming.realTimeMode.minBatchDuration's default
_SECRET_KEY = re.compile(r"password|secret|jaas|token|credential|key\b|\.key$", re.IGNORECASE)


def env_names(text: str) -> list[str]:
    """The environment variables a flow file's text refers to as `${env:NAME}`, in order of first use."""
    return list(dict.fromkeys(ENV.findall(text)))


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
        return {k: ("***" if _SECRET_KEY.search(k) else v) for k, v in self.kafka.items()}

    def java_properties(self) -> dict[str, str]:
        """What a Java client of this cluster is given: its bootstrap servers and `kafka` as written."""
        return {"bootstrap.servers": self.bootstrap_servers, **self.kafka}


@dataclass(frozen=True)
class TopicsConfig:
    include: tuple[str, ...] = (".*",)
    exclude: tuple[str, ...] = ()
    rename: str = "${topic}"
    preserve_partitions: bool = True
    sync_configs: bool = True


@dataclass(frozen=True)
class FilterOverride:
    """Lets records through the cycle rule: header cluster and topic match, timestamp in range."""

    cluster: str
    topic: str
    from_ms: int | None = None
    to_ms: int | None = None


@dataclass(frozen=True)
class ProvenanceConfig:
    enabled: bool = True
    header: str = PROVENANCE_HEADER
    filter_overrides: tuple[FilterOverride, ...] = ()
    # Copy what the source received from other clusters (their records, and the group positions
    # dr-stream synced there): a hop of a chain. False in a full mesh, where every cluster gets
    # each other cluster's own records and groups straight from it.
    forward: bool = True


@dataclass(frozen=True)
class GroupsConfig:
    include: tuple[str, ...] = (".*",)
    exclude: tuple[str, ...] = ()


POSITIONS_FROM = ("__consumer_offsets", "admin")


@dataclass(frozen=True)
class AclsConfig:
    """ACL sync (`acl_mapping`): off unless `enabled`; `write` for an active-active destination."""

    enabled: bool = False
    write: bool = False
    interval_s: float = 30.0


@dataclass(frozen=True)
class OffsetsConfig:
    translate: bool = True
    groups: GroupsConfig = GroupsConfig()
    sync_to_destination: bool = True
    # Where the poller reads the source groups' committed offsets: `__consumer_offsets` (follows
    # the internal topic, so a round costs what was committed since the last one; needs READ on
    # it) or `admin` (asks the coordinators for every selected group each round; needs DESCRIBE
    # on the groups). A refused READ falls back to `admin`, and the flow says so.
    positions_from: str = "__consumer_offsets"
    share_groups: ShareGroupsConfig = field(default_factory=ShareGroupsConfig)
    # Kafka Streams groups' states read through Kafka 4's admin API (a helper JVM): the consumer-group
    # describe calls a Streams group with members absent, so only the broker would keep it from a sync.
    streams_groups: bool = False


@dataclass(frozen=True)
class StreamingConfig:
    checkpoint_dir: str
    offset_index: str
    translations: str = ".cache/flows/translations"
    # the ledger of source records the flow could no longer copy (`replication.losses`)
    losses: str = ".cache/flows/losses"
    trigger: str = "1s"
    max_records_per_batch: int = 200_000
    starting_offsets: str = "earliest"
    # microbatch: a batch every `trigger`. realtime: Spark's real-time mode, one long-running task
    # per source partition, records copied as they arrive; `trigger` is how long each of its
    # batches runs, i.e. how often progress is checkpointed.
    mode: str = "microbatch"
    # micro-batch: how wide the trigger may grow when batches take longer than it for a few
    # records per partition (`replication.trigger_width`); at `trigger`, it never widens.
    max_trigger: str = "30s"
    # The longest a (re)start reads the destination past the offset index for copies no run
    # reported; past it those partitions resume at-least-once, and the flow says so.
    resume_scan_timeout: str = "60s"

    @property
    def resume_scan_timeout_s(self) -> float:
        return milliseconds(self.resume_scan_timeout) / 1000

    @property
    def realtime(self) -> bool:
        return self.mode == "realtime"

    @property
    def trigger_ms(self) -> int:
        return milliseconds(self.trigger)

    @property
    def max_trigger_ms(self) -> int:
        return milliseconds(self.max_trigger)

    @property
    def trigger_interval(self) -> str:
        """The trigger as Spark's processingTime string ("1 second", "500 milliseconds")."""
        number, unit = duration_parts(self.trigger)  # validated on load
        unit = {"ms": "milliseconds", "s": "seconds", "m": "minutes", "h": "hours"}.get(unit, unit.rstrip("s") + "s")
        return f"{number} {unit}"


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

    @property
    def replicate_query(self) -> str:
        """`replicate-<flow>`: the replication query's name, unique within a Spark session."""
        return f"replicate-{self.name}"

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


def sibling(location: str, name: str) -> str:
    """`name` in the same directory as `location`, for local paths and URIs alike."""
    parent, slash, _ = location.rstrip("/").rpartition("/")
    return f"{parent}{slash}{name}" if slash else name


def _properties(r: YamlReader, raw: dict, key: str) -> dict[str, str]:
    """A map of client properties (`kafka:` or `librdkafka:`): scalar values, `${env:...}` expanded."""
    value = raw.get(key.rsplit(".", 1)[1]) or {}
    if not isinstance(value, dict):
        raise r.fail(key, "expected a mapping of client properties")
    out: dict[str, str] = {}
    for k, v in value.items():
        if k == "bootstrap.servers":
            raise r.fail(f"{key}.{k}", "set bootstrap_servers instead")
        if isinstance(v, (dict, list)) or v is None:
            raise r.fail(f"{key}.{k}", "expected a scalar value")
        out[str(k)] = r.expand(str(v).lower() if isinstance(v, bool) else str(v), f"{key}.{k}")
    return out


def _cluster(r: YamlReader, raw: Any, key: str) -> ClusterConfig:
    raw = r.mapping(raw, key, {"alias", "bootstrap_servers", "kafka", "librdkafka"},
                    required={"alias", "bootstrap_servers"})
    alias = r.string(raw, "alias", key)
    if not re.fullmatch(r"[A-Za-z0-9_.-]+", alias):
        raise r.fail(f"{key}.alias", f"{alias!r} may hold only letters, digits, '.', '_' and '-'")
    kafka, librdkafka = _properties(r, raw, f"{key}.kafka"), _properties(r, raw, f"{key}.librdkafka")
    try:
        # Only whether the settings can be derived; files are read when the clients are built.
        derive(kafka, librdkafka, read_truststore=lambda *_: "")
    except ClientSettingsError as exc:
        raise r.fail(f"{key}.kafka.{exc.key}", exc.message) from None
    return ClusterConfig(alias, r.string(raw, "bootstrap_servers", key), kafka, librdkafka, f"{r.path}: {key}")


def _override(r: YamlReader, raw: Any, key: str) -> FilterOverride:
    raw = r.mapping(raw, key, {"cluster", "topic", "from_ms", "to_ms"}, required={"cluster", "topic"})
    cluster = r.regex(r.string(raw, "cluster", key), f"{key}.cluster")
    topic = r.regex(r.string(raw, "topic", key), f"{key}.topic")
    from_ms = r.integer(raw, "from_ms", key, None, 0)
    to_ms = r.integer(raw, "to_ms", key, None, 0)
    if from_ms is not None and to_ms is not None and from_ms > to_ms:
        raise r.fail(f"{key}.from_ms", f"{from_ms} is after to_ms {to_ms}")
    return FilterOverride(cluster, topic, from_ms, to_ms)


def _topics(r: YamlReader, raw: Any) -> TopicsConfig:
    t = r.mapping(raw, "topics", {"include", "exclude", "rename", "preserve_partitions", "sync_configs"})
    rename = r.string(t, "rename", "topics", default="${topic}")
    if rename.count("${topic}") != 1:
        raise r.fail("topics.rename", f"{rename!r} must contain ${{topic}} exactly once")
    if not re.fullmatch(r"[A-Za-z0-9._-]*", rename.replace("${topic}", "")):
        raise r.fail("topics.rename", f"{rename!r} would make an invalid topic name")
    return TopicsConfig(
        include=r.regexes(t, "include", "topics", (".*",)),
        exclude=r.regexes(t, "exclude", "topics", ()),
        rename=rename,
        preserve_partitions=r.boolean(t, "preserve_partitions", "topics", True),
        sync_configs=r.boolean(t, "sync_configs", "topics", True),
    )


def _provenance(r: YamlReader, raw: Any) -> ProvenanceConfig:
    p = r.mapping(raw, "provenance", {"enabled", "header", "filter_overrides", "forward"})
    return ProvenanceConfig(
        enabled=r.boolean(p, "enabled", "provenance", True),
        header=r.string(p, "header", "provenance", default=PROVENANCE_HEADER),
        filter_overrides=r.each(p, "filter_overrides", "provenance", lambda v, k: _override(r, v, k)),
        forward=r.boolean(p, "forward", "provenance", True),
    )


def _acls(r: YamlReader, raw: Any) -> AclsConfig:
    a = r.mapping(raw, "acls", {"enabled", "write", "interval"})
    interval = r.duration_s(a, "interval", "acls", "30s")
    if interval < 1:
        raise r.fail("acls.interval", f"{interval:g}s is shorter than 1s")
    return AclsConfig(r.boolean(a, "enabled", "acls", False), r.boolean(a, "write", "acls", False), interval)


def _offsets(r: YamlReader, raw: Any) -> OffsetsConfig:
    o = r.mapping(raw, "offsets", {"translate", "groups", "sync_to_destination", "positions_from", "share_groups",
                                   "streams_groups"})
    g = r.mapping(o.get("groups"), "offsets.groups", {"include", "exclude"})
    positions_from = r.string(o, "positions_from", "offsets", default=POSITIONS_FROM[0])
    if positions_from not in POSITIONS_FROM:
        raise r.fail("offsets.positions_from", f"expected {' or '.join(POSITIONS_FROM)}, got {positions_from!r}")
    return OffsetsConfig(
        translate=r.boolean(o, "translate", "offsets", True),
        groups=GroupsConfig(r.regexes(g, "include", "offsets.groups", (".*",)),
                            r.regexes(g, "exclude", "offsets.groups", ())),
        sync_to_destination=r.boolean(o, "sync_to_destination", "offsets", True),
        positions_from=positions_from,
        share_groups=read_share_groups(r, o.get("share_groups")),
        streams_groups=r.boolean(o, "streams_groups", "offsets", False),
    )


def _streaming(r: YamlReader, raw: Any, name: str) -> StreamingConfig:
    s = r.mapping(raw, "streaming", {"checkpoint_dir", "offset_index", "translations", "losses", "trigger",
                                     "max_records_per_batch", "starting_offsets", "mode", "resume_scan_timeout",
                                     "max_trigger"})
    mode = r.string(s, "mode", "streaming", default="microbatch")
    if mode not in MODES:
        raise r.fail("streaming.mode", f"expected {' or '.join(MODES)}, got {mode!r}")
    # A real-time batch is a checkpoint interval, not a wait. Its end stalls the copy for about a
    # second (offsets, planning, new tasks), so batches are long; a restart re-reads at most one.
    trigger = r.string(s, "trigger", "streaming", default="5m" if mode == "realtime" else "1s")
    if not DURATION.match(trigger):
        raise r.fail("streaming.trigger", f"{trigger!r} is not a duration like 500ms, 1s or 1m")
    if mode == "realtime" and milliseconds(trigger) < REALTIME_MIN_BATCH_MS:
        raise r.fail("streaming.trigger", f"{trigger!r}: in realtime mode the trigger is the length of a "
                                          f"batch, at least {REALTIME_MIN_BATCH_MS // 1000}s (Spark's minimum)")
    max_trigger = r.string(s, "max_trigger", "streaming", default=max(("30s", trigger), key=milliseconds))
    # Real-time mode's trigger is a batch length, which never widens: there the key is not used.
    if not DURATION.match(max_trigger) or (mode != "realtime" and milliseconds(max_trigger) < milliseconds(trigger)):
        raise r.fail("streaming.max_trigger", f"{max_trigger!r} is not a duration at least as long as the trigger "
                                              f"({trigger}): the trigger widens up to it, never narrows")
    starting = r.string(s, "starting_offsets", "streaming", default="earliest")
    if starting not in ("earliest", "latest"):
        raise r.fail("streaming.starting_offsets", f"expected earliest or latest, got {starting!r}")
    offset_index = r.string(s, "offset_index", "streaming", default=f".cache/flows/{name}/offset-index")
    scan_timeout = r.string(s, "resume_scan_timeout", "streaming", default="60s")
    if not DURATION.match(scan_timeout):
        raise r.fail("streaming.resume_scan_timeout", f"{scan_timeout!r} is not a duration like 500ms, 1s or 1m")
    return StreamingConfig(
        checkpoint_dir=r.string(s, "checkpoint_dir", "streaming", default=f".cache/flows/{name}/checkpoints"),
        offset_index=offset_index,
        # Where the flow records each translation: a Delta table beside the offset
        # index unless set. Derived as a string, since the index may be a URI (hdfs://, s3a://).
        translations=r.string(s, "translations", "streaming", default=sibling(offset_index, "translations")),
        losses=r.string(s, "losses", "streaming", default=sibling(offset_index, "losses")),
        trigger=trigger,
        max_records_per_batch=r.integer(s, "max_records_per_batch", "streaming", 200_000, 1),
        starting_offsets=starting,
        mode=mode,
        resume_scan_timeout=scan_timeout,
        max_trigger=max_trigger,
    )


def parse_flow(raw: Any, path: str = "<memory>") -> FlowConfig:
    r = YamlReader(path)
    top = r.mapping(
        raw, "", {"name", "source", "destination", "topics", "provenance", "offsets", "streaming", "metrics",
              "drill", "acls"},
        required={"source", "destination"},
    )
    source = _cluster(r, top["source"], "source")
    destination = _cluster(r, top["destination"], "destination")
    if source.alias == destination.alias:
        raise r.fail("destination.alias", f"is the same as source.alias ({source.alias!r})")
    name = r.string(top, "name", "", default=f"{source.alias}-to-{destination.alias}")
    if not re.fullmatch(r"[A-Za-z0-9_.-]+", name):
        raise r.fail("name", f"{name!r} may hold only letters, digits, '.', '_' and '-'")
    return FlowConfig(name, source, destination, _topics(r, top.get("topics")), _provenance(r, top.get("provenance")),
                      _offsets(r, top.get("offsets")), _streaming(r, top.get("streaming"), name), path,
                      read_metrics(r, top.get("metrics")), read_drill(r, top.get("drill")), _acls(r, top.get("acls")))


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
