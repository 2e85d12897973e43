-- origin: https://github.com/apache/flink/blob/07d57de7e113cf9e195b3632d0e63a0d248a78cc/flink-table/flink-table-planner/src/test/java/org/apache/flink/table/planner/plan/nodes/exec/stream/OverWindowTestPrograms.java (OVER_AGGREGATE_NON_TIME_UNBOUNDED_NO_PARTITION_BY, "over-aggregate-sum-no-partition-by")
-- ported: the source and sink connectors (the program's values source and sink are a file and stdout); schemas, data and query as the program has them
-- expect: +I[key1, 1, 100, 1]
-- expect: +I[key1, 2, 200, 3]
-- expect: +I[key1, 5, 500, 8]
-- expect: +I[key1, 6, 600, 14]
-- expect: +I[key2, 1, 100, 2]
-- expect: -U[key1, 2, 200, 3]
-- expect: +U[key1, 2, 200, 4]
-- expect: -U[key1, 5, 500, 8]
-- expect: +U[key1, 5, 500, 9]
-- expect: -U[key1, 6, 600, 14]
-- expect: +U[key1, 6, 600, 15]
-- expect: +I[key2, 2, 200, 6]
-- expect: -U[key1, 5, 500, 9]
-- expect: +U[key1, 5, 500, 11]
-- expect: -U[key1, 6, 600, 15]
-- expect: +U[key1, 6, 600, 17]
-- expect: +I[key1, 4, 400, 10]
-- expect: -U[key1, 5, 500, 11]
-- expect: +U[key1, 5, 500, 15]
-- expect: -U[key1, 6, 600, 17]
-- expect: +U[key1, 6, 600, 21]

CREATE TABLE source_t (
  key STRING,
  val BIGINT,
  ts BIGINT
) WITH (connector = 'file', path = '${DATA}/source_t.ndjson');

CREATE TABLE sink_t (
  key STRING,
  val BIGINT,
  ts BIGINT,
  sum_val BIGINT
) WITH (connector = 'stdout');

INSERT INTO sink_t SELECT key, val, ts, SUM(val) OVER (ORDER BY val RANGE BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW) AS sum_val FROM source_t;
