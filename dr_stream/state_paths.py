"""A flow's state paths (checkpoints, offset index, translations) on whatever storage holds them.

They are URIs: local paths, `file:`, `hdfs://`, `s3a://`, `abfss://`. Python's own file
functions only know the local disk (`Path("s3a://b/x").exists()` is simply False), so every
operation on them goes through Hadoop's FileSystem in the Spark driver's JVM, the same code
Spark and Delta use to write them.
"""

from __future__ import annotations

from pyspark.sql import SparkSession


def _qualified(spark: SparkSession, uri: str):
    """(Hadoop Path made absolute with its scheme, its FileSystem); a relative path is under the cwd."""
    jvm = spark.sparkContext._jvm
    path = jvm.org.apache.hadoop.fs.Path(uri.rstrip("/") or "/")
    fs = path.getFileSystem(spark.sparkContext._jsc.hadoopConfiguration())
    return fs.makeQualified(path), fs


def move_aside(spark: SparkSession, uri: str, suffix: str) -> str | None:
    """Renames `uri` to `<uri>.<suffix>` beside it; the new URI, or None when there was nothing."""
    path, fs = _qualified(spark, uri)
    if not fs.exists(path):
        return None
    target = spark.sparkContext._jvm.org.apache.hadoop.fs.Path(path.getParent(), f"{path.getName()}.{suffix}")
    if not fs.rename(path, target):
        raise OSError(f"{uri}: could not be renamed to {target.toString()}")
    return str(target.toString())
