-- Quoted names keep their case in the DDL, the WATERMARK clause, DESCRIPTOR
-- and the query (as Nexmark's files write `dateTime`): the NDJSON key
-- "userId" fills the column `userId`.
CREATE TABLE clicks (
  `userId` VARCHAR NOT NULL,
  `eventTs` BIGINT,
  `dateTime` AS TO_TIMESTAMP_LTZ(`eventTs`, 3),
  WATERMARK FOR `dateTime` AS `dateTime` - INTERVAL '2' SECOND
) WITH (connector = 'file', path = '${DATA}/camel_case.ndjson');

SELECT C.`userId`, CAST(window_start AS BIGINT) AS window_start_ms, count(*) AS clicks
FROM TABLE(TUMBLE(TABLE clicks, DESCRIPTOR(`dateTime`), INTERVAL '10' SECOND)) AS C
GROUP BY C.`userId`, window_start, window_end;
