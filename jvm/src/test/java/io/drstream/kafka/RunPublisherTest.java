package io.drstream.kafka;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;

import java.util.HashMap;
import java.util.Map;
import org.junit.jupiter.api.Test;

class RunPublisherTest {
  private static Map<String, Object> sink() {
    Map<String, Object> sink = new HashMap<>();
    sink.put("bootstrap.servers", "dc2:9093");
    sink.put("security.protocol", "SASL_SSL");
    sink.put("compression.type", "none");
    sink.put("linger.ms", "100");
    sink.put("client.id", "producer-1");
    sink.put("interceptor.classes", "com.example.Audit");
    sink.put(CopyProducer.RUNS_TOPIC, "__dr_stream_runs.f");
    sink.put("transactional.id", "t");
    return sink;
  }

  @Test
  void theRunsPublisherCompressesItsReportsWhateverTheSinkUses() {
    Map<String, Object> publisher = RunPublisher.publisherConfig(sink());
    assertEquals("zstd", publisher.get("compression.type"));
    assertEquals("0", publisher.get("linger.ms"));
    assertEquals("all", publisher.get("acks"));
  }

  @Test
  void theRunsPublisherConnectsAsTheSinkDoesAndTakesNoneOfItsOwnSettings() {
    Map<String, Object> publisher = RunPublisher.publisherConfig(sink());
    assertEquals("dc2:9093", publisher.get("bootstrap.servers"));
    assertEquals("SASL_SSL", publisher.get("security.protocol"));
    assertEquals("dr-stream-runs-producer-1", publisher.get("client.id"));
    assertFalse(publisher.containsKey("interceptor.classes"));
    assertFalse(publisher.containsKey("transactional.id"));
    assertFalse(publisher.containsKey(CopyProducer.RUNS_TOPIC));
  }
}
