package io.drstream.kafka;

import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.Collection;
import java.util.HashMap;
import java.util.HashSet;
import java.util.Iterator;
import java.util.List;
import java.util.Map;
import java.util.Set;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndTimestamp;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.header.Header;
import org.apache.kafka.common.record.TimestampType;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;

/**
 * Reads one partition another replicator copied, and its source, for {@link CopyMatcher}: the
 * destination from its log start to the end it had when the walk began, the source from a little
 * before the first copy's timestamp (or its log start). Both are read committed, with consumers of
 * their own (assigned, no group), closed before it returns. Runs in the driver's JVM, so that no
 * record crosses into Python: what returns is one JSON document of runs and counts.
 *
 * <p>A destination whose end moved while it was read is said ({@code "grew": true}): the other
 * replicator is still writing, and what was matched is not where copying can resume.
 */
public final class AdoptedCopies {
  private static final Duration POLL = Duration.ofMillis(500);
  private static final long IDLE_MS = 30_000L;
  // ranges listed per partition (the counts cover all of them)
  private static final int RANGES_SHOWN = 100;

  private AdoptedCopies() {}

  /**
   * The walk of {@code destTopic[partition]} against {@code sourceTopic[partition]}. {@code
   * ignoredHeaders}: header keys the other replicator adds to its copies (left out of both sides'
   * digests).
   */
  public static String walk(Map<String, String> sourceClient, Map<String, String> destClient, String sourceTopic,
      String destTopic, int partition, List<String> ignoredHeaders, int lookBehind, int lookAhead) {
    Set<String> ignored = new HashSet<>(ignoredHeaders);
    TopicPartition dest = new TopicPartition(destTopic, partition);
    TopicPartition origin = new TopicPartition(sourceTopic, partition);
    try (KafkaConsumer<byte[], byte[]> destination = consumer(destClient);
        KafkaConsumer<byte[], byte[]> source = consumer(sourceClient)) {
      destination.assign(List.of(dest));
      source.assign(List.of(origin));
      long destStart = destination.beginningOffsets(List.of(dest)).get(dest);
      long destEnd = destination.endOffsets(List.of(dest)).get(dest);
      long sourceStart = source.beginningOffsets(List.of(origin)).get(origin);
      long sourceEnd = source.endOffsets(List.of(origin)).get(origin);
      destination.seek(dest, destStart);
      Reader copies = new Reader(destination, dest, destEnd);
      ConsumerRecord<byte[], byte[]> first = copies.next();
      source.seek(origin, firstSourceOffset(source, origin, first, sourceStart, sourceEnd, lookBehind));
      Reader originals = new Reader(source, origin, sourceEnd);
      CopyMatcher matcher = new CopyMatcher(() -> {
        ConsumerRecord<byte[], byte[]> r = originals.next();
        return r == null ? null : new CopyMatcher.Rec(r.offset(), digest(r, ignored), r.timestamp());
      }, lookBehind, lookAhead);
      long read = 0;
      for (ConsumerRecord<byte[], byte[]> r = first; r != null; r = copies.next()) {
        matcher.copy(r.offset(), digest(r, ignored), r.timestamp(), r.timestampType() == TimestampType.CREATE_TIME);
        read++;
      }
      boolean grew = destination.endOffsets(List.of(dest)).get(dest) != destEnd;
      return report(matcher, destStart, destEnd, sourceStart, sourceEnd, read, copies.stoppedShort, grew);
    }
  }

  /**
   * Where the source is read from: {@code lookBehind} records before the first source record at or
   * after the first copy's timestamp (a copy keeps its source's CreateTime), or the log start.
   */
  private static long firstSourceOffset(KafkaConsumer<byte[], byte[]> source, TopicPartition origin,
      ConsumerRecord<byte[], byte[]> first, long start, long end, int lookBehind) {
    if (first == null || first.timestampType() != TimestampType.CREATE_TIME || first.timestamp() < 0) {
      return start;
    }
    Map<TopicPartition, OffsetAndTimestamp> found = source.offsetsForTimes(Map.of(origin, first.timestamp()));
    OffsetAndTimestamp at = found.get(origin);
    long offset = at == null ? end : at.offset();
    return Math.max(start, offset - lookBehind);
  }

