-- origin: https://github.com/apache/flink/blob/0658fb7cac0f0b8ba9cd247fff66dbf642583976/flink-table/flink-table-planner/src/test/java/org/apache/flink/table/planner/plan/nodes/exec/stream/GroupAggregateTestPrograms.java (GROUP_BY_SIMPLE, "group-aggregate-simple")
-- ported: the source and sink connectors (the program's values source and sink are a file and stdout); schemas, data and query as the program has them
-- expect: +I[1, 1, null, Hi]
-- expect: +I[2, 1, 2.0, Hello]
-- expect: +U[2, 2, 2.0, Hello]
-- expect: +U[1, 2, null, Hi]
-- expect: +U[2, 3, 2.0, Hello]
-- expect: +U[2, 4, 2.0, Hello]

CREATE TABLE source_t (
  a INT,
  b BIGINT,
  c VARCHAR
) WITH (connector = 'file', path = '${DATA}/source_one.ndjson');

CREATE TABLE sink_t (
  b BIGINT,
  cnt BIGINT,
  avg_a DOUBLE,
  min_c VARCHAR,
  PRIMARY KEY (b) NOT ENFORCED
) WITH (connector = 'stdout');

INSERT INTO sink_t SELECT b, COUNT(*) AS cnt, AVG(a) FILTER (WHERE a > 1) AS avg_a, MIN(c) AS min_c FROM source_t GROUP BY b;
