package io.drstream.kafka;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.util.Arrays;
import java.util.Map;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.header.Header;
import org.junit.jupiter.api.Test;

class OriginStampTest {
  private static byte[] originStamp(long ms, int partition, long offset, String topic) {
    byte[] name = topic.getBytes(StandardCharsets.UTF_8);
    return ByteBuffer.allocate(20 + name.length).putLong(ms).putInt(partition).putLong(offset).put(name).array();
  }

  @Test
  void anOriginStampNamesTheSourceRecordAndGivesItsTimestamp() {
    byte[] stamp = originStamp(1_700_000_000_123L, 7, 42_000_000_000L, "orders.eu");
    OriginStamp stamps = new OriginStamp("Zq3");
    assertEquals(new CopyRuns.Origin("Zq3", "orders.eu", 7, 42_000_000_000L, 1_700_000_000_123L), stamps.origin(stamp));
    assertEquals(new CopyRuns.Origin("Zq3", "orders", 1, 2L, 3L), stamps.origin(originStamp(3L, 1, 2L, "orders")),
        "a new topic is read, not the last one reused");
    assertEquals(1_700_000_000_123L, OriginStamp.timestamp(stamp));
  }

  @Test
  void aStampOfTheTimestampAloneNamesNoOrigin() {
    byte[] stamp = ByteBuffer.allocate(8).putLong(5L).array();
    assertNull(new OriginStamp("").origin(stamp));
    assertEquals(5L, OriginStamp.timestamp(stamp));
    assertNull(OriginStamp.timestamp(new byte[12]), "neither a timestamp nor an origin stamp");
    assertNull(new OriginStamp("").origin(new byte[12]));
  }

  @Test
  void theProvenanceValueOfAStampIsTheOneOfItsEntry() {
    byte[] stamp = originStamp(9L, 12, 1234567890123L, "dc1.orders_v-2");
    assertArrayEquals(OriginStamp.provenance("a\"b", "dc1.orders_v-2", 12, 1234567890123L, 77L),
        new OriginStamp("a\"b").provenance(stamp, 77L));
    assertEquals("{\"cluster\":\"a\\\"b\",\"topic\":\"dc1.orders_v-2\",\"partition\":12,\"offset\":1234567890123,"
        + "\"timestamp\":-5}", new String(OriginStamp.provenance("a\"b", "dc1.orders_v-2", 12, 1234567890123L, -5L),
            StandardCharsets.UTF_8));
  }

  @Test
  void everyNumberIsWrittenAsJavaWritesItInDecimal() {
    long[] numbers = {0, 9, 10, 99, 100, 999_999_999, 1_000_000_000, 999_999_999_999_999_999L,
        1_000_000_000_000_000_000L, Long.MAX_VALUE, -1, -10, Long.MIN_VALUE};
    OriginStamp stamps = new OriginStamp("c");
    for (long n : numbers) {
      String expected = "{\"cluster\":\"c\",\"topic\":\"t\",\"partition\":" + (int) Math.max(0, Math.min(n, 7))
          + ",\"offset\":" + n + ",\"timestamp\":" + n + "}";
      byte[] stamp = originStamp(0L, (int) Math.max(0, Math.min(n, 7)), n, "t");
      assertEquals(expected, new String(stamps.provenance(stamp, n), StandardCharsets.UTF_8));
      assertEquals(expected, new String(stamps.provenance(stamp, n), StandardCharsets.UTF_8), "the time reused");
    }
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

  @Test
  void aFlowWithProvenanceGetsItsHeaderInTheStampsPlaceAndEveryOtherHeaderKept() {
    CopyInterceptor interceptor = new CopyInterceptor();
    interceptor.configure(Map.of(CopyInterceptor.PROVENANCE_CLUSTER, "SRC", CopyInterceptor.HEADER, "__hop"));
    try {
      ProducerRecord<byte[], byte[]> record = new ProducerRecord<>("dc1.orders", 2, null, new byte[] {1}, new byte[] {2});
      record.headers().add("app", new byte[] {3}).add(CopyInterceptor.STAMP_HEADER, originStamp(99L, 2, 40L, "orders"));
      long before = System.currentTimeMillis();
      ProducerRecord<byte[], byte[]> sent = interceptor.onSend(record);
      long after = System.currentTimeMillis();
      assertEquals(99L, sent.timestamp());
      Header[] headers = sent.headers().toArray();
      assertEquals("app,__hop", String.join(",", Arrays.stream(headers).map(Header::key).toList()));
      ProvenanceEntry entry = ProvenanceEntry.parse(headers[1].value());
      assertEquals(new ProvenanceEntry("SRC", "orders", 2, 40L, entry.timestamp()), entry);
      assertTrue(entry.timestamp() >= before && entry.timestamp() <= after, "the copy time");
      assertArrayEquals(new byte[] {2}, sent.value());
    } finally {
      interceptor.close();
    }
  }

  @Test
  void aFlowWithoutProvenanceWritesNoHeader() {
    CopyInterceptor interceptor = new CopyInterceptor();
    interceptor.configure(Map.of());
    try {
      ProducerRecord<byte[], byte[]> record = new ProducerRecord<>("orders", 2, null, new byte[] {1}, new byte[] {2});
      record.headers().add(CopyInterceptor.STAMP_HEADER, originStamp(99L, 2, 40L, "orders"));
      ProducerRecord<byte[], byte[]> sent = interceptor.onSend(record);
      assertEquals(99L, sent.timestamp());
      assertEquals(0, sent.headers().toArray().length);
    } finally {
      interceptor.close();
    }
  }
}
