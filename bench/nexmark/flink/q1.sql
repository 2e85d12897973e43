-- Nexmark q1 (currency conversion: dollars to euros), in the Nexmark suite's Flink form
-- (github.com/nexmark/nexmark, nexmark-flink/src/main/resources/queries/q1.sql);
-- reads the views of ddl.sql.
CREATE TABLE nexmark_q1 (
  auction BIGINT, bidder BIGINT, price DECIMAL(23, 3), `dateTime` TIMESTAMP(3), extra VARCHAR
) WITH ('connector' = 'blackhole');

INSERT INTO nexmark_q1
SELECT auction, bidder, 0.908 * price AS price, `dateTime`, extra
FROM bid;
