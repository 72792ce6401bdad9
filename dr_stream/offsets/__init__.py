"""The offsets wing: where consumer groups stand, and the same position on the other cluster.

`index` (the Delta table of copied runs) and `index_query` (the query that fills it);
`consumer_timestamps` (the topic of group positions) and `poller` (dr-stream's own writer of
it); `translation` (the rule, pure) and `translator` (its inputs from Kafka and Delta);
`returned_records` (copies that map back to originals); `group_sync` (when a destination
group may be written, pure, and the write); `translate_query` and `translation_log`.
"""
