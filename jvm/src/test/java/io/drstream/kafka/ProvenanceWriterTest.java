package io.drstream.kafka;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;

import java.nio.charset.StandardCharsets;
import org.junit.jupiter.api.Test;

class ProvenanceWriterTest {
  private static byte[] utf8(String s) {
    return s.getBytes(StandardCharsets.UTF_8);
  }

  @Test
  void aCopysValueIsTheOneOfItsEntryWithTheClusterEscapedOnce() {
    assertArrayEquals(ProvenanceWriter.provenance("a\"b", "dc1.orders_v-2", 12, 1234567890123L, 77L),
        new ProvenanceWriter("a\"b").provenance(utf8("dc1.orders_v-2"), 12, 1234567890123L, 77L));
    assertEquals("{\"cluster\":\"a\\\"b\",\"topic\":\"dc1.orders_v-2\",\"partition\":12,\"offset\":1234567890123,"
        + "\"timestamp\":-5}", new String(ProvenanceWriter.provenance("a\"b", "dc1.orders_v-2", 12, 1234567890123L, -5L),
            StandardCharsets.UTF_8));
  }

  @Test
  void everyNumberIsWrittenAsJavaWritesItInDecimal() {
    long[] numbers = {0, 9, 10, 99, 100, 999_999_999, 1_000_000_000, 999_999_999_999_999_999L,
        1_000_000_000_000_000_000L, Long.MAX_VALUE, -1, -10, Long.MIN_VALUE};
    ProvenanceWriter writer = new ProvenanceWriter("c");
    for (long n : numbers) {
      int partition = (int) Math.max(0, Math.min(n, 7));
      String expected = "{\"cluster\":\"c\",\"topic\":\"t\",\"partition\":" + partition + ",\"offset\":" + n
          + ",\"timestamp\":" + n + "}";
      assertEquals(expected, new String(writer.provenance(utf8("t"), partition, n, n), StandardCharsets.UTF_8));
      assertEquals(expected, new String(writer.provenance(utf8("t"), partition, n, n), StandardCharsets.UTF_8),
          "the time's text reused");
    }
  }

  @Test
  void theValueReadsBackAsItsEntry() {
    byte[] value = new ProvenanceWriter("SRC").provenance(utf8("orders"), 2, 40L, 99L);
    assertEquals(new ProvenanceEntry("SRC", "orders", 2, 40L, 99L), ProvenanceEntry.parse(value));
  }
}
