package io.drstream.spark;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.Map;
import org.junit.jupiter.api.Test;

// Spark's types need the whole of Spark to load: the columns a row needs are checked in
// tests/kafka/test_copy_sink.py, in Spark's JVM.
class CopySinkTest {
  private static final Map<String, String> OPTIONS = Map.of(
      "kafka.bootstrap.servers", "dc2:9093",
      "kafka.sasl.jaas.config", "ScramLoginModule required username=\"u\" password=\"s3cret\";",
      "kafka.dr.stream.runs.topic", "__dr_stream_runs.f",
      CopySink.RENAME_PREFIX, "dc1.",
      CopySink.PRESERVE_PARTITIONS, "false");

  @Test
  void theProducerTakesTheKafkaSettingsAndDrStreamsOwnButNotTheSinks() {
    Map<String, String> producer = CopySink.CopyRows.producerSettings(OPTIONS);
    assertEquals("dc2:9093", producer.get("bootstrap.servers"));
    assertEquals("__dr_stream_runs.f", producer.get("dr.stream.runs.topic"));
    assertFalse(producer.containsKey(CopySink.RENAME_PREFIX));
    assertFalse(producer.containsKey(CopySink.PRESERVE_PARTITIONS));
  }

  @Test
  void aSerializerOrNoDestinationIsRefusedInOneLine() {
    assertTrue(assertThrows(IllegalArgumentException.class, () -> CopySink.CopyRows.producerSettings(
        Map.of("kafka.bootstrap.servers", "dc2:9093", "kafka.value.serializer", "x"))).getMessage()
        .contains("kafka.value.serializer cannot be set"));
    assertTrue(assertThrows(IllegalArgumentException.class, () -> CopySink.CopyRows.producerSettings(Map.of()))
        .getMessage().contains("kafka.bootstrap.servers"));
  }

  @Test
  void whatSparkShowsOfTheWriteNamesTheDestinationAndNoSetting() {
    String shown = new CopySink.CopyRows(CopySink.CopyRows.producerSettings(OPTIONS), "dc1.", "", false,
        0, 1, 2, 3, 4, 5, 6).toString();
    assertEquals("dr-stream copies to dc2:9093 as dc1.<topic>, partitioned by key", shown);
    assertFalse(shown.contains("s3cret"), shown);
  }
}