  private static KafkaConsumer<byte[], byte[]> consumer(Map<String, String> client) {
    Map<String, Object> config = new HashMap<>(client);
    config.remove("group.id");
    config.put("enable.auto.commit", "false");
    config.put("isolation.level", "read_committed");
    config.put("auto.offset.reset", "earliest");
    config.put("max.poll.records", "5000");
    config.putIfAbsent("client.id", "dr-stream-adopt");
    return new KafkaConsumer<>(config, new ByteArrayDeserializer(), new ByteArrayDeserializer());
  }

  /** The key, value and headers (less those ignored) as one digest. */
  static long digest(ConsumerRecord<byte[], byte[]> r, Set<String> ignored) {
    List<byte[]> parts = new ArrayList<>();
    parts.add(r.key());
    parts.add(r.value());
    for (Header h : r.headers()) {
      if (!ignored.contains(h.key())) {
        parts.add(h.key().getBytes(StandardCharsets.UTF_8));
        parts.add(h.value());
      }
    }
    return CopyMatcher.digest(parts.toArray(new byte[0][]));
  }

  /** One partition's records up to {@code end}, one at a time; stops early when none came for a while. */
  private static final class Reader {
    private final KafkaConsumer<byte[], byte[]> consumer;
    private final TopicPartition partition;
    private final long end;
    private Iterator<ConsumerRecord<byte[], byte[]>> batch = new ArrayDeque<ConsumerRecord<byte[], byte[]>>().iterator();
    private boolean done;
    boolean stoppedShort; // stopped before `end`: records there could not be read

    Reader(KafkaConsumer<byte[], byte[]> consumer, TopicPartition partition, long end) {
      this.consumer = consumer;
      this.partition = partition;
      this.end = end;
    }

    ConsumerRecord<byte[], byte[]> next() {
      long idleSince = System.currentTimeMillis();
      while (!done) {
        while (batch.hasNext()) {
          ConsumerRecord<byte[], byte[]> r = batch.next();
          if (r.offset() < end) {
            return r;
          }
          done = true;
          return null;
        }
        if (consumer.position(partition) >= end) {
          done = true;
          return null;
        }
        Collection<ConsumerRecord<byte[], byte[]>> polled = consumer.poll(POLL).records(partition);
        if (polled.isEmpty()) {
          if (System.currentTimeMillis() - idleSince > IDLE_MS) {
            done = stoppedShort = true;
          }
        } else {
          batch = polled.iterator();
          idleSince = System.currentTimeMillis();
        }
      }
      return null;
    }
  }

  private static String report(CopyMatcher m, long destStart, long destEnd, long sourceStart, long sourceEnd,
      long read, boolean unread, boolean grew) {
    StringBuilder out = new StringBuilder(256 + 64 * m.runs().size());
    out.append("{\"dest_start\":").append(destStart).append(",\"dest_end\":").append(destEnd)
        .append(",\"source_start\":").append(sourceStart).append(",\"source_end\":").append(sourceEnd)
        .append(",\"records\":").append(read).append(",\"kept\":").append(m.kept())
        .append(",\"duplicates\":").append(m.duplicates()).append(",\"unmatched\":").append(m.unmatched())
        .append(",\"uncopied\":").append(m.uncopied()).append(",\"unread\":").append(unread)
        .append(",\"grew\":").append(grew).append(",\"runs\":[");
    String sep = "";
    for (CopyMatcher.Run r : m.runs()) {
      out.append(sep).append('[').append(r.originStart).append(',').append(r.originEnd).append(',')
          .append(r.destStart).append(',').append(r.destEnd).append(',').append(r.firstTimestamp).append(',')
          .append(r.lastTimestamp).append(']');
      sep = ",";
    }
    out.append("],\"unmatched_ranges\":").append(ranges(m.unmatchedRanges()))
        .append(",\"uncopied_ranges\":").append(ranges(m.uncopiedRanges())).append('}');
    return out.toString();
  }

  private static String ranges(List<long[]> ranges) {
    StringBuilder out = new StringBuilder("[");
    for (int i = 0; i < Math.min(ranges.size(), RANGES_SHOWN); i++) {
      long[] r = ranges.get(i);
      out.append(i == 0 ? "" : ",").append('[');
      for (int j = 0; j < r.length; j++) {
        out.append(j == 0 ? "" : ",").append(r[j]);
      }
      out.append(']');
    }
    return out.append(']').toString();
  }
}
