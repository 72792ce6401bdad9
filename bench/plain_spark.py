"""The floor under dr-stream's record path: Spark's Kafka source straight into Spark's Kafka sink.

    BENCH_SOURCE=... BENCH_TARGET=... BENCH_WORK=... BENCH_TOPICS=<regex> python -m bench.plain_spark

What a Spark user would write to copy topics, with nothing of dr-stream's record path: no
provenance header, no timestamp carried over, no interceptor, no offset index, no translation.
It reads with headers and writes each record's topic, key, value, headers and partition, on
`local[2]` and the same driver memory, trigger and batch bound as dr-stream's micro-batch run,
through a producer set as both replicators' are (acks=all, idempotent, linger 5 ms, batch 256
KiB). It is tuned as dr-stream tunes Spark, since those choices are Spark's path, not
dr-stream's additions: the flow's JVM options (`session.DRIVER_JAVA_OPTIONS`: the JIT and the
collector), one task per core, offsets and commits logged beside the batches. The destination
topics must exist (`make bench` creates them). What dr-stream costs above this is its own; what
this costs above MirrorMaker 2 is Spark's. It runs until SIGTERM, then stops the query between
batches.
"""

from __future__ import annotations

import os
import signal
import sys
import threading

from dr_stream.kafka.spark_options import SINK_PRODUCER
from dr_stream.runtime.jvm import spark_jars
from dr_stream.runtime.session import flow_java_options


def connector_jars() -> list[str]:
    """Spark's Kafka connector and what it needs, none of dr-stream's or Delta's jars."""
    return [str(j) for j in spark_jars() if not j.name.startswith(("dr-stream", "delta-"))]


def main() -> int:
    from pyspark.sql import SparkSession

    env = os.environ
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    spark = (SparkSession.builder.appName("plain-spark-copy")
             .master(env.get("DR_STREAM_MASTER", "local[2]"))
             .config("spark.jars", ",".join(connector_jars()))
             .config("spark.driver.memory", env.get("DR_STREAM_DRIVER_MEMORY", "1g"))
             .config("spark.driver.extraJavaOptions", flow_java_options())
             .config("spark.ui.enabled", "false")
             .getOrCreate())
    spark.sparkContext.setLogLevel("WARN")
    records = (spark.readStream.format("kafka")
               .option("kafka.bootstrap.servers", env["BENCH_SOURCE"])
               .option("subscribePattern", env["BENCH_TOPICS"])
               .option("startingOffsets", "earliest")
               .option("includeHeaders", "true")
               .option("maxOffsetsPerTrigger", env.get("BENCH_MAX_RECORDS", "500000"))
               .load()
               .coalesce(spark.sparkContext.defaultParallelism))
    # The sink takes topic, key, value, headers and partition by name and leaves the source's other
    # columns: no projection of the user's own.
    query = (records.writeStream.format("kafka")
             .option("kafka.bootstrap.servers", env["BENCH_TARGET"])
             # dr-stream's sink producer settings (bench/mm2.properties has the same): the floor
             # differs from dr-stream only in what dr-stream adds.
             .options(**SINK_PRODUCER)
             .option("checkpointLocation", env["BENCH_WORK"] + "/checkpoint")
             .option("asyncProgressTrackingEnabled", "true")
             .trigger(processingTime=env.get("BENCH_TRIGGER", "200ms").replace("ms", " milliseconds"))
             .start())
    stopping = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stopping.set())
    while not stopping.wait(0.5) and query.isActive:
        pass
    failed = query.exception()
    query.stop()
    spark.stop()
    if failed is not None:
        print(f"plain Spark copy failed: {failed}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
