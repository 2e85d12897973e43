-- origin: https://github.com/apache/flink/blob/091389e1db4b4ff7a42264681efda1e2d05ee675/flink-table/flink-table-planner/src/test/java/org/apache/flink/table/planner/plan/nodes/exec/stream/CalcTestPrograms.java (CALC_SARG, "calc-sarg")
-- ported: the source and sink connectors (the program's values source and sink are a file and stdout); schemas, data and query as the program has them
-- expect: +I[1]
-- expect: +I[1]

CREATE TABLE source_t (
  a INT
) WITH (connector = 'file', path = '${DATA}/source_a.ndjson');

CREATE TABLE sink_t (
  a INT
) WITH (connector = 'stdout');

INSERT INTO sink_t SELECT a FROM source_t WHERE a = 1 or a = 2 or a is null;
