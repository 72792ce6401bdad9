"""The replication wing: the record path and what keeps it correct.

`record_path` turns source rows into destination rows as Spark SQL expressions;
`topic_sync` creates and follows destination topics; `resume` and `left_out` decide what a
restarted run must not write again; `flow` wires the flow's one streaming query (replicate) and
its driver threads (topics, lag, index feed, translate, poller) together, and `supervisor`
keeps them running; `progress` prints a line per batch.
"""
