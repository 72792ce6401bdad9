package io.drstream.spark;

import io.drstream.kafka.CopyProducer;
import java.io.Serializable;
import java.util.EnumSet;
import java.util.HashMap;
import java.util.Locale;
import java.util.Map;
import java.util.Set;
import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.connector.catalog.SupportsWrite;
import org.apache.spark.sql.connector.catalog.Table;
import org.apache.spark.sql.connector.catalog.TableCapability;
import org.apache.spark.sql.connector.catalog.TableProvider;
import org.apache.spark.sql.connector.expressions.Transform;
import org.apache.spark.sql.connector.write.BatchWrite;
import org.apache.spark.sql.connector.write.DataWriter;
import org.apache.spark.sql.connector.write.DataWriterFactory;
import org.apache.spark.sql.connector.write.LogicalWriteInfo;
import org.apache.spark.sql.connector.write.PhysicalWriteInfo;
import org.apache.spark.sql.connector.write.Write;
import org.apache.spark.sql.connector.write.WriteBuilder;
import org.apache.spark.sql.connector.write.WriterCommitMessage;
import org.apache.spark.sql.connector.write.streaming.StreamingDataWriterFactory;
import org.apache.spark.sql.connector.write.streaming.StreamingWrite;
import org.apache.spark.sql.internal.connector.SupportsStreamingUpdateAsAppend;
import org.apache.spark.sql.types.ArrayType;
import org.apache.spark.sql.types.DataType;
import org.apache.spark.sql.types.DataTypes;
import org.apache.spark.sql.types.StructField;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.sql.util.CaseInsensitiveStringMap;

/**
 * dr-stream's sink: writes each row of Spark's Kafka source, as the source gave it, as its copy
 * on the destination ({@code format("io.drstream.spark.CopySink")}, streaming or batch append).
 *
 * <p>A row is read where it lies: no projection builds a destination row first. Its copy goes to
 * the renamed topic ({@value #RENAME_PREFIX} + topic + {@value #RENAME_SUFFIX}), to the same
 * partition number with {@value #PRESERVE_PARTITIONS} (the default) or where the producer's
 * partitioner puts it without, with the source record's key, value, headers and timestamp, and
 * with this hop's provenance header last ({@link CopyProducer}, which also publishes the runs).
 *
 * <p>Options: {@code kafka.}-prefixed Java producer properties (as Spark's Kafka sink takes them),
 * {@link CopyProducer}'s {@code dr.stream.} settings, and the two above. The rows need the Kafka
 * source's {@code topic}, {@code partition}, {@code offset}, {@code timestamp}, {@code key} and
 * {@code value} columns, with their types; {@code headers} is read when present; any other column
 * is left alone. A write commits nothing of its own: a task succeeds once its copies are
 * acknowledged and their runs published, so the sink is at least once, as Spark's Kafka sink is,
 * and a restart's resume filter drops what was already copied.
 */
public final class CopySink implements TableProvider {
  public static final String RENAME_PREFIX = "dr.stream.rename.prefix";
  public static final String RENAME_SUFFIX = "dr.stream.rename.suffix";
  public static final String PRESERVE_PARTITIONS = "dr.stream.preserve.partitions";
  static final String PRODUCER_PREFIX = "kafka.";
  static final DataType HEADERS = DataTypes.createArrayType(DataTypes.createStructType(new StructField[] {
      DataTypes.createStructField("key", DataTypes.StringType, true),
      DataTypes.createStructField("value", DataTypes.BinaryType, true)}));

  @Override
  public StructType inferSchema(CaseInsensitiveStringMap options) {
    // Only asked when the query's schema is not handed over: the Kafka source's columns.
    return new StructType()
        .add("key", DataTypes.BinaryType).add("value", DataTypes.BinaryType).add("topic", DataTypes.StringType)
        .add("partition", DataTypes.IntegerType).add("offset", DataTypes.LongType)
        .add("timestamp", DataTypes.TimestampType).add("timestampType", DataTypes.IntegerType)
        .add("headers", HEADERS);
  }

  @Override
  public boolean supportsExternalMetadata() {
    return true;
  }

  @Override
  public Table getTable(StructType schema, Transform[] partitioning, Map<String, String> properties) {
    return new Copies(schema);
  }

  /** The destination as a table that takes rows and holds none. */
  private static final class Copies implements SupportsWrite {
    private final StructType schema;

    Copies(StructType schema) {
      this.schema = schema;
    }

    @Override
    public String name() {
      return "dr-stream copies";
    }

    @Override
    public StructType schema() {
      return schema;
    }

    @Override
    public Set<TableCapability> capabilities() {
      return EnumSet.of(TableCapability.BATCH_WRITE, TableCapability.STREAMING_WRITE,
          TableCapability.ACCEPT_ANY_SCHEMA);
    }

    @Override
    public WriteBuilder newWriteBuilder(LogicalWriteInfo info) {
      CopyRows rows = CopyRows.of(info.schema(), info.options());
      return new UpdateAsAppend(rows);
    }
  }

  /**
   * Every write appends copies; real-time mode's update mode is the same for a sink that only
   * appends.
   */
  private record UpdateAsAppend(CopyRows rows) implements SupportsStreamingUpdateAsAppend {
    @Override
    public String toString() {
      return rows.toString();
    }

