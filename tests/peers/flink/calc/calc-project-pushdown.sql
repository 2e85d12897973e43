-- origin: https://github.com/apache/flink/blob/091389e1db4b4ff7a42264681efda1e2d05ee675/flink-table/flink-table-planner/src/test/java/org/apache/flink/table/planner/plan/nodes/exec/stream/CalcTestPrograms.java (CALC_PROJECT_PUSHDOWN, "calc-project-pushdown")
-- ported: the source and sink connectors (the program's values source and sink are a file and stdout); schemas, data and query as the program has them
-- expect: +I[421, 421]
-- expect: +I[421, 421]

CREATE TABLE source_t (
  a BIGINT,
  b DOUBLE
) WITH (connector = 'file', path = '${DATA}/source_ab.ndjson');

CREATE TABLE sink_t (
  a BIGINT,
  a1 VARCHAR
) WITH (connector = 'stdout');

INSERT INTO sink_t SELECT a, CAST(a AS VARCHAR) FROM source_t WHERE a > CAST(1 AS BIGINT);
