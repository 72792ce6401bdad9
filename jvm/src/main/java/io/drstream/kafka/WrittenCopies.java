package io.drstream.kafka;

import java.io.Serializable;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;
import java.util.concurrent.ConcurrentHashMap;
import java.util.stream.Collectors;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.common.PartitionInfo;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Whether a record on a cluster is a copy a dr-stream flow wrote there, as the runs those flows
 * publish on it ({@code __dr_stream_runs.*}) say: the evidence a cycle claim is held to before a
 * record is filtered. A provenance header is anybody's to write; only flows may write the runs
 * topics, so a run, not a header, is what proves a record came back.
 *
 * <p>One per cluster per JVM (executor tasks share it), reading every runs topic of the cluster
 * from its start with a consumer of its own (assigned, no group). A record whose run is not read
 * yet waits for it: the writing flow publishes a batch's runs when its task ends, after the copy
 * is already readable. It waits at most {@code waitMs} per partition, and after a wait that found
 * nothing, no record of that partition waits again until a new run of it arrives, so forged
 * headers stall a partition once, not once each. A cluster whose runs cannot be read (no READ on
 * {@code __dr_stream_runs.*}, a broker down) gives {@link Verdict#UNREAD}: the claim is trusted
 * as before, and counted apart, so a missing ACL never makes every returning record loop.
 *
 * <p>Invariants: {@link #verdict} never throws; a copy's verdict is {@link Verdict#COPY} once
 * its run is read; what is kept follows what the runs topics keep ({@link RunLedger}).
 */
public final class WrittenCopies {
  private static final Logger LOG = LoggerFactory.getLogger(WrittenCopies.class);
  public static final String RUNS_PREFIX = "__dr_stream_runs.";
  // Runs read this long ago stay after their topic trimmed them: a reader lagging the writer less finds them.
  static final long KEEP_MS = 5 * 60 * 1000L;
  private static final long LIST_EVERY_MS = 5_000L;
  private static final long FORGET_EVERY_MS = 10_000L;
  private static final long UNREADABLE_FOR_MS = 30_000L;
  private static final long POLL_MS = 100L;
  private static final Map<String, WrittenCopies> OPEN = new ConcurrentHashMap<>();

  /** BEYOND: below every run held of the record's origin and partition, so the runs cannot tell. */
  public enum Verdict { COPY, NOT_A_COPY, BEYOND, UNREAD }

  /** Where the runs are read (the cluster's Java client settings) and how long a record waits: what a task carries. */
  public record Source(Map<String, String> clientConfig, long waitMs) implements Serializable {
    public Source {
      clientConfig = Map.copyOf(clientConfig);
    }

    /** This JVM's reader of the cluster's runs. */
    public WrittenCopies copies() {
      return OPEN.computeIfAbsent(new TreeMap<>(clientConfig).toString(), k -> new WrittenCopies(this));
    }

    @Override
    public String toString() {
      return "WrittenCopies.Source(" + clientConfig.get("bootstrap.servers") + ", waitMs=" + waitMs + ")";
    }
  }

  private record Key(String cluster, String topic, int partition) {}

  private final Source source;
  private final RunLedger ledger = new RunLedger(KEEP_MS);
  private KafkaConsumer<byte[], byte[]> consumer;
  private Set<TopicPartition> assigned = Set.of();
  private long listedAt;  // 0: never, as long ago as it gets
  private long forgotAt;
  private long readAt;
  private long unreadableUntil = Long.MIN_VALUE;
  // Per partition of a claim: when its first undecided record started waiting, and the ledger's
  // version when a wait ran out (no record waits again before a newer run arrives).
  private final Map<Key, Long> waitingSince = new HashMap<>();
  private final Map<Key, Long> gaveUpAt = new HashMap<>();

  private WrittenCopies(Source source) {
    this.source = source;
    Runtime.getRuntime().addShutdownHook(new Thread(this::close, "dr-stream-written-copies-close"));
  }

  /**
   * Whether the record at {@code offset} of {@code topic}/{@code partition}, whose newest entry is
   * {@code newest}, is that copy. Without {@code waitForRun} (a claim the destination can confirm
   * instead) a run not read yet is not waited for: anything but a copy is {@link Verdict#NOT_A_COPY}.
   */
  public synchronized Verdict verdict(ProvenanceEntry newest, String topic, int partition, long offset,
      boolean waitForRun) {
    Key key = new Key(newest.cluster(), topic, partition);
    long now = System.currentTimeMillis();
    RunLedger.Verdict v = ledger.verdict(newest, topic, partition, offset);
    while (v == RunLedger.Verdict.UNDECIDED) {
      if (!readOn(now)) {
        return Verdict.UNREAD;
      }
      v = ledger.verdict(newest, topic, partition, offset);
      if (v != RunLedger.Verdict.UNDECIDED || !waitForRun) {
        break;
      }
      long version = ledger.version(newest.cluster(), topic, partition);
      Long gaveUp = gaveUpAt.get(key);
      if (gaveUp != null && gaveUp == version) {
        return Verdict.NOT_A_COPY;
      }
      long since = waitingSince.computeIfAbsent(key, k -> System.currentTimeMillis());
      now = System.currentTimeMillis();
      if (now - since >= source.waitMs()) {
        gaveUpAt.put(key, version);
        waitingSince.remove(key);
        LOG.info("no run on {} holds {}-{}@{} after {} ms: taken as no copy", source, topic, partition, offset,
            source.waitMs());
        return Verdict.NOT_A_COPY;
      }
      try {
        wait(POLL_MS);
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
        return Verdict.NOT_A_COPY;
      }
      now = System.currentTimeMillis();
    }
    waitingSince.remove(key);
    return switch (v) {
      case COPY -> Verdict.COPY;
      case BEYOND -> waitForRun ? Verdict.BEYOND : Verdict.NOT_A_COPY;
      default -> Verdict.NOT_A_COPY;
    };
  }

  /** Reads every runs topic to its end; false while the cluster's runs cannot be read. */
  private boolean readOn(long now) {
    if (now < unreadableUntil) {
      return false;
    }
    if (now - readAt < POLL_MS) {
      return true;  // read just now: a run of each record since then would not be published yet either
    }
    readAt = now;
    try {
      if (consumer == null) {
        consumer = new KafkaConsumer<>(consumerConfig(source.clientConfig()), new ByteArrayDeserializer(),
            new ByteArrayDeserializer());
      }
      if (now - listedAt >= LIST_EVERY_MS) {
        assign();
        listedAt = now;
      }
      if (assigned.isEmpty()) {
        return true;
      }
      Map<TopicPartition, Long> ends = consumer.endOffsets(assigned, Duration.ofSeconds(10));
      long deadline = System.currentTimeMillis() + 10_000L;
      while (behind(ends) && System.currentTimeMillis() < deadline) {
        for (ConsumerRecord<byte[], byte[]> r : consumer.poll(Duration.ofMillis(POLL_MS))) {
          ledger.add(r.topic(), r.offset(), r.value(), now);
        }
      }
      if (now - forgotAt >= FORGET_EVERY_MS) {
        Map<String, Long> starts = new HashMap<>();
        consumer.beginningOffsets(assigned, Duration.ofSeconds(10)).forEach((tp, o) -> starts.put(tp.topic(), o));
        ledger.forget(starts, now);
        forgotAt = now;
      }
      return true;
    } catch (RuntimeException e) {
      LOG.warn("cannot read the runs on {} ({}): cycle claims there are trusted unchecked for {} s", source,
          e.toString(), UNREADABLE_FOR_MS / 1000);
      unreadableUntil = now + UNREADABLE_FOR_MS;
      close();
      return false;
    }
  }

  private boolean behind(Map<TopicPartition, Long> ends) {
    for (Map.Entry<TopicPartition, Long> e : ends.entrySet()) {
      if (consumer.position(e.getKey(), Duration.ofSeconds(10)) < e.getValue()) {
        return true;
      }
    }
    return false;
  }

  private void assign() {
    List<TopicPartition> runsTopics = new ArrayList<>();
    for (Map.Entry<String, List<PartitionInfo>> t : consumer.listTopics(Duration.ofSeconds(10)).entrySet()) {
      if (t.getKey().startsWith(RUNS_PREFIX)) {
        t.getValue().forEach(p -> runsTopics.add(new TopicPartition(p.topic(), p.partition())));
      }
    }
    Set<TopicPartition> now = runsTopics.stream().collect(Collectors.toUnmodifiableSet());
    if (!now.equals(assigned)) {
      consumer.assign(now);
      assigned = now;
    }
  }

  /** The cluster's connection and security settings, reading bytes from the start without a group. */
  static Map<String, Object> consumerConfig(Map<String, String> clientConfig) {
    Map<String, Object> config = readerConfig(clientConfig, "dr-stream-written-copies");
    config.put("auto.offset.reset", "earliest");
    config.put("isolation.level", "read_uncommitted");
    return config;
  }

  /** A reader of the cluster these settings reach that joins no group and commits nothing. */
  static Map<String, Object> readerConfig(Map<String, String> clientConfig, String clientId) {
    Map<String, Object> config = new HashMap<>(clientConfig);
    config.remove("group.id");
    config.remove("group.instance.id");
    config.put("enable.auto.commit", "false");
    // a claim names topics, and looking one up must never create it
    config.put("allow.auto.create.topics", "false");
    config.put("client.id", clientId);
    return config;
  }

  private synchronized void close() {
    if (consumer != null) {
      try {
        consumer.close(Duration.ofSeconds(5));
      } catch (RuntimeException e) {
        LOG.debug("closing the runs reader on {}", source, e);
      }
      consumer = null;
      assigned = Set.of();
      listedAt = 0L;
    }
  }
}
