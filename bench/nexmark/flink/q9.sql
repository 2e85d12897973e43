-- Nexmark q9 (winning bids: Top-1 per auction over a join), in the Nexmark suite's Flink form
-- (github.com/nexmark/nexmark, nexmark-flink/src/main/resources/queries/q9.sql);
-- reads the views of ddl.sql.
CREATE TABLE nexmark_q9 (
  id BIGINT, itemName VARCHAR, description VARCHAR, initialBid BIGINT, reserve BIGINT,
  `dateTime` TIMESTAMP(3), expires TIMESTAMP(3), seller BIGINT, category BIGINT, extra VARCHAR,
  auction BIGINT, bidder BIGINT, price BIGINT, bid_dateTime TIMESTAMP(3), bid_extra VARCHAR
) WITH ('connector' = 'blackhole');

INSERT INTO nexmark_q9
SELECT id, itemName, description, initialBid, reserve, `dateTime`, expires, seller, category, extra,
       auction, bidder, price, bid_dateTime, bid_extra
FROM (
    SELECT A.*, B.auction, B.bidder, B.price, B.`dateTime` AS bid_dateTime, B.extra AS bid_extra,
           ROW_NUMBER() OVER (PARTITION BY A.id ORDER BY B.price DESC, B.`dateTime` ASC) AS rownum
    FROM auction A, bid B
    WHERE A.id = B.auction AND B.`dateTime` BETWEEN A.`dateTime` AND A.expires
)
WHERE rownum <= 1;
