from dr_stream.replication.flow_metrics import FlowMetrics
from dr_stream.replication.progress import BatchRead, ProgressPrinter, durations, partitions_read, read_by_topic
from dr_stream.replication.trigger_width import BatchCost

BATCH = {"startOffset": {"a": {"0": 5, "1": 7}, "b": {"0": 0}},
         "endOffset": {"a": {"0": 9, "1": 7}, "b": {"0": 3}, "c": {"0": 4}},
         "latestOffset": {"a": {"0": 12, "1": 7}, "b": {"0": 3}, "c": {"0": 4}}}


def test_a_batch_reads_from_the_partitions_whose_end_moved_past_their_start():
    # a[1] did not move; c[0] is new to the query, with no start to measure from
    assert partitions_read([BATCH]) == 2
    assert read_by_topic([BATCH]) == {"a": 4, "b": 3, "c": 0}


def test_a_batch_may_have_gaps_only_when_it_delivered_fewer_records_than_offsets_or_a_partition_is_new():
    spans = ({("a", 0): 5, ("a", 1): 7}, {("a", 0): 9, ("a", 1): 8})
    assert not BatchRead(*spans, 5).may_have_gaps
    assert BatchRead(*spans, 4).may_have_gaps
    assert BatchRead(spans[0], {**spans[1], ("c", 0): 4}, 9).may_have_gaps
    assert BatchRead(*spans, 4).without({("a", 0): 6}) == BatchRead({("a", 1): 7}, {("a", 1): 8}, 4)


def test_durations_show_the_total_and_the_three_largest_parts():
    assert durations({"triggerExecution": 1094, "addBatch": 700, "walCommit": 120, "getBatch": 3, "latestOffset": 0}) \
        == "1094 ms (addBatch 700, walCommit 120, getBatch 3)"


class Taken:
    """What the record path's counts hand out, one dict per call (jvm/ RecordCounts.taken)."""

    def __init__(self, counts: list[dict[str, int]], unconfirmed: dict[tuple[str, int], int] | None = None) -> None:
        self.counts = counts
        self.unconfirmed = unconfirmed or {}

    def taken(self) -> dict[str, int]:
        return self.counts.pop(0)

    def unconfirmed_taken(self) -> dict[tuple[str, int], int]:
        taken, self.unconfirmed = self.unconfirmed, {}
        return taken


def test_a_batchs_json_progress_is_counted_logged_and_passed_on():
    lines, ends, costs = [], [], []
    printer = ProgressPrinter("f", "replicate-f", FlowMetrics("f", "replicate-f"), log=lines.append,
                              on_batch=ends.append, on_cost=costs.append)
    printer.counts = Taken([{"came_from_destination": 3, "malformed_provenance": 0, "already_copied": 0,
                             "left_out": 0}])
    # As Spark writes it: a rate it could not compute is left out.
    printer.batch_done({"name": "replicate-f", "batchId": 7, "numInputRows": 10, "sources": [BATCH],
                        "durationMs": {"triggerExecution": 250, "addBatch": 200}})
    printer.batch_done({"name": "another query", "numInputRows": 99})
    assert printer.totals == {"batches": 1, "read": 10, "copied": 7, "skipped_cycle": 3, "malformed_provenance": 0,
                              "unconfirmed_cycle": 0}
    assert ends == [BatchRead({("a", 0): 5, ("a", 1): 7, ("b", 0): 0},
                              {("a", 0): 9, ("a", 1): 7, ("b", 0): 3, ("c", 0): 4}, 10,
                              {("a", 0): 12, ("a", 1): 7, ("b", 0): 3, ("c", 0): 4})]
    assert costs == [BatchCost(250, 10, 2)]
    assert lines[0].startswith("batch 7: 10 read, 7 copied, 3 skipped") and "0 rec/s" in lines[0]


def test_cycle_claims_no_run_confirms_are_said_copied_and_counted_by_topic_and_unchecked_ones_as_skipped():
    lines: list[str] = []
    metrics = FlowMetrics("f", "replicate-f")
    printer = ProgressPrinter("f", "replicate-f", metrics, log=lines.append)
    printer.counts = Taken([{"came_from_destination": 2, "came_from_destination_unchecked": 1,
                             "malformed_provenance": 0, "already_copied": 0, "left_out": 0, "unconfirmed_cycle": 4}],
                           {("orders", 0): 2, ("orders", 1): 1, ("payments", 0): 1})
    printer.batch_done({"name": "replicate-f", "batchId": 1, "numInputRows": 10, "sources": [BATCH]})
    assert printer.totals["copied"] == 7 and printer.totals["unconfirmed_cycle"] == 4
    assert "4 copied though a header claims they came from the destination" in lines[0]
    assert "1 of the skipped taken on their header unchecked" in lines[0]
    assert [line.split(":")[0] for line in lines[1:4]] == ["orders-0", "orders-1", "payments-0"]
    assert lines[1].startswith("orders-0: 2 records claiming to come back from the destination copied")
    assert "could not be read" in lines[4]
    exposed = {(s.name, tuple(s.labels.items())): s.value for m in metrics.collect() for s in m.samples}
    assert exposed[("dr_stream_provenance_unconfirmed_total", (("flow", "f"), ("topic", "orders")))] == 3
    assert exposed[("dr_stream_provenance_unconfirmed_total", (("flow", "f"), ("topic", "payments")))] == 1
    assert exposed[("dr_stream_records_skipped_total",
                    (("flow", "f"), ("reason", "came_from_destination_unchecked")))] == 1
    assert ("dr_stream_records_skipped_total", (("flow", "f"), ("reason", "unconfirmed_cycle"))) not in exposed


def test_an_idle_trigger_counts_only_for_the_printers_own_query():
    costs = []
    printer = ProgressPrinter("f", "replicate-f", FlowMetrics("f", "replicate-f"), log=lambda line: None,
                              on_cost=costs.append)
    printer.query_started("id-1", "replicate-f")
    printer.query_idle("id-2")
    printer.query_idle("id-1")
    assert costs == [BatchCost(0, 0, 0)]
