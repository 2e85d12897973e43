-- Nexmark q20 (bids with their auction: a regular join with a filter), in the Nexmark suite's Flink form
-- (github.com/nexmark/nexmark, nexmark-flink/src/main/resources/queries/q20.sql);
-- reads the views of ddl.sql.
CREATE TABLE nexmark_q20 (
  auction BIGINT, bidder BIGINT, price BIGINT, channel VARCHAR, url VARCHAR,
  bid_dateTime TIMESTAMP(3), bid_extra VARCHAR,
  itemName VARCHAR, description VARCHAR, initialBid BIGINT, reserve BIGINT,
  auction_dateTime TIMESTAMP(3), expires TIMESTAMP(3), seller BIGINT, category BIGINT,
  auction_extra VARCHAR
) WITH ('connector' = 'blackhole');

INSERT INTO nexmark_q20
SELECT auction, bidder, price, channel, url, B.`dateTime`, B.extra,
       itemName, description, initialBid, reserve, A.`dateTime`, expires, seller, category, A.extra
FROM bid AS B INNER JOIN auction AS A ON B.auction = A.id
WHERE A.category = 10;
