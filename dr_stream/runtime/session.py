"""The SparkSession dr-stream runs in: Kafka connector, Delta and dr-stream's sink on the classpath."""

from __future__ import annotations

import logging
import os
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

from pyspark.sql import SparkSession
from pyspark.sql.streaming import StreamingQuery

from dr_stream.runtime.jvm import local_file_system_jar, spark_jars
from dr_stream.runtime.paths import cache_dir

if TYPE_CHECKING:
    from dr_stream.core.config import FlowConfig

Setting = bool | float | int | str | None  # what SparkSession.Builder.config(map=...) takes

# Spark's Kafka source keeps a consumer per partition between micro-batches; at its default of 64,
# every batch over more partitions closed and opened most of them again (kafka/spark_options says
# what else keeps a batch's cost per partition low).
CONSUMER_CACHE: dict[str, str] = {"spark.kafka.consumer.cache.capacity": "2048"}

# Kafka client properties reach Spark as source and sink options; plan strings (explain, the
# SQL tab, the event log) show option values unless their names match this. Spark's own
# `spark.redaction.regex` covers conf keys and environment variables the same way; it also
# hides every variable spark-submit.sh hands a cluster-mode driver (`${env:NAME}` values are
# often secrets whatever their names).
REDACTED_OPTIONS = r"(?i)url|password|secret|token|jaas|credential|keystore\.key|key\.pem|truststore\.certificates"
REDACTED_CONF = r"(?i)secret|password|token|access[.]?key|jaas|credential|appMasterEnv|driverEnv"

# The replicate query's tasks go first when the driver's own jobs (the offset index's Delta
# writes, a scan of the destination at start) want the same cores: they only follow the copy, and
# a replicate batch waiting behind them is latency on every record.
_POOLS = """<?xml version="1.0"?>
<allocations>
  <pool name="replicate"><schedulingMode>FIFO</schedulingMode><weight>4</weight><minShare>1</minShare></pool>
</allocations>
"""
LOG4J2 = {"text": "log4j2.properties", "json": "log4j2-json.properties"}

# Hadoop's local file system starts a `chmod` per file it creates and a `readlink` per rename
# when its native library is absent (pyspark ships none): some twenty processes per micro-batch
# for the checkpoint logs and the offset index, each CPU and latency on the batch, and each one a
# SIGTERM to the flow's process group ends, failing the write. dr-stream's makes those calls in the
# JVM (io.drstream.hadoop.NioRawLocalFileSystem). Only `file:` paths use it; its jar must be on
# the JVM's own classpath, since spark-submit opens the local file system before it adds jars: the
# local driver's `extraClassPath`, a YARN container's working directory, a Kubernetes image's jars.
LOCAL_FILE_SYSTEM: dict[str, str] = {
    "spark.hadoop.fs.file.impl": "io.drstream.hadoop.NioLocalFileSystem",
    "spark.hadoop.fs.AbstractFileSystem.file.impl": "io.drstream.hadoop.NioLocalFs",
}

_log = logging.getLogger("dr_stream.runtime.session")
T = TypeVar("T")


def is_ui_start_race(error: BaseException) -> bool:
    """Whether a session failed in Spark's own start-up race on YARN in client mode: the
    application master sends its web-proxy filter to the driver while the driver's UI is still
    starting its page handlers, and Jetty fails the start with a ConcurrentModificationException
    (nothing of the flow had run yet)."""
    text = str(error)
    return "ConcurrentModificationException" in text and "attachAllHandlers" in text


def started(create: Callable[[], T], attempts: int = 3) -> T:
    """`create()`, again (up to `attempts` times) when it failed in Spark's UI start-up race:
    each attempt is a new application whose filter and handlers race anew, and a failed
    SparkContext has stopped itself before the next starts. Any other failure is raised as is."""
    for attempt in range(1, attempts + 1):
        try:
            return create()
        except Exception as error:
            if attempt == attempts or not is_ui_start_race(error):
                raise
            _log.warning("spark: the driver's UI lost a start-up race with YARN's web-proxy filter "
                         "(ConcurrentModificationException in Spark); starting the session again (%d of %d)",
                         attempt + 1, attempts)
    raise AssertionError("unreachable")


def log4j2_file(log_format: str = "text") -> Path:
    """dr-stream's log4j2 configuration for Spark's JVMs (shipped inside the package)."""
    return Path(__file__).resolve().parent / LOG4J2[log_format]


