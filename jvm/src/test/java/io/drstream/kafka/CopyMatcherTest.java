package io.drstream.kafka;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;

import java.util.ArrayList;
import java.util.Iterator;
import java.util.List;
import org.junit.jupiter.api.Test;

class CopyMatcherTest {
  /** Source records at the offsets given, each its own content (digest = offset) at time 1000 + offset. */
  private static CopyMatcher over(long... offsets) {
    List<CopyMatcher.Rec> recs = new ArrayList<>();
    for (long o : offsets) {
      recs.add(new CopyMatcher.Rec(o, o, 1000 + o));
    }
    Iterator<CopyMatcher.Rec> it = recs.iterator();
    return new CopyMatcher(() -> it.hasNext() ? it.next() : null, 100, 100);
  }

  private static CopyMatcher range(long first, long last) {
    long[] offsets = new long[(int) (last - first + 1)];
    for (int i = 0; i < offsets.length; i++) {
      offsets[i] = first + i;
    }
    return over(offsets);
  }

  /** Feeds copies of the origin offsets given, at destination offsets from `destStart` on. */
  private static long copies(CopyMatcher m, long destStart, long... origins) {
    long d = destStart;
    for (long o : origins) {
      m.copy(d++, o, 1000 + o, true);
    }
    return d;
  }

  private static long[] seq(long first, long last) {
    long[] out = new long[(int) (last - first + 1)];
    for (int i = 0; i < out.length; i++) {
      out[i] = first + i;
    }
    return out;
  }

  private static List<long[]> runs(CopyMatcher m) {
    List<long[]> out = new ArrayList<>();
    for (CopyMatcher.Run r : m.runs()) {
      out.add(new long[] {r.originStart, r.originEnd, r.destStart, r.destEnd});
    }
    return out;
  }

  @Test
  void aSteadyCopyIsOneRunWithEveryRecordKept() {
    CopyMatcher m = range(0, 49);
    copies(m, 10, seq(0, 49));
    assertEquals(1, m.runs().size());
    assertArrayEquals(new long[] {0, 49, 10, 59}, runs(m).get(0));
    assertEquals(50, m.kept());
    assertEquals(0, m.duplicates() + m.unmatched() + m.uncopied());
  }

  @Test
  void aReSendSupersedesTheEarlierCopiesSoTheLastCopyOfEachRecordIsKept() {
    CopyMatcher m = range(0, 99);
    long d = copies(m, 0, seq(0, 59));   // copied 0..59, then restarted from its commit at 40
    copies(m, d, seq(40, 99));
    assertEquals(2, m.runs().size());
    assertArrayEquals(new long[] {0, 39, 0, 39}, runs(m).get(0));
    assertArrayEquals(new long[] {40, 99, 60, 119}, runs(m).get(1));
    assertEquals(100, m.kept());
    assertEquals(20, m.duplicates());
    assertEquals(0, m.uncopied());
  }

  @Test
  void aReSendCutShortLeavesTheRecordsPastItUnkeptSoTheyAreCopiedAgain() {
    CopyMatcher m = range(0, 99);
    long d = copies(m, 0, seq(0, 10));
    copies(m, d, seq(5, 7));
    assertArrayEquals(new long[] {5, 7, 11, 13}, runs(m).get(1));
    assertEquals(7, m.runs().get(m.runs().size() - 1).originEnd);
    assertEquals(6, m.duplicates());
  }

  @Test
  void recordsTheOtherReplicatorNeverCopiedAreCountedAsUncopied() {
    CopyMatcher m = range(0, 99);
    long d = copies(m, 0, seq(0, 9));
    copies(m, d, seq(15, 19));
    assertEquals(5, m.uncopied());
    assertArrayEquals(new long[] {10, 14, 5}, m.uncopiedRanges().get(0));
  }

  @Test
  void gapsInSourceOffsetsAreNoUncopiedRecords() {
    CopyMatcher m = over(0, 1, 2, 5, 6); // a transaction marker or compaction between 2 and 5
    copies(m, 0, 0, 1, 2, 5, 6);
    assertEquals(0, m.uncopied());
    assertEquals(2, m.runs().size());
  }

  @Test
  void aDestinationRecordOfNoSourceRecordIsUnmatchedAndTheWalkGoesOn() {
    CopyMatcher m = range(0, 19);
    long d = copies(m, 0, seq(0, 9));
    m.copy(d++, 777_777, 5, true);
    m.copy(d++, 777_778, 5, true);
    copies(m, d, seq(10, 19));
    assertEquals(2, m.unmatched());
    assertArrayEquals(new long[] {10, 11}, m.unmatchedRanges().get(0));
    assertEquals(20, m.kept());
    assertArrayEquals(new long[] {10, 19, 12, 21}, runs(m).get(1));
  }

  @Test
  void aCopyWhoseTimestampDiffersIsNoCopyUnlessTheDestinationSetsItsOwnTime() {
    CopyMatcher m = range(0, 1);
    m.copy(0, 0, 42, true);
    assertEquals(1, m.unmatched());
    m.copy(1, 0, 42, false);
    assertEquals(1, m.kept());
  }

  @Test
  void theSourceIsForgottenBehindTheLookBehindSoMemoryStaysBounded() {
    CopyMatcher m = range(0, 9_999);
    copies(m, 0, seq(0, 9_999));
    assertEquals(10_000, m.kept());
    // a re-send from further back than the look-behind is no longer found
    m.copy(10_000, 10, 1010, true);
    assertEquals(1, m.unmatched());
  }

  @Test
  void digestsTellNullFromEmptyAndWhereOnePartEnds() {
    assertEquals(CopyMatcher.digest(new byte[0], null), CopyMatcher.digest(new byte[0], null));
    org.junit.jupiter.api.Assertions.assertNotEquals(CopyMatcher.digest(null, new byte[0]),
        CopyMatcher.digest(new byte[0], null));
    org.junit.jupiter.api.Assertions.assertNotEquals(CopyMatcher.digest(new byte[] {1, 2}, new byte[] {3}),
        CopyMatcher.digest(new byte[] {1}, new byte[] {2, 3}));
  }
}
