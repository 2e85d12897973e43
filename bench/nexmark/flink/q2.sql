-- Nexmark q2 (selection), in the Nexmark suite's Flink form
-- (github.com/nexmark/nexmark, nexmark-flink/src/main/resources/queries/q2.sql);
-- reads the views of ddl.sql.
CREATE TABLE nexmark_q2 (auction BIGINT, price BIGINT) WITH ('connector' = 'blackhole');

INSERT INTO nexmark_q2
SELECT auction, price FROM bid WHERE MOD(auction, 123) = 0;
