package io.drstream.kafka;

import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayDeque;
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
import org.apache.kafka.clients.producer.ProducerInterceptor;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.header.Header;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The one interceptor of the replicate query's sink producer: gives each copied record its source
 * record's timestamp, writes this hop's provenance header, and feeds the offset index from the
 * write path.
 *
 * <p>Stamp: Spark's Kafka sink (through 4.2) has no timestamp column, so the record path adds one
 * transient header, {@value #STAMP_HEADER}, to each record: the source record's timestamp,
 * partition, offset and topic in fixed-width binary ({@link OriginStamp}). {@code onSend} moves
 * the timestamp into the record's, drops the header and, when the flow writes provenance
 * ({@value #PROVENANCE_CLUSTER} names the source's cluster.id), puts this hop's provenance header
 * in its place, built here once rather than as text in every row of the record path. A record
 * leaves either unchanged (no stamp) or with the stamp replaced and every other header, the key,
 * value and partition untouched; a stamp too short to read leaves the timestamp to the producer,
 * as Kafka would.
 *
 * <p>Runs: the interceptor turns the producer's sends and acknowledgements into runs (origin
 * offsets -> destination offsets) and publishes them to the flow's runs topic on the destination.
 * {@code onSend} takes each record's origin from its stamp (from its newest provenance header,
 * {@link ProvenanceOrigin}, when the stamp names none) on the sending thread and queues it per
 * destination partition; the producer acknowledges a partition's records in the order they were
 * sent (idempotent, ordered retries), so {@code onAcknowledgement} pairs each acknowledgement
 * with the head of that queue. A failed send is dropped: only acknowledged records enter a run;
 * one the destination refused for the record itself has its origin attached to the error the task
 * fails with ({@link Refusals}), so the flow holds that partition there (with or without runs).
 *
 * <p>Publication: at the end of every Spark task that sent through this producer (after Spark's
 * writer flushed it, before the task reports success), and every {@value #DEFAULT_INTERVAL_MS} ms
 * within long tasks. A publication that fails fails the task and its runs go out with the next
 * one. So when a micro-batch commits, every run of its records is on the runs topic, and runs of
 * one partition reach the topic in destination order even when executors take turns writing it.
 * A crash between an acknowledgement and its publication loses only runs the flow rebuilds at
 * start from the destination's records.
 *
 * <p>Settings (from the producer's own configuration): {@value #RUNS_TOPIC} (none: no runs),
 * {@value #PROVENANCE_CLUSTER} (none: no provenance header), {@value #HEADER} (default
 * {@code __replicator_id}), and
 * {@value #HOLD_MS}, a test knob that delays each end-of-task publication and turns the periodic
 * one off, so a test can kill the flow between a write and its publication.
 */
public final class CopyInterceptor implements ProducerInterceptor<byte[], byte[]> {
  public static final String STAMP_HEADER = "__dr_stream_ts";
  public static final String RUNS_TOPIC = "dr.stream.runs.topic";
  public static final String HEADER = "dr.stream.provenance.header";
  public static final String HOLD_MS = "dr.stream.runs.hold.ms";
  public static final String PROVENANCE_CLUSTER = "dr.stream.provenance.cluster";
  /** The provenance header a flow uses unless its `provenance.header` names another. */
  public static final String DEFAULT_PROVENANCE_HEADER = "__replicator_id";
  static final long DEFAULT_INTERVAL_MS = 500;

  private static final Logger LOG = LoggerFactory.getLogger(CopyInterceptor.class);
  private static final CopyRuns.Origin NONE = new CopyRuns.Origin("", "", -1, -1, -1);

  // Origins sent and not yet acknowledged, by destination topic and partition (an index, not a
  // key object per record); guarded by itself.
  private final Map<String, List<ArrayDeque<CopyRuns.Origin>>> sent = new HashMap<>();
  private final Runnable publishAtTaskEnd = this::publishAtTaskEnd;
  private final CopyRuns runs = new CopyRuns();
  private final ProvenanceOrigin origins = new ProvenanceOrigin();
  private OriginStamp stamps = new OriginStamp("");
  private boolean writesProvenance;
  private final Refusals refusals = new Refusals();
  private final TaskEnd taskEnd = new TaskEnd();
  private final Object publishing = new Object();
  private final Map<String, Object> publisherConfig = new HashMap<>();
  private String runsTopic;
  private String header = DEFAULT_PROVENANCE_HEADER;
  private long holdMs;
  private Producer<byte[], byte[]> publisher;
  private ScheduledExecutorService timer;

  @Override
  public void configure(Map<String, ?> configs) {
    Object topic = configs.get(RUNS_TOPIC);
    runsTopic = topic == null || topic.toString().isEmpty() ? null : topic.toString();
    if (configs.get(HEADER) != null) {
      header = configs.get(HEADER).toString();
    }
    Object cluster = configs.get(PROVENANCE_CLUSTER);
    writesProvenance = cluster != null;
    stamps = new OriginStamp(cluster == null ? "" : cluster.toString());
    holdMs = configs.get(HOLD_MS) == null ? 0 : Long.parseLong(configs.get(HOLD_MS).toString());
    publisherConfig.putAll(publisherConfig(configs));
    if (runsTopic != null && holdMs == 0) {
      timer = Executors.newSingleThreadScheduledExecutor(r -> {
        Thread t = new Thread(r, "dr-stream-runs-publisher");
        t.setDaemon(true);
        return t;
      });
      timer.scheduleWithFixedDelay(this::publishQuietly, DEFAULT_INTERVAL_MS, DEFAULT_INTERVAL_MS,
          TimeUnit.MILLISECONDS);
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

  @Override
  public ProducerRecord<byte[], byte[]> onSend(ProducerRecord<byte[], byte[]> record) {
    Header stampHeader = record.headers().lastHeader(STAMP_HEADER);
    byte[] stamp = stampHeader == null ? null : stampHeader.value();
    CopyRuns.Origin stamped = stamps.origin(stamp);
    ProducerRecord<byte[], byte[]> out = stampHeader == null ? record : withStamp(record, stamp);
    if (out.partition() == null || runsTopic == null && stamped == null) {
      return out;
    }
    // Without a stamp that names it, the origin is the newest provenance header's (a record a
    // flow of another version wrote).
    CopyRuns.Origin origin = stamped != null ? stamped : origin(out);
    synchronized (sent) {
      queue(out.topic(), out.partition()).add(origin);
    }
    if (runsTopic != null) {
      taskEnd.onEndOfCurrentTask(publishAtTaskEnd);
    }
    return out;
  }

  /**
   * The record with its stamp moved into its timestamp and, when the flow writes provenance and
   * the stamp names the source record, this hop's provenance header in the stamp's place (the
   * newest header, as every reader expects). Every other header, the key, value and partition are
   * untouched.
   */
  private ProducerRecord<byte[], byte[]> withStamp(ProducerRecord<byte[], byte[]> record, byte[] stamp) {
    byte[] provenance = writesProvenance && OriginStamp.namesOrigin(stamp)
        ? stamps.provenance(stamp, System.currentTimeMillis()) : null;
    return restamped(record, stamp, header, provenance);
  }

  /** The record with its stamp moved into its timestamp (the record itself without a stamp). */
  public static ProducerRecord<byte[], byte[]> stamped(ProducerRecord<byte[], byte[]> record) {
    Header stamp = record.headers().lastHeader(STAMP_HEADER);
    return stamp == null ? record : restamped(record, stamp.value(), null, null);
  }

  /**
   * The record with its stamp's timestamp, the stamp removed and {@code provenance}, when not
   * null, added under {@code key} as its newest header.
   */
  private static ProducerRecord<byte[], byte[]> restamped(ProducerRecord<byte[], byte[]> record, byte[] stamp,
      String key, byte[] provenance) {
    // The header list is changed in place: the sink builds a new record (and list) per row and
    // does not read it again, and the producer makes the list read-only only after the
    // interceptors. Only the record object is new, since its timestamp cannot be changed.
    record.headers().remove(STAMP_HEADER);
    if (provenance != null) {
      record.headers().add(key, provenance);
    }
    return new ProducerRecord<>(record.topic(), record.partition(), OriginStamp.timestamp(stamp), record.key(),
        record.value(), record.headers());
  }

  /** The record's newest provenance entry, or NONE when it has none that parses. */
  private CopyRuns.Origin origin(ProducerRecord<byte[], byte[]> record) {
    Header newest = record.headers().lastHeader(header);
    CopyRuns.Origin origin = newest == null ? null
        : origins.read(newest.value(), record.timestamp() == null ? -1 : record.timestamp());
    return origin == null ? NONE : origin;
  }

  @Override
  public void onAcknowledgement(RecordMetadata metadata, Exception exception) {
    if (metadata == null) {
      return;
    }
    CopyRuns.Origin origin;
    synchronized (sent) {
      origin = sentFirst(metadata.topic(), metadata.partition());
    }
    if (exception != null) {
      refusals.failed(exception, origin, metadata.topic(), metadata.partition());
      return;
    }
    if (runsTopic == null || origin == null || origin == NONE || !metadata.hasOffset()) {
      return;
    }
    runs.acked(metadata.topic(), metadata.partition(), origin, metadata.offset(), System.currentTimeMillis());
  }

  /**
   * The oldest origin sent and not yet acknowledged of one destination partition, taken off its
   * queue; null when none waits (without runs, a flow whose stamps name no origin queues none).
   * Callers hold {@code sent}.
   */
  private CopyRuns.Origin sentFirst(String topic, int partition) {
    List<ArrayDeque<CopyRuns.Origin>> partitions = sent.get(topic);
    return partitions == null || partition < 0 || partition >= partitions.size() ? null
        : partitions.get(partition).poll();
  }

  /** The queue of sent origins of one destination partition; callers hold {@code sent}. */
  private ArrayDeque<CopyRuns.Origin> queue(String topic, int partition) {
    List<ArrayDeque<CopyRuns.Origin>> partitions = sent.computeIfAbsent(topic, t -> new ArrayList<>());
    while (partitions.size() <= partition) {
      partitions.add(new ArrayDeque<>());
    }
    return partitions.get(partition);
  }

  private void publishAtTaskEnd() {
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
          publisher = new KafkaProducer<>(publisherConfig);
        }
        for (CopyRuns.Version v : taken) {
          futures.add(publisher.send(new ProducerRecord<>(runsTopic, 0,
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
        throw new IllegalStateException("offset runs not published to " + runsTopic + ": " + failure, failure);
      }
    }
  }

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
