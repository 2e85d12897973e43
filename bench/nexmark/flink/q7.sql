-- Nexmark q7 (highest bid per 10-second window), in the Nexmark suite's Flink form
-- (github.com/nexmark/nexmark, nexmark-flink/src/main/resources/queries/q7.sql);
-- reads the views of ddl.sql.
CREATE TABLE nexmark_q7 (
  auction BIGINT, bidder BIGINT, price BIGINT, `dateTime` TIMESTAMP(3), extra VARCHAR
) WITH ('connector' = 'blackhole');

-- As the suite writes it: price and bidder go to the sink's bidder and
-- price columns in that order.
INSERT INTO nexmark_q7
SELECT B.auction, B.price, B.bidder, B.`dateTime`, B.extra
FROM bid B
JOIN (
    SELECT MAX(price) AS maxprice, window_end AS `dateTime`
    FROM TABLE(TUMBLE(TABLE bid, DESCRIPTOR(`dateTime`), INTERVAL '10' SECOND))
    GROUP BY window_start, window_end
) B1
ON B.price = B1.maxprice
WHERE B.`dateTime` BETWEEN B1.`dateTime` - INTERVAL '10' SECOND AND B1.`dateTime`;
