-- origin: https://github.com/apache/flink/blob/0658fb7cac0f0b8ba9cd247fff66dbf642583976/flink-table/flink-table-planner/src/test/java/org/apache/flink/table/planner/plan/nodes/exec/stream/MatchRecognizeTestPrograms.java (MATCH_ORDER_BY_EVENT_TIME, "match-order-by-event-time")
-- ported: the source and sink connectors (the program's values source and sink are a file and stdout); schemas, data and query as the program has them
-- expect: +I[10, 8, 9]
-- expect: +I[7, 5, 8]
-- expect: +I[9, 3, 11]

CREATE TABLE MyEventTimeTable (
  ts STRING,
  price INT,
  sequence_num INT,
  `rowtime` AS TO_TIMESTAMP(`ts`),
  `proctime` AS PROCTIME(),
  WATERMARK for `rowtime` AS `rowtime` - INTERVAL '2' SECOND
) WITH (connector = 'file', path = '${DATA}/MyEventTimeTable.ndjson');

CREATE TABLE MySink (
  first bigint,
  last bigint,
  up bigint
) WITH (connector = 'stdout');

insert into MySink SELECT * FROM MyEventTimeTable MATCH_RECOGNIZE (
   ORDER BY rowtime
  MEASURES
    FIRST(DOWN.price) as first,
    LAST(DOWN.price) as last,
    UP.price as up
  ONE ROW PER MATCH
  AFTER MATCH SKIP PAST LAST ROW
  PATTERN (DOWN{2,} UP)
  DEFINE
    DOWN AS price < LAST(DOWN.price, 1) OR LAST(DOWN.price, 1) IS NULL,
    UP AS price > LAST(DOWN.price)
) AS T;
