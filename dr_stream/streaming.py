"""How dr-stream starts a streaming query over Kafka: read, hand each micro-batch to a function.

The index and translate queries are such queries; the replicate query is one too, with the
record path applied to the stream before its batches reach the function.
"""

from __future__ import annotations

from collections.abc import Callable

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.streaming import StreamingQuery

from dr_stream.step import Step


def start_batch_query(spark: SparkSession, kafka_options: dict[str, str], name: str,
                      batch: Callable[[DataFrame, int], None], checkpoint: str, trigger: str,
                      transform: Step | None = None) -> StreamingQuery:
    """Starts query `name` reading Kafka with `kafka_options`, calling `batch(frame, batch_id)` every
    `trigger` (a processing-time interval such as "1 second"), with its state at `checkpoint`."""
    stream = spark.readStream.format("kafka").options(**kafka_options).load()
    if transform is not None:
        stream = stream.transform(transform)
    return (
        stream.writeStream.queryName(name)
        .foreachBatch(batch)
        .option("checkpointLocation", checkpoint)
        .trigger(processingTime=trigger)
        .start()
    )
