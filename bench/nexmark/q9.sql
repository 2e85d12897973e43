-- Nexmark q9, winning bids: each auction with its winning bid (the highest,
-- the earliest of equal ones, made while the auction was open), as the
-- Nexmark repository's q9.sql writes it (columns in snake case). An updating
-- query: a Top-1 per auction over a join that keeps auctions and bids; a
-- higher bid replaces the auction's row (-U, +U).
CREATE TABLE auction (
  id BIGINT NOT NULL, item_name VARCHAR, description VARCHAR, initial_bid BIGINT, reserve BIGINT,
  date_time TIMESTAMP NOT NULL, expires TIMESTAMP, seller BIGINT NOT NULL, category BIGINT NOT NULL, extra VARCHAR,
  WATERMARK FOR date_time AS date_time - INTERVAL '4' SECOND
) WITH (connector = 'nexmark', stream = 'auction', events = '${EVENTS:10000000}', rate = '${RATE:10000}');

CREATE TABLE bid (
  auction BIGINT NOT NULL, bidder BIGINT NOT NULL, price BIGINT NOT NULL,
  channel VARCHAR, url VARCHAR, date_time TIMESTAMP NOT NULL, extra VARCHAR,
  WATERMARK FOR date_time AS date_time - INTERVAL '4' SECOND
) WITH (connector = 'nexmark', stream = 'bid', events = '${EVENTS:10000000}', rate = '${RATE:10000}');

CREATE TABLE q9 (
  id BIGINT, item_name VARCHAR, description VARCHAR, initial_bid BIGINT, reserve BIGINT,
  date_time TIMESTAMP, expires TIMESTAMP, seller BIGINT, category BIGINT, extra VARCHAR,
  auction BIGINT, bidder BIGINT, price BIGINT, bid_date_time TIMESTAMP, bid_extra VARCHAR
) WITH (connector = '${SINK:blackhole}');

INSERT INTO q9
SELECT
    id, item_name, description, initial_bid, reserve, date_time, expires, seller, category, extra,
    auction, bidder, price, bid_date_time, bid_extra
FROM (
    SELECT A.*, B.auction, B.bidder, B.price, B.date_time AS bid_date_time, B.extra AS bid_extra,
      ROW_NUMBER() OVER (PARTITION BY A.id ORDER BY B.price DESC, B.date_time ASC) AS rownum
    FROM auction A, bid B
    WHERE A.id = B.auction AND B.date_time BETWEEN A.date_time AND A.expires
)
WHERE rownum <= 1;
