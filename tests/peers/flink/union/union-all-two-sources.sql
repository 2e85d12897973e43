-- origin: https://github.com/apache/flink/blob/0658fb7cac0f0b8ba9cd247fff66dbf642583976/flink-table/flink-table-planner/src/test/java/org/apache/flink/table/planner/plan/nodes/exec/stream/UnionTestPrograms.java (UNION_ALL_TWO_SOURCES, "union-all-two-sources")
-- ported: the source and sink connectors (the program's values source and sink are a file and stdout); schemas, data and query as the program has them
-- expect: +I[420, 1]
-- expect: +I[420, 1]
-- expect: +I[421, 2]
-- expect: +I[600, 6]
-- expect: +I[500, 3]
-- expect: +I[421, 2]

CREATE TABLE source_t1 (
  a BIGINT,
  b INT NOT NULL,
  c VARCHAR,
  d TIMESTAMP(3)
) WITH (connector = 'file', path = '${DATA}/source_t1_ua.ndjson');

CREATE TABLE source_t2 (
  d BIGINT,
  e INT NOT NULL
) WITH (connector = 'file', path = '${DATA}/source_t2_ua.ndjson');

CREATE TABLE sink_t1_union_all_t2 (
  a BIGINT,
  b INT
) WITH (connector = 'stdout');

INSERT INTO sink_t1_union_all_t2 SELECT * FROM (SELECT a, b FROM source_t1) UNION ALL (SELECT d, e FROM source_t2);
