package io.drstream.kafka;

import java.util.Map;
import org.apache.kafka.clients.producer.ProducerInterceptor;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.header.Header;

/**
 * Gives a replicated record the timestamp of its source record.
 *
 * <p>Spark's Kafka sink (through 4.2) has no timestamp column, so the replication query
 * carries the source timestamp in a transient header, {@value #HEADER}, whose value is the
 * epoch milliseconds as a decimal string. This interceptor moves it into the record's
 * timestamp and drops the header.
 *
 * <p>Invariant: a record leaves the producer either unchanged (no transient header) or with
 * the header removed and every other header, the key, value and partition untouched.
 */
public final class TimestampInterceptor implements ProducerInterceptor<byte[], byte[]> {
  public static final String HEADER = "__dr_stream_ts";

  @Override
  public ProducerRecord<byte[], byte[]> onSend(ProducerRecord<byte[], byte[]> record) {
    Header stamp = record.headers().lastHeader(HEADER);
    if (stamp == null) {
      return record;
    }
    // The headers are removed in place: the sink builds a new record (and header list) per row
    // and does not read it again, and the producer makes the list read-only only after the
    // interceptors. A record's key, value and headers are not copied; only the record object is
    // new, since its timestamp cannot be changed.
    record.headers().remove(HEADER);
    return new ProducerRecord<>(
        record.topic(), record.partition(), parse(stamp.value()), record.key(), record.value(), record.headers());
  }

  /** A missing or unreadable stamp leaves the timestamp to the producer, as Kafka would. */
  static Long parse(byte[] value) {
    if (value == null || value.length == 0 || value.length > 18) {
      return null;
    }
    long ms = 0;
    for (byte b : value) {
      if (b < '0' || b > '9') {
        return null;
      }
      ms = ms * 10 + (b - '0');
    }
    return ms;
  }

  @Override
  public void onAcknowledgement(RecordMetadata metadata, Exception exception) {}

  @Override
  public void close() {}

  @Override
  public void configure(Map<String, ?> configs) {}
}
