-- origin: https://github.com/apache/flink/blob/0658fb7cac0f0b8ba9cd247fff66dbf642583976/flink-table/flink-table-planner/src/test/java/org/apache/flink/table/planner/plan/nodes/exec/stream/MatchRecognizeTestPrograms.java (MATCH_COMPLEX, "match-complex")
-- ported: the source and sink connectors (the program's values source and sink are a file and stdout); schemas, data and query as the program has them
-- expect: +I[ACME, 19, 13, null]
-- expect: +I[BETA, 18, 16, null]

CREATE TABLE MyTable (
  symbol string,
  tstamp bigint,
  price int,
  tax int,
  proctime as PROCTIME()
) WITH (connector = 'file', path = '${DATA}/MyTable_complex.ndjson');

CREATE TABLE MySink (
  somestring string,
  a bigint,
  b bigint,
  c bigint
) WITH (connector = 'stdout');

insert into MySink SELECT * FROM MyTable MATCH_RECOGNIZE (
  PARTITION BY symbol
  ORDER BY proctime
  MEASURES
    FIRST(DOWN.price) as first,
    LAST(DOWN.price) as last,
    FIRST(DOWN.price, 5) as nullPrice
  ONE ROW PER MATCH
  AFTER MATCH SKIP PAST LAST ROW
  PATTERN (DOWN{2,} UP)
  DEFINE
    DOWN AS price < LAST(DOWN.price, 1) OR LAST(DOWN.price, 1) IS NULL,
    UP AS price > LAST(DOWN.price)
) AS T;
