-- origin: https://github.com/ArroyoSystems/arroyo/blob/master/crates/arroyo-planner/src/test/queries/basic_tumble_aggregate.sql
-- expected: worked out from the input by check_expected.py

CREATE TABLE nexmark (
  bid STRUCT<auction BIGINT, bidder BIGINT, price BIGINT, channel VARCHAR, url VARCHAR, datetime TIMESTAMP(3), extra VARCHAR>,
  event_time TIMESTAMP(3),
  WATERMARK FOR event_time AS event_time - INTERVAL '1' SECOND
) WITH (connector = 'file', path = '${DATA}/arroyo_nexmark.ndjson');

SELECT
    bid.auction as auction,
    tumble(INTERVAL '1' second) as window,
    count(*) as count
FROM
    nexmark
where
    bid is not null
GROUP BY
    1,
    2;
