-- origin: https://github.com/apache/flink/blob/0658fb7cac0f0b8ba9cd247fff66dbf642583976/flink-table/flink-table-planner/src/test/java/org/apache/flink/table/planner/plan/nodes/exec/stream/RankTestPrograms.java (RANK_TEST_UPDATE_FAST_STRATEGY, "rank-test-update-fast-strategy")
-- ported: the source and sink connectors (the program's values source and sink are a file and stdout); schemas, data and query as the program has them
-- expect: +I[2, a, 1, 1]
-- expect: +I[4, b, 1, 1]
-- expect: +I[6, c, 1, 1]
-- expect: -U[2, a, 1, 1]
-- expect: +U[1, a, 1, 1]
-- expect: +I[2, a, 1, 2]
-- expect: -U[4, b, 1, 1]
-- expect: +U[3, b, 1, 1]
-- expect: +I[4, b, 1, 2]
-- expect: -U[6, c, 1, 1]
-- expect: +U[5, c, 1, 1]
-- expect: +I[6, c, 1, 2]
-- expect: +I[4, d, 1, 1]
-- expect: -U[1, a, 1, 1]
-- expect: +U[0, a, 1, 1]
-- expect: -U[2, a, 1, 2]
-- expect: +U[1, a, 1, 2]
-- expect: +I[2, a, 1, 3]

CREATE TABLE MyTable (
  a INT primary key not enforced,
  b VARCHAR,
  c INT
) WITH (connector = 'file', path = '${DATA}/MyTable_update.ndjson');

CREATE TABLE sink_t (
  a INT NOT NULL,
  b STRING,
  count_c BIGINT NOT NULL,
  row_num BIGINT NOT NULL
) WITH (connector = 'stdout');

INSERT INTO sink_t SELECT * FROM (SELECT a, b, count_c, ROW_NUMBER()    OVER (PARTITION BY b ORDER BY count_c DESC, a ASC) AS row_num   FROM (       SELECT a, b, COUNT(*) AS count_c       FROM MyTable       GROUP BY a, b   )) WHERE row_num <= 10;
