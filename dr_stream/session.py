"""The SparkSession dr-stream runs in: Kafka connector, Delta and the interceptor on the classpath."""

from __future__ import annotations

import os

from pyspark.sql import SparkSession

from dr_stream.jvm import spark_jars


def spark_session(app_name: str = "dr-stream", master: str | None = None) -> SparkSession:
    """Get or create the session. Under spark-submit the jars and master come from the command line."""
    builder = SparkSession.builder.appName(app_name)
    # spark-submit starts the Python driver with a gateway already open: jars and master are set.
    submitted = "PYSPARK_GATEWAY_PORT" in os.environ
    if not submitted:
        builder = (
            builder.master(master or os.environ.get("DR_STREAM_MASTER", "local[2]"))
            .config("spark.jars", ",".join(str(j) for j in spark_jars()))
            .config("spark.driver.memory", os.environ.get("DR_STREAM_DRIVER_MEMORY", "2g"))
            .config("spark.ui.enabled", "false")
            .config("spark.ui.showConsoleProgress", "false")
        )
    return (
        builder.config("spark.sql.extensions", "io.delta.sql.DeltaSparkSessionExtension")
        .config("spark.sql.catalog.spark_catalog", "org.apache.spark.sql.delta.catalog.DeltaCatalog")
        # The record path never shuffles; the few aggregations on the driver side stay small.
        .config("spark.sql.shuffle.partitions", "4")
        .config("spark.sql.streaming.stopGracefullyOnShutdown", "true")
        # Replication must see each task failure as a query failure: the restart path is what
        # drops already-written records (see already_copied.py); a silent task retry would not.
        .config("spark.task.maxFailures", "1")
        .getOrCreate()
    )
