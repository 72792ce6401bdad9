package io.drstream.kafka;

import java.time.Duration;
import java.util.HashMap;
import java.util.Iterator;
import java.util.Map;
import java.util.concurrent.Executors;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.TimeUnit;
import org.apache.kafka.clients.producer.Callback;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.Producer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.header.Header;
import org.apache.kafka.common.header.internals.RecordHeader;
import org.apache.kafka.common.header.internals.RecordHeaders;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The producer that writes a flow's copies to the destination: each copy with its source record's
 * timestamp and, when the flow writes provenance, this hop's provenance header as its newest
 * header; and, when the flow indexes its copies, the runs of acknowledged copies published to the
 * flow's runs topic ({@link RunPublisher}).
 *
 * <p>One per configuration in a JVM, shared by the tasks that write at the same time and kept
 * between batches ({@link #acquire}, {@link #release}); closed once no task has used it for
 * {@value #IDLE_MS} ms, its last runs published first.
 *
 * <p>Ordering: the producer is idempotent with ordered retries, so the destination acknowledges a
 * partition's copies in the order they were sent and each acknowledgement's callback names the
 * copy's origin; runs are built from them in that order. A copy whose send failed enters no run;
 * one the destination refused for the record itself has its origin attached to the error the
 * task fails with ({@link Refusals}), so the flow holds that partition there.
 *
 * <p>Settings, beside the Java producer's own: {@value #RUNS_TOPIC} (none: no runs),
 * {@value #PROVENANCE_CLUSTER} (none: no provenance header; the origin cluster of runs is then
 * ""), {@value #HEADER} (default {@value #DEFAULT_PROVENANCE_HEADER}) and {@value #HOLD_MS}
 * ({@link RunPublisher}'s test knob).
 */
public final class CopyProducer {
  public static final String RUNS_TOPIC = "dr.stream.runs.topic";
  public static final String HEADER = "dr.stream.provenance.header";
  public static final String HOLD_MS = "dr.stream.runs.hold.ms";
  public static final String PROVENANCE_CLUSTER = "dr.stream.provenance.cluster";
  /** The provenance header a flow uses unless its `provenance.header` names another. */
  public static final String DEFAULT_PROVENANCE_HEADER = "__replicator_id";
  static final long IDLE_MS = 120_000;

  private static final Logger LOG = LoggerFactory.getLogger(CopyProducer.class);
  // Guarded by the class.
  private static final Map<Map<String, String>, CopyProducer> OPEN = new HashMap<>();
  private static ScheduledExecutorService janitor;

  private final Map<String, String> settings;
  private final Producer<byte[], byte[]> producer;
  private final RunPublisher publisher;
  private final Refusals refusals = new Refusals();
  private final ProvenanceWriter provenance;
  private final String cluster;
  private final String header;
  private final boolean writesProvenance;
  // Guarded by the class.
  private int users;
  private long idleSince;

  private CopyProducer(Map<String, String> settings) {
    this.settings = settings;
    String clusterId = settings.get(PROVENANCE_CLUSTER);
    writesProvenance = clusterId != null;
    cluster = clusterId == null ? "" : clusterId;
    provenance = new ProvenanceWriter(cluster);
    header = settings.getOrDefault(HEADER, DEFAULT_PROVENANCE_HEADER);
    String runsTopic = settings.get(RUNS_TOPIC);
    long holdMs = settings.get(HOLD_MS) == null ? 0 : Long.parseLong(settings.get(HOLD_MS));
    producer = new KafkaProducer<>(producerConfig(settings));
    publisher = runsTopic == null || runsTopic.isEmpty() ? null : new RunPublisher(runsTopic, settings, holdMs);
  }

  /** The Java producer's configuration: every setting but dr-stream's own, writing bytes as they are. */
  static Map<String, Object> producerConfig(Map<String, String> settings) {
    Map<String, Object> config = new HashMap<>();
    settings.forEach((k, v) -> {
      if (!k.startsWith("dr.stream.")) {
        config.put(k, v);
      }
    });
    config.put("key.serializer", "org.apache.kafka.common.serialization.ByteArraySerializer");
    config.put("value.serializer", "org.apache.kafka.common.serialization.ByteArraySerializer");
    return config;
  }

  /** This JVM's producer for {@code settings}, made at the first ask; give it back with {@link #release}. */
  public static CopyProducer acquire(Map<String, String> settings) {
    synchronized (CopyProducer.class) {
      CopyProducer open = OPEN.get(settings);
      if (open == null) {
        open = new CopyProducer(Map.copyOf(settings));
        OPEN.put(open.settings, open);
        if (janitor == null) {
          janitor = Executors.newSingleThreadScheduledExecutor(r -> {
            Thread t = new Thread(r, "dr-stream-copy-producers");
            t.setDaemon(true);
            return t;
          });
          janitor.scheduleWithFixedDelay(CopyProducer::closeIdle, IDLE_MS / 4, IDLE_MS / 4, TimeUnit.MILLISECONDS);
        }
      }
      open.users++;
      return open;
    }
  }

  /** The task that acquired it is done with it. */
  public void release() {
    synchronized (CopyProducer.class) {
      users--;
      if (users == 0) {
        idleSince = System.nanoTime();
      }
    }
  }

  private static void closeIdle() {
    Map<Map<String, String>, CopyProducer> idle = new HashMap<>();
    synchronized (CopyProducer.class) {
      for (Iterator<CopyProducer> i = OPEN.values().iterator(); i.hasNext(); ) {
        CopyProducer p = i.next();
        if (p.users == 0 && System.nanoTime() - p.idleSince > IDLE_MS * 1_000_000L) {
          idle.put(p.settings, p);
          i.remove();
        }
      }
    }
    idle.values().forEach(CopyProducer::close);
  }

  /** Closes every producer no task uses now; how many were open. For the end of a test's JVM use. */
  public static int closeUnused() {
    Map<Map<String, String>, CopyProducer> unused = new HashMap<>();
    int open;
    synchronized (CopyProducer.class) {
      open = OPEN.size();
      OPEN.values().removeIf(p -> {
        if (p.users == 0) {
          unused.put(p.settings, p);
          return true;
        }
        return false;
      });
    }
    unused.values().forEach(CopyProducer::close);
    return open;
  }

  private void close() {
    try {
      if (publisher != null) {
        publisher.close();
      }
    } finally {
      producer.close(Duration.ofSeconds(5));
    }
  }

  /** Whether each copy gets this hop's provenance header: {@link Copying#send} then fills the last slot. */
  public boolean writesProvenance() {
    return writesProvenance;
  }

  /** What one task writes through this producer. */
  public Copying copying() {
    return new Copying();
  }

  /**
   * One task's copies: sent as they come, acknowledged in the background, and the task's first
   * failed send kept to fail the task with at {@link #finish}.
   */
  public final class Copying {
    private volatile Exception failure;
    private boolean sent;

    private Copying() {}

    /**
     * Sends one copy of the source record {@code topic}-{@code partition}@{@code offset} (its topic's
     * UTF-8 name {@code topicName}) to {@code destTopic} ({@code destPartition} null: the producer's
     * partitioner chooses), with {@code timestamp} (epoch ms, null: the producer's clock) and
     * {@code headers}, whose last slot is left empty for this hop's provenance header when
     * {@link #writesProvenance}.
     */
    public void send(String destTopic, Integer destPartition, Long timestamp, byte[] key, byte[] value,
        Header[] headers, String topic, byte[] topicName, int partition, long offset) {
      if (writesProvenance) {
        headers[headers.length - 1] = new RecordHeader(header,
            provenance.provenance(topicName, partition, offset, System.currentTimeMillis()));
      }
      sent = true;
      producer.send(new ProducerRecord<>(destTopic, destPartition, timestamp, key, value, new RecordHeaders(headers)),
          new Sent(this, topic, partition, offset, timestamp == null ? -1 : timestamp));
    }

    void failed(Exception e) {
      if (failure == null) {
        failure = e;
      }
    }

    /**
     * Waits until every copy sent so far is acknowledged, fails with the first error a send of
     * this task got, then publishes the runs (a failed publication fails the task too).
     */
    public void finish() {
      rethrowFailure();
      if (!sent) {
        return;
      }
      producer.flush();
      rethrowFailure();
      if (publisher != null) {
        publisher.publishAtTaskEnd();
      }
    }

    /** A task that fails: what was acknowledged still enters the runs topic, as far as it can. */
    public void abandon() {
      if (!sent || publisher == null) {
        return;
      }
      try {
        producer.flush();
        publisher.publishAtTaskEnd();
      } catch (RuntimeException e) {
        LOG.warn("dr-stream: {} after a failed task; the flow rebuilds them from the destination at its next start",
            e.getMessage());
      }
    }

    private void rethrowFailure() {
      Exception e = failure;
      if (e instanceof RuntimeException r) {
        throw r;
      }
      if (e != null) {
        throw new IllegalStateException(e.toString(), e);
      }
    }
  }

  /** One copy's acknowledgement: into a run, or as the task's failure (and a refusal's origin). */
  private final class Sent implements Callback {
    private final Copying task;
    private final String topic;
    private final int partition;
    private final long offset;
    private final long timestamp;

    Sent(Copying task, String topic, int partition, long offset, long timestamp) {
      this.task = task;
      this.topic = topic;
      this.partition = partition;
      this.offset = offset;
      this.timestamp = timestamp;
    }

    @Override
    public void onCompletion(RecordMetadata metadata, Exception error) {
      if (error != null) {
        task.failed(error);
        refusals.failed(error, new CopyRuns.Origin(cluster, topic, partition, offset, timestamp),
            metadata == null ? "" : metadata.topic(), metadata == null ? -1 : metadata.partition());
        return;
      }
      if (publisher != null && metadata.hasOffset()) {
        publisher.acked(metadata.topic(), metadata.partition(), cluster, topic, partition, offset, timestamp,
            metadata.offset());
      }
    }
  }
}
