-- origin: https://github.com/apache/flink/blob/091389e1db4b4ff7a42264681efda1e2d05ee675/flink-table/flink-table-planner/src/test/java/org/apache/flink/table/planner/plan/nodes/exec/stream/CalcTestPrograms.java (CALC_FILTER, "calc-filter")
-- ported: the source and sink connectors (the program's values source and sink are a file and stdout); schemas, data and query as the program has them
-- expect: +I[420, 1, 42.0, hello]
-- expect: +I[420, 1, 42.0, hello]

CREATE TABLE source_t (
  a BIGINT,
  b INT,
  c DOUBLE,
  d VARCHAR
) WITH (connector = 'file', path = '${DATA}/source_abcd.ndjson');

CREATE TABLE sink_t (
  a BIGINT,
  b INT,
  c DOUBLE,
  d VARCHAR
) WITH (connector = 'stdout');

INSERT INTO sink_t SELECT * FROM source_t WHERE b > 0;
