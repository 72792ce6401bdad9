package io.drstream.kafka;

import java.util.HashMap;
import java.util.Iterator;
import java.util.Map;
import java.util.TreeMap;

/**
 * The runs dr-stream flows published on one cluster, read as the copies they wrote there: which
 * records of which partitions a flow wrote, and from where.
 *
 * <p>The rule a claim is held to: a record at {@code offset} of {@code topic}/{@code partition}
 * whose newest provenance entry names {@code (cluster, origin topic, origin partition, origin
 * offset)} is a copy only if a run published from that cluster holds the offset and maps it to
 * exactly that origin ({@code origin = origin_start + (offset - dest_start)}). Since one flow per
 * origin cluster writes a partition and publishes its runs in destination order, a run of the
 * same origin and partition that starts past the offset proves the record is no copy; until then
 * the answer is undecided (its run may not be published yet). An offset below every run held of
 * its origin and partition is beyond what the ledger can tell: the runs there were trimmed or
 * never read.
 *
 * <p>What it keeps follows what the runs topics keep: a run is forgotten once its record is gone
 * from its topic (the writing flow trims what its table holds) and it was read {@code keepMs}
 * before, so a reader that lags the writer by less than that still finds it.
 *
 * <p>Invariants: a value that is no run is skipped and counted, never fatal; a later version of
 * a run (same origin, partition and start) replaces the earlier; nothing here does I/O.
 */
final class RunLedger {
  enum Verdict { COPY, NOT_A_COPY, UNDECIDED, BEYOND }

  private record Key(String originCluster, String topic, int partition) {}

  private record Range(long destEnd, String originTopic, int originPartition, long originStart, String runsTopic,
      long runsOffset, long readAt) {}

  private final Map<Key, TreeMap<Long, Range>> runs = new HashMap<>();
  // The highest dest_start read per key: an offset below it without a run of its own is no copy.
  private final Map<Key, Long> reached = new HashMap<>();
  // How many runs were read per key: a waiter tells from it whether a new run arrived.
  private final Map<Key, Long> versions = new HashMap<>();
  private final long keepMs;
  private int size;
  private long skipped;

  RunLedger(long keepMs) {
    this.keepMs = keepMs;
  }

  /** Takes one runs record; false (and counted) when its value is no run. */
  boolean add(String runsTopic, long runsOffset, byte[] value, long now) {
    Map<String, Object> m = FlatJson.members(value);
    Long partition = m == null ? null : FlatJson.integer(m, "dest_partition", 0, Integer.MAX_VALUE);
    Long originPartition = m == null ? null : FlatJson.integer(m, "origin_partition", 0, Integer.MAX_VALUE);
    Long destStart = m == null ? null : FlatJson.integer(m, "dest_start", 0, Long.MAX_VALUE);
    Long destEnd = m == null ? null : FlatJson.integer(m, "dest_end", 0, Long.MAX_VALUE);
    Long originStart = m == null ? null : FlatJson.integer(m, "origin_start", 0, Long.MAX_VALUE);
    if (m == null || !(m.get("origin_cluster") instanceof String cluster) || !(m.get("dest_topic") instanceof String topic)
        || !(m.get("origin_topic") instanceof String originTopic) || partition == null || originPartition == null
        || destStart == null || destEnd == null || originStart == null || destEnd < destStart) {
      skipped++;
      return false;
    }
    Key key = new Key(cluster, topic, partition.intValue());
    Range range = new Range(destEnd, originTopic, originPartition.intValue(), originStart, runsTopic, runsOffset, now);
    if (runs.computeIfAbsent(key, k -> new TreeMap<>()).put(destStart, range) == null) {
      size++;
    }
    reached.merge(key, destStart, Math::max);
    versions.merge(key, 1L, Long::sum);
    return true;
  }

  /** How many runs from {@code cluster} into {@code topic}/{@code partition} were read so far. */
  long version(String cluster, String topic, int partition) {
    return versions.getOrDefault(new Key(cluster, topic, partition), 0L);
  }

  /** Whether the record at {@code offset} of {@code topic}/{@code partition} is the copy {@code newest} names. */
  Verdict verdict(ProvenanceEntry newest, String topic, int partition, long offset) {
    Key key = new Key(newest.cluster(), topic, partition);
    TreeMap<Long, Range> ranges = runs.get(key);
    Map.Entry<Long, Range> at = ranges == null ? null : ranges.floorEntry(offset);
    if (at != null && offset <= at.getValue().destEnd()) {
      Range r = at.getValue();
      boolean same = r.originTopic().equals(newest.topic()) && r.originPartition() == newest.partition()
          && newest.offset() == r.originStart() + (offset - at.getKey());
      return same ? Verdict.COPY : Verdict.NOT_A_COPY;
    }
    if (ranges != null && offset < ranges.firstKey()) {
      return Verdict.BEYOND;
    }
    Long reach = reached.get(key);
    return reach != null && reach > offset ? Verdict.NOT_A_COPY : Verdict.UNDECIDED;
  }

  /** Forgets the runs whose records are below their topic's log start and were read keepMs ago. */
  int forget(Map<String, Long> logStarts, long now) {
    int forgotten = 0;
    for (Iterator<TreeMap<Long, Range>> keys = runs.values().iterator(); keys.hasNext(); ) {
      TreeMap<Long, Range> ranges = keys.next();
      for (Iterator<Range> it = ranges.values().iterator(); it.hasNext(); ) {
        Range r = it.next();
        Long start = logStarts.get(r.runsTopic());
        if (start != null && r.runsOffset() < start && r.readAt() <= now - keepMs) {
          it.remove();
          forgotten++;
        }
      }
      if (ranges.isEmpty()) {
        keys.remove();
      }
    }
    size -= forgotten;
    return forgotten;
  }

  int size() {
    return size;
  }

  long skipped() {
    return skipped;
  }
}
