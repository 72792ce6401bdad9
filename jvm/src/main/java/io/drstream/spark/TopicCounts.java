package io.drstream.spark;

import java.util.HashMap;
import java.util.Map;
import org.apache.spark.util.AccumulatorV2;

/**
 * A count per name (a topic, a topic's partition), added to in tasks and read on the driver: Spark adds a succeeded task's
 * counts once, as it does a {@code LongAccumulator}'s. What it holds is bounded by the topics
 * counted (a count per name, never a record).
 *
 * <p>Invariant: {@link #taken} hands each count out once, driver side.
 */
public final class TopicCounts extends AccumulatorV2<String, Map<String, Long>> {
  private static final long serialVersionUID = 1L;
  private final HashMap<String, Long> counts = new HashMap<>();
  // The totals last handed out: driver side only.
  private transient Map<String, Long> handed;

  @Override
  public boolean isZero() {
    synchronized (counts) {
      return counts.isEmpty();
    }
  }

  @Override
  public TopicCounts copy() {
    TopicCounts c = new TopicCounts();
    synchronized (counts) {
      c.counts.putAll(counts);
    }
    return c;
  }

  @Override
  public void reset() {
    synchronized (counts) {
      counts.clear();
    }
  }

  @Override
  public void add(String topic) {
    synchronized (counts) {
      counts.merge(topic == null ? "" : topic, 1L, Long::sum);
    }
  }

  @Override
  public void merge(AccumulatorV2<String, Map<String, Long>> other) {
    Map<String, Long> theirs = other.value();
    synchronized (counts) {
      theirs.forEach((t, n) -> counts.merge(t, n, Long::sum));
    }
  }

  @Override
  public Map<String, Long> value() {
    synchronized (counts) {
      return new HashMap<>(counts);
    }
  }

  /** The counts since the last call, as {topics, counts} (String[], long[]) for Python. */
  synchronized Object[] taken() {
    Map<String, Long> now = value();
    Map<String, Long> before = handed == null ? Map.of() : handed;
    handed = now;
    String[] topics = now.keySet().stream().filter(t -> now.get(t) - before.getOrDefault(t, 0L) > 0)
        .sorted().toArray(String[]::new);
    long[] added = new long[topics.length];
    for (int i = 0; i < topics.length; i++) {
      added[i] = now.get(topics[i]) - before.getOrDefault(topics[i], 0L);
    }
    return new Object[] {topics, added};
  }
}
