package io.drstream.kafka;

import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;

/**
 * The transient header the record path adds to every record it hands the sink, read in the sink's
 * producer ({@link CopyInterceptor}): the source record's timestamp (epoch milliseconds, 8 bytes),
 * partition (4 bytes) and offset (8 bytes), all big-endian, then its topic in UTF-8. Fixed-width
 * binary, so the record path writes it with no number formatting and the sink reads it with no
 * parsing.
 *
 * <p>From it the sink gives the copy its source timestamp, names the source record (for the offset
 * index, and for a record the destination refuses) and writes this hop's provenance header,
 * {@code {"cluster":C,"topic":"T","partition":P,"offset":O,"timestamp":S}} with the copy time as
 * S: the one writer of that value, whose bytes the golden fixture fixes. A topic name needs no
 * JSON escaping (Kafka allows only ASCII letters, digits, '.', '_' and '-'); the cluster id is
 * escaped once, when the stamp reader is made.
 *
 * <p>A stamp of the 8 timestamp bytes alone names no origin; any other length shorter than an
 * origin stamp is no stamp at all (the producer's clock then gives the timestamp, as Kafka's
 * would). Invariant: reading never throws, whatever the bytes.
 */
final class OriginStamp {
  /** The fixed part of an origin stamp: timestamp, partition, offset; the topic follows. */
  static final int FIXED_BYTES = Long.BYTES + Integer.BYTES + Long.BYTES;
  private static final byte[] PARTITION = ascii("\",\"partition\":");
  private static final byte[] OFFSET = ascii(",\"offset\":");
  private static final byte[] TIMESTAMP = ascii(",\"timestamp\":");
  private static final long[] POWERS_OF_TEN = new long[19];

  static {
    POWERS_OF_TEN[0] = 1;
    for (int i = 1; i < POWERS_OF_TEN.length; i++) {
      POWERS_OF_TEN[i] = POWERS_OF_TEN[i - 1] * 10;
    }
  }

  private final String cluster;
  private final byte[] prefix;
  // The last topic read: records of one topic follow each other.
  private volatile ProvenanceOrigin.Seen topic = new ProvenanceOrigin.Seen(new byte[0], "");
  // The copy time's text, written once per millisecond rather than once per record.
  private volatile Time time = new Time(Long.MIN_VALUE, new byte[0]);

  private record Time(long ms, byte[] text) {}

  /** A reader of stamps copied from {@code cluster} (the source's cluster.id; "" when unknown). */
  OriginStamp(String cluster) {
    this.cluster = cluster;
    this.prefix = ascii("{\"cluster\":" + jsonString(cluster) + ",\"topic\":\"");
  }

  /** The stamp's epoch milliseconds; null for a value that is neither 8 bytes long nor an origin stamp. */
  static Long timestamp(byte[] stamp) {
    return stamp == null || stamp.length != Long.BYTES && stamp.length < FIXED_BYTES ? null
        : ByteBuffer.wrap(stamp).getLong();
  }

  /** Whether the stamp names its source record (more than the timestamp). */
  static boolean namesOrigin(byte[] stamp) {
    return stamp != null && stamp.length > FIXED_BYTES;
  }

  /** The source record the stamp names, with this reader's cluster; null for a stamp that names none. */
  CopyRuns.Origin origin(byte[] stamp) {
    if (!namesOrigin(stamp)) {
      return null;
    }
    ByteBuffer buffer = ByteBuffer.wrap(stamp);
    long timestamp = buffer.getLong();
    int partition = buffer.getInt();
    long offset = buffer.getLong();
    return new CopyRuns.Origin(cluster, topic(stamp), partition, offset, timestamp);
  }

  private String topic(byte[] stamp) {
    ProvenanceOrigin.Seen last = topic;
    ProvenanceOrigin.Seen read = ProvenanceOrigin.reuse(last, stamp, FIXED_BYTES, stamp.length);
    if (read != last) {
      topic = read;
    }
    return read.text();
  }

