-- origin: https://github.com/apache/flink/blob/0658fb7cac0f0b8ba9cd247fff66dbf642583976/flink-table/flink-table-planner/src/test/java/org/apache/flink/table/planner/plan/nodes/exec/stream/MatchRecognizeTestPrograms.java (MATCH_SKIP_PAST_LAST_ROW, "match-skip-past-last-row")
-- ported: the source and sink connectors (the program's values source and sink are a file and stdout); schemas, data and query as the program has them
-- expect: +I[1, 100, 106]
-- expect: +I[1, 107, 107]
-- expect: +I[1, 100, 111]

CREATE TABLE MyTable (
  vehicle_id bigint,
  engine_temperature int,
  proctime as PROCTIME()
) WITH (connector = 'file', path = '${DATA}/MyTable_skip.ndjson');

CREATE TABLE MySink (
  vehicle_id bigint,
  Initial_Temp int,
  Final_Temp int
) WITH (connector = 'stdout');

insert into MySink SELECT * FROM
 MyTable
   MATCH_RECOGNIZE(
   PARTITION BY vehicle_id
   ORDER BY `proctime`
   MEASURES 
       FIRST(A.engine_temperature) as Initial_Temp,
       LAST(A.engine_temperature) as Final_Temp
   ONE ROW PER MATCH
   AFTER MATCH SKIP PAST LAST ROW
   PATTERN (A+ B)
   DEFINE
       A as LAST(A.engine_temperature,1) is NULL OR A.engine_temperature > LAST(A.engine_temperature,1),
       B as B.engine_temperature < LAST(A.engine_temperature)
   )MR;
