package io.drstream.kafka;

import java.nio.charset.StandardCharsets;

/**
 * Reads the origin (cluster, topic, partition, offset) out of a provenance header's value.
 *
 * <p>The run interceptor reads the newest entry of every copied record, which is always the one
 * dr-stream's record path has just written, in one fixed layout:
 * {@code {"cluster":"C","topic":"T","partition":P,"offset":O,"timestamp":S}} with no spaces and
 * no escapes. That layout is read by comparing bytes and parsing digits in place, with no regular
 * expression, map or intermediate string (the cluster and topic strings are reused while they
 * repeat, which they do record after record). Any other JSON (another writer's spacing, field
 * order or escapes) is read as the record path's cycle rule reads it ({@link ProvenanceEntry}).
 *
 * <p>Invariant: both readings give the same origin for the same JSON object; a value without the
 * four fields gives null, never an exception.
 */
public final class ProvenanceOrigin {
  private static final byte[] CLUSTER = ascii("{\"cluster\":\"");
  private static final byte[] TOPIC = ascii("\",\"topic\":\"");
  private static final byte[] PARTITION = ascii("\",\"partition\":");
  private static final byte[] OFFSET = ascii(",\"offset\":");
  private static final byte[] TIMESTAMP = ascii(",\"timestamp\":");

  /** A string last read, with its bytes: shared by the producer's sending threads. */
  record Seen(byte[] bytes, String text) {}

  private volatile Seen cluster = new Seen(new byte[0], "");
  private volatile Seen topic = new Seen(new byte[0], "");

  /** The origin a provenance value names, with {@code timestamp} as the copy's timestamp; null without one. */
  public CopyRuns.Origin read(byte[] value, long timestamp) {
    if (value == null) {
      return null;
    }
    CopyRuns.Origin own = readOwnLayout(value, timestamp);
    return own != null ? own : readAnyLayout(value, timestamp);
  }

  private CopyRuns.Origin readOwnLayout(byte[] v, long timestamp) {
    int clusterStart = after(v, 0, CLUSTER);
    int clusterEnd = clusterStart < 0 ? -1 : stringEnd(v, clusterStart);
    int topicStart = clusterEnd < 0 ? -1 : after(v, clusterEnd, TOPIC);
    int topicEnd = topicStart < 0 ? -1 : stringEnd(v, topicStart);
    int partitionStart = topicEnd < 0 ? -1 : after(v, topicEnd, PARTITION);
    int partitionEnd = partitionStart < 0 ? -1 : digitsEnd(v, partitionStart);
    int offsetStart = partitionEnd < 0 ? -1 : after(v, partitionEnd, OFFSET);
    int offsetEnd = offsetStart < 0 ? -1 : digitsEnd(v, offsetStart);
    if (offsetEnd < 0 || offsetEnd - offsetStart > 18 || partitionEnd - partitionStart > 9
        || !endsOwnLayout(v, offsetEnd)) {
      return null;
    }
    Seen c = cluster = reuse(cluster, v, clusterStart, clusterEnd);
    Seen t = topic = reuse(topic, v, topicStart, topicEnd);
    return new CopyRuns.Origin(c.text(), t.text(), (int) number(v, partitionStart, partitionEnd),
        number(v, offsetStart, offsetEnd), timestamp);
  }

  /** The rest of the value from {@code at} is the own layout's tail: {@code }} or a timestamp and {@code }}. */
  private static boolean endsOwnLayout(byte[] v, int at) {
    if (at == v.length - 1) {
      return v[at] == '}';
    }
    int timestampStart = after(v, at, TIMESTAMP);
    int from = timestampStart >= 0 && timestampStart < v.length && v[timestampStart] == '-'
        ? timestampStart + 1 : timestampStart;
    int timestampEnd = from < 0 ? -1 : digitsEnd(v, from);
    return timestampEnd == v.length - 1 && timestampEnd - from <= 18 && v[timestampEnd] == '}';
  }

  private static CopyRuns.Origin readAnyLayout(byte[] value, long timestamp) {
    ProvenanceEntry entry = ProvenanceEntry.parse(value);
    return entry == null ? null
        : new CopyRuns.Origin(entry.cluster(), entry.topic(), entry.partition(), entry.offset(), timestamp);
  }

  /** {@code last} when {@code v[from, to)} holds its bytes, else the string those bytes hold (UTF-8). */
  static Seen reuse(Seen last, byte[] v, int from, int to) {
    byte[] seen = last.bytes();
    if (seen.length == to - from && java.util.Arrays.equals(seen, 0, seen.length, v, from, to)) {
      return last;
    }
    byte[] bytes = java.util.Arrays.copyOfRange(v, from, to);
    return new Seen(bytes, new String(bytes, StandardCharsets.UTF_8));
  }

  /** The index after {@code expected} when {@code v} holds it at {@code at}, else -1. */
  private static int after(byte[] v, int at, byte[] expected) {
    if (at + expected.length > v.length) {
      return -1;
    }
    for (int i = 0; i < expected.length; i++) {
      if (v[at + i] != expected[i]) {
        return -1;
      }
    }
    return at + expected.length;
  }

  /** The index of the closing quote of a string without escapes, else -1. */
  private static int stringEnd(byte[] v, int from) {
    for (int i = from; i < v.length; i++) {
      if (v[i] == '"') {
        return i;
      }
      if (v[i] == '\\') {
        return -1;
      }
    }
    return -1;
  }

  /** The index after one or more decimal digits, else -1. */
  private static int digitsEnd(byte[] v, int from) {
    int i = from;
    while (i < v.length && v[i] >= '0' && v[i] <= '9') {
      i++;
    }
    return i > from ? i : -1;
  }

  private static long number(byte[] v, int from, int to) {
    long n = 0;
    for (int i = from; i < to; i++) {
      n = n * 10 + (v[i] - '0');
    }
    return n;
  }

  private static byte[] ascii(String s) {
    return s.getBytes(StandardCharsets.US_ASCII);
  }
}
