-- origin: https://github.com/apache/flink/blob/0658fb7cac0f0b8ba9cd247fff66dbf642583976/flink-table/flink-table-planner/src/test/java/org/apache/flink/table/planner/plan/nodes/exec/stream/UnionTestPrograms.java (UNION_ALL_WITH_FILTER, "union-all-with-filter")
-- ported: the source and sink connectors (the program's values source and sink are a file and stdout); schemas, data and query as the program has them
-- expect: +I[0, a, 6]
-- expect: +I[4, b, 8]
-- expect: +I[6, c, 10]
-- expect: +I[1, a, 5]
-- expect: +I[3, b, 7]
-- expect: +I[5, c, 9]

CREATE TABLE source_t1 (
  a INT,
  b VARCHAR,
  c INT
) WITH (connector = 'file', path = '${DATA}/source_t1_f.ndjson');

CREATE TABLE source_t2 (
  a INT,
  b VARCHAR,
  c INT
) WITH (connector = 'file', path = '${DATA}/source_t2_f.ndjson');

CREATE TABLE sink_t1_union_all_t2 (
  a INT,
  b VARCHAR,
  c INT
) WITH (connector = 'stdout');

INSERT INTO sink_t1_union_all_t2 (SELECT * FROM source_t1 where a >=3) UNION ALL (select * from source_t2 where a <= 3);
