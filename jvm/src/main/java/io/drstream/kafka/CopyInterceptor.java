package io.drstream.kafka;

import java.nio.ByteBuffer;
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
 * record's timestamp, and feeds the offset index from the write path.
 *
 * <p>Timestamp: Spark's Kafka sink (through 4.2) has no timestamp column, so the record path
 * carries the source timestamp in a transient header, {@value #STAMP_HEADER}, whose value is the
 * epoch milliseconds as 8 bytes, big-endian. {@code onSend} moves it into the record's timestamp
 * and drops the header. A record leaves either unchanged (no stamp) or with the stamp removed and
 * every other header, the key, value and partition untouched; a stamp that is not 8 bytes leaves
 * the timestamp to the producer, as Kafka would. A flow without provenance (so without runs) adds
 * its source record's topic, partition and offset to the stamp, the one way a refused record of
 * it can be named ({@link #stampedOrigin}).
 *
 * <p>Runs: the interceptor turns the producer's sends and acknowledgements into runs (origin
 * offsets -> destination offsets) and publishes them to the flow's runs topic on the destination.
 * {@code onSend} reads each record's newest provenance header (origin cluster, topic,
 * partition, offset; {@link ProvenanceOrigin}) on the sending thread and queues it per destination partition; the
 * producer acknowledges a partition's records in the order they were sent (idempotent, ordered
 * retries), so {@code onAcknowledgement} pairs each acknowledgement with the head of that queue.
 * A failed send is dropped: only acknowledged records enter a run; one the destination refused
 * for the record itself has its origin attached to the error the task fails with
 * ({@link Refusals}), so the flow holds that partition there.
 *
 * <p>Publication: at the end of every Spark task that sent through this producer (after Spark's
 * writer flushed it, before the task reports success), and every {@value #DEFAULT_INTERVAL_MS} ms
 * within long tasks. A publication that fails fails the task and its runs go out with the next
 * one. So when a micro-batch commits, every run of its records is on the runs topic, and runs of
 * one partition reach the topic in destination order even when executors take turns writing it.
 * A crash between an acknowledgement and its publication loses only runs the flow rebuilds at
 * start from the destination's records.
 *
 * <p>Settings (from the producer's own configuration): {@value #RUNS_TOPIC} (none: the
 * interceptor does nothing), {@value #HEADER} (default {@code __replicator_id}), and
 * {@value #HOLD_MS}, a test knob that delays each end-of-task publication and turns the periodic
 * one off, so a test can kill the flow between a write and its publication.
 */
public final class CopyInterceptor implements ProducerInterceptor<byte[], byte[]> {
  public static final String STAMP_HEADER = "__dr_stream_ts";
  public static final String RUNS_TOPIC = "dr.stream.runs.topic";
  public static final String HEADER = "dr.stream.provenance.header";
  public static final String HOLD_MS = "dr.stream.runs.hold.ms";
  /** The provenance header a flow uses unless its `provenance.header` names another. */
  public static final String DEFAULT_PROVENANCE_HEADER = "__replicator_id";
  static final long DEFAULT_INTERVAL_MS = 500;
  /** The fixed part of an origin stamp: timestamp, partition, offset; the topic follows. */
  static final int ORIGIN_STAMP_BYTES = Long.BYTES + Integer.BYTES + Long.BYTES;

  private static final Logger LOG = LoggerFactory.getLogger(CopyInterceptor.class);
  private static final CopyRuns.Origin NONE = new CopyRuns.Origin("", "", -1, -1, -1);

  // Origins sent and not yet acknowledged, by destination topic and partition (an index, not a
  // key object per record); guarded by itself.
  private final Map<String, List<ArrayDeque<CopyRuns.Origin>>> sent = new HashMap<>();
  private final Runnable publishAtTaskEnd = this::publishAtTaskEnd;
  private final CopyRuns runs = new CopyRuns();
  private final ProvenanceOrigin origins = new ProvenanceOrigin();
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
    holdMs = configs.get(HOLD_MS) == null ? 0 : Long.parseLong(configs.get(HOLD_MS).toString());
    for (Map.Entry<String, ?> e : configs.entrySet()) {
      String k = e.getKey();
      boolean own = k.startsWith("dr.stream.") || k.equals("interceptor.classes") || k.equals("client.id")
          || k.equals("transactional.id") || k.endsWith(".serializer") || k.equals("partitioner.class");
      if (!own && e.getValue() != null) {
        publisherConfig.put(k, e.getValue());
      }
    }
    publisherConfig.put("key.serializer", "org.apache.kafka.common.serialization.ByteArraySerializer");
    publisherConfig.put("value.serializer", "org.apache.kafka.common.serialization.ByteArraySerializer");
    publisherConfig.put("acks", "all");
    publisherConfig.put("enable.idempotence", "true");
    publisherConfig.put("linger.ms", "0");
    publisherConfig.put("delivery.timeout.ms", "30000");
    publisherConfig.put("request.timeout.ms", "10000");
    publisherConfig.put("client.id", "dr-stream-runs-" + configs.get("client.id"));
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

  @Override
  public ProducerRecord<byte[], byte[]> onSend(ProducerRecord<byte[], byte[]> record) {
    if (runsTopic == null) {
      // no offset index: only a refused record's origin is wanted, from the stamp when it has one
      Header stamp = record.headers().lastHeader(STAMP_HEADER);
      CopyRuns.Origin origin = stamp == null ? null : stampedOrigin(stamp.value());
      record = stamped(record);
      if (origin != null && record.partition() != null) {
        synchronized (sent) {
          queue(record.topic(), record.partition()).add(origin);
        }
      }
      return record;
    }
    record = stamped(record);
    if (record.partition() == null) {
      return record;
    }
    CopyRuns.Origin origin = origin(record);
    synchronized (sent) {
      queue(record.topic(), record.partition()).add(origin);
    }
    taskEnd.onEndOfCurrentTask(publishAtTaskEnd);
    return record;
  }

  /** The record with its stamp moved into its timestamp (the record itself without a stamp). */
  public static ProducerRecord<byte[], byte[]> stamped(ProducerRecord<byte[], byte[]> record) {
    Header stamp = record.headers().lastHeader(STAMP_HEADER);
    if (stamp == null) {
      return record;
    }
    // The header is removed in place: the sink builds a new record (and header list) per row and
    // does not read it again, and the producer makes the list read-only only after the
    // interceptors. Only the record object is new, since its timestamp cannot be changed.
    record.headers().remove(STAMP_HEADER);
    return new ProducerRecord<>(
        record.topic(), record.partition(), timestamp(stamp.value()), record.key(), record.value(), record.headers());
  }

  /**
   * The stamp's epoch milliseconds; null (the producer's own time) for a value that is neither 8
   * bytes long nor an origin stamp ({@link #stampedOrigin}).
   */
  static Long timestamp(byte[] value) {
    return value == null || value.length != Long.BYTES && value.length < ORIGIN_STAMP_BYTES ? null
        : ByteBuffer.wrap(value).getLong();
  }

  /**
   * The source record's topic, partition and offset, which a flow without provenance adds to its
   * stamp so that a refused record can still be named: after the 8 bytes of the timestamp, the
   * partition (4 bytes), the offset (8 bytes), then the topic in UTF-8, all big-endian. Null for
   * a stamp of the timestamp alone.
   */
  static CopyRuns.Origin stampedOrigin(byte[] value) {
    if (value == null || value.length <= ORIGIN_STAMP_BYTES) {
      return null;
    }
    ByteBuffer buffer = ByteBuffer.wrap(value);
    long timestamp = buffer.getLong();
    int partition = buffer.getInt();
    long offset = buffer.getLong();
    String topic = new String(value, ORIGIN_STAMP_BYTES, value.length - ORIGIN_STAMP_BYTES, StandardCharsets.UTF_8);
    return new CopyRuns.Origin("", topic, partition, offset, timestamp);
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
