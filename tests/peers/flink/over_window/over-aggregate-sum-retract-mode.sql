-- origin: https://github.com/apache/flink/blob/07d57de7e113cf9e195b3632d0e63a0d248a78cc/flink-table/flink-table-planner/src/test/java/org/apache/flink/table/planner/plan/nodes/exec/stream/OverWindowTestPrograms.java (OVER_AGGREGATE_NON_TIME_UNBOUNDED_RETRACT_MODE, "over-aggregate-sum-retract-mode")
-- ported: the source and sink connectors (the program's values source with changelog-mode I,UB,UA is a file of Debezium JSON changes, each -U/+U pair one update; its sink is stdout); schemas, data and query as the program has them
-- expect: +I[key1, 1, 100, 1]
-- expect: +I[key1, 2, 200, 3]
-- expect: +I[key1, 5, 500, 8]
-- expect: +I[key1, 6, 600, 14]
-- expect: -U[key1, 2, 200, 3]
-- expect: -U[key1, 5, 500, 8]
-- expect: +U[key1, 5, 500, 6]
-- expect: -U[key1, 6, 600, 14]
-- expect: +U[key1, 6, 600, 12]
-- expect: +U[key1, 3, 200, 4]
-- expect: -U[key1, 5, 500, 6]
-- expect: +U[key1, 5, 500, 9]
-- expect: -U[key1, 6, 600, 12]
-- expect: +U[key1, 6, 600, 15]
-- expect: +I[key2, 1, 100, 1]
-- expect: +I[key2, 2, 200, 3]
-- expect: +I[key3, 1, 100, 1]
-- expect: +I[key1, 4, 400, 8]
-- expect: -U[key1, 5, 500, 9]
-- expect: +U[key1, 5, 500, 13]
-- expect: -U[key1, 6, 600, 15]
-- expect: +U[key1, 6, 600, 19]
-- expect: -U[key1, 3, 200, 4]
-- expect: -U[key1, 4, 400, 8]
-- expect: +U[key1, 4, 400, 5]
-- expect: -U[key1, 5, 500, 13]
-- expect: +U[key1, 5, 500, 10]
-- expect: -U[key1, 6, 600, 19]
-- expect: +U[key1, 6, 600, 16]
-- expect: +U[key1, 3, 300, 4]
-- expect: -U[key1, 4, 400, 5]
-- expect: +U[key1, 4, 400, 8]
-- expect: -U[key1, 5, 500, 10]
-- expect: +U[key1, 5, 500, 13]
-- expect: -U[key1, 6, 600, 16]
-- expect: +U[key1, 6, 600, 19]

CREATE TABLE source_t (
  key STRING,
  val BIGINT,
  ts BIGINT
) WITH (connector = 'file', path = '${DATA}/source_t_changelog.ndjson', format = 'debezium-json');

CREATE TABLE sink_t (
  key STRING,
  val BIGINT,
  ts BIGINT,
  sum_val BIGINT
) WITH (connector = 'stdout');

INSERT INTO sink_t SELECT key, val, ts, SUM(val) OVER (PARTITION BY key ORDER BY val RANGE BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW) AS sum_val FROM source_t;
