package io.drstream.kafka;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;

import java.nio.charset.StandardCharsets;
import java.util.Arrays;
import java.util.Map;
import org.junit.jupiter.api.Test;

class DestinationOriginalsTest {
  private static byte[] b(String s) {
    return s.getBytes(StandardCharsets.UTF_8);
  }

  @Test
  void equalKeysAndValuesDigestAlikeAndANullKeyAnEmptyOneOrAShiftedBoundaryDoNot() {
    assertArrayEquals(DestinationOriginals.digest(b("k"), b("v")), DestinationOriginals.digest(b("k"), b("v")));
    assertFalse(Arrays.equals(DestinationOriginals.digest(null, b("v")), DestinationOriginals.digest(b(""), b("v"))));
    assertFalse(Arrays.equals(DestinationOriginals.digest(b("ab"), b("c")), DestinationOriginals.digest(b("a"), b("bc"))));
    assertFalse(Arrays.equals(DestinationOriginals.digest(b("k"), null), DestinationOriginals.digest(b("k"), b(""))));
  }

  @Test
  void theReaderJoinsNoGroupCommitsNothingCreatesNoTopicAndReadsCommittedRecordsOnly() {
    Map<String, Object> config = DestinationOriginals.consumerConfig(
        Map.of("bootstrap.servers", "b:9092", "group.id", "dr-stream-f-replicate", "sasl.mechanism", "SCRAM-SHA-512"));
    assertFalse(config.containsKey("group.id"));
    assertArrayEquals(new Object[] {"false", "false", "read_committed", "none", "SCRAM-SHA-512"},
        new Object[] {config.get("enable.auto.commit"), config.get("allow.auto.create.topics"),
            config.get("isolation.level"), config.get("auto.offset.reset"), config.get("sasl.mechanism")});
  }
}
