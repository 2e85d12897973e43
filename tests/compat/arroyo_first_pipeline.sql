-- origin: https://github.com/ArroyoSystems/arroyo/blob/master/crates/arroyo-planner/src/test/queries/first_pipeline.sql
-- expected: worked out from the input by check_expected.py

CREATE TABLE nexmark (
  bid STRUCT<auction BIGINT, bidder BIGINT, price BIGINT, channel VARCHAR, url VARCHAR, datetime TIMESTAMP(3), extra VARCHAR>,
  event_time TIMESTAMP(3),
  WATERMARK FOR event_time AS event_time - INTERVAL '1' SECOND
) WITH (connector = 'file', path = '${DATA}/arroyo_nexmark.ndjson');

SELECT * FROM (
     SELECT *, ROW_NUMBER() OVER (
         PARTITION BY window
         ORDER BY count DESC) AS row_num
     FROM (SELECT count(*) AS count, bid.auction AS auction,
         hop(interval '2 seconds', interval '60 seconds') AS window
             FROM nexmark WHERE bid is not null
             GROUP BY 2, window)) WHERE row_num <= 5;
