package io.drstream.spark;

import io.drstream.kafka.DestinationOriginals;
import io.drstream.kafka.ProvenanceEntry;
import io.drstream.kafka.WrittenCopies;
import java.io.Serializable;
import java.util.regex.Pattern;
import org.apache.spark.sql.api.java.UDF8;
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
 * <p>A header is a claim anybody may write. A rule {@link #confirmedBy} the source's written
 * copies and the destination's records takes the claim only when a run of a dr-stream flow on
 * the source holds the record as the copy its newest entry names ({@link WrittenCopies}), or the
 * destination holds the original the entry naming it names, with the record's key, value and
 * timestamp ({@link DestinationOriginals}; then the claim is true or harmless). Otherwise the
 * record is {@link #UNCONFIRMED} and copied, so a forged header hides no record. A claim neither
 * can check (the runs or the destination cannot be read; the original is gone from the
 * destination, by retention or compaction; a third cluster's entry below every run the source
 * still holds) is taken {@link #UNCHECKED}, as a rule without them (the failback's batch reads)
 * takes every claim.
 *
 * <p>A Spark SQL function of the record path (UDF8: header keys, header values, destination
 * topic, the record's topic, partition, offset, key and value ->
 * {@link #CYCLE} | {@link #MALFORMED} | {@link #UNCONFIRMED} | {@link #UNCHECKED} bits), compiled
 * into the path's generated code, unlike the higher-order functions it replaces. The record path
 * calls it only for a record that has a header under the provenance key, once per record: a rule
 * {@link #counting} counts what it finds there. Invariant: never throws; null headers give 0.
 */
public final class CycleRule implements
    UDF8<Seq<String>, Seq<byte[]>, String, String, Integer, Long, byte[], byte[], Integer>, Serializable {
  private static final long serialVersionUID = 1L;
  public static final int CYCLE = 1;
  public static final int MALFORMED = 2;
  /** A cycle claim no run of the source holds: the record is copied. */
  public static final int UNCONFIRMED = 4;
  /** With {@link #CYCLE}: taken without a check, the source's runs could not be read. */
  public static final int UNCHECKED = 8;

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
  // What a claim is held to; null: claims are taken as they are.
  private final WrittenCopies.Source copies;
  private final DestinationOriginals.Source originals;
  // This JVM's readers of them, found once per deserialized rule: finding one builds a key of
  // the whole client config, too much to do for every returning record.
  private transient WrittenCopies written;
  private transient DestinationOriginals held;

  public CycleRule(String header, String destinationClusterId, FilterOverride[] overrides) {
    this(header, destinationClusterId, overrides, true);
  }

  public CycleRule(String header, String destinationClusterId, FilterOverride[] overrides, boolean forward) {
    this(header, destinationClusterId, overrides, forward, null, null, null);
  }

  private CycleRule(String header, String destinationClusterId, FilterOverride[] overrides, boolean forward,
      RecordCounts counts, WrittenCopies.Source copies, DestinationOriginals.Source originals) {
    this.header = header;
    this.destinationClusterId = destinationClusterId;
    this.overrides = overrides.clone();
    this.forward = forward;
    this.counts = counts;
    this.copies = copies;
    this.originals = originals;
  }

  /** The same rule, counting each cycle and each malformed header it finds in {@code counts}. */
  public CycleRule counting(RecordCounts counts) {
    return new CycleRule(header, destinationClusterId, overrides, forward, counts, copies, originals);
  }

  /**
   * The same rule, taking a cycle claim only for a copy the source's runs hold or whose original
   * the destination holds.
   */
  public CycleRule confirmedBy(WrittenCopies.Source copies, DestinationOriginals.Source originals) {
    return new CycleRule(header, destinationClusterId, overrides, forward, counts, copies, originals);
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
  public Integer call(Seq<String> keys, Seq<byte[]> values, String destinationTopic, String topic,
      Integer partition, Long offset, byte[] key, byte[] value) {
    int flags = flags(keys, values, destinationTopic, topic, partition, offset, key, value);
    if (counts != null && flags != 0) {
      counts.flagged(flags, topic, partition);
    }
    return flags;
  }

  int flags(Seq<String> keys, Seq<byte[]> values, String destinationTopic, String topic, Integer partition,
      Long offset, byte[] key, byte[] value) {
    if (keys == null || values == null) {
      return 0;
    }
    int flags = 0;
    boolean claimed = false;
    ProvenanceEntry newest = null;
    // The claim's entry that names the destination, whose original the destination can show.
    ProvenanceEntry named = null;
    int n = Math.min(keys.length(), values.length());
    for (int i = 0; i < n; i++) {
      if (!header.equals(keys.apply(i))) {
        continue;
      }
      ProvenanceEntry entry = ProvenanceEntry.parse(values.apply(i));
      if (entry == null) {
        flags |= MALFORMED;
        continue;
      }
      newest = entry;
      boolean namesDestination = entry.cluster().equals(destinationClusterId) && entry.topic().equals(destinationTopic);
      if ((!forward || namesDestination) && !allowed(entry)) {
        claimed = true;
        if (namesDestination && named == null) {
          named = entry;
        }
      }
    }
    if (!claimed) {
      return flags;
    }
    if (copies == null) {
      return flags | CYCLE;
    }
    if (topic == null || partition == null || offset == null) {
      return flags | UNCONFIRMED;
    }
    if (written == null) {
      written = copies.copies();
    }
    WrittenCopies.Verdict verdict = written.verdict(newest, topic, partition, offset, named == null);
    if (verdict == WrittenCopies.Verdict.COPY) {
      return flags | CYCLE;
    }
    if (named != null && originals != null) {
      byte[] digest = DestinationOriginals.digest(key, value);
      if (held == null) {
        held = originals.originals();
      }
      return flags | switch (held.match(named.topic(), named.partition(), named.offset(), digest)) {
        case SAME -> CYCLE;
        case DIFFERENT, NEVER -> UNCONFIRMED;
        // Copying back a record whose original compaction or retention removed would bring an
        // old value back as the newest: such a claim is taken, and counted apart.
        case GONE, UNREAD -> CYCLE | UNCHECKED;
      };
    }
    return flags | switch (verdict) {
      case COPY -> CYCLE;
      case NOT_A_COPY -> UNCONFIRMED;
      case BEYOND, UNREAD -> CYCLE | UNCHECKED;
    };
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
