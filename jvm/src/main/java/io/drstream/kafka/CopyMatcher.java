package io.drstream.kafka;

import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;

/**
 * Pairs the copies another replicator wrote to one destination partition with the source records
 * they are copies of, walking both partitions once, in offset order (the rule behind {@code
 * dr-stream adopt}; {@link AdoptedCopies} does the reading).
 *
 * <p>A replicator that copies at least once (MirrorMaker 2, Replicator) writes a partition's
 * records in source order, and after a restart writes again from the last position it had
 * committed: the destination holds stretches of copies, each starting at or below where the one
 * before ended. A copy is told from its source record by content ({@link #digest}: key, value,
 * headers) and timestamp. Each destination record is matched to the next source record when they
 * agree; else to the nearest earlier one within {@code lookBehind} records (a re-send); else to
 * the nearest later one within {@code lookAhead} (records the other replicator never copied);
 * else it is no copy of a source record that is still there ({@code unmatched}).
 *
 * <p>Invariants: the copies kept ({@link #runs}) are one per origin offset at most, in ascending
 * origin and destination order, and each is the copy a consumer reaches last: a re-send
 * supersedes every copy kept for its origin offset and after, so a group placed on a kept copy
 * reads every later record once (0 re-read, 0 skipped). Every destination record fed is counted
 * exactly once: kept, superseded ({@link #duplicates}) or unmatched.
 */
public final class CopyMatcher {
  /** One source record: its offset, content digest and timestamp. */
  public record Rec(long offset, long digest, long timestamp) {}

  /** The source partition, read forward once; {@code null} at its end. */
  public interface SourceRecords {
    Rec next();
  }

  /**
   * Kept copies: origin offsets [originStart, originEnd] at destination offsets [destStart,
   * destEnd], one to one; {@code position} counts source records before originStart from the
   * walk's start (what tells records the other replicator skipped from offsets no record holds).
   */
  public static final class Run {
    public final long originStart;
    public long originEnd;
    public final long destStart;
    public long destEnd;
    final long position;
    public final long firstTimestamp;
    public long lastTimestamp;

    Run(long originStart, long destStart, long position, long timestamp) {
      this.originStart = this.originEnd = originStart;
      this.destStart = this.destEnd = destStart;
      this.position = position;
      this.firstTimestamp = this.lastTimestamp = timestamp;
    }

    public long records() {
      return destEnd - destStart + 1;
    }

    long lastPosition() {
      return position + records() - 1;
    }
  }

  private final SourceRecords source;
  private final int lookBehind;
  private final int lookAhead;
  // source records at positions [base, base + buffer.size())
  private final ArrayList<Rec> buffer = new ArrayList<>();
  private long base;
  private boolean exhausted;
  private final Map<Long, ArrayDeque<Long>> positionsOf = new HashMap<>();
  private long expected; // position of the source record the next copy should be of
  private final ArrayList<Run> runs = new ArrayList<>();
  private long kept;
  private long duplicates;
  private long unmatched;
  private final List<long[]> unmatchedRanges = new ArrayList<>();

  public CopyMatcher(SourceRecords source, int lookBehind, int lookAhead) {
    this.source = source;
    this.lookBehind = lookBehind;
    this.lookAhead = lookAhead;
  }

  /** FNV-1a over the parts, each prefixed by its length (-1 for null), so no two splits agree. */
  public static long digest(byte[]... parts) {
    long h = 0xcbf29ce484222325L;
    for (byte[] part : parts) {
      int length = part == null ? -1 : part.length;
      for (int shift = 0; shift < 32; shift += 8) {
        h = (h ^ ((length >>> shift) & 0xff)) * 0x100000001b3L;
      }
      if (part != null) {
        for (byte b : part) {
          h = (h ^ (b & 0xff)) * 0x100000001b3L;
        }
      }
    }
    return h;
  }

  /**
   * The destination record at {@code destOffset}: pairs it with its source record if one is found.
   * {@code sameTime}: its timestamp was kept from the source (CreateTime), so must be equal.
   */
  public void copy(long destOffset, long digest, long timestamp, boolean sameTime) {
    Long at = null;
    if (buffered(expected) && agrees(expected, digest, timestamp, sameTime)) {
      at = expected;
    }
    if (at == null) {
      at = nearest(digest, timestamp, sameTime);
    }
    while (at == null && !exhausted && base + buffer.size() - expected < lookAhead) {
      long p = base + buffer.size();
      if (read() && agrees(p, digest, timestamp, sameTime)) {
        at = p;
      }
    }
    if (at == null) {
      unmatched++;
      long[] last = unmatchedRanges.isEmpty() ? null : unmatchedRanges.get(unmatchedRanges.size() - 1);
      if (last != null && last[1] + 1 == destOffset) {
        last[1] = destOffset;
      } else {
        unmatchedRanges.add(new long[] {destOffset, destOffset});
      }
      return;
    }
    take(at, destOffset);
  }

