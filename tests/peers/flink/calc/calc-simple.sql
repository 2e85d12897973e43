-- origin: https://github.com/apache/flink/blob/091389e1db4b4ff7a42264681efda1e2d05ee675/flink-table/flink-table-planner/src/test/java/org/apache/flink/table/planner/plan/nodes/exec/stream/CalcTestPrograms.java (SIMPLE_CALC, "calc-simple")
-- ported: the source and sink connectors (the program's values source and sink are a file and stdout); schemas, data and query as the program has them
-- expect: +I[421, 42.0]
-- expect: +I[422, 42.1]

CREATE TABLE t (
  a BIGINT,
  b DOUBLE
) WITH (connector = 'file', path = '${DATA}/t.ndjson');

CREATE TABLE sink_t (
  a BIGINT,
  b DOUBLE
) WITH (connector = 'stdout');

INSERT INTO sink_t SELECT a + 1, b FROM t;
