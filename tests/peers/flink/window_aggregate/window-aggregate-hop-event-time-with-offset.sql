-- origin: https://github.com/apache/flink/blob/051eef8f41fb76c60fb2dc86a6cec225617b038b/flink-table/flink-table-planner/src/test/java/org/apache/flink/table/planner/plan/nodes/exec/stream/WindowAggregateTestPrograms.java (GROUP_HOP_WINDOW_EVENT_TIME_WITH_OFFSET, "window-aggregate-hop-event-time-with-offset")
-- ported: the source and sink connectors (the program's values source and sink are a file and stdout); schemas, data and query as the program has them
-- expect: +I[a, 2020-10-09T23:59:56, 2020-10-10T00:00:06, 4, 10, 2]
-- expect: +I[b, 2020-10-10T00:00:01, 2020-10-10T00:00:11, 2, 9, 2]
-- expect: +I[a, 2020-10-10T00:00:01, 2020-10-10T00:00:11, 6, 18, 3]
-- expect: +I[b, 2020-10-10T00:00:06, 2020-10-10T00:00:16, 2, 9, 2]
-- expect: +I[a, 2020-10-10T00:00:06, 2020-10-10T00:00:16, 1, 3, 1]
-- expect: +I[b, 2020-10-10T00:00:11, 2020-10-10T00:00:21, 1, 4, 1]
-- expect: +I[b, 2020-10-10T00:00:16, 2020-10-10T00:00:26, 1, 4, 1]
-- expect: +I[b, 2020-10-10T00:00:26, 2020-10-10T00:00:36, 1, 1, 1]
-- expect: +I[null, 2020-10-10T00:00:26, 2020-10-10T00:00:36, 1, 7, 0]
-- expect: +I[a, 2020-10-10T00:00:31, 2020-10-10T00:00:41, 1, 10, 1]
-- expect: +I[b, 2020-10-10T00:00:31, 2020-10-10T00:00:41, 1, 1, 1]
-- expect: +I[null, 2020-10-10T00:00:31, 2020-10-10T00:00:41, 1, 7, 0]
-- expect: +I[c, 2020-10-10T00:00:36, 2020-10-10T00:00:46, 1, 12, 1]
-- expect: +I[d, 2020-10-10T00:00:36, 2020-10-10T00:00:46, 2, 24, 2]
-- expect: +I[a, 2020-10-10T00:00:36, 2020-10-10T00:00:46, 1, 10, 1]
-- expect: +I[d, 2020-10-10T00:00:41, 2020-10-10T00:00:51, 2, 24, 2]
-- expect: +I[c, 2020-10-10T00:00:41, 2020-10-10T00:00:51, 1, 12, 1]

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

INSERT INTO window_sink_t SELECT name, window_start, window_end, COUNT(*), SUM(a_int), COUNT(DISTINCT `comment`) FROM TABLE(HOP(TABLE window_source_t, DESCRIPTOR(rowtime), INTERVAL '5' SECOND, INTERVAL '10' SECOND, INTERVAL '1' SECOND))
GROUP BY name, window_start, window_end;