  private void take(long position, long destOffset) {
    Rec rec = at(position);
    if (position < expected) {
      supersede(rec.offset());
    }
    Run last = runs.isEmpty() ? null : runs.get(runs.size() - 1);
    if (last != null && last.originEnd + 1 == rec.offset() && last.destEnd + 1 == destOffset) {
      last.originEnd = rec.offset();
      last.destEnd = destOffset;
      last.lastTimestamp = rec.timestamp();
    } else {
      runs.add(new Run(rec.offset(), destOffset, position, rec.timestamp()));
    }
    kept++;
    expected = position + 1;
    forget();
  }

  /** A re-send from {@code origin}: the copies kept for it and after are not the ones read last. */
  private void supersede(long origin) {
    while (!runs.isEmpty()) {
      Run last = runs.get(runs.size() - 1);
      if (last.originStart >= origin) {
        runs.remove(runs.size() - 1);
        kept -= last.records();
        duplicates += last.records();
      } else {
        if (last.originEnd >= origin) {
          long cut = last.originEnd - origin + 1;
          last.originEnd -= cut;
          last.destEnd -= cut;
          last.lastTimestamp = -1; // the record now last was not looked at again
          kept -= cut;
          duplicates += cut;
        }
        return;
      }
    }
  }

  /** The nearest source record before the expected one with this content, else the nearest after it. */
  private Long nearest(long digest, long timestamp, boolean sameTime) {
    ArrayDeque<Long> positions = positionsOf.get(digest);
    if (positions == null) {
      return null;
    }
    Long behind = null;
    Long ahead = null;
    for (Long p : positions) {
      if (!agrees(p, digest, timestamp, sameTime)) {
        continue;
      }
      if (p < expected) {
        behind = p;
      } else if (ahead == null) {
        ahead = p;
      }
    }
    return behind != null ? behind : ahead;
  }

  private boolean buffered(long position) {
    while (position >= base + buffer.size() && !exhausted) {
      read();
    }
    return position >= base && position < base + buffer.size();
  }

  private boolean read() {
    Rec rec = source.next();
    if (rec == null) {
      exhausted = true;
      return false;
    }
    positionsOf.computeIfAbsent(rec.digest(), d -> new ArrayDeque<>()).addLast(base + buffer.size());
    buffer.add(rec);
    return true;
  }

  private Rec at(long position) {
    return buffer.get((int) (position - base));
  }

  private boolean agrees(long position, long digest, long timestamp, boolean sameTime) {
    Rec rec = at(position);
    return rec.digest() == digest && (!sameTime || rec.timestamp() == timestamp);
  }

  /** Drops source records more than {@code lookBehind} before the expected one (in steps, not one by one). */
  private void forget() {
    long drop = expected - lookBehind - base;
    if (drop < Math.max(1024, lookBehind)) {
      return;
    }
    for (int i = 0; i < drop; i++) {
      Rec rec = buffer.get(i);
      ArrayDeque<Long> positions = positionsOf.get(rec.digest());
      positions.pollFirst();
      if (positions.isEmpty()) {
        positionsOf.remove(rec.digest());
      }
    }
    buffer.subList(0, (int) drop).clear();
    base += drop;
  }

  public List<Run> runs() {
    return runs;
  }

  public long kept() {
    return kept;
  }

  /** Copies superseded by a later copy of the same record. */
  public long duplicates() {
    return duplicates;
  }

  /** Destination records no source record still there was found for. */
  public long unmatched() {
    return unmatched;
  }

  /** Destination offset ranges [first, last] of the unmatched records, in order. */
  public List<long[]> unmatchedRanges() {
    return unmatchedRanges;
  }

  /** Source records between the first and last kept copy that no kept copy is of. */
  public long uncopied() {
    if (runs.isEmpty()) {
      return 0;
    }
    long span = runs.get(runs.size() - 1).lastPosition() - runs.get(0).position + 1;
    return span - kept;
  }

  /** Origin offset ranges [first, last, records] between kept runs whose records were not copied. */
  public List<long[]> uncopiedRanges() {
    List<long[]> out = new ArrayList<>();
    for (int i = 1; i < runs.size(); i++) {
      Run before = runs.get(i - 1);
      Run after = runs.get(i);
      long records = after.position - before.lastPosition() - 1;
      if (records > 0) {
        out.add(new long[] {before.originEnd + 1, after.originStart - 1, records});
      }
    }
    return out;
  }
}
