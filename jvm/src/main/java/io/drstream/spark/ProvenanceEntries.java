package io.drstream.spark;

import io.drstream.kafka.ProvenanceEntry;
import java.io.Serializable;
import java.util.ArrayList;
import java.util.List;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.RowFactory;
import org.apache.spark.sql.api.java.UDF2;
import org.apache.spark.sql.types.DataType;
import org.apache.spark.sql.types.DataTypes;
import org.apache.spark.sql.types.StructField;
import scala.collection.Seq;
import scala.jdk.javaapi.CollectionConverters;

/**
 * A record's provenance entries, oldest hop first, as the batch reads of a destination need them
 * (a failback's search for the originals the other side already has): every value under the
 * provenance key that {@link ProvenanceEntry} reads as an entry, the others left out. The same
 * reader as the record path's {@link CycleRule}, so a header means one thing to every reader.
 *
 * <p>A Spark SQL function (UDF2: header keys, header values -> array of structs cluster, topic,
 * partition, offset, timestamp; -1 for a missing time). Invariant: never throws; null headers
 * give an empty array.
 */
public final class ProvenanceEntries implements UDF2<Seq<String>, Seq<byte[]>, Seq<Row>>, Serializable {
  private static final long serialVersionUID = 1L;

  /** The type of what {@link #call} returns. */
  public static final DataType TYPE = DataTypes.createArrayType(DataTypes.createStructType(new StructField[] {
      DataTypes.createStructField("cluster", DataTypes.StringType, false),
      DataTypes.createStructField("topic", DataTypes.StringType, false),
      DataTypes.createStructField("partition", DataTypes.IntegerType, false),
      DataTypes.createStructField("offset", DataTypes.LongType, false),
      DataTypes.createStructField("timestamp", DataTypes.LongType, false)}), false);

  private final String header;

  public ProvenanceEntries(String header) {
    this.header = header;
  }

  @Override
  public Seq<Row> call(Seq<String> keys, Seq<byte[]> values) {
    List<Row> out = new ArrayList<>();
    if (keys != null && values != null) {
      int n = Math.min(keys.length(), values.length());
      for (int i = 0; i < n; i++) {
        if (!header.equals(keys.apply(i))) {
          continue;
        }
        ProvenanceEntry e = ProvenanceEntry.parse(values.apply(i));
        if (e != null) {
          out.add(RowFactory.create(e.cluster(), e.topic(), e.partition(), e.offset(), e.timestamp()));
        }
      }
    }
    return CollectionConverters.asScala(out).toSeq();
  }
}
