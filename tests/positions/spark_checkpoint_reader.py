"""An application under test: a Structured Streaming query that reads Kafka with its own
checkpoint and records what each batch read, as a user's query would.

    python -m tests.positions.spark_checkpoint_reader BOOTSTRAP TOPIC CHECKPOINT OUT [--hold S]

Each batch writes its records (topic, partition, offset, value) to `OUT/batch=<id>/`, replacing
what an earlier run of the same batch wrote (the idempotent sink of a query that runs a batch
again after a crash), then appends `<id>` to `OUT/written` and sleeps `--hold` seconds before
Spark commits it: a kill in that sleep leaves the batch planned and uncommitted. It runs until
`OUT/stop` exists (then stops between batches) or it is killed.
"""

from __future__ import annotations

import argparse
import os
import time


def main() -> None:
    parser = argparse.ArgumentParser()
    for name in ("bootstrap", "topic", "checkpoint", "out"):
        parser.add_argument(name)
    parser.add_argument("--hold", type=float, default=0.0)
    parser.add_argument("--per-batch", type=int, default=40)
    args = parser.parse_args()

    from dr_stream.runtime.session import spark_session

    spark = spark_session("checkpoint-reader", master="local[2]")
    spark.sparkContext.setLogLevel("ERROR")

    def record(batch, batch_id: int) -> None:
        batch.selectExpr("topic", "partition", "offset", "CAST(value AS STRING) AS value") \
            .write.mode("overwrite").json(f"{args.out}/batch={batch_id}")
        with open(f"{args.out}/written", "a") as written:
            written.write(f"{batch_id}\n")
        time.sleep(args.hold)

    query = (spark.readStream.format("kafka")
             .option("kafka.bootstrap.servers", args.bootstrap)
             .option("subscribe", args.topic)
             .option("startingOffsets", "earliest")
             .option("maxOffsetsPerTrigger", args.per_batch)
             .load()
             .writeStream.foreachBatch(record)
             .option("checkpointLocation", args.checkpoint)
             .trigger(processingTime="1 second")
             .start())
    while not os.path.exists(f"{args.out}/stop"):
        if query.awaitTermination(0.2):
            raise SystemExit(f"the query ended: {query.exception()}")
    query.stop()
    spark.stop()


if __name__ == "__main__":
    main()
