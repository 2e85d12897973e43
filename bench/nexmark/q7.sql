-- Nexmark q7, highest bid: the bids at the highest price of each 10-second window.
CREATE TABLE bid (
  auction BIGINT NOT NULL, bidder BIGINT NOT NULL, price BIGINT NOT NULL,
  channel VARCHAR, url VARCHAR, date_time TIMESTAMP NOT NULL, extra VARCHAR,
  WATERMARK FOR date_time AS date_time - INTERVAL '4' SECOND
) WITH (connector = 'nexmark', stream = 'bid', events = '${EVENTS:10000000}', rate = '${RATE:10000}');

CREATE TABLE q7 (auction BIGINT, price BIGINT, bidder BIGINT, date_time TIMESTAMP, extra VARCHAR)
  WITH (connector = '${SINK:blackhole}');

INSERT INTO q7
SELECT B.auction, B.price, B.bidder, B.date_time, B.extra
FROM bid B
JOIN (
  SELECT max(price) AS maxprice, window_end AS date_time
  FROM TABLE(TUMBLE(TABLE bid, DESCRIPTOR(date_time), INTERVAL '10' SECOND))
  GROUP BY window_start, window_end
) B1
ON B.price = B1.maxprice
WHERE B.date_time >= B1.date_time - INTERVAL '10' SECOND AND B.date_time < B1.date_time;
