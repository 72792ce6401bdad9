package io.drstream.spark;

import io.drstream.kafka.ProvenanceEntry;
import java.io.Serializable;
import java.util.regex.Pattern;
import org.apache.spark.sql.api.java.UDF3;
import scala.collection.Seq;

/**
 * What a record's provenance headers say about copying it: whether it came from the destination
 * topic (copying it would loop) and whether a header under the provenance key is no entry.
 *
 * <p>The rule: among the values under the provenance key, an entry ({@link ProvenanceEntry})
 * that names the destination's cluster.id and topic makes the record a cycle, unless a filter
 * override lets it through: the entry's cluster and topic fully match the override's regular
 * expressions and its copy time lies within the override's bounds (inclusive; an entry without a
 * time counts as -1). A flow that does not forward (a full mesh, where every cluster gets each
 * other cluster's own records straight from it) takes any entry as a cycle, under the same
 * overrides: the record came from another cluster. A value that is no entry makes the record
 * malformed; it is still copied.
 *
 * <p>A Spark SQL function of the record path (UDF3: header keys, header values, destination
 * topic -> {@link #CYCLE} | {@link #MALFORMED} bits), compiled into the path's generated code,
 * unlike the higher-order functions it replaces. The record path calls it only for a record that
 * has a header under the provenance key, once per record: a rule {@link #counting} counts what it
 * finds there. Invariant: never throws; null headers give 0.
 */
public final class CycleRule implements UDF3<Seq<String>, Seq<byte[]>, String, Integer>, Serializable {
  private static final long serialVersionUID = 1L;
  public static final int CYCLE = 1;
  public static final int MALFORMED = 2;

  /** Lets an entry through the rule: cluster and topic regexes, copy time within [from, to]. */
  public record FilterOverride(Pattern cluster, Pattern topic, long fromMs, long toMs) implements Serializable {
    boolean allows(ProvenanceEntry e) {
      return cluster.matcher(e.cluster()).matches() && topic.matcher(e.topic()).matches()
          && e.timestamp() >= fromMs && e.timestamp() <= toMs;
    }
  }

  private final String header;
  private final String destinationClusterId;
  private final FilterOverride[] overrides;
  private final boolean forward;
  // Where the replicate query counts what the rule finds; null in batch reads, which count nothing.
  private final RecordCounts counts;

  public CycleRule(String header, String destinationClusterId, FilterOverride[] overrides) {
    this(header, destinationClusterId, overrides, true);
  }

  public CycleRule(String header, String destinationClusterId, FilterOverride[] overrides, boolean forward) {
    this(header, destinationClusterId, overrides, forward, null);
  }

  private CycleRule(String header, String destinationClusterId, FilterOverride[] overrides, boolean forward,
      RecordCounts counts) {
    this.header = header;
    this.destinationClusterId = destinationClusterId;
    this.overrides = overrides.clone();
    this.forward = forward;
    this.counts = counts;
  }

  /** The same rule, counting each cycle and each malformed header it finds in {@code counts}. */
  public CycleRule counting(RecordCounts counts) {
    return new CycleRule(header, destinationClusterId, overrides, forward, counts);
  }

  /** The overrides as Python hands them over: parallel arrays, open bounds as Long.MIN/MAX_VALUE. */
  public static FilterOverride[] overrides(String[] clusters, String[] topics, long[] fromMs, long[] toMs) {
    FilterOverride[] out = new FilterOverride[clusters.length];
    for (int i = 0; i < out.length; i++) {
      out[i] = new FilterOverride(Pattern.compile(clusters[i]), Pattern.compile(topics[i]), fromMs[i], toMs[i]);
    }
    return out;
  }

  @Override
  public Integer call(Seq<String> keys, Seq<byte[]> values, String destinationTopic) {
    int flags = flags(keys, values, destinationTopic);
    if (counts != null && flags != 0) {
      counts.flagged(flags);
    }
    return flags;
  }

  int flags(Seq<String> keys, Seq<byte[]> values, String destinationTopic) {
    if (keys == null || values == null) {
      return 0;
    }
    int flags = 0;
    int n = Math.min(keys.length(), values.length());
    for (int i = 0; i < n; i++) {
      if (!header.equals(keys.apply(i))) {
        continue;
      }
      ProvenanceEntry entry = ProvenanceEntry.parse(values.apply(i));
      if (entry == null) {
        flags |= MALFORMED;
      } else if ((!forward || entry.cluster().equals(destinationClusterId) && entry.topic().equals(destinationTopic))
          && !allowed(entry)) {
        flags |= CYCLE;
      }
    }
    return flags;
  }

  private boolean allowed(ProvenanceEntry entry) {
    for (FilterOverride override : overrides) {
      if (override.allows(entry)) {
        return true;
      }
    }
    return false;
  }
}
