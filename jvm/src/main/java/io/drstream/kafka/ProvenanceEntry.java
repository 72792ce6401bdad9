package io.drstream.kafka;

import java.nio.charset.StandardCharsets;
import java.util.HashMap;
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
    if (value == null) {
      return null;
    }
    try {
      return new Reader(new String(value, StandardCharsets.UTF_8)).entry();
    } catch (IllegalArgumentException | IndexOutOfBoundsException e) {
      return null;
    }
  }

  /** A reader of one flat JSON object; nested values are skipped, as are unknown members. */
  private static final class Reader {
    private static final Object OTHER = new Object();
    private final String s;
    private int at;

    Reader(String s) {
      this.s = s;
    }

    ProvenanceEntry entry() {
      Map<String, Object> first = new HashMap<>();
      expect('{');
      if (peek() == '}') {
        at++;
      } else {
        char c;
        do {
          String name = string();
          expect(':');
          Object v = value();
          if (!first.containsKey(name)) {
            first.put(name, v);
          }
          c = next();
        } while (c == ',');
        if (c != '}') {
          return null;
        }
      }
      skipSpace();
      Object timestamp = first.get("timestamp");
      if (at != s.length() || !(first.get("cluster") instanceof String cluster)
          || !(first.get("topic") instanceof String topic) || !(first.get("partition") instanceof Long partition)
          || !(first.get("offset") instanceof Long offset) || (timestamp != null && !(timestamp instanceof Long))
          || partition < Integer.MIN_VALUE || partition > Integer.MAX_VALUE) {
        return null;
      }
      return new ProvenanceEntry(cluster, topic, partition.intValue(), offset,
          timestamp == null ? -1 : (Long) timestamp);
    }

    /** A string, a Long for an integer that fits, null for JSON null, OTHER for anything else. */
    private Object value() {
      char c = peek();
      if (c == '"') {
        return string();
      }
      if (c == '-' || (c >= '0' && c <= '9')) {
        return number();
      }
      if (c == '{' || c == '[') {
        skipNested();
        return OTHER;
      }
      for (String word : new String[] {"null", "true", "false"}) {
        if (s.startsWith(word, at)) {
          at += word.length();
          return word.equals("null") ? null : OTHER;
        }
      }
      throw new IllegalArgumentException();
    }

    private Object number() {
      int start = at;
      if (s.charAt(at) == '-') {
        at++;
      }
      int digits = at;
      while (at < s.length() && Character.isDigit(s.charAt(at))) {
        at++;
      }
      if (at == digits) {
        throw new IllegalArgumentException();
      }
      int end = at;
      while (at < s.length() && "0123456789.eE+-".indexOf(s.charAt(at)) >= 0) {
        at++;
      }
      if (at != end) {
        return OTHER;  // a fraction or an exponent: not an integer
      }
      try {
        return Long.parseLong(s, start, end, 10);
      } catch (NumberFormatException e) {
        return OTHER;  // beyond a long
      }
    }

    private String string() {
      expect('"');
      StringBuilder out = new StringBuilder();
      while (true) {
        char c = s.charAt(at++);
        if (c == '"') {
          return out.toString();
        }
        if (c < 0x20) {
          throw new IllegalArgumentException();
        }
        if (c != '\\') {
          out.append(c);
          continue;
        }
        char e = s.charAt(at++);
        switch (e) {
          case '"', '\\', '/' -> out.append(e);
          case 'b' -> out.append('\b');
          case 'f' -> out.append('\f');
          case 'n' -> out.append('\n');
          case 'r' -> out.append('\r');
          case 't' -> out.append('\t');
          case 'u' -> {
            out.append((char) Integer.parseInt(s, at, at + 4, 16));
            at += 4;
          }
          default -> throw new IllegalArgumentException();
        }
      }
    }

    private void skipNested() {
      int depth = 0;
      do {
        char c = s.charAt(at);
        if (c == '"') {
          string();
          continue;
        }
        if (c == '{' || c == '[') {
          depth++;
        } else if (c == '}' || c == ']') {
          depth--;
        }
        at++;
      } while (depth > 0);
    }

    private void expect(char c) {
      if (next() != c) {
        throw new IllegalArgumentException();
      }
    }

    private char next() {
      skipSpace();
      return s.charAt(at++);
    }

    private char peek() {
      skipSpace();
      return s.charAt(at);
    }

    private void skipSpace() {
      while (at < s.length() && " \t\r\n".indexOf(s.charAt(at)) >= 0) {
        at++;
      }
    }
  }
}
