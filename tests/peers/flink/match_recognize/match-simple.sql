-- origin: https://github.com/apache/flink/blob/0658fb7cac0f0b8ba9cd247fff66dbf642583976/flink-table/flink-table-planner/src/test/java/org/apache/flink/table/planner/plan/nodes/exec/stream/MatchRecognizeTestPrograms.java (MATCH_SIMPLE, "match-simple")
-- ported: the source and sink connectors (the program's values source and sink are a file and stdout); schemas, data and query as the program has them (its Java string's \u006C is the letter l)
-- expect: +I[6, 7, 8]
-- expect: +I[9, 10, 11]

CREATE TABLE MyTable (
  id bigint,
  name varchar,
  proctime as PROCTIME()
) WITH (connector = 'file', path = '${DATA}/MyTable_simple.ndjson');

CREATE TABLE MySink (
  a bigint,
  b bigint,
  c bigint
) WITH (connector = 'stdout');

insert into MySink SELECT T.aid, T.bid, T.cid
     FROM MyTable MATCH_RECOGNIZE (
             ORDER BY proctime
             MEASURES
             `A"`.id AS aid,
             l.id AS bid,
             C.id AS cid
             PATTERN (`A"` l C)
             DEFINE
                 `A"` AS name = 'a',
                 l AS name = 'b',
                 C AS name = 'c'
     ) AS T;
