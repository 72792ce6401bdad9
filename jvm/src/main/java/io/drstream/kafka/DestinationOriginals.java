package io.drstream.kafka;

import java.io.Serializable;
import java.nio.ByteBuffer;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import java.time.Duration;
import java.util.Arrays;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.concurrent.ConcurrentHashMap;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetOutOfRangeException;
import org.apache.kafka.common.PartitionInfo;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Whether the destination holds the record a cycle claim names as the original: the record at
 * the claimed topic, partition and offset there has the claiming record's key and value. The claim is then true or harmless (the destination already holds that record), so
 * the record may be filtered; otherwise it is copied. This is what confirms a claim no run does
 * (the runs of copies older than a minute or two are trimmed: a flow catching up, a failback).
 *
 * <p>One per cluster per JVM (executor tasks share it), with a consumer of its own (assigned, no
 * group, committed records only). A claim that misses what was read fetches up to a few hundred
 * records from the claimed offset on, kept as digests, so the claims of a run of returning records
 * cost one fetch per few hundred. What it keeps is bounded: {@value #WINDOWS} partitions' windows.
 *
 * <p>Invariants: {@link #match} never throws; a destination that cannot be read gives
 * {@link Match#UNREAD}; an offset at or past the partition's end gives {@link Match#NEVER}.
 */
public final class DestinationOriginals {
  private static final Logger LOG = LoggerFactory.getLogger(DestinationOriginals.class);
  static final int WINDOWS = 64;
  private static final long FETCH_MS = 5_000L;
  private static final long UNREADABLE_FOR_MS = 30_000L;
  private static final Map<String, DestinationOriginals> OPEN = new ConcurrentHashMap<>();

  /**
   * SAME: the destination holds the record; DIFFERENT: another record is there; NEVER: the
   * partition never reached that offset; GONE: nothing is there any more (retention deleted it,
   * compaction removed it, or a transaction marker sits there), so what was there is unknown.
   */
  public enum Match { SAME, DIFFERENT, NEVER, GONE, UNREAD }

  /** The destination's Java client settings: what a task carries. */
  public record Source(Map<String, String> clientConfig) implements Serializable {
    public Source {
      clientConfig = Map.copyOf(clientConfig);
    }

    /** This JVM's reader of the destination's records. */
    public DestinationOriginals originals() {
      return OPEN.computeIfAbsent(new TreeMap<>(clientConfig).toString(), k -> new DestinationOriginals(this));
    }

    @Override
    public String toString() {
      return "DestinationOriginals.Source(" + clientConfig.get("bootstrap.servers") + ")";
    }
  }

  /** Digests of the records at offsets [from, to) of one partition; an offset without one holds no record. */
  private record Window(long from, long to, Map<Long, byte[]> digests) {}

  private final Source source;
  private KafkaConsumer<byte[], byte[]> consumer;
  private long unreadableUntil = Long.MIN_VALUE;
  private final LinkedHashMap<TopicPartition, Window> windows = new LinkedHashMap<>(16, 0.75f, true) {
    @Override
    protected boolean removeEldestEntry(Map.Entry<TopicPartition, Window> eldest) {
      return size() > WINDOWS;
    }
  };

  private DestinationOriginals(Source source) {
    this.source = source;
    Runtime.getRuntime().addShutdownHook(new Thread(this::close, "dr-stream-destination-originals-close"));
  }

  /**
   * The digest a record is compared by: its key and value. Not its timestamp: a topic with
   * LogAppendTime stamps each copy anew, and a record equal in key and value to the original it
   * names is harmless to skip whatever its time.
   */
  public static byte[] digest(byte[] key, byte[] value) {
    try {
      MessageDigest sha = MessageDigest.getInstance("SHA-256");
      feed(sha, key);
      feed(sha, value);
      return sha.digest();
    } catch (NoSuchAlgorithmException e) {
      throw new IllegalStateException("every JVM has SHA-256", e);
    }
  }

  private static void feed(MessageDigest sha, byte[] bytes) {
    // the length first, so a null, an empty array and a shifted boundary all digest apart
    sha.update(ByteBuffer.allocate(Integer.BYTES).putInt(bytes == null ? -1 : bytes.length).array());
    if (bytes != null) {
      sha.update(bytes);
    }
  }

  /** Whether the destination's record at {@code topic}/{@code partition}@{@code offset} has this digest. */
  public synchronized Match match(String topic, int partition, long offset, byte[] digest) {
    if (offset < 0 || partition < 0) {
      return Match.NEVER;
    }
    TopicPartition tp = new TopicPartition(topic, partition);
    Window w = windows.get(tp);
    if (w == null || offset < w.from() || offset >= w.to()) {
      long now = System.currentTimeMillis();
      if (now < unreadableUntil) {
        return Match.UNREAD;
      }
      try {
        if (offset >= end(tp)) {
          return Match.NEVER;
        }
        w = fetch(tp, offset);
      } catch (RuntimeException e) {
        LOG.warn("cannot read {} on {} ({}): cycle claims naming it are taken unchecked for {} s", tp, source,
            e.toString(), UNREADABLE_FOR_MS / 1000);
        unreadableUntil = now + UNREADABLE_FOR_MS;
        close();
        return Match.UNREAD;
      }
      if (w == null) {
        return Match.GONE;
      }
      windows.put(tp, w);
    }
    byte[] held = w.digests().get(offset);
    return held == null ? Match.GONE : Arrays.equals(held, digest) ? Match.SAME : Match.DIFFERENT;
  }

  /** The partition's end; 0 for a partition the topic does not have (a claim may name any). */
  private long end(TopicPartition tp) {
    if (consumer == null) {
      consumer = new KafkaConsumer<>(consumerConfig(source.clientConfig()), new ByteArrayDeserializer(),
          new ByteArrayDeserializer());
    }
    List<PartitionInfo> partitions = consumer.partitionsFor(tp.topic(), Duration.ofMillis(FETCH_MS));
    if (partitions == null || partitions.stream().noneMatch(p -> p.partition() == tp.partition())) {
      return 0;
    }
    Long end = consumer.endOffsets(List.of(tp), Duration.ofMillis(FETCH_MS)).get(tp);
    return end == null ? 0 : end;
  }

  /** The window from {@code offset} (below the partition's end) on; null when nothing is there any more. */
  private Window fetch(TopicPartition tp, long offset) {
    consumer.assign(List.of(tp));
    consumer.seek(tp, offset);
    Map<Long, byte[]> digests = new HashMap<>();
    long deadline = System.currentTimeMillis() + FETCH_MS;
    long to = -1;
    try {
      while (to < 0 && System.currentTimeMillis() < deadline) {
        for (ConsumerRecord<byte[], byte[]> r : consumer.poll(Duration.ofMillis(200)).records(tp)) {
          digests.put(r.offset(), digest(r.key(), r.value()));
          to = Math.max(to, r.offset() + 1);
        }
        if (to < 0 && consumer.position(tp) > offset) {
          to = consumer.position(tp);  // markers or compacted records only: nothing there
        }
      }
    } catch (OffsetOutOfRangeException e) {
      return null;  // below the log start: retention deleted it
    }
    return to < 0 ? null : new Window(offset, to, digests);
  }

  /** The cluster's connection and security settings, reading committed records without a group. */
  static Map<String, Object> consumerConfig(Map<String, String> clientConfig) {
    Map<String, Object> config = WrittenCopies.readerConfig(clientConfig, "dr-stream-destination-originals");
    config.put("auto.offset.reset", "none");
    config.put("isolation.level", "read_committed");
    config.put("max.poll.records", "500");
    return config;
  }

  private synchronized void close() {
    if (consumer != null) {
      try {
        consumer.close(Duration.ofSeconds(5));
      } catch (RuntimeException e) {
        LOG.debug("closing the originals reader on {}", source, e);
      }
      consumer = null;
      windows.clear();
    }
  }
}
