package io.drstream.spark;

import java.io.Serializable;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import org.apache.spark.sql.Column;
import org.apache.spark.sql.api.java.UDF0;
import org.apache.spark.sql.api.java.UDF1;
import org.apache.spark.sql.api.java.UDF4;
import org.apache.spark.sql.functions;
import org.apache.spark.sql.types.DataTypes;

/**
 * The provenance columns that Spark SQL has no expression for, built for Python
 * (dr_stream/runtime/provenance_columns.py). Each is a Java function Spark compiles into the path's generated
 * code; a higher-order function or {@code reflect} would keep the whole operator out of it.
 */
public final class RecordPathColumns {
  private RecordPathColumns() {}

  /** {@link CycleRule}'s bits for the record whose header keys, values and destination topic these are. */
  public static Column cycleFlags(CycleRule rule, Column keys, Column values, Column destinationTopic) {
    return functions.udf(rule, DataTypes.IntegerType).apply(keys, values, destinationTopic);
  }

  /** Whether the record of this topic, partition and offset lies in one of {@code ranges}. */
  public static Column inCopiedRanges(CopiedRanges ranges, Column topic, Column partition, Column offset) {
    return functions.udf(ranges, DataTypes.BooleanType).apply(topic, partition, offset);
  }

  /** {@link ProvenanceEntries} of the record whose header keys and values these are. */
  public static Column provenanceEntries(String header, Column keys, Column values) {
    return functions.udf(new ProvenanceEntries(header), ProvenanceEntries.TYPE).apply(keys, values);
  }

  /**
   * The time, epoch milliseconds, read as each record is copied. Not {@code current_timestamp()}:
   * a stream writes that into the generated code as each batch's constant, so the record path
   * was compiled anew for every micro-batch; nondeterministic, so the optimizer never folds it.
   */
  public static Column copyTime() {
    return functions.udf(new Clock(), DataTypes.LongType).asNondeterministic().apply();
  }

  /**
   * The sink interceptor's timestamp stamp ({@code io.drstream.kafka.CopyInterceptor}) of epoch
   * milliseconds: 8 bytes, big-endian, so neither side formats or parses a number.
   */
  public static Column timestampStamp(Column epochMillis) {
    return functions.udf(new Stamp(), DataTypes.BinaryType).apply(epochMillis);
  }

  /**
   * The stamp of a flow without provenance: the timestamp's 8 bytes, then the source record's
   * partition (4 bytes), offset (8 bytes) and topic (UTF-8), so the sink can name a record the
   * destination refuses ({@code io.drstream.kafka.CopyInterceptor.stampedOrigin}).
   */
  public static Column originStamp(Column epochMillis, Column topic, Column partition, Column offset) {
    return functions.udf(new OriginStamp(), DataTypes.BinaryType).apply(epochMillis, topic, partition, offset);
  }

  private static final class OriginStamp implements UDF4<Long, String, Integer, Long, byte[]>, Serializable {
    private static final long serialVersionUID = 1L;

    @java.lang.Override
    public byte[] call(Long ms, String topic, Integer partition, Long offset) {
      if (ms == null || topic == null || partition == null || offset == null) {
        return ms == null ? null : ByteBuffer.allocate(Long.BYTES).putLong(ms).array();
      }
      byte[] name = topic.getBytes(StandardCharsets.UTF_8);
      return ByteBuffer.allocate(Long.BYTES + Integer.BYTES + Long.BYTES + name.length)
          .putLong(ms).putInt(partition).putLong(offset).put(name).array();
    }
  }

  private static final class Stamp implements UDF1<Long, byte[]>, Serializable {
    private static final long serialVersionUID = 1L;

    @java.lang.Override
    public byte[] call(Long ms) {
      return ms == null ? null : ByteBuffer.allocate(Long.BYTES).putLong(ms).array();
    }
  }

  private static final class Clock implements UDF0<Long>, Serializable {
    private static final long serialVersionUID = 1L;

    @java.lang.Override
    public Long call() {
      return System.currentTimeMillis();
    }
  }
}
