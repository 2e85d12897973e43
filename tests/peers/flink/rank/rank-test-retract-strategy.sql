-- origin: https://github.com/apache/flink/blob/0658fb7cac0f0b8ba9cd247fff66dbf642583976/flink-table/flink-table-planner/src/test/java/org/apache/flink/table/planner/plan/nodes/exec/stream/RankTestPrograms.java (RANK_TEST_RETRACT_STRATEGY, "rank-test-retract-strategy")
-- ported: the source and sink connectors (the program's values source, changelog mode I,UA,UB, produces only inserts: a file of them; its sink is stdout); schemas, data and query as the program has them
-- expect: +I[2, a, 1]
-- expect: +I[4, b, 1]
-- expect: +I[6, c, 1]
-- expect: -D[2, a, 1]
-- expect: +I[1, a, 1]
-- expect: -D[4, b, 1]
-- expect: +I[3, b, 1]
-- expect: -D[6, c, 1]
-- expect: +I[5, c, 1]
-- expect: +I[4, d, 1]
-- expect: +I[3, e, 1]

CREATE TABLE MyTable (
  a INT,
  b VARCHAR,
  c INT primary key not enforced
) WITH (connector = 'file', path = '${DATA}/MyTable.ndjson');

CREATE TABLE sink_t (
  a INT,
  b VARCHAR,
  c BIGINT
) WITH (connector = 'stdout');

insert into `sink_t` select * from (select a, b, row_number() over(partition by b order by c) as c from MyTable) where c = 1;
