package io.drstream.kafka;

import java.util.Map;

/**
 * One provenance header value read as the entry it names: the cluster.id, topic, partition and
 * offset a record was copied from, and the copy's time ({@code -1} when the value has none).
 *
 * <p>A value is an entry when it is one JSON object whose {@code cluster} and {@code topic} are
 * strings and whose {@code partition} (an int) and {@code offset} (a long) are integers; its
 * {@code timestamp}, when present and not null, is an integer too. Other members are ignored,
 * whatever their order or spacing; the first occurrence of a repeated member counts. Anything
 * else (not UTF-8 JSON, another type, a missing member, text after the object) is no entry.
 *
 * <p>Invariant: {@link #parse} never throws; it gives null for a value that is not an entry.
 */
public record ProvenanceEntry(String cluster, String topic, int partition, long offset, long timestamp) {

  /** The entry {@code value} holds, or null. */
  public static ProvenanceEntry parse(byte[] value) {
    Map<String, Object> m = FlatJson.members(value);
    if (m == null) {
      return null;
    }
    Object timestamp = m.get("timestamp");
    Long partition = FlatJson.integer(m, "partition", Integer.MIN_VALUE, Integer.MAX_VALUE);
    Long offset = FlatJson.integer(m, "offset", Long.MIN_VALUE, Long.MAX_VALUE);
    if (!(m.get("cluster") instanceof String cluster) || !(m.get("topic") instanceof String topic)
        || partition == null || offset == null || (timestamp != null && !(timestamp instanceof Long))) {
      return null;
    }
    return new ProvenanceEntry(cluster, topic, partition.intValue(), offset, timestamp == null ? -1 : (Long) timestamp);
  }
}
