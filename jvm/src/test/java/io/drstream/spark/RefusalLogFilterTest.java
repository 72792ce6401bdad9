package io.drstream.spark;

import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import org.junit.jupiter.api.Test;

class RefusalLogFilterTest {
  @Test
  void anErrorCarryingARefusedRecordDeepInItsCausesIsKeptOff() {
    RuntimeException task = new RuntimeException("Failed to append record");
    task.addSuppressed(new RuntimeException("dr-stream refused record {\"topic\":\"t\"}"));
    RuntimeException query = new RuntimeException("Job aborted", new IllegalStateException("stage", task));
    assertTrue(RefusalLogFilter.refused("Query replicate-x terminated with error", query));
  }

  @Test
  void aLostTasksTextNamingARefusedRecordIsKeptOff() {
    assertTrue(RefusalLogFilter.refused("Lost task 0.0 ...\n\tSuppressed: x: dr-stream refused record {}", null));
  }

  @Test
  void everyOtherEventPasses() {
    RuntimeException loop = new RuntimeException("a");
    loop.addSuppressed(new RuntimeException("c"));
    assertFalse(RefusalLogFilter.refused("Query terminated with error", new RuntimeException("b", loop)));
    assertFalse(RefusalLogFilter.refused(null, null));
  }
}