def _metrics_conf(builder: SparkSession.Builder) -> SparkSession.Builder:
    """Spark's streaming metrics on, served by its UI (when the UI is on) in the Prometheus
    format at /metrics/prometheus/; as conf keys, so they reach a driver on YARN or Kubernetes
    without a metrics.properties file (conf/metrics.properties holds the same for spark-submit)."""
    return (
        builder.config("spark.sql.streaming.metricsEnabled", "true")
        .config("spark.metrics.conf.*.sink.prometheusServlet.class",
                "org.apache.spark.metrics.sink.PrometheusServlet")
        .config("spark.metrics.conf.*.sink.prometheusServlet.path", "/metrics/prometheus")
        .config("spark.metrics.appStatusSource.enabled", "true")
    )


def scheduler_pools() -> str:
    path = cache_dir() / "spark" / "fairscheduler.xml"
    if not path.exists() or path.read_text() != _POOLS:
        # Written aside and renamed: another process starting Spark at the same moment (the test
        # suite's parallel workers) reads the old file or the whole new one, never half of it.
        path.parent.mkdir(parents=True, exist_ok=True)
        aside = path.with_name(f"{path.name}.{uuid.uuid4().hex}")
        aside.write_text(_POOLS)
        aside.replace(path)
    return str(path)


def in_pool(spark: SparkSession, pool: str, start: Callable[[], StreamingQuery]) -> Callable[[], StreamingQuery]:
    """`start`, with the jobs of the query it starts in scheduler pool `pool`: a query's jobs run
    in the pool set on the thread that starts it."""

    def started() -> StreamingQuery:
        context = spark.sparkContext
        context.setLocalProperty("spark.scheduler.pool", pool)
        try:
            return start()
        finally:
            context.setLocalProperty("spark.scheduler.pool", None)  # type: ignore[arg-type]  # None unsets it

    return started


# A flow runs for days, so the JIT is chosen for the records it copies, not its first minute.
# Both compilers run (C2 too): a 5,000,000-record catch-up (`python -m bench.ab --records
# 5000000`, 2026-11-26, beside MirrorMaker 2 4.3.1 at 95,395 records/s and 49 CPU-seconds)
# copied 87,920 records/s in 71 CPU-seconds with C2, 57,895 in 106 with C1 alone
# (-XX:TieredStopAtLevel=1). C2 compiles only what stays hot, though: its thresholds are ten
# times the JVM's defaults (Tier4*). A streaming query runs a great deal of lukewarm Spark code
# once per batch (analysis, planning, code generation, progress), and at the default thresholds
# C2 kept compiling it for minutes, a third of the catch-up's CPU; the record path's loops reach
# the higher thresholds within a few batches all the same. Same 5,000,000 records, two rounds
# each, alternating with MirrorMaker 2 4.3.1 (2026-11-26; 118,189-120,161 records/s in 42.6-45.3
# CPU-seconds): 81,263 / 96,205 records/s in 70.1 / 68.0 CPU-seconds at the default thresholds,
# 95,086 / 105,333 in 62.4 / 59.2 with the higher ones; over the 60 s steady load after it, p99
# 747 / 572 -> 333 / 388 ms and 48 / 46 -> 38 / 35 CPU-seconds; the whole run 132 / 136 -> 116 /
# 111 CPU-seconds.
#
# The parallel collector, not G1: the record path allocates several short-lived copies of every
# record, and G1's write barriers and concurrent refinement cost more than the parallel
# collector's young collections (1,000,000 records with C2: 28.1 CPU-seconds of catch-up against
# 25.1, 101 for the whole run against 91, 1,141 MiB against 924). The heap is kept at most 30%
# free, so a driver whose live data is a few hundred MB does not sit on its whole -Xmx.
DRIVER_JAVA_OPTIONS = ("-XX:ReservedCodeCacheSize=256m -XX:+UseParallelGC "
                       "-XX:MinHeapFreeRatio=10 -XX:MaxHeapFreeRatio=30 "
                       "-XX:Tier4InvocationThreshold=50000 -XX:Tier4MinInvocationThreshold=6000 "
                       "-XX:Tier4CompileThreshold=150000 -XX:Tier4BackEdgeThreshold=400000")


def flow_java_options() -> str:
    """The JVM options of a flow's JVMs: `DR_STREAM_DRIVER_JAVA_OPTIONS`, else DRIVER_JAVA_OPTIONS."""
    return os.environ.get("DR_STREAM_DRIVER_JAVA_OPTIONS", DRIVER_JAVA_OPTIONS)


def spark_session(app_name: str = "dr-stream", master: str | None = None, ui_port: int | None = None,
                  log_format: str = "text") -> SparkSession:
    """Get or create the session. Under spark-submit the jars, master and JVM options come from
    the command line (submission.py). `ui_port`: Spark's UI (with its metrics) on that port."""
    builder = _metrics_conf(SparkSession.builder.appName(app_name))
    # spark-submit starts the Python driver with a gateway already open: jars and master are set.
    if "PYSPARK_GATEWAY_PORT" not in os.environ:
        builder = _local_launch_conf(builder, master, ui_port, log_format)
    return started(_flow_conf(builder).getOrCreate)


