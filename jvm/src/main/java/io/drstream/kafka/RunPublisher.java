package io.drstream.kafka;

import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.TimeUnit;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.Producer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Publishes the runs one sink producer wrote ({@link CopyRuns}) to the flow's runs topic on the
 * destination.
 *
 * <p>When: at the end of every Spark task that wrote through the producer (after its records were
 * acknowledged, before the task reports success), and every {@value #INTERVAL_MS} ms within long
 * tasks (real-time mode's). A publication that fails fails the task and its runs go out with the
 * next one. So when a micro-batch commits, every run of its records is on the runs topic, and runs
 * of one partition reach the topic in destination order even when executors take turns writing
 * it. A crash between an acknowledgement and its publication loses only runs the flow rebuilds at
 * start from the destination's records.
 *
 * <p>{@code holdMs}, a test knob, delays each end-of-task publication and turns the periodic one
 * off, so a test can kill the flow between a write and its publication.
 */
final class RunPublisher implements AutoCloseable {
  static final long INTERVAL_MS = 500;
  private static final Logger LOG = LoggerFactory.getLogger(RunPublisher.class);

  private final CopyRuns runs = new CopyRuns();
  private final String topic;
  private final long holdMs;
  private final Map<String, Object> config;
  private final Object publishing = new Object();
  private final ScheduledExecutorService timer;
  private Producer<byte[], byte[]> publisher;

  /** A publisher to {@code topic} connecting as the sink producer of {@code sinkConfig} does. */
  RunPublisher(String topic, Map<String, ?> sinkConfig, long holdMs) {
    this.topic = topic;
    this.holdMs = holdMs;
    this.config = publisherConfig(sinkConfig);
    if (holdMs == 0) {
      timer = Executors.newSingleThreadScheduledExecutor(r -> {
        Thread t = new Thread(r, "dr-stream-runs-publisher");
        t.setDaemon(true);
        return t;
      });
      timer.scheduleWithFixedDelay(this::publishQuietly, INTERVAL_MS, INTERVAL_MS, TimeUnit.MILLISECONDS);
    } else {
      timer = null;
    }
  }

  /**
   * The runs publisher's settings: the sink producer's connection and security settings, with
   * its own delivery ones. Reports go out zstd-compressed whatever the sink uses: a report is
   * about 340 bytes of JSON that differs from its neighbours in a few digits and takes about 14
   * on the broker's disk compressed, so what the topic writes and holds until the broker's
   * retention check (a flow copying 100 partitions of a transactional source publishes about 270
   * reports a second) shrinks about 25 times. Every broker dr-stream supports (Kafka 3.9 on) takes
   * zstd.
   */
  static Map<String, Object> publisherConfig(Map<String, ?> sinkConfig) {
    Map<String, Object> config = new HashMap<>();
    for (Map.Entry<String, ?> e : sinkConfig.entrySet()) {
      String k = e.getKey();
      boolean own = k.startsWith("dr.stream.") || k.equals("interceptor.classes") || k.equals("client.id")
          || k.equals("transactional.id") || k.endsWith(".serializer") || k.equals("partitioner.class");
      if (!own && e.getValue() != null) {
        config.put(k, e.getValue());
      }
    }
    config.put("key.serializer", "org.apache.kafka.common.serialization.ByteArraySerializer");
    config.put("value.serializer", "org.apache.kafka.common.serialization.ByteArraySerializer");
    config.put("acks", "all");
    config.put("enable.idempotence", "true");
    config.put("linger.ms", "0");
    config.put("compression.type", "zstd");
    // A publication sends its reports at once and flushes, so linger adds nothing; larger batches
    // put more of a publication's reports in one compressed batch, where they compress best.
    config.put("batch.size", String.valueOf(256 * 1024));
    config.put("delivery.timeout.ms", "30000");
    config.put("request.timeout.ms", "10000");
    config.put("client.id", "dr-stream-runs-" + sinkConfig.get("client.id"));
    return config;
  }

  /** One acknowledged copy: its origin (cluster, topic, partition, offset, timestamp) -> its destination offset. */
  void acked(String destTopic, int destPartition, String cluster, String topic, int partition, long offset,
      long timestamp, long destOffset) {
    runs.acked(destTopic, destPartition, cluster, topic, partition, offset, timestamp, destOffset,
        System.currentTimeMillis());
  }

  /** The end of a task that wrote through the producer: its runs go out now (after the hold). */
  void publishAtTaskEnd() {
    if (holdMs > 0) {
      try {
        Thread.sleep(holdMs);
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
      }
    }
    publish();
  }

  private void publishQuietly() {
    try {
      publish();
    } catch (RuntimeException e) {
      LOG.warn("dr-stream: {} (retried at the next publication)", e.getMessage());
    }
  }

  /** Sends every changed run and waits for the destination to acknowledge them all. */
  void publish() {
    synchronized (publishing) {
      List<CopyRuns.Version> taken = runs.takeChanged();
      if (taken.isEmpty()) {
        return;
      }
      List<Future<RecordMetadata>> futures = new ArrayList<>(taken.size());
      Exception failure = null;
      try {
        if (publisher == null) {
          publisher = new KafkaProducer<>(config);
        }
        for (CopyRuns.Version v : taken) {
          futures.add(publisher.send(new ProducerRecord<>(topic, 0,
              v.key().getBytes(StandardCharsets.UTF_8), v.value().getBytes(StandardCharsets.UTF_8))));
        }
        publisher.flush();
        for (Future<RecordMetadata> f : futures) {
          f.get();
        }
      } catch (Exception e) {
        failure = e;
      }
      if (failure != null) {
        runs.unpublished(taken);
        throw new IllegalStateException("offset runs not published to " + topic + ": " + failure, failure);
      }
    }
  }

  /** Publishes what is left, said rather than thrown, and closes the publisher. */
  @Override
  public void close() {
    if (timer != null) {
      timer.shutdownNow();
    }
    try {
      publish();
    } catch (RuntimeException e) {
      LOG.warn("dr-stream: {} at close; the flow rebuilds them from the destination at its next start",
          e.getMessage());
    }
    synchronized (publishing) {
      if (publisher != null) {
        publisher.close(Duration.ofSeconds(5));
      }
    }
  }
}
