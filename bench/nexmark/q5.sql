-- Nexmark q5, hot items: every 2 seconds, the auctions with the most bids
-- over the last 10 seconds (a hopping count per auction, its greatest count
-- per window, and a window join of the two).
CREATE TABLE bid (
  auction BIGINT NOT NULL, bidder BIGINT NOT NULL, price BIGINT NOT NULL,
  channel VARCHAR, url VARCHAR, date_time TIMESTAMP NOT NULL, extra VARCHAR,
  WATERMARK FOR date_time AS date_time - INTERVAL '4' SECOND
) WITH (connector = 'nexmark', stream = 'bid', events = '${EVENTS:10000000}', rate = '${RATE:10000}');

CREATE TABLE q5 (auction BIGINT, num BIGINT, starttime TIMESTAMP, endtime TIMESTAMP)
  WITH (connector = '${SINK:blackhole}');

CREATE VIEW auction_bids AS
SELECT auction, count(*) AS num, window_start AS starttime, window_end AS endtime
FROM TABLE(HOP(TABLE bid, DESCRIPTOR(date_time), INTERVAL '2' SECOND, INTERVAL '10' SECOND))
GROUP BY auction, window_start, window_end;

INSERT INTO q5
SELECT AuctionBids.auction, AuctionBids.num, AuctionBids.starttime, AuctionBids.endtime
FROM auction_bids AS AuctionBids
JOIN (
  SELECT max(num) AS maxn, starttime, endtime
  FROM auction_bids
  GROUP BY starttime, endtime
) AS MaxBids
ON AuctionBids.starttime = MaxBids.starttime
  AND AuctionBids.endtime = MaxBids.endtime
  AND AuctionBids.num >= MaxBids.maxn;
