package io.drstream.kafka;

import java.util.Arrays;
import java.util.Collections;
import java.util.Set;
import java.util.WeakHashMap;
import org.apache.kafka.common.InvalidRecordException;
import org.apache.kafka.common.errors.CorruptRecordException;
import org.apache.kafka.common.errors.InvalidTimestampException;
import org.apache.kafka.common.errors.PolicyViolationException;
import org.apache.kafka.common.errors.RecordBatchTooLargeException;
import org.apache.kafka.common.errors.RecordTooLargeException;
import org.apache.kafka.common.errors.TopicAuthorizationException;

/**
 * Source records the destination refused for the record itself, told to the flow's driver.
 *
 * <p>A refusal is an acknowledgement whose error says the destination will never take that
 * record as it is: too large, invalid (a compacted topic's record without a key), a timestamp
 * out of the topic's bounds, a policy, or no right to write its topic. Retrying the batch can
 * never pass, so the flow holds the record's partition at it instead while the other partitions
 * go on. Spark's Kafka sink fails its task with the first error its producer reported, and the
 * driver sees only that error's text; so the refused record's origin is attached to that error
 * as a suppressed {@link Mark} whose message is {@value #MARK} and one JSON object
 * ({@code cluster, topic, partition, offset, dest_topic, dest_partition, error}).
 *
 * <p>The first error of a failing task is not always the refusal: when a broker refuses one
 * record of a batch, the batch's records before it fail first with a generic error. So each
 * failed acknowledgement's error is remembered (weakly) until a refusal comes, and the refusal's
 * origin is attached to it and to each of them. Invariant: an error carries at most one origin,
 * that of the first refusal reported after it.
 */
public final class Refusals {
  static final String MARK = "dr-stream refused record ";
  // When this JVM's producers last reported a refusal (System.nanoTime), 0 before any.
  private static volatile long lastRefusal;

  /** The text that carries a refused record's origin; it has no stack, its message is all of it. */
  static final class Mark extends RuntimeException {
    private static final long serialVersionUID = 1L;

    Mark(String message) {
      super(message, null, false, false);
    }
  }

  // Errors of failed acknowledgements no refusal was attached to yet; guarded by itself.
  private final Set<Exception> unmarked = Collections.newSetFromMap(new WeakHashMap<>());

  /** Whether a producer of this JVM reported a refusal within the last {@code ms} milliseconds. */
  public static boolean refusedWithin(long ms) {
    long last = lastRefusal;
    return last != 0 && System.nanoTime() - last < ms * 1_000_000L;
  }

  /** Whether the destination refused the record itself (the same record can never pass). */
  static boolean isRefusal(Exception e) {
    return e instanceof RecordTooLargeException || e instanceof RecordBatchTooLargeException
        || e instanceof InvalidRecordException || e instanceof CorruptRecordException
        || e instanceof InvalidTimestampException || e instanceof PolicyViolationException
        || e instanceof TopicAuthorizationException;
  }

  /** One failed acknowledgement, in the order the producer reports them. */
  void failed(Exception error, CopyRuns.Origin origin, String destTopic, int destPartition) {
    synchronized (unmarked) {
      unmarked.add(error);
      if (!isRefusal(error) || origin == null || origin.topic().isEmpty()) {
        return;
      }
      lastRefusal = System.nanoTime();
      Mark mark = new Mark(MARK + describe(origin, destTopic, destPartition, error));
      for (Exception e : unmarked) {
        if (marks(e).length == 0) {
          e.addSuppressed(mark);
        }
      }
      unmarked.clear();
    }
  }

  static String describe(CopyRuns.Origin origin, String destTopic, int destPartition, Exception error) {
    String reason = error.getClass().getSimpleName() + ": " + (error.getMessage() == null ? "" : error.getMessage());
    return "{\"cluster\":" + quoted(origin.cluster()) + ",\"topic\":" + quoted(origin.topic())
        + ",\"partition\":" + origin.partition() + ",\"offset\":" + origin.offset()
        + ",\"dest_topic\":" + quoted(destTopic) + ",\"dest_partition\":" + destPartition
        + ",\"error\":" + quoted(reason) + "}";
  }

  /** A JSON string; every character outside printable ASCII is escaped, so the text stays one line. */
  static String quoted(String s) {
    StringBuilder b = new StringBuilder(s.length() + 2).append('"');
    for (char c : s.toCharArray()) {
      if (c == '"' || c == '\\') {
        b.append('\\').append(c);
      } else if (c < 0x20 || c > 0x7e) {
        b.append(String.format("\\u%04x", (int) c));
      } else {
        b.append(c);
      }
    }
    return b.append('"').toString();
  }

  /** The origins attached to an error, as their texts. */
  static String[] marks(Throwable e) {
    return Arrays.stream(e.getSuppressed()).filter(s -> s instanceof Mark).map(Throwable::getMessage)
        .toArray(String[]::new);
  }
}
