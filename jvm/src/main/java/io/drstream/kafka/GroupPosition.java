package io.drstream.kafka;

import java.util.Map;

/**
 * One {@code __consumer_timestamps} record read as the position it reports: a consumer group's
 * next offset on one source partition and the timestamp of the last record it read ({@code -1}
 * when unknown).
 *
 * <p>The key is a JSON object whose {@code group} and {@code topic} are strings and whose
 * {@code partition} is an integer of at least 0; the value one whose {@code offset} is an integer
 * of at least 0. A {@code timestamp} that is missing, null or not an integer is unknown. Anything
 * else is no position (counted by the reader as malformed), a null value included: compaction's
 * tombstone, which forgets a key rather than moving it.
 *
 * <p>Invariant: {@link #parse} never throws.
 */
public record GroupPosition(String group, String topic, int partition, long offset, long timestamp) {
  public static final long UNKNOWN_TIMESTAMP = -1;

  /** The position the record with this key and value reports, or null. */
  public static GroupPosition parse(byte[] key, byte[] value) {
    Map<String, Object> k = FlatJson.members(key);
    Map<String, Object> v = FlatJson.members(value);
    if (k == null || v == null) {
      return null;
    }
    Long partition = FlatJson.integer(k, "partition", 0, Integer.MAX_VALUE);
    Long offset = FlatJson.integer(v, "offset", 0, Long.MAX_VALUE);
    if (!(k.get("group") instanceof String group) || !(k.get("topic") instanceof String topic) || partition == null
        || offset == null) {
      return null;
    }
    long timestamp = v.get("timestamp") instanceof Long t ? t : UNKNOWN_TIMESTAMP;
    return new GroupPosition(group, topic, partition.intValue(), offset, timestamp);
  }
}
