package io.drstream.kafka;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;

import java.nio.charset.StandardCharsets;
import java.util.Map;
import org.junit.jupiter.api.Test;

class RunLedgerTest {
  private static byte[] run(String origin, String originTopic, int originPartition, long originStart, String topic,
      int partition, long destStart, long destEnd) {
    return ("{\"origin_cluster\":\"" + origin + "\",\"origin_topic\":\"" + originTopic + "\",\"origin_partition\":"
        + originPartition + ",\"origin_start\":" + originStart + ",\"origin_end\":" + (originStart + destEnd - destStart)
        + ",\"dest_topic\":\"" + topic + "\",\"dest_partition\":" + partition + ",\"dest_start\":" + destStart
        + ",\"dest_end\":" + destEnd + ",\"first_timestamp\":1,\"last_timestamp\":2,\"copied_at\":3}")
        .getBytes(StandardCharsets.UTF_8);
  }

  private static ProvenanceEntry claim(String cluster, String topic, int partition, long offset) {
    return new ProvenanceEntry(cluster, topic, partition, offset, -1);
  }

  @Test
  void aRecordInARunWhoseOriginItsNewestEntryNamesIsACopy() {
    RunLedger ledger = new RunLedger(0);
    ledger.add("__dr_stream_runs.b-to-a", 0, run("B", "orders", 2, 100, "orders", 2, 40, 49), 0);
    assertEquals(RunLedger.Verdict.COPY, ledger.verdict(claim("B", "orders", 2, 105), "orders", 2, 45));
  }

  @Test
  void aClaimThatNamesAnotherOriginThanTheRunIsNoCopy() {
    RunLedger ledger = new RunLedger(0);
    ledger.add("__dr_stream_runs.b-to-a", 0, run("B", "orders", 2, 100, "orders", 2, 40, 49), 0);
    assertEquals(RunLedger.Verdict.NOT_A_COPY, ledger.verdict(claim("B", "orders", 2, 106), "orders", 2, 45));
    assertEquals(RunLedger.Verdict.NOT_A_COPY, ledger.verdict(claim("B", "orders", 3, 105), "orders", 2, 45));
    assertEquals(RunLedger.Verdict.NOT_A_COPY, ledger.verdict(claim("B", "payments", 2, 105), "orders", 2, 45));
  }

  @Test
  void anOffsetBelowALaterRunOfTheSameOriginIsNoCopyAndOnePastEveryRunIsUndecided() {
    RunLedger ledger = new RunLedger(0);
    ledger.add("__dr_stream_runs.b-to-a", 0, run("B", "orders", 2, 100, "orders", 2, 40, 49), 0);
    ledger.add("__dr_stream_runs.b-to-a", 1, run("B", "orders", 2, 110, "orders", 2, 60, 69), 0);
    assertEquals(RunLedger.Verdict.NOT_A_COPY, ledger.verdict(claim("B", "orders", 2, 0), "orders", 2, 55));
    assertEquals(RunLedger.Verdict.UNDECIDED, ledger.verdict(claim("B", "orders", 2, 0), "orders", 2, 70));
    // below every run held: the runs that would tell were trimmed or never read
    assertEquals(RunLedger.Verdict.BEYOND, ledger.verdict(claim("B", "orders", 2, 0), "orders", 2, 39));
    // another origin's runs decide nothing about this one's
    assertEquals(RunLedger.Verdict.UNDECIDED, ledger.verdict(claim("C", "orders", 2, 0), "orders", 2, 55));
  }

  @Test
  void aGrownRunReplacesItsEarlierVersion() {
    RunLedger ledger = new RunLedger(0);
    ledger.add("__dr_stream_runs.b-to-a", 0, run("B", "orders", 0, 0, "orders", 0, 10, 11), 0);
    ledger.add("__dr_stream_runs.b-to-a", 1, run("B", "orders", 0, 0, "orders", 0, 10, 19), 0);
    assertEquals(1, ledger.size());
    assertEquals(RunLedger.Verdict.COPY, ledger.verdict(claim("B", "orders", 0, 8), "orders", 0, 18));
    assertEquals(2, ledger.version("B", "orders", 0));
  }

  @Test
  void aValueThatIsNoRunIsSkippedAndCounted() {
    RunLedger ledger = new RunLedger(0);
    assertFalse(ledger.add("t", 0, "{\"origin_cluster\":\"B\"}".getBytes(StandardCharsets.UTF_8), 0));
    assertFalse(ledger.add("t", 1, null, 0));
    assertEquals(2, ledger.skipped());
    assertEquals(0, ledger.size());
  }

  @Test
  void aRunIsForgottenOnlyOnceItsTopicTrimmedItAndItWasReadLongEnoughAgo() {
    RunLedger ledger = new RunLedger(1000);
    ledger.add("runs", 5, run("B", "orders", 0, 0, "orders", 0, 0, 9), 0);
    ledger.add("runs", 9, run("B", "orders", 0, 20, "orders", 0, 20, 29), 0);
    assertEquals(0, ledger.forget(Map.of("runs", 7L), 500));
    assertEquals(1, ledger.forget(Map.of("runs", 7L), 1000));
    assertEquals(1, ledger.size());
    assertEquals(RunLedger.Verdict.COPY, ledger.verdict(claim("B", "orders", 0, 25), "orders", 0, 25));
  }
}
