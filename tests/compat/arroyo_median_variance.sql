-- origin: https://github.com/ArroyoSystems/arroyo/blob/master/crates/arroyo-planner/src/test/queries/median_variance.sql
-- expected: worked out from the input by check_expected.py (an updating query: its changelog replayed)

CREATE TABLE nexmark (
  bid STRUCT<auction BIGINT, bidder BIGINT, price BIGINT, channel VARCHAR, url VARCHAR, datetime TIMESTAMP(3), extra VARCHAR>,
  event_time TIMESTAMP(3),
  WATERMARK FOR event_time AS event_time - INTERVAL '1' SECOND
) WITH (connector = 'file', path = '${DATA}/arroyo_nexmark.ndjson');

SELECT
    median(bid.auction) AS median_auction,
    variance(bid.auction) AS variance_auction
FROM
    nexmark
WHERE
    bid IS NOT NULL;
