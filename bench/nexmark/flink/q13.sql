-- Nexmark q13 (bounded side input join: a processing-time lookup join), in the Nexmark suite's Flink form
-- (github.com/nexmark/nexmark, nexmark-flink/src/main/resources/queries/q13.sql);
-- reads the views of ddl.sql.
-- The suite reads its side input with Flink's legacy CSV filesystem
-- options; here it is an NDJSON file of {"key": ..., "value": ...} lines
-- (side_input.ndjson beside this file, keys 0..9999), read whole before
-- any bid is joined.
CREATE TABLE side_input (
  key BIGINT,
  `value` VARCHAR
) WITH (
  'connector' = 'filesystem',
  'path' = '${SIDE_INPUT:bench/nexmark/flink/side_input.ndjson}',
  'format' = 'json'
);

CREATE TABLE nexmark_q13 (
  auction BIGINT, bidder BIGINT, price BIGINT, `dateTime` TIMESTAMP(3), `value` VARCHAR
) WITH ('connector' = 'blackhole');

INSERT INTO nexmark_q13
SELECT B.auction, B.bidder, B.price, B.`dateTime`, S.`value`
FROM (SELECT *, PROCTIME() AS p_time FROM bid) B
JOIN side_input FOR SYSTEM_TIME AS OF B.p_time AS S
ON mod(B.auction, 10000) = S.key;
