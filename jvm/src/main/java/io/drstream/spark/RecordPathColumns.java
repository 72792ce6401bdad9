package io.drstream.spark;

import org.apache.spark.sql.Column;
import org.apache.spark.sql.functions;
import org.apache.spark.sql.types.DataTypes;

/**
 * The provenance columns that Spark SQL has no expression for, built for Python
 * (dr_stream/runtime/provenance_columns.py). Each is a Java function Spark compiles into the path's generated
 * code; a higher-order function or {@code reflect} would keep the whole operator out of it.
 */
public final class RecordPathColumns {
  private RecordPathColumns() {}

  /**
   * {@link CycleRule}'s bits for the record whose header keys, values, destination topic, topic,
   * partition, offset, key and value these are.
   */
  public static Column cycleFlags(CycleRule rule, Column keys, Column values, Column destinationTopic, Column topic,
      Column partition, Column offset, Column key, Column value) {
    return functions.udf(rule, DataTypes.IntegerType)
        .apply(keys, values, destinationTopic, topic, partition, offset, key, value);
  }

  /** True, counting a record a restart drops as left out (when {@code leftOut}) or already copied. */
  public static Column countedDrop(RecordCounts counts, Column leftOut) {
    return functions.udf(counts.dropped(), DataTypes.BooleanType).asNondeterministic().apply(leftOut);
  }

  /** Whether the record of this topic, partition and offset lies in one of {@code ranges}. */
  public static Column inCopiedRanges(CopiedRanges ranges, Column topic, Column partition, Column offset) {
    return functions.udf(ranges, DataTypes.BooleanType).apply(topic, partition, offset);
  }

  /** {@link ProvenanceEntries} of the record whose header keys and values these are. */
  public static Column provenanceEntries(String header, Column keys, Column values) {
    return functions.udf(new ProvenanceEntries(header), ProvenanceEntries.TYPE).apply(keys, values);
  }
}
