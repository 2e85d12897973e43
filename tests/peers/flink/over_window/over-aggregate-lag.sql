-- origin: https://github.com/apache/flink/blob/07d57de7e113cf9e195b3632d0e63a0d248a78cc/flink-table/flink-table-planner/src/test/java/org/apache/flink/table/planner/plan/nodes/exec/stream/OverWindowTestPrograms.java (LAG_OVER_FUNCTION, "over-aggregate-lag")
-- ported: the source and sink connectors (the program's values source and sink are a file and stdout); schemas, data and query as the program has them
-- expect: +I[2020-04-15 08:00:05, null]
-- expect: +I[2020-04-15 08:00:06, {42.0=42.0}]

CREATE TABLE t (
  ts STRING,
  b MAP<DOUBLE, DOUBLE>,
  `r_time` AS TO_TIMESTAMP(`ts`),
  WATERMARK for `r_time` AS `r_time`
) WITH (connector = 'file', path = '${DATA}/t.ndjson');

CREATE TABLE sink_t (
  ts STRING,
  b MAP<DOUBLE, DOUBLE>
) WITH (connector = 'stdout');

INSERT INTO sink_t SELECT ts, LAG(b, 1) over (order by r_time) AS bLag FROM t;
