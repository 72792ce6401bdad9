package io.drstream.spark;

import java.io.Serializable;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import org.apache.spark.sql.api.java.UDF3;

/**
 * Whether a source record lies in one of its partition's origin ranges already on the destination:
 * the ranges a restarted replicate query must not copy again above the first record a failed
 * write left out.
 *
 * <p>A Spark SQL function of the record path (UDF3: topic, partition, offset -> true when the
 * offset lies within an inclusive range of that partition), compiled into the path's generated
 * code. One SQL term per range would not be: thousands of ranges (an active-active flow's copies
 * between the records it filters out) outgrow the generated method and Spark falls back to
 * interpreting the whole stage. Here a record costs one hash lookup and a binary search.
 *
 * <p>Invariant: never throws; a partition without ranges, or a null column, gives false.
 */
public final class CopiedRanges implements UDF3<String, Integer, Long, Boolean>, Serializable {
  private static final long serialVersionUID = 1L;

  /** One partition's ranges: sorted, disjoint, inclusive. */
  private record Ranges(long[] firsts, long[] lasts) implements Serializable {
    boolean holds(long offset) {
      int at = Arrays.binarySearch(firsts, offset);
      if (at >= 0) {
        return true;
      }
      int below = -at - 2; // the last range starting below the offset
      return below >= 0 && offset <= lasts[below];
    }
  }

  // topic -> ranges indexed by partition (null where a partition has none)
  private final Map<String, Ranges[]> byTopic;

  private CopiedRanges(Map<String, Ranges[]> byTopic) {
    this.byTopic = byTopic;
  }

  /**
   * The ranges as parallel arrays, one entry per range, each partition's ranges in origin order
   * and disjoint.
   */
  static CopiedRanges of(String[] topics, int[] partitions, long[] firsts, long[] lasts) {
    Map<String, TreeMap<Integer, List<long[]>>> grouped = new HashMap<>();
    for (int i = 0; i < topics.length; i++) {
      grouped.computeIfAbsent(topics[i], t -> new TreeMap<>()).computeIfAbsent(partitions[i], p -> new ArrayList<>())
          .add(new long[] {firsts[i], lasts[i]});
    }
    Map<String, Ranges[]> byTopic = new HashMap<>();
    grouped.forEach((topic, parts) -> {
      Ranges[] indexed = new Ranges[parts.lastKey() + 1];
      parts.forEach((partition, spans) -> indexed[partition] = new Ranges(
          spans.stream().mapToLong(s -> s[0]).toArray(), spans.stream().mapToLong(s -> s[1]).toArray()));
      byTopic.put(topic, indexed);
    });
    return new CopiedRanges(byTopic);
  }

  /**
   * The ranges as one text, as Python hands them over in a single call however many there are: a
   * line per range, {@code topic partition first last} (Kafka's topic names hold no blank).
   */
  public static CopiedRanges parse(String text) {
    String[] lines = text.isEmpty() ? new String[0] : text.split("\n");
    String[] topics = new String[lines.length];
    int[] partitions = new int[lines.length];
    long[] firsts = new long[lines.length];
    long[] lasts = new long[lines.length];
    for (int i = 0; i < lines.length; i++) {
      String[] f = lines[i].split(" ");
      topics[i] = f[0];
      partitions[i] = Integer.parseInt(f[1]);
      firsts[i] = Long.parseLong(f[2]);
      lasts[i] = Long.parseLong(f[3]);
    }
    return of(topics, partitions, firsts, lasts);
  }

  @Override
  public Boolean call(String topic, Integer partition, Long offset) {
    return holds(topic, partition, offset);
  }

  boolean holds(String topic, Integer partition, Long offset) {
    if (topic == null || partition == null || offset == null) {
      return false;
    }
    Ranges[] indexed = byTopic.get(topic);
    if (indexed == null || partition < 0 || partition >= indexed.length || indexed[partition] == null) {
      return false;
    }
    return indexed[partition].holds(offset);
  }
}
