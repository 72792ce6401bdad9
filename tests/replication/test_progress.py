from types import SimpleNamespace

from dr_stream.replication.progress import durations, partitions_read, read_by_topic

BATCH = SimpleNamespace(startOffset='{"a": {"0": 5, "1": 7}, "b": {"0": 0}}',
                        endOffset='{"a": {"0": 9, "1": 7}, "b": {"0": 3}, "c": {"0": 4}}')


def test_a_batch_reads_from_the_partitions_whose_end_moved_past_their_start():
    # a[1] did not move; c[0] is new to the query, with no start to measure from
    assert partitions_read([BATCH]) == 2
    assert read_by_topic([BATCH]) == {"a": 4, "b": 3, "c": 0}


def test_durations_show_the_total_and_the_three_largest_parts():
    assert durations({"triggerExecution": 1094, "addBatch": 700, "walCommit": 120, "getBatch": 3, "latestOffset": 0}) \
        == "1094 ms (addBatch 700, walCommit 120, getBatch 3)"
