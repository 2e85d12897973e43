-- origin: https://github.com/apache/flink/blob/0658fb7cac0f0b8ba9cd247fff66dbf642583976/flink-table/flink-table-planner/src/test/java/org/apache/flink/table/planner/plan/nodes/exec/stream/GroupAggregateTestPrograms.java (GROUP_BY_DISTINCT, "group-aggregate-distinct")
-- ported: the source and sink connectors (the program's values source and sink are a file and stdout); schemas, data and query as the program has them
-- expect: +I[1, 0, 1, 2, 3, 3.0, 1]
-- expect: +I[2, 0, 1, 3, 4, 4.0, 1]
-- expect: +U[2, 0, 2, 5, 6, 3.0, 2]
-- expect: +U[1, 0, 2, 3, 4, 2.0, 2]
-- expect: +U[1, 1, 3, 8, 15, 5.0, 3]
-- expect: +U[2, 0, 2, 5, 11, 3.0, 3]
-- expect: +U[2, 0, 3, 9, 21, 5.0, 4]
-- expect: +U[2, 0, 3, 9, 28, 5.0, 5]
-- expect: +U[2, 1, 4, 14, 42, 7.0, 6]
-- expect: +U[1, 1, 4, 12, 24, 6.0, 4]
-- expect: +U[2, 1, 4, 14, 57, 8.0, 7]
-- expect: +I[3, 1, 1, 5, 12, 12.0, 1]
-- expect: +U[1, 1, 4, 12, 32, 6.0, 5]
-- expect: +U[3, 1, 1, 5, 25, 12.0, 2]
-- expect: +U[3, 1, 2, 8, 31, 10.0, 3]
-- expect: +U[1, 1, 4, 12, 32, 5.0, 5]
-- expect: +U[2, 1, 4, 14, 57, 7.0, 7]
-- expect: +U[2, 1, 4, 14, 57, 8.0, 7]
-- expect: +U[2, 1, 4, 14, 57, 7.0, 7]
-- expect: +I[7, 0, 1, 7, 7, 7.0, 1]
-- expect: +U[3, 1, 2, 8, 31, 9.0, 3]
-- expect: +U[7, 0, 1, 7, 7, 7.0, 2]

CREATE TABLE source_t (
  a INT,
  b BIGINT,
  c INT,
  d VARCHAR,
  e BIGINT
) WITH (connector = 'file', path = '${DATA}/source_two.ndjson');

CREATE TABLE sink_t (
  e BIGINT,
  cnt_a1 BIGINT,
  cnt_a2 BIGINT,
  sum_a BIGINT,
  sum_b BIGINT,
  avg_b DOUBLE,
  cnt_d BIGINT,
  PRIMARY KEY (e) NOT ENFORCED
) WITH (connector = 'stdout');

INSERT INTO sink_t SELECT e, COUNT(DISTINCT a) FILTER (WHERE b > 10) AS cnt_a1, COUNT(DISTINCT a) AS cnt_a2, SUM(DISTINCT a) AS sum_a, SUM(DISTINCT b) AS sum_b, AVG(b) AS avg_b, COUNT(DISTINCT d) AS concat_d FROM source_t GROUP BY e;
