-- origin: https://github.com/apache/flink/blob/051eef8f41fb76c60fb2dc86a6cec225617b038b/flink-table/flink-table-planner/src/test/java/org/apache/flink/table/planner/plan/nodes/exec/stream/WindowAggregateTestPrograms.java (GROUP_TUMBLE_WINDOW_EVENT_TIME, "window-aggregate-tumble-event-time")
-- ported: the source and sink connectors (the program's values source and sink are a file and stdout); schemas, data and query as the program has them
-- expect: +I[a, 2020-10-10T00:00, 2020-10-10T00:00:05, 4, 10, 2]
-- expect: +I[a, 2020-10-10T00:00:05, 2020-10-10T00:00:10, 1, 3, 1]
-- expect: +I[b, 2020-10-10T00:00:05, 2020-10-10T00:00:10, 2, 9, 2]
-- expect: +I[b, 2020-10-10T00:00:15, 2020-10-10T00:00:20, 1, 4, 1]
-- expect: +I[b, 2020-10-10T00:00:30, 2020-10-10T00:00:35, 1, 1, 1]
-- expect: +I[null, 2020-10-10T00:00:30, 2020-10-10T00:00:35, 1, 7, 0]
-- expect: +I[a, 2020-10-10T00:00:40, 2020-10-10T00:00:45, 1, 10, 1]
-- expect: +I[c, 2020-10-10T00:00:40, 2020-10-10T00:00:45, 1, 12, 1]
-- expect: +I[d, 2020-10-10T00:00:40, 2020-10-10T00:00:45, 2, 24, 2]

CREATE TABLE window_source_t (
  ts STRING,
  a_int INT,
  b_double DOUBLE,
  c_float FLOAT,
  d_bigdec DECIMAL(10, 2),
  `comment` STRING,
  name STRING,
  `rowtime` AS TO_TIMESTAMP(`ts`),
  `proctime` AS PROCTIME(),
  WATERMARK for `rowtime` AS `rowtime` - INTERVAL '1' SECOND
) WITH (connector = 'file', path = '${DATA}/window_source_t.ndjson');

CREATE TABLE window_sink_t (
  name STRING,
  window_start TIMESTAMP(3),
  window_end TIMESTAMP(3),
  cnt BIGINT,
  sum_int INT,
  distinct_cnt BIGINT
) WITH (connector = 'stdout');

INSERT INTO window_sink_t SELECT name, window_start, window_end, COUNT(*), SUM(a_int), COUNT(DISTINCT `comment`) FROM TABLE(TUMBLE(TABLE window_source_t, DESCRIPTOR(rowtime), INTERVAL '5' SECOND))
GROUP BY name, window_start, window_end;
