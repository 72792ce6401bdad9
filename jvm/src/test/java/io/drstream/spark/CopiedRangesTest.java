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
    assertTrue(ranges.holds("orders", 2, 10L));
    assertTrue(ranges.holds("orders", 2, 11L));
    assertTrue(ranges.holds("orders", 2, 12L));
    assertTrue(ranges.holds("orders", 2, 20L));
    assertTrue(ranges.holds("orders", 0, 5L));
    assertTrue(ranges.holds("audit", 1, 150L));
  }

  @Test
  void anOffsetBetweenOrAroundTheRangesIsNot() {
    assertFalse(ranges.holds("orders", 2, 9L));
    assertFalse(ranges.holds("orders", 2, 13L));
    assertFalse(ranges.holds("orders", 2, 19L));
    assertFalse(ranges.holds("orders", 2, 21L));
    assertFalse(ranges.holds("audit", 1, 99L));
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
