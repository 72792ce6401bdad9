package io.drstream.kafka;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;

/**
 * The JVM side of the contracts against the golden fixtures in tests/contracts/, which the Python
 * tests read too (tests/test_contracts.py): a change on one side alone fails one of them.
 */
class ContractsTest {
  private static final ObjectMapper JSON = new ObjectMapper();

  private static JsonNode golden(String name) throws IOException {
    return JSON.readTree(Path.of(System.getProperty("contracts.dir", "../tests/contracts"), name).toFile());
  }

  private static byte[] utf8(JsonNode text) {
    return text.asText().getBytes(StandardCharsets.UTF_8);
  }

  @Test
  void everyNameTheJvmUsesIsTheOneTheFixtureStates() throws IOException {
    JsonNode names = golden("names.json");
    Map<String, String> said = Map.of(
        "provenance_header", CopyProducer.DEFAULT_PROVENANCE_HEADER,
        "copy_sink", io.drstream.spark.CopySink.class.getName(),
        "runs_topic_setting", CopyProducer.RUNS_TOPIC,
        "provenance_header_setting", CopyProducer.HEADER,
        "provenance_cluster_setting", CopyProducer.PROVENANCE_CLUSTER,
        "runs_hold_setting", CopyProducer.HOLD_MS,
        "runs_topic_prefix", WrittenCopies.RUNS_PREFIX,
        "rename_prefix_setting", io.drstream.spark.CopySink.RENAME_PREFIX,
        "rename_suffix_setting", io.drstream.spark.CopySink.RENAME_SUFFIX,
        "preserve_partitions_setting", io.drstream.spark.CopySink.PRESERVE_PARTITIONS);
    said.forEach((name, value) -> assertEquals(names.get(name).asText(), value, name));
  }

  @Test
  void aRunIsWrittenAsTheFixtureStatesByteForByte() throws IOException {
    for (JsonNode c : golden("runs_records.json").get("written")) {
      JsonNode r = c.get("run");
      CopyRuns.Origin first = new CopyRuns.Origin(r.get("origin_cluster").asText(), r.get("origin_topic").asText(),
          r.get("origin_partition").asInt(), r.get("origin_start").asLong(), r.get("first_timestamp").asLong());
      CopyRuns.Run run = new CopyRuns.Run(r.get("dest_topic").asText(), r.get("dest_partition").asInt(), first,
          r.get("dest_start").asLong(), r.get("copied_at").asLong());
      run.originEnd = r.get("origin_end").asLong();
      run.destEnd = r.get("dest_end").asLong();
      run.lastTimestamp = r.get("last_timestamp").asLong();
      assertEquals(c.get("key").asText(), run.key());
      assertEquals(c.get("value").asText(), run.value());
    }
  }

  @Test
  void aProvenanceValueIsWrittenAsTheFixtureStatesByteForByte() throws IOException {
    for (JsonNode c : golden("provenance_header.json").get("written")) {
      JsonNode e = c.get("entry");
      byte[] written = ProvenanceWriter.provenance(e.get("cluster").asText(), e.get("topic").asText(),
          e.get("partition").asInt(), e.get("offset").asLong(), e.get("timestamp").asLong());
      assertEquals(c.get("value").asText(), new String(written, StandardCharsets.UTF_8));
    }
  }

  @Test
  void aProvenanceValueReadsAsTheEntryTheFixtureStates() throws IOException {
    JsonNode fixture = golden("provenance_header.json");
    for (String part : new String[] {"written", "read"}) {
      for (JsonNode c : fixture.get(part)) {
        byte[] value = utf8(c.get("value"));
        JsonNode e = c.get("entry");
        ProvenanceEntry parsed = ProvenanceEntry.parse(value);
        if (e.isNull()) {
          assertNull(parsed, c.get("value").asText());
          continue;
        }
        long timestamp = e.get("timestamp").isNull() ? -1 : e.get("timestamp").asLong();
        ProvenanceEntry expected = new ProvenanceEntry(e.get("cluster").asText(), e.get("topic").asText(),
            e.get("partition").asInt(), e.get("offset").asLong(), timestamp);
        assertEquals(expected, parsed, c.get("value").asText());
      }
    }
  }

  @Test
  void aConsumerTimestampsRecordReadsAsThePositionTheFixtureStates() throws IOException {
    JsonNode fixture = golden("consumer_timestamps.json");
    for (String part : new String[] {"written", "read"}) {
      for (JsonNode c : fixture.get(part)) {
        GroupPosition parsed = GroupPosition.parse(utf8(c.get("key")), utf8(c.get("value")));
        JsonNode p = c.get("position");
        String said = c.get("key").asText() + " " + c.get("value").asText();
        if (p.isNull()) {
          assertNull(parsed, said);
          continue;
        }
        assertEquals(new GroupPosition(p.get("group").asText(), p.get("topic").asText(), p.get("partition").asInt(),
            p.get("offset").asLong(), p.get("timestamp").asLong()), parsed, said);
      }
    }
  }

  @Test
  void aTombstoneIsNoPosition() {
    assertNull(GroupPosition.parse("{\"group\":\"g\",\"topic\":\"t\",\"partition\":0}".getBytes(StandardCharsets.UTF_8),
        null));
  }

  @Test
  void destinationRecordsMakeTheRunsTheFixtureStates() throws IOException {
    for (JsonNode c : golden("copied_records.json").get("cases")) {
      CopyRuns runs = new CopyRuns();
      for (JsonNode r : c.get("records")) {
        JsonNode o = r.get("origin");
        runs.acked(r.get("dest_topic").asText(), r.get("dest_partition").asInt(),
            new CopyRuns.Origin(o.get("cluster").asText(), o.get("topic").asText(), o.get("partition").asInt(),
                o.get("offset").asLong(), r.get("timestamp").asLong()),
            r.get("dest_offset").asLong(), 0L);
      }
      List<String> got = new ArrayList<>();
      for (CopyRuns.Version v : runs.takeChanged()) {
        CopyRuns.Run run = v.run();
        got.add(String.join(" ", run.first.cluster(), run.first.topic(), String.valueOf(run.first.partition()),
            String.valueOf(run.first.offset()), String.valueOf(run.originEnd), run.destTopic,
            String.valueOf(run.destPartition), String.valueOf(run.destStart), String.valueOf(run.destEnd),
            String.valueOf(run.first.timestamp()), String.valueOf(run.lastTimestamp)));
      }
      List<String> expected = new ArrayList<>();
      for (JsonNode r : c.get("runs")) {
        expected.add(String.join(" ", r.get("origin_cluster").asText(), r.get("origin_topic").asText(),
            r.get("origin_partition").asText(), r.get("origin_start").asText(), r.get("origin_end").asText(),
            r.get("dest_topic").asText(), r.get("dest_partition").asText(), r.get("dest_start").asText(),
            r.get("dest_end").asText(), r.get("first_timestamp").asText(), r.get("last_timestamp").asText()));
      }
      got.sort(null);
      expected.sort(null);
      assertEquals(expected, got, c.get("name").asText());
    }
  }
}
