package io.drstream.spark;

import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import org.junit.jupiter.api.Test;

class CopiedRangesTest {
  private final CopiedRanges ranges = CopiedRanges.of(
      new String[] {"orders", "orders", "orders", "audit"}, new int[] {2, 2, 0, 1},
      new long[] {10, 20, 5, 100}, new long[] {12, 20, 5, 200});

  @Test
  void anOffsetWithinARangeOfItsPartitionIsCopied() {
    long[] copied = {10, 11, 12, 20};
    for (long offset : copied) {
      assertTrue(ranges.holds("orders", 2, offset), "orders[2] " + offset);
    }
    assertTrue(ranges.holds("orders", 0, 5L));
    assertTrue(ranges.holds("audit", 1, 150L));
  }

  @Test
  void anOffsetBetweenOrAroundTheRangesIsNot() {
    long[] around = {9, 13, 19, 21};
    for (long offset : around) {
      assertFalse(ranges.holds("orders", 2, offset), "orders[2] " + offset);
    }
    assertFalse(ranges.holds("audit", 1, 99L));
  }

  @Test
  void theRangesReadFromTextAreTheSame() {
    CopiedRanges parsed = CopiedRanges.parse("orders 2 10 12\norders 2 20 20\naudit 1 100 200");
    assertTrue(parsed.holds("orders", 2, 11L));
    assertTrue(parsed.holds("audit", 1, 200L));
    assertFalse(parsed.holds("orders", 2, 15L));
    assertFalse(CopiedRanges.parse("").holds("orders", 2, 11L));
  }

  @Test
  void aPartitionOrTopicWithoutRangesOrANullColumnIsNot() {
    assertFalse(ranges.holds("orders", 1, 5L));
    assertFalse(ranges.holds("orders", 7, 5L));
    assertFalse(ranges.holds("audit", 0, 150L));
    assertFalse(ranges.holds("other", 0, 5L));
    assertFalse(ranges.holds(null, 0, 5L));
    assertFalse(ranges.holds("orders", null, 5L));
    assertFalse(ranges.holds("orders", 2, null));
  }
}
