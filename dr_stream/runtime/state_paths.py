"""A flow's state paths (checkpoints, offset index, translations) on whatever storage holds them.

They are URIs: local paths, `file:`, `hdfs://`, `s3a://`, `abfss://`. Python's own file
functions only know the local disk (`Path("s3a://b/x").exists()` is simply False), so every
operation on them goes through Hadoop's FileSystem in the Spark driver's JVM, the same code
Spark and Delta use to write them.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

from dr_stream.runtime.jvm_classes import jvm_class, jvm_view

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from dr_stream.core.config import FlowConfig

_SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*:")
# Each state key, and the directory name a shared URI for it would usually end in.
_KEYS = {"checkpoint_dir": "checkpoints", "offset_index": "offset-index", "translations": "translations",
         "losses": "losses"}


def is_relative(uri: str) -> bool:
    """A path with neither a scheme (`hdfs:`, `s3a:`, `file:`, ...) nor a leading `/`."""
    return not _SCHEME.match(uri) and not uri.startswith("/")


def require_shared(flow: FlowConfig) -> None:
    """In cluster deploy mode the driver runs on a node the submitter never sees, and a relative
    path would name a directory in that container, gone with it: every state path must then be a
    URI or an absolute path (a mount every node shares). Raises the ConfigError for the first."""
    from dr_stream.core.config import ConfigError

    for key, directory in _KEYS.items():
        value = getattr(flow.streaming, key)
        if is_relative(value):
            raise ConfigError(
                f"{flow.path}: streaming.{key}: {value!r} is a relative path; in cluster deploy mode the driver "
                f"runs on another node, so give a shared URI (e.g. hdfs://NAMENODE:8020/dr-stream/{flow.name}/{directory})")


def qualified(spark: SparkSession, uri: str) -> tuple[Any, Any]:
    """(Hadoop Path made absolute with its scheme, its FileSystem); a relative path is under the cwd."""
    path = jvm_class(spark.sparkContext, "org.apache.hadoop.fs.Path")(uri.rstrip("/") or "/")
    fs = path.getFileSystem(spark.sparkContext._jsc.hadoopConfiguration())
    return fs.makeQualified(path), fs


def move_aside(spark: SparkSession, uri: str, suffix: str) -> str | None:
    """Renames `uri` to `<uri>.<suffix>` beside it; the new URI, or None when there was nothing."""
    path, fs = qualified(spark, uri)
    if not fs.exists(path):
        return None
    target = jvm_class(spark.sparkContext, "org.apache.hadoop.fs.Path")(path.getParent(), f"{path.getName()}.{suffix}")
    if not fs.rename(path, target):
        raise OSError(f"{uri}: could not be renamed to {target.toString()}")
    return str(target.toString())


def read_text(spark: SparkSession, uri: str) -> str | None:
    """The file's text (UTF-8), or None when there is no such file."""
    path, fs = qualified(spark, uri)
    if not fs.exists(path):
        return None
    stream = fs.open(path)
    try:
        return str(jvm_class(spark.sparkContext, "org.apache.commons.io.IOUtils").toString(stream, "UTF-8"))
    finally:
        stream.close()


def write_text(spark: SparkSession, uri: str, text: str) -> None:
    """Writes the file whole, replacing it: a temporary file beside it, then a rename, so a reader
    never sees half of it (object stores rename by copying, which is fine for a small file)."""
    path, fs = qualified(spark, uri)
    jvm = jvm_view(spark.sparkContext)
    temporary = jvm.org.apache.hadoop.fs.Path(path.getParent(), f".{path.getName()}.tmp")
    stream = fs.create(temporary, True)
    try:
        stream.write(bytearray(text.encode()))
    finally:
        stream.close()
    fs.delete(path, False)
    if not fs.rename(temporary, path):
        raise OSError(f"{uri}: could not be written (rename from {temporary.toString()} failed)")
