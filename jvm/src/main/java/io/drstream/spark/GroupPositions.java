package io.drstream.spark;

import io.drstream.kafka.GroupPosition;
import java.io.Serializable;
import org.apache.spark.sql.Column;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.RowFactory;
import org.apache.spark.sql.api.java.UDF2;
import org.apache.spark.sql.functions;
import org.apache.spark.sql.types.DataType;
import org.apache.spark.sql.types.DataTypes;
import org.apache.spark.sql.types.StructField;

/**
 * The position a {@code __consumer_timestamps} record reports, as the translate query reads the
 * topic (dr_stream/positions/position_records.py): {@link GroupPosition}'s rule, so the query, the
 * commands' Python reader and the golden fixture agree on every record.
 *
 * <p>A Spark SQL function (UDF2: key, value -> struct group, topic, partition, offset, timestamp,
 * or null for a record that reports no position). Invariant: never throws.
 */
public final class GroupPositions implements UDF2<byte[], byte[], Row>, Serializable {
  private static final long serialVersionUID = 1L;

  /** The type of what {@link #call} returns. */
  public static final DataType TYPE = DataTypes.createStructType(new StructField[] {
      DataTypes.createStructField("group", DataTypes.StringType, false),
      DataTypes.createStructField("topic", DataTypes.StringType, false),
      DataTypes.createStructField("partition", DataTypes.IntegerType, false),
      DataTypes.createStructField("offset", DataTypes.LongType, false),
      DataTypes.createStructField("timestamp", DataTypes.LongType, false)});

  /** The position column of records whose key and value these are. */
  public static Column of(Column key, Column value) {
    return functions.udf(new GroupPositions(), TYPE).apply(key, value);
  }

  @Override
  public Row call(byte[] key, byte[] value) {
    GroupPosition p = GroupPosition.parse(key, value);
    return p == null ? null : RowFactory.create(p.group(), p.topic(), p.partition(), p.offset(), p.timestamp());
  }
}
