-- origin: https://github.com/apache/flink/blob/0658fb7cac0f0b8ba9cd247fff66dbf642583976/flink-table/flink-table-planner/src/test/java/org/apache/flink/table/planner/plan/nodes/exec/stream/JoinTestPrograms.java (NON_WINDOW_INNER_JOIN_WITH_NULL, "join-non-window-inner-join-with-null-cond")
-- ported: the source and sink connectors (the program's values source and sink are a file and stdout); schemas, data and query as the program has them
-- expect: +I[1, BakerBaker, Baker2]
-- expect: +I[1, BakerBaker, Baker2]
-- expect: +I[1, BakerBaker, Baker3]
-- expect: +I[2, HeHe, Baker5]
-- expect: +I[1, BakerBaker, Baker6]
-- expect: +I[1, BakerBaker, Baker8]
-- expect: +I[null, HeHe, Baker9]
-- expect: +I[2, PostRestoreRight, Baker5]

CREATE TABLE T1 (
  a int,
  b bigint,
  c varchar
) WITH (connector = 'file', path = '${DATA}/T1.ndjson');

CREATE TABLE T2 (
  a int,
  b bigint,
  c varchar
) WITH (connector = 'file', path = '${DATA}/T2.ndjson');

CREATE TABLE MySink (
  a int,
  c1 varchar,
  c2 varchar
) WITH (connector = 'stdout');

insert into MySink SELECT t2.a, t2.c, t1.c
FROM (
 SELECT if(a = 3, cast(null as int), a) as a, b, c FROM T1
) as t1
JOIN (
 SELECT if(a = 3, cast(null as int), a) as a, b, c FROM T2
) as t2
ON 
  ((t1.a is null AND t2.a is null) OR
  (t1.a = t2.a))
  AND t1.b > t2.b;
