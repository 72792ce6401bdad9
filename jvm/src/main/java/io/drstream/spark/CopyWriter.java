package io.drstream.spark;

import io.drstream.kafka.CopyProducer;
import java.nio.charset.StandardCharsets;
import org.apache.kafka.common.header.Header;
import org.apache.kafka.common.header.internals.RecordHeader;
import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.catalyst.util.ArrayData;
import org.apache.spark.sql.connector.write.DataWriter;
import org.apache.spark.sql.connector.write.WriterCommitMessage;
import org.apache.spark.unsafe.types.UTF8String;

/**
 * One task's writer of {@link CopySink}: each row, read where it lies, sent as its copy through the
 * JVM's shared {@link CopyProducer}.
 *
 * <p>Records of one topic follow each other, so the topic's names (source, destination, UTF-8)
 * are made once per change of topic, and header keys once per change of key at each position,
 * rather than once per record. Only the key, value and header values are copied out of the row.
 */
final class CopyWriter implements DataWriter<InternalRow> {
  private static final WriterCommitMessage DONE = new WriterCommitMessage() {
    private static final long serialVersionUID = 1L;
  };
  private static final Header[] NO_HEADERS = new Header[0];

  private final CopySink.CopyRows rows;
  private final CopyProducer producer;
  private final CopyProducer.Copying copying;
  private final int extra;
  private boolean released;
  // The last topic's names.
  private UTF8String topic;
  private String topicName = "";
  private byte[] topicBytes = new byte[0];
  private String destination = "";
  // Header keys by position in the last record that had one there.
  private UTF8String[] keys = new UTF8String[4];
  private String[] keyNames = new String[4];

  CopyWriter(CopySink.CopyRows rows) {
    this.rows = rows;
    this.producer = CopyProducer.acquire(rows.producer());
    this.copying = producer.copying();
    this.extra = producer.writesProvenance() ? 1 : 0;
  }

  @Override
  public void write(InternalRow row) {
    UTF8String t = row.getUTF8String(rows.topic());
    if (!t.equals(topic)) {
      topic = t.clone();
      topicName = t.toString();
      topicBytes = topicName.getBytes(StandardCharsets.UTF_8);
      destination = rows.prefix() + topicName + rows.suffix();
    }
    int partition = row.getInt(rows.partition());
    Long timestamp = row.isNullAt(rows.timestamp()) ? null : Math.floorDiv(row.getLong(rows.timestamp()), 1000L);
    copying.send(destination, rows.preservePartitions() ? partition : null, timestamp,
        row.isNullAt(rows.key()) ? null : row.getBinary(rows.key()),
        row.isNullAt(rows.value()) ? null : row.getBinary(rows.value()),
        headers(row), topicName, topicBytes, partition, row.getLong(rows.offset()));
  }

  /** The row's headers, in order, and an empty last slot when the producer writes provenance. */
  private Header[] headers(InternalRow row) {
    if (rows.headers() < 0 || row.isNullAt(rows.headers())) {
      return extra == 0 ? NO_HEADERS : new Header[extra];
    }
    ArrayData array = row.getArray(rows.headers());
    int n = array.numElements();
    Header[] out = new Header[n + extra];
    for (int i = 0; i < n; i++) {
      InternalRow header = array.getStruct(i, 2);
      out[i] = new RecordHeader(keyName(i, header.getUTF8String(0)), header.isNullAt(1) ? null : header.getBinary(1));
    }
    return out;
  }

  private String keyName(int at, UTF8String key) {
    if (key == null) {
      return null;
    }
    if (at >= keys.length) {
      keys = java.util.Arrays.copyOf(keys, at * 2);
      keyNames = java.util.Arrays.copyOf(keyNames, at * 2);
    }
    if (!key.equals(keys[at])) {
      keys[at] = key.clone();
      keyNames[at] = key.toString();
    }
    return keyNames[at];
  }

  @Override
  public WriterCommitMessage commit() {
    copying.finish();
    return DONE;
  }

  @Override
  public void abort() {
    copying.abandon();
  }

  @Override
  public void close() {
    if (!released) {
      released = true;
      producer.release();
    }
  }
}
