package io.drstream.kafka;

import java.nio.charset.StandardCharsets;
import java.util.Map;
import org.apache.kafka.clients.producer.ProducerInterceptor;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.header.Header;
import org.apache.kafka.common.header.internals.RecordHeaders;

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
    Long timestamp = parse(stamp.value());
    RecordHeaders kept = new RecordHeaders();
    for (Header h : record.headers()) {
      if (!HEADER.equals(h.key())) {
        kept.add(h);
      }
    }
    return new ProducerRecord<>(
        record.topic(), record.partition(), timestamp, record.key(), record.value(), kept);
  }

  /** A missing or unreadable stamp leaves the timestamp to the producer, as Kafka would. */
  private static Long parse(byte[] value) {
    if (value == null) {
      return null;
    }
    try {
      long ms = Long.parseLong(new String(value, StandardCharsets.US_ASCII));
      return ms >= 0 ? ms : null;
    } catch (NumberFormatException e) {
      return null;
    }
  }

  @Override
  public void onAcknowledgement(RecordMetadata metadata, Exception exception) {}

  @Override
  public void close() {}

  @Override
  public void configure(Map<String, ?> configs) {}
}
