package io.drstream.kafka;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;

import org.junit.jupiter.api.Test;

/** The metadata rule of {@link GroupOffsets}: what a commit carries, and what a fetch gives back. */
class GroupOffsetsTest {
  @Test
  void aCommitsMetadataEndsInOneNulWhateverItWasGiven() {
    assertEquals("dr-stream:f@ID\u0000", GroupOffsets.onTheWire("dr-stream:f@ID"));
    assertEquals("dr-stream:f@ID\u0000", GroupOffsets.onTheWire("dr-stream:f@ID\u0000"));
    assertEquals("\u0000", GroupOffsets.onTheWire(""));
  }

  @Test
  void aFetchedMetadataIsTheTextItsWriterGaveEitherWay() {
    // committed here, or by librdkafka (whose length counts the terminator): the same text
    assertEquals("dr-stream:f@ID", GroupOffsets.asWritten(GroupOffsets.onTheWire("dr-stream:f@ID")));
    // committed before the rule, or by a Java consumer: unchanged
    assertEquals("app", GroupOffsets.asWritten("app"));
    assertEquals("", GroupOffsets.asWritten(""));
    assertNull(GroupOffsets.asWritten(null));
  }
}
