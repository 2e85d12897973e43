-- Nexmark q1, currency conversion: bid prices from dollars to euros.
CREATE TABLE bid (
  auction BIGINT NOT NULL, bidder BIGINT NOT NULL, price BIGINT NOT NULL,
  channel VARCHAR, url VARCHAR, date_time TIMESTAMP NOT NULL, extra VARCHAR,
  WATERMARK FOR date_time AS date_time - INTERVAL '4' SECOND
) WITH (connector = 'nexmark', stream = 'bid', events = '${EVENTS:10000000}', rate = '${RATE:10000}');

CREATE TABLE q1 (auction BIGINT, bidder BIGINT, price DOUBLE, date_time TIMESTAMP, extra VARCHAR)
  WITH (connector = '${SINK:blackhole}');

INSERT INTO q1 SELECT auction, bidder, 0.908 * price AS price, date_time, extra FROM bid;
