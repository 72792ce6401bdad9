package io.drstream.kafka;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotSame;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.Map;
import org.junit.jupiter.api.Test;

class CopyProducerTest {
  // Nothing listens there: a producer is made without meeting a broker.
  private static final Map<String, String> SINK = Map.of("bootstrap.servers", "127.0.0.1:1", "linger.ms", "5",
      CopyProducer.PROVENANCE_CLUSTER, "SRC-id", CopyProducer.HEADER, "__hop");

  @Test
  void theJavaProducerGetsEverySettingButDrStreamsOwnAndWritesBytesAsTheyAre() {
    Map<String, Object> config = CopyProducer.producerConfig(SINK);
    assertEquals("127.0.0.1:1", config.get("bootstrap.servers"));
    assertEquals("5", config.get("linger.ms"));
    assertFalse(config.keySet().stream().anyMatch(k -> k.startsWith("dr.stream.")));
    assertEquals("org.apache.kafka.common.serialization.ByteArraySerializer", config.get("value.serializer"));
  }

  @Test
  void tasksWithTheSameSettingsShareOneProducerAndAnIdleOneIsClosed() {
    CopyProducer first = CopyProducer.acquire(SINK);
    CopyProducer second = CopyProducer.acquire(Map.copyOf(SINK));
    CopyProducer other = CopyProducer.acquire(Map.of("bootstrap.servers", "127.0.0.1:2"));
    try {
      assertSame(first, second);
      assertNotSame(first, other);
      assertTrue(first.writesProvenance());
      assertFalse(other.writesProvenance());
    } finally {
      first.release();
      second.release();
      other.release();
    }
    assertTrue(CopyProducer.closeUnused() >= 2);
    CopyProducer again = CopyProducer.acquire(SINK);
    try {
      assertNotSame(first, again, "a closed producer is never handed out again");
    } finally {
      again.release();
      CopyProducer.closeUnused();
    }
  }
}
