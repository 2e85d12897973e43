-- origin: https://github.com/apache/flink/blob/0658fb7cac0f0b8ba9cd247fff66dbf642583976/flink-table/flink-table-planner/src/test/java/org/apache/flink/table/planner/plan/nodes/exec/stream/DeduplicationTestPrograms.java (DEDUPLICATE_DESC, "deduplicate-desc")
-- ported: the source and sink connectors (the program's values source and sink are a file and stdout); schemas, data and query as the program has them
-- expect: +I[1, terry, pen, 1000]
-- expect: +U[2, alice, pen, 2000]
-- expect: +U[3, bob, pen, 3000]
-- expect: +I[4, bob, apple, 4000]
-- expect: +U[5, fish, apple, 5000]
-- expect: +U[6, jerry, pen, 6000]
-- expect: +U[7, larry, apple, 7000]
-- expect: +I[8, bill, banana, 8000]
-- expect: +U[9, carol, apple, 9000]

CREATE TABLE MyTable (
  order_id bigint,
  `user` varchar,
  product varchar,
  order_time bigint ,
  event_time as TO_TIMESTAMP(FROM_UNIXTIME(order_time)) ,
  watermark for event_time as event_time - INTERVAL '5' second 
) WITH (connector = 'file', path = '${DATA}/MyTable.ndjson');

CREATE TABLE MySink (
  order_id bigint,
  `user` varchar,
  product varchar,
  order_time bigint,
  primary key(product) not enforced
) WITH (connector = 'stdout');

insert into MySink select order_id, user, product, order_time 
FROM (  SELECT *,    ROW_NUMBER() OVER (PARTITION BY product ORDER BY event_time DESC) AS row_num
  FROM MyTable)WHERE row_num = 1;