  /** This hop's provenance value for the record an origin stamp names, copied at {@code copiedAt}. */
  byte[] provenance(byte[] stamp, long copiedAt) {
    ByteBuffer buffer = ByteBuffer.wrap(stamp, Long.BYTES, Integer.BYTES + Long.BYTES);
    int partition = buffer.getInt();
    long offset = buffer.getLong();
    return write(stamp, FIXED_BYTES, stamp.length - FIXED_BYTES, partition, offset, copiedAt);
  }

  /** The provenance value of one entry, written as the sink writes it. */
  static byte[] provenance(String cluster, String topic, int partition, long offset, long timestamp) {
    byte[] name = topic.getBytes(StandardCharsets.UTF_8);
    return new OriginStamp(cluster).write(name, 0, name.length, partition, offset, timestamp);
  }

  private byte[] timeText(long ms) {
    Time last = time;
    if (last.ms() == ms) {
      return last.text();
    }
    byte[] text = new byte[digits(ms)];
    putNumber(text, 0, ms);
    time = new Time(ms, text);
    return text;
  }

  private byte[] write(byte[] topicBytes, int from, int length, long partition, long offset, long timestamp) {
    byte[] stamp = timeText(timestamp);
    byte[] out = new byte[prefix.length + length + PARTITION.length + digits(partition) + OFFSET.length
        + digits(offset) + TIMESTAMP.length + stamp.length + 1];
    int at = put(out, 0, prefix, 0, prefix.length);
    at = put(out, at, topicBytes, from, length);
    at = put(out, at, PARTITION, 0, PARTITION.length);
    at = putNumber(out, at, partition);
    at = put(out, at, OFFSET, 0, OFFSET.length);
    at = putNumber(out, at, offset);
    at = put(out, at, TIMESTAMP, 0, TIMESTAMP.length);
    at = put(out, at, stamp, 0, stamp.length);
    out[at] = '}';
    return out;
  }

  private static int put(byte[] out, int at, byte[] bytes, int from, int length) {
    System.arraycopy(bytes, from, out, at, length);
    return at + length;
  }

  /** The characters of {@code n} in decimal, its sign included: comparisons, no division. */
  private static int digits(long n) {
    if (n < 0) {
      return n == Long.MIN_VALUE ? 20 : 1 + digits(-n);
    }
    int count = 1;
    while (count < POWERS_OF_TEN.length && n >= POWERS_OF_TEN[count]) {
      count++;
    }
    return count;
  }

  private static int putNumber(byte[] out, int at, long n) {
    int end = at + digits(n);
    if (n == Long.MIN_VALUE) {
      byte[] text = ascii(Long.toString(n));
      return put(out, at, text, 0, text.length);
    }
    if (n < 0) {
      out[at] = '-';
    }
    long rest = Math.abs(n);
    int i = end;
    do {
      out[--i] = (byte) ('0' + rest % 10);
      rest /= 10;
    } while (rest > 0);
    return end;
  }

  /** {@code s} as a JSON string as Python's json.dumps writes it: non-ASCII and controls as \\u escapes. */
  static String jsonString(String s) {
    StringBuilder out = new StringBuilder(s.length() + 2).append('"');
    for (int i = 0; i < s.length(); i++) {
      char c = s.charAt(i);
      switch (c) {
        case '"' -> out.append("\\\"");
        case '\\' -> out.append("\\\\");
        case '\n' -> out.append("\\n");
        case '\r' -> out.append("\\r");
        case '\t' -> out.append("\\t");
        case '\b' -> out.append("\\b");
        case '\f' -> out.append("\\f");
        default -> {
          if (c < 0x20 || c > 0x7f) {
            out.append(String.format("\\u%04x", (int) c));
          } else {
            out.append(c);
          }
        }
      }
    }
    return out.append('"').toString();
  }

  private static byte[] ascii(String s) {
    return s.getBytes(StandardCharsets.US_ASCII);
  }
}
