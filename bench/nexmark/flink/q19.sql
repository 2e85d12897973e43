-- Nexmark q19 (the ten highest bids per auction: Top-N), in the Nexmark suite's Flink form
-- (github.com/nexmark/nexmark, nexmark-flink/src/main/resources/queries/q19.sql);
-- reads the views of ddl.sql.
CREATE TABLE nexmark_q19 (
  auction BIGINT, bidder BIGINT, price BIGINT, channel VARCHAR, url VARCHAR,
  `dateTime` TIMESTAMP(3), extra VARCHAR, rank_number BIGINT
) WITH ('connector' = 'blackhole');

INSERT INTO nexmark_q19
SELECT * FROM (
    SELECT *, ROW_NUMBER() OVER (PARTITION BY auction ORDER BY price DESC) AS rank_number FROM bid
)
WHERE rank_number <= 10;
