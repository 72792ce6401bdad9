"""What the offset index table keeps: runs whose records the destination still holds, the rows
of one run merged into one.

The feed appends a row per run it reads, and a run that grows is published again at each batch
(`run_store`), so the table's rows grow with the flow's age while what translation needs, one
row per stretch of steady copying, grows only with the copying's breaks. The upkeep rewrites
the table to `kept_runs_sql` over it: rows whose every record the destination deleted (its
retention passed them) leave, and rows that overlap or continue each other with the same
mapping (gaps-and-islands: a row continues the rows before it when it starts at most one past
their furthest end and its destination-minus-origin distance equals the previous row's) become
one. It is SQL so that the two engines that keep the table run the same rule: delta-rs
(DataFusion) from the driver, and Spark where delta-rs cannot open the table.

Invariant: every origin offset a row of the table maps is mapped to the same destination offset
after the rewrite, unless the destination deleted that record.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

# A run's place: the rows of one run share it.
KEY = ("origin_cluster", "origin_topic", "origin_partition", "dest_topic", "dest_partition")

_KEY = ", ".join(KEY)
_ORDERED = f"PARTITION BY {_KEY} ORDER BY dest_start, origin_start"


def _literal(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def on_destination_sql(log_starts: Mapping[tuple[str, int], int], table: str = "t") -> str:
    """The rows of `table` with at least one record still on the destination (`log_starts`:
    each destination partition's log start; a partition not in it keeps all its rows)."""
    if not log_starts:
        return f"SELECT * FROM {table}"
    values = ", ".join(f"({_literal(topic)}, {partition}, {start})"
                       for (topic, partition), start in sorted(log_starts.items()))
    return (f"SELECT r.* FROM {table} AS r LEFT JOIN (VALUES {values}) AS s(s_topic, s_partition, log_start) "
            "ON r.dest_topic = s.s_topic AND r.dest_partition = s.s_partition "
            "WHERE s.log_start IS NULL OR r.dest_end >= s.log_start")


def merged_sql(rows_sql: str) -> str:
    """The rows `rows_sql` selects, those of one run merged (this module's rule)."""
    return (
        f"WITH rows_ AS ({rows_sql}), "
        f"ordered AS (SELECT *, max(dest_end) OVER ({_ORDERED} ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) "
        f"AS _reach, lag(dest_start - origin_start) OVER ({_ORDERED}) AS _prev_shift FROM rows_), "
        "islands AS (SELECT *, sum(CASE WHEN dest_start <= _reach + 1 AND dest_start - origin_start = _prev_shift "
        f"THEN 0 ELSE 1 END) OVER ({_ORDERED} ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW) AS _island "
        "FROM ordered) "
        f"SELECT {_KEY}, min(origin_start) AS origin_start, max(origin_end) AS origin_end, "
        "min(dest_start) AS dest_start, max(dest_end) AS dest_end, max(dest_end) - min(dest_start) + 1 AS records, "
        "min(first_timestamp) AS first_timestamp, max(last_timestamp) AS last_timestamp, "
        "max(copied_at) AS copied_at, max(runs_topic_offset) AS runs_topic_offset "
        f"FROM islands GROUP BY {_KEY}, _island"
    )


def kept_runs_sql(log_starts: Mapping[tuple[str, int], int], table: str = "t") -> str:
    """What the upkeep rewrites the table to: `merged_sql` over `on_destination_sql`."""
    return merged_sql(on_destination_sql(log_starts, table))


def spans_sql(rows_sql: str, origin_cluster: str, floors: Mapping[tuple[str, int], int], max_slack: int,
              pins: Mapping[tuple[str, int], Sequence[int]] | None = None) -> str:
    """The rows `rows_sql` selects (one run merged into one row, `merged_sql`), the rows of
    `origin_cluster` wholly below their origin partition's floor joined into spans (`spans`: the
    rule, `spans.islands`: which rows join). A row out of origin order (`spans.in_order`) or one
    a pin answers to (`spans.pinned`) keeps itself and starts a new stretch; so does a partition
    with no floor keep its rows, and every other cluster's."""
    half = max(max_slack // 2, 1)
    columns = ("origin_start, origin_end, dest_start, dest_end, records, first_timestamp, last_timestamp, copied_at, "
               "runs_topic_offset")
    if not floors:
        return f"SELECT {_KEY}, {columns} FROM ({rows_sql}) AS s"
    values = ", ".join(f"({_literal(topic)}, {partition}, {floor})"
                       for (topic, partition), floor in sorted(floors.items()))
    # a row's own slack, and the slack from the key's first row up to it (`spans.islands`)
    own = "(origin_end - origin_start + 1 - records) + (dest_end - dest_start + 1 - records)"
    # a row is in order when every row of its key before it ends below it and every row after
    # starts above it; a row out of order, or another cluster's, stays alone and starts a new
    # stretch (`spans.islands`)
    earlier = f"OVER ({_ORDERED} ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING)"
    later = f"OVER ({_ORDERED} ROWS BETWEEN 1 FOLLOWING AND UNBOUNDED FOLLOWING)"
    running = f"OVER ({_ORDERED} ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW)"
    out_of_order = (f"CASE WHEN origin_start <= coalesce(max(origin_end) {earlier}, -1) "
                    f"OR origin_end >= coalesce(min(origin_start) {later}, origin_end + 1) THEN 1 ELSE 0 END")
    theirs = f"origin_cluster <> {_literal(origin_cluster)}"
    kept_alone = f"f.floor IS NULL OR s._out = 1 OR s._pin = 1 OR s.origin_end >= f.floor OR s.{theirs}"
    return (
        f"WITH rows_ AS ({rows_sql}), "
        f"placed AS (SELECT *, {own} AS _own, row_number() OVER ({_ORDERED}) AS _rn, "
        f"CASE WHEN lag(origin_end) OVER ({_ORDERED}) IS NULL THEN 0 ELSE "
        f"(origin_start - lag(origin_end) OVER ({_ORDERED}) - 1) + (dest_start - lag(dest_end) OVER ({_ORDERED}) - 1) "
        f"END AS _gap, {out_of_order} AS _out, "
        f"coalesce(lag(origin_end) OVER (PARTITION BY {_KEY} ORDER BY origin_start, dest_start), -1) AS _prev_end "
        "FROM rows_), "
        f"{_pinned_sql(pins or {})}, "
        f"summed AS (SELECT *, sum(_gap + _own) {running} - _own AS _before, "
        f"sum(CASE WHEN _out = 1 OR _pin = 1 OR {theirs} THEN 1 ELSE 0 END) {running} AS _stretch FROM marked), "
        f"islands AS (SELECT s.*, CASE WHEN {kept_alone} THEN NULL "
        f"ELSE CAST(floor(CAST(s._before AS DOUBLE) / {half}) AS BIGINT) END AS _bucket, "
        f"CASE WHEN {kept_alone} OR s._own >= {half} THEN s._rn ELSE -1 END AS _alone "
        f"FROM summed AS s LEFT JOIN (VALUES {values}) AS f(f_topic, f_partition, floor) "
        "ON s.origin_topic = f.f_topic AND s.origin_partition = f.f_partition) "
        f"SELECT {_KEY}, min(origin_start) AS origin_start, max(origin_end) AS origin_end, "
        "min(dest_start) AS dest_start, max(dest_end) AS dest_end, sum(records) AS records, "
        "min(first_timestamp) AS first_timestamp, max(last_timestamp) AS last_timestamp, "
        "max(copied_at) AS copied_at, max(runs_topic_offset) AS runs_topic_offset "
        f"FROM islands GROUP BY {_KEY}, _stretch, _bucket, _alone"
    )


def _pinned_sql(pins: Mapping[tuple[str, int], Sequence[int]]) -> str:
    """The CTE `marked`: `placed` with `_pin` 1 on each row a pin answers to, the row whose
    origin range reaches the pin and whose predecessor in origin order ends below it
    (`spans.pinned`)."""
    values = ", ".join(f"({_literal(topic)}, {partition}, {offset})"
                       for (topic, partition), held in sorted(pins.items()) for offset in sorted(set(held)))
    if not values:
        return "marked AS (SELECT *, 0 AS _pin FROM placed)"
    same = " AND ".join(f"a.{column} = b.{column}" for column in KEY)
    return (
        f"answered AS (SELECT DISTINCT {', '.join(f'q.{column}' for column in KEY)}, q.origin_start, q.dest_start "
        f"FROM placed AS q JOIN (VALUES {values}) AS p(p_topic, p_partition, p_offset) "
        "ON q.origin_topic = p.p_topic AND q.origin_partition = p.p_partition "
        "AND p.p_offset > q._prev_end AND p.p_offset <= q.origin_end), "
        "marked AS (SELECT a.*, CASE WHEN b.origin_start IS NULL THEN 0 ELSE 1 END AS _pin FROM placed AS a "
        f"LEFT JOIN answered AS b ON {same} AND a.origin_start = b.origin_start AND a.dest_start = b.dest_start)"
    )
