-- origin: https://github.com/apache/flink/blob/0658fb7cac0f0b8ba9cd247fff66dbf642583976/flink-table/flink-table-planner/src/test/java/org/apache/flink/table/planner/plan/nodes/exec/stream/RankTestPrograms.java (RANK_N_TEST, "rank-n-test")
-- ported: the source and sink connectors (the program's values source and sink are a file and stdout); schemas, data and query as the program has them
-- expect: +I[book, 1, 1]
-- expect: +I[book, 2, 2]
-- expect: +I[fruit, 4, 1]
-- expect: +I[cereal, 6, 1]
-- expect: +I[cereal, 7, 2]
-- expect: +I[apple, 8, 1]
-- expect: +I[fruit, 9, 2]

CREATE TABLE MyTable1 (
  a STRING,
  b INT,
  c INT,
  t as proctime()
) WITH (connector = 'file', path = '${DATA}/MyTable1.ndjson');

CREATE TABLE result1 (
  a varchar,
  b int,
  c bigint
) WITH (connector = 'stdout');

insert into `result1` select * from (select a, b, row_number() over(partition by a order by t asc) as c from MyTable1) where c <= 2;
