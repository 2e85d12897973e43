-- Nexmark q4, average price for a category: the average winning bid (the
-- highest bid made while the auction was open) of each category's auctions,
-- as the Nexmark repository's q4.sql writes it (columns in snake case). An
-- updating query: the join keeps auctions and bids, the inner GROUP BY revises
-- an auction's final price as higher bids come, the outer one retracts the old
-- price from its category's average and adds the new one.
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

CREATE TABLE q4 (id BIGINT, final DOUBLE) WITH (connector = '${SINK:blackhole}');

INSERT INTO q4
SELECT
    Q.category,
    AVG(Q.final)
FROM (
    SELECT MAX(B.price) AS final, A.category
    FROM auction A, bid B
    WHERE A.id = B.auction AND B.date_time BETWEEN A.date_time AND A.expires
    GROUP BY A.id, A.category
) Q
GROUP BY Q.category;
