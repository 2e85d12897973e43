-- Nexmark q18 (each bidder's last bid per auction: deduplication keeping the last), in the Nexmark suite's Flink form
-- (github.com/nexmark/nexmark, nexmark-flink/src/main/resources/queries/q18.sql);
-- reads the views of ddl.sql.
CREATE TABLE nexmark_q18 (
  auction BIGINT, bidder BIGINT, price BIGINT, channel VARCHAR, url VARCHAR,
  `dateTime` TIMESTAMP(3), extra VARCHAR
) WITH ('connector' = 'blackhole');

INSERT INTO nexmark_q18
SELECT auction, bidder, price, channel, url, `dateTime`, extra
FROM (
    SELECT *, ROW_NUMBER() OVER (PARTITION BY bidder, auction ORDER BY `dateTime` DESC) AS rank_number
    FROM bid
)
WHERE rank_number <= 1;
