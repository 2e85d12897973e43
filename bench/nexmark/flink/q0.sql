-- Nexmark q0 (pass-through), in the Nexmark suite's Flink form
-- (github.com/nexmark/nexmark, nexmark-flink/src/main/resources/queries/q0.sql);
-- reads the views of ddl.sql.
CREATE TABLE nexmark_q0 (
  auction BIGINT, bidder BIGINT, price BIGINT, `dateTime` TIMESTAMP(3), extra VARCHAR
) WITH ('connector' = 'blackhole');

INSERT INTO nexmark_q0
SELECT auction, bidder, price, `dateTime`, extra FROM bid;
