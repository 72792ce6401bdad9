package io.drstream.kafka;

import java.nio.charset.StandardCharsets;
import java.util.HashMap;
import java.util.Map;

/**
 * One flat JSON object read as its members, the way every dr-stream format is read on both sides
 * (the Python side is core/contracts.py): a string member is a String, an integer that fits a long
 * is a Long, null is null, anything else (a fraction, a boolean, a nested value) is {@link #OTHER}.
 * The first occurrence of a repeated member counts; spacing and member order do not matter.
 *
 * <p>Invariant: {@link #members} never throws; it gives null for anything that is not one JSON
 * object in UTF-8 (text after the object, NaN, a truncated value included).
 */
public final class FlatJson {
  /** A member's value that is neither a string, an integer nor null. */
  public static final Object OTHER = new Object();

  private final String s;
  private int at;

  private FlatJson(String s) {
    this.s = s;
  }

  /** The members of the object {@code value} holds, or null. */
  public static Map<String, Object> members(byte[] value) {
    if (value == null) {
      return null;
    }
    try {
      return new FlatJson(new String(value, StandardCharsets.UTF_8)).object();
    } catch (IllegalArgumentException | IndexOutOfBoundsException e) {
      return null;
    }
  }

  /** A member that is an integer within [min, max], or null. */
  public static Long integer(Map<String, Object> members, String name, long min, long max) {
    return members.get(name) instanceof Long v && v >= min && v <= max ? v : null;
  }

  private Map<String, Object> object() {
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
    return at == s.length() ? first : null;
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
