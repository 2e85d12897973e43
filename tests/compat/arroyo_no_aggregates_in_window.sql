-- origin: https://github.com/ArroyoSystems/arroyo/blob/master/crates/arroyo-planner/src/test/queries/test_no_aggregates_in_window.sql
-- expected: worked out from the input by check_expected.py (the view drops the event time; it is carried to the window, as Arroyo carries it)

CREATE TABLE nexmark (
  bid STRUCT<auction BIGINT, bidder BIGINT, price BIGINT, channel VARCHAR, url VARCHAR, datetime TIMESTAMP(3), extra VARCHAR>,
  event_time TIMESTAMP(3),
  WATERMARK FOR event_time AS event_time - INTERVAL '1' SECOND
) WITH (connector = 'file', path = '${DATA}/arroyo_nexmark.ndjson');

WITH bids as (
  SELECT bid.auction as auction, bid.price as price, bid.bidder as bidder, bid.extra as extra, bid.datetime as datetime
  FROM nexmark where bid is not null)

SELECT * FROM (
SELECT bidder, COUNT( distinct auction) as distinct_auctions
FROM bids B1
GROUP BY bidder, HOP(INTERVAL '3 second', INTERVAL '10' minute)) WHERE distinct_auctions > 2;