    @Override
    public Write build() {
      CopyRows r = rows;
      return new Write() {
        @Override
        public String description() {
          return r.toString();
        }

        @Override
        public String toString() {
          return r.toString();
        }

        @Override
        public BatchWrite toBatch() {
          return new Writes(r);
        }

        @Override
        public StreamingWrite toStreaming() {
          return new Writes(r);
        }
      };
    }
  }

  /** A batch or a micro-batch of copies: its tasks write; nothing to do when it commits. */
  private record Writes(CopyRows rows) implements BatchWrite, StreamingWrite {
    @Override
    public String toString() {
      return rows.toString();
    }

    @Override
    public DataWriterFactory createBatchWriterFactory(PhysicalWriteInfo info) {
      return new Writers(rows);
    }

    @Override
    public StreamingDataWriterFactory createStreamingWriterFactory(PhysicalWriteInfo info) {
      return new Writers(rows);
    }

    @Override
    public boolean useCommitCoordinator() {
      return false;
    }

    @Override
    public void commit(WriterCommitMessage[] messages) {}

    @Override
    public void abort(WriterCommitMessage[] messages) {}

    @Override
    public void commit(long epochId, WriterCommitMessage[] messages) {}

    @Override
    public void abort(long epochId, WriterCommitMessage[] messages) {}
  }

  /** Shipped to the executors: makes each task's writer. */
  private record Writers(CopyRows rows) implements DataWriterFactory, StreamingDataWriterFactory {
    @Override
    public String toString() {
      return rows.toString();
    }

    @Override
    public DataWriter<InternalRow> createWriter(int partitionId, long taskId) {
      return new CopyWriter(rows);
    }

    @Override
    public DataWriter<InternalRow> createWriter(int partitionId, long taskId, long epochId) {
      return new CopyWriter(rows);
    }
  }

  /**
   * Where a row's columns are and what its copy becomes: the producer's settings, the rename, and
   * whether the partition number is kept. Checked once, on the driver, when the write is planned.
   * Spark shows it (plans, the UI, the event log) by its text, which names the destination and
   * never a setting: the settings carry the destination's credentials.
   */
  record CopyRows(Map<String, String> producer, String prefix, String suffix, boolean preservePartitions,
      int topic, int partition, int offset, int timestamp, int key, int value, int headers) implements Serializable {

    @Override
    public String toString() {
      return "dr-stream copies to " + producer.get("bootstrap.servers") + " as " + prefix + "<topic>" + suffix
          + (preservePartitions ? ", same partition" : ", partitioned by key");
    }

    static CopyRows of(StructType schema, CaseInsensitiveStringMap options) {
      return new CopyRows(producerSettings(options.asCaseSensitiveMap()), options.getOrDefault(RENAME_PREFIX, ""),
          options.getOrDefault(RENAME_SUFFIX, ""), options.getBoolean(PRESERVE_PARTITIONS, true),
          column(schema, "topic", DataTypes.StringType), column(schema, "partition", DataTypes.IntegerType),
          column(schema, "offset", DataTypes.LongType), column(schema, "timestamp", DataTypes.TimestampType),
          column(schema, "key", DataTypes.BinaryType), column(schema, "value", DataTypes.BinaryType),
          schema.getFieldIndex("headers").isDefined() ? column(schema, "headers", HEADERS) : -1);
    }

    /**
     * The producer's settings among the write's options: the {@code kafka.}-prefixed ones without
     * the prefix, and {@link CopyProducer}'s own; refused without the destination's address or with
     * a serializer, since copies are bytes written as they are.
     */
    static Map<String, String> producerSettings(Map<String, String> options) {
      Map<String, String> producer = new HashMap<>();
      options.forEach((k, v) -> {
        String lower = k.toLowerCase(Locale.ROOT);
        if (lower.startsWith(PRODUCER_PREFIX)) {
          producer.put(k.substring(PRODUCER_PREFIX.length()), v);
        } else if (lower.startsWith("dr.stream.") && !lower.startsWith("dr.stream.rename.")
            && !lower.equals(PRESERVE_PARTITIONS)) {
          producer.put(lower, v);
        }
      });
      if (producer.get("bootstrap.servers") == null) {
        throw new IllegalArgumentException("dr-stream's sink needs kafka.bootstrap.servers: the destination's address");
      }
      for (String own : new String[] {"key.serializer", "value.serializer"}) {
        if (producer.containsKey(own)) {
          throw new IllegalArgumentException("dr-stream's sink writes bytes as they are: kafka." + own
              + " cannot be set");
        }
      }
      return producer;
    }

    private static int column(StructType schema, String name, DataType type) {
      if (schema.getFieldIndex(name).isEmpty()) {
        throw new IllegalArgumentException("dr-stream's sink takes the Kafka source's rows: no column " + name
            + " in " + schema.simpleString());
      }
      int at = (Integer) schema.getFieldIndex(name).get();
      DataType found = schema.fields()[at].dataType();
      boolean matches = type instanceof ArrayType ? DataType.equalsIgnoreNullability(found, type) : found.equals(type);
      if (!matches) {
        throw new IllegalArgumentException("dr-stream's sink takes the Kafka source's rows: column " + name
            + " is " + found.simpleString() + ", not " + type.simpleString());
      }
      return at;
    }
  }
}
