package io.drstream.spark;

import java.io.Serializable;
import org.apache.spark.SparkContext;
import org.apache.spark.sql.api.java.UDF1;
import org.apache.spark.util.LongAccumulator;

/**
 * What the replicate query's rules kept from the destination, counted where each rule decides:
 * records that came from the destination (a cycle the source's runs confirm), records whose
 * provenance header is no entry (copied all the same), records a restart found already copied,
 * records an operator left out at failback, cycle claims no run confirmed (copied, and counted by
 * source partition too) and cycle claims taken unchecked because the source's runs could not be read.
 *
 * <p>Why not Spark's observed metrics: an observation ships its aggregate expressions with every
 * task both ways and generates their code anew in every task, which cost the flow a sixth of its
 * JVM's CPU at five batches a second. These are Spark accumulators instead (six counts, and the
 * unconfirmed claims per partition), moved only by the rules' own functions, and only for the
 * records they drop or flag (a record without a provenance header, past its restart's replay
 * span, costs nothing here).
 *
 * <p>Invariants: the counts grow only in tasks of the query that registered them, and Spark adds
 * a task's counts once, when the task succeeds; {@link #taken} hands each count out once. A
 * batch that fails after some of its tasks succeeded is read again: its records are then counted
 * again, never lost from the counts.
 */
public final class RecordCounts implements Serializable {
  private static final long serialVersionUID = 1L;
  public static final int CAME_BACK = 0;
  public static final int MALFORMED = 1;
  public static final int ALREADY_COPIED = 2;
  public static final int LEFT_OUT = 3;
  public static final int UNCONFIRMED = 4;
  public static final int UNCHECKED = 5;

  private final LongAccumulator[] counts = new LongAccumulator[6];
  // By "topic:partition" (no topic name holds a colon).
  private final TopicCounts unconfirmedByTopic = new TopicCounts();
  // The totals last handed out: driver side only.
  private transient long[] taken;

  /** Counts registered with {@code context} under {@code query}'s name. */
  public RecordCounts(SparkContext context, String query) {
    String[] names = {"came_back", "malformed_provenance", "already_copied", "left_out", "unconfirmed_cycle",
        "unchecked_cycle"};
    for (int i = 0; i < counts.length; i++) {
      counts[i] = context.longAccumulator(query + "." + names[i]);
    }
    context.register(unconfirmedByTopic, query + ".unconfirmed_cycle_by_topic");
  }

  /** Counts what {@link CycleRule} found in one record of source partition {@code topic}/{@code partition}. */
  void flagged(int flags, String topic, Integer partition) {
    if ((flags & CycleRule.CYCLE) != 0) {
      counts[(flags & CycleRule.UNCHECKED) != 0 ? UNCHECKED : CAME_BACK].add(1);
    }
    if ((flags & CycleRule.MALFORMED) != 0) {
      counts[MALFORMED].add(1);
    }
    if ((flags & CycleRule.UNCONFIRMED) != 0) {
      counts[UNCONFIRMED].add(1);
      unconfirmedByTopic.add(topic + ":" + partition);
    }
  }

  /**
   * A Spark SQL function of one record that a restart drops: counts it as left out at failback
   * (argument true) or already copied, and is true. Nondeterministic, so the optimizer neither
   * folds it nor calls it for a record the filter keeps.
   */
  public UDF1<Boolean, Boolean> dropped() {
    LongAccumulator copied = counts[ALREADY_COPIED];
    LongAccumulator left = counts[LEFT_OUT];
    return (UDF1<Boolean, Boolean> & Serializable) leftOut -> {
      (Boolean.TRUE.equals(leftOut) ? left : copied).add(1);
      return true;
    };
  }

  /** The counts since the last call (since registration at the first), by the indexes above. */
  public synchronized long[] taken() {
    long[] now = new long[counts.length];
    long[] since = new long[counts.length];
    for (int i = 0; i < counts.length; i++) {
      now[i] = counts[i].value();
      since[i] = now[i] - (taken == null ? 0 : taken[i]);
    }
    taken = now;
    return since;
  }

  /** The unconfirmed cycle claims by "topic:partition" since the last call, as parallel arrays (names, counts). */
  public synchronized Object[] unconfirmedTaken() {
    return unconfirmedByTopic.taken();
  }
}