def command_spark(config: FlowConfig) -> SparkSession:
    """A command's Spark session, for the tables `deltalake` cannot open: quiet, named after the flow."""
    spark = spark_session(f"dr-stream-{config.name}-cli")
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def _local_launch_conf(builder: SparkSession.Builder, master: str | None, ui_port: int | None,
                       log_format: str) -> SparkSession.Builder:
    """What spark-submit's command line would set: master, jars, driver memory and JVM options."""
    master = master or os.environ.get("DR_STREAM_MASTER", "local[2]")
    if master.startswith("local"):
        # Everything runs in this process: no need for the host's outward address (and no
        # warning that the hostname resolves to a loopback one).
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    java_options = flow_java_options()
    return (
        builder.master(master)
        .config("spark.jars", ",".join(str(j) for j in spark_jars()))
        .config("spark.driver.extraClassPath", str(local_file_system_jar()))
        .config("spark.driver.memory", os.environ.get("DR_STREAM_DRIVER_MEMORY", "2g"))
        .config("spark.ui.enabled", "true" if ui_port else "false")
        .config("spark.ui.port", str(ui_port or 4040))
        .config("spark.ui.showConsoleProgress", "false")
        .config(map=_settings(CONSUMER_CACHE))
        # The JVM's options: DRIVER_JAVA_OPTIONS says why each. log4j2 reads its configuration
        # before Spark's first line: no start-up WARN lines.
        .config("spark.driver.extraJavaOptions",
                f"{java_options} -Dlog4j2.configurationFile=file:{log4j2_file(log_format)}")
    )


def _settings(conf: dict[str, str]) -> dict[str, Setting]:
    return {key: value for key, value in conf.items()}


def _flow_conf(builder: SparkSession.Builder) -> SparkSession.Builder:
    """The settings every flow's session has, however it was launched."""
    return (
        builder.config("spark.sql.extensions", "io.delta.sql.DeltaSparkSessionExtension")
        .config(map=_settings(LOCAL_FILE_SYSTEM))
        .config("spark.sql.catalog.spark_catalog", "org.apache.spark.sql.delta.catalog.DeltaCatalog")
        # The record path never shuffles; the few aggregations on the driver side stay small.
        .config("spark.sql.shuffle.partitions", "4")
        # Delta's VACUUM lists a table's files in a job of this many tasks (Spark's default 10,000):
        # 83 s for one of the flow's small tables on two cores, 8 s with 4.
        .config("spark.sql.sources.parallelPartitionDiscovery.parallelism", "4")
        # Every query, each micro-batch included, describes its plan for the SQL tab before it runs,
        # whether the UI is on or not: Spark's default (`formatted`) writes out every operator's
        # details, 3% of the JVM's samples in `make bench`'s steady micro-batch phase. The tree is
        # enough for the tab.
        .config("spark.sql.ui.explainMode", "simple")
        # The driver's small frames (runs, translations) become one Delta file per write, however
        # many task slots the application has (real-time mode wants one per source partition).
        .config("spark.sql.leafNodeDefaultParallelism", "1")
        .config("spark.sql.streaming.stopGracefullyOnShutdown", "true")
        # Real-time mode runs only sinks on Spark's list unless told: the replicate query writes
        # through dr-stream's own (io.drstream.spark.CopySink), which sends each row as it comes
        # and commits nothing at the batch's end that a long batch would hold back.
        .config("spark.sql.streaming.realTimeMode.allowlistCheck", "false")
        # The offset index and the translation log are small Delta tables written every second or
        # so: rebuilding their snapshot over Delta's default 50 partitions costs more than the data.
        # One partition, not two: the rebuild's tasks take task slots the replicate batch is
        # waiting for and cannot be preempted, and with two of them on a 2-slot driver the index's
        # upkeep held a steady micro-batch back for about a second (`make bench`, 3 runs
        # each: steady p99 641 -> 479 ms, catch-up and CPU unchanged).
        .config("spark.databricks.delta.snapshotPartitions", "1")
        .config("spark.sql.redaction.options.regex", REDACTED_OPTIONS)
        .config("spark.redaction.regex", REDACTED_CONF)
        .config("spark.scheduler.mode", "FAIR")
        # The UI, when a flow turns it on, shows; it does not stop jobs or stages: a click there
        # would fail the replicate query (a killed task fails it, `spark.task.maxFailures`).
        .config("spark.ui.killEnabled", "false")
        # A scheme, or Spark would look for it on the default file system (HDFS on YARN).
        .config("spark.scheduler.allocation.file", "file://" + scheduler_pools())
        # Replication must see each task failure as a query failure: the restart path is what
        # drops already-written records (replication/resume.py); a silent task retry would not.
        .config("spark.task.maxFailures", "1")
    )
