-- Nexmark q0, pass-through: every bid as it comes (the cost of reading and writing).
-- eddy run bench/nexmark/q0.sql --set EVENTS=10000000   (SINK=stdout prints the rows)
CREATE TABLE bid (
  auction BIGINT NOT NULL, bidder BIGINT NOT NULL, price BIGINT NOT NULL,
  channel VARCHAR, url VARCHAR, date_time TIMESTAMP NOT NULL, extra VARCHAR,
  WATERMARK FOR date_time AS date_time - INTERVAL '4' SECOND
) WITH (connector = 'nexmark', stream = 'bid', events = '${EVENTS:10000000}', rate = '${RATE:10000}');

CREATE TABLE q0 (auction BIGINT, bidder BIGINT, price BIGINT, date_time TIMESTAMP, extra VARCHAR)
  WITH (connector = '${SINK:blackhole}');

INSERT INTO q0 SELECT auction, bidder, price, date_time, extra FROM bid;
