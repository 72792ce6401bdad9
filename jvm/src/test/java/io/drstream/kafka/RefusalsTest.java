package io.drstream.kafka;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;

import org.apache.kafka.common.InvalidRecordException;
import org.apache.kafka.common.KafkaException;
import org.apache.kafka.common.errors.RecordTooLargeException;
import org.apache.kafka.common.errors.TimeoutException;
import org.junit.jupiter.api.Test;

class RefusalsTest {
  private static final CopyRuns.Origin AT_42 = new CopyRuns.Origin("c1", "orders", 3, 42, 7);

  @Test
  void aRefusedRecordsOriginIsAttachedToItsOwnError() {
    Refusals refusals = new Refusals();
    RecordTooLargeException error = new RecordTooLargeException("The message is 3000 bytes");
    refusals.failed(error, AT_42, "x.orders", 3);
    assertArrayEquals(new String[] {"dr-stream refused record {\"cluster\":\"c1\",\"topic\":\"orders\",\"partition\":3,"
        + "\"offset\":42,\"dest_topic\":\"x.orders\",\"dest_partition\":3,"
        + "\"error\":\"RecordTooLargeException: The message is 3000 bytes\"}"}, Refusals.marks(error));
  }

  @Test
  void theGenericErrorsOfABatchBeforeTheRefusedRecordCarryItsOriginTooOnlyOnce() {
    Refusals refusals = new Refusals();
    KafkaException first = new KafkaException("Failed to append record because it was part of a batch");
    refusals.failed(first, new CopyRuns.Origin("c1", "orders", 3, 41, 7), "orders", 3);
    refusals.failed(new InvalidRecordException("Compacted topic cannot accept message without key"), AT_42,
        "orders", 3);
    refusals.failed(new InvalidRecordException("later"), new CopyRuns.Origin("c1", "orders", 3, 43, 7), "orders", 3);
    assertEquals(1, Refusals.marks(first).length);
    assertEquals(true, Refusals.marks(first)[0].contains("\"offset\":42"));
  }

  @Test
  void anErrorThatIsNotARefusalCarriesNothing() {
    Refusals refusals = new Refusals();
    TimeoutException error = new TimeoutException("Expiring 3 record(s)");
    refusals.failed(error, AT_42, "orders", 3);
    assertEquals(0, Refusals.marks(error).length);
  }

  @Test
  void aReasonStaysOneLineOfJson() {
    assertEquals("\"a\\\"b\\\\c\\u000ad\\u00e9\"", Refusals.quoted("a\"b\\c\nd\u00e9"));
  }
}
