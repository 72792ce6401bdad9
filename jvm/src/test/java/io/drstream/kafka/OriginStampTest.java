package io.drstream.kafka;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;

import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.junit.jupiter.api.Test;

class OriginStampTest {
  private static byte[] originStamp(long ms, int partition, long offset, String topic) {
    byte[] name = topic.getBytes(StandardCharsets.UTF_8);
    return ByteBuffer.allocate(20 + name.length).putLong(ms).putInt(partition).putLong(offset).put(name).array();
  }

  @Test
  void anOriginStampNamesTheSourceRecordAndGivesItsTimestamp() {
    byte[] stamp = originStamp(1_700_000_000_123L, 7, 42_000_000_000L, "orders.eu");
    assertEquals(new CopyRuns.Origin("", "orders.eu", 7, 42_000_000_000L, 1_700_000_000_123L),
        CopyInterceptor.stampedOrigin(stamp));
    assertEquals(1_700_000_000_123L, CopyInterceptor.timestamp(stamp));
  }

  @Test
  void aStampOfTheTimestampAloneNamesNoOrigin() {
    byte[] stamp = ByteBuffer.allocate(8).putLong(5L).array();
    assertNull(CopyInterceptor.stampedOrigin(stamp));
    assertEquals(5L, CopyInterceptor.timestamp(stamp));
    assertNull(CopyInterceptor.timestamp(new byte[12]), "neither a timestamp nor an origin stamp");
  }

  @Test
  void theStampLeavesTheRecordAsItsTimestamp() {
    ProducerRecord<byte[], byte[]> record = new ProducerRecord<>("orders.eu", 7, null, new byte[] {1}, new byte[] {2});
    record.headers().add("h", new byte[] {3}).add(CopyInterceptor.STAMP_HEADER, originStamp(99L, 7, 3L, "orders"));
    ProducerRecord<byte[], byte[]> sent = CopyInterceptor.stamped(record);
    assertEquals(99L, sent.timestamp());
    assertNull(sent.headers().lastHeader(CopyInterceptor.STAMP_HEADER));
    assertEquals(1, sent.headers().toArray().length);
  }
}
