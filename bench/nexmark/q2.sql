-- Nexmark q2, selection: the bids on a few auctions.
CREATE TABLE bid (
  auction BIGINT NOT NULL, bidder BIGINT NOT NULL, price BIGINT NOT NULL,
  channel VARCHAR, url VARCHAR, date_time TIMESTAMP NOT NULL, extra VARCHAR,
  WATERMARK FOR date_time AS date_time - INTERVAL '4' SECOND
) WITH (connector = 'nexmark', stream = 'bid', events = '${EVENTS:10000000}', rate = '${RATE:10000}');

CREATE TABLE q2 (auction BIGINT, price BIGINT) WITH (connector = '${SINK:blackhole}');

INSERT INTO q2 SELECT auction, price FROM bid WHERE auction % 123 = 0;
