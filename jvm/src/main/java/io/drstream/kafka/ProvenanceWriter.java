package io.drstream.kafka;

import java.nio.charset.StandardCharsets;

/**
 * Writes this hop's provenance value for each copy the sink sends ({@link CopyProducer}):
 * {@code {"cluster":C,"topic":"T","partition":P,"offset":O,"timestamp":S}}, the source's
 * cluster.id, the source record's topic, partition and offset, and the copy time as S. It is the
 * one writer of that value, whose bytes the golden fixture fixes. A topic name needs no JSON
 * escaping (Kafka allows only ASCII letters, digits, '.', '_' and '-'); the cluster id is escaped
 * once, when the writer is made, and the copy time's digits once per millisecond. Numbers are
 * written as Java writes them in decimal, with comparisons and no division for their length.
 */
final class ProvenanceWriter {
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

  private final byte[] prefix;
  // The copy time's text, written once per millisecond rather than once per record.
  private volatile Time time = new Time(Long.MIN_VALUE, new byte[0]);

  private record Time(long ms, byte[] text) {}

  /** A writer for copies from {@code cluster} (the source's cluster.id). */
  ProvenanceWriter(String cluster) {
    this.prefix = ascii("{\"cluster\":" + jsonString(cluster) + ",\"topic\":\"");
  }

  /** This hop's provenance value for a record of the topic whose UTF-8 name this is, copied at {@code copiedAt}. */
  byte[] provenance(byte[] topicName, int partition, long offset, long copiedAt) {
    return write(topicName, partition, offset, copiedAt);
  }

  /** The provenance value of one entry, written as the sink writes it. */
  static byte[] provenance(String cluster, String topic, int partition, long offset, long timestamp) {
    byte[] name = topic.getBytes(StandardCharsets.UTF_8);
    return new ProvenanceWriter(cluster).write(name, partition, offset, timestamp);
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

  private byte[] write(byte[] topicName, long partition, long offset, long timestamp) {
    byte[] time = timeText(timestamp);
    byte[] out = new byte[prefix.length + topicName.length + PARTITION.length + digits(partition) + OFFSET.length
        + digits(offset) + TIMESTAMP.length + time.length + 1];
    int at = put(out, 0, prefix, 0, prefix.length);
    at = put(out, at, topicName, 0, topicName.length);
    at = put(out, at, PARTITION, 0, PARTITION.length);
    at = putNumber(out, at, partition);
    at = put(out, at, OFFSET, 0, OFFSET.length);
    at = putNumber(out, at, offset);
    at = put(out, at, TIMESTAMP, 0, TIMESTAMP.length);
    at = put(out, at, time, 0, time.length);
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
