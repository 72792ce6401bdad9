package io.drstream.kafka;

import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;

/**
 * The runs one producer has written: stretches where origin and destination offsets advance
 * together, built from acknowledgements in the order the producer reports them.
 *
 * <p>Invariants: a run only ever holds acknowledged records, so it never claims a record that
 * is not on the destination; a run grows only while both the origin offset and the destination
 * offset continue by exactly one, so destination = dest_start + (origin - origin_start) holds for
 * every record in it; each changed run is handed out by {@link #takeChanged} once per change, in
 * destination order per partition, identified by (destination topic, partition, dest_start) so a
 * later version of the same run replaces the earlier one.
 */
final class CopyRuns {
  /** Where one copied record came from, read from its newest provenance header. */
  record Origin(String cluster, String topic, int partition, long offset, long timestamp) {}

  /** One run; the destination topic and partition are the map key. */
  static final class Run {
    final String destTopic;
    final int destPartition;
    final Origin first;
    long originEnd;
    final long destStart;
    long destEnd;
    long lastTimestamp;
    long copiedAt;
    // Its place among the changed runs, made once; `listed` while it is there, so an
    // acknowledgement that extends a listed run touches no map but the open runs.
    final String changeKey;
    boolean listed;

    Run(String destTopic, int destPartition, Origin first, long destOffset, long copiedAt) {
      this.destTopic = destTopic;
      this.destPartition = destPartition;
      this.first = first;
      this.originEnd = first.offset();
      this.destStart = destOffset;
      this.destEnd = destOffset;
      this.lastTimestamp = first.timestamp();
      this.copiedAt = copiedAt;
      this.changeKey = partitionKey(destTopic, destPartition) + "\u0000" + String.format("%020d", destStart);
    }

    boolean continuedBy(String cluster, String topic, int partition, long offset, long destOffset) {
      return offset == originEnd + 1 && destOffset == destEnd + 1 && partition == first.partition()
          && topic.equals(first.topic()) && cluster.equals(first.cluster());
    }

    String key() {
      return "{\"topic\":\"" + destTopic + "\",\"partition\":" + destPartition + ",\"dest_start\":" + destStart + "}";
    }

    String value() {
      return "{\"origin_cluster\":\"" + first.cluster() + "\",\"origin_topic\":\"" + first.topic()
          + "\",\"origin_partition\":" + first.partition() + ",\"origin_start\":" + first.offset()
          + ",\"origin_end\":" + originEnd + ",\"dest_topic\":\"" + destTopic + "\",\"dest_partition\":"
          + destPartition + ",\"dest_start\":" + destStart + ",\"dest_end\":" + destEnd
          + ",\"first_timestamp\":" + first.timestamp() + ",\"last_timestamp\":" + lastTimestamp
          + ",\"copied_at\":" + copiedAt + "}";
    }
  }

  /** A run as handed out: its key and value as they were when taken. */
  record Version(Run run, String key, String value) {}

  /** A destination partition, as the open runs' key. */
  private record Dest(String topic, int partition) {}

  private final Map<Dest, Run> open = new HashMap<>();
  // Changed runs not handed out yet, by partition then dest_start: destination order per partition.
  private final TreeMap<String, Run> changed = new TreeMap<>();

  private static String partitionKey(String topic, int partition) {
    return topic + "\u0000" + partition;
  }

  synchronized void acked(String destTopic, int destPartition, Origin origin, long destOffset, long now) {
    acked(destTopic, destPartition, origin.cluster(), origin.topic(), origin.partition(), origin.offset(),
        origin.timestamp(), destOffset, now);
  }

  /** {@link #acked(String, int, Origin, long, long)} of the origin these fields name: no object made per record. */
  synchronized void acked(String destTopic, int destPartition, String cluster, String topic, int partition,
      long offset, long timestamp, long destOffset, long now) {
    Dest key = new Dest(destTopic, destPartition);
    Run run = open.get(key);
    if (run != null && run.continuedBy(cluster, topic, partition, offset, destOffset)) {
      run.originEnd = offset;
      run.destEnd = destOffset;
      run.lastTimestamp = timestamp;
      run.copiedAt = now;
    } else {
      run = new Run(destTopic, destPartition, new Origin(cluster, topic, partition, offset, timestamp), destOffset, now);
      open.put(key, run);
    }
    if (!run.listed) {
      run.listed = true;
      changed.put(run.changeKey, run);
    }
  }

  synchronized List<Version> takeChanged() {
    List<Version> out = new ArrayList<>(changed.size());
    for (Run run : changed.values()) {
      out.add(new Version(run, run.key(), run.value()));
      run.listed = false;
    }
    changed.clear();
    return out;
  }

  /** Hands runs back after a failed publication: they go out again, as they are then, next time. */
  synchronized void unpublished(List<Version> versions) {
    for (Version v : versions) {
      changed.putIfAbsent(v.run().changeKey, v.run());
      v.run().listed = true;
    }
  }

  synchronized boolean hasChanges() {
    return !changed.isEmpty();
  }
}
