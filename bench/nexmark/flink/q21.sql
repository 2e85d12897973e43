-- Nexmark q21 (channel ids: CASE and REGEXP_EXTRACT), in the Nexmark suite's Flink form
-- (github.com/nexmark/nexmark, nexmark-flink/src/main/resources/queries/q21.sql);
-- reads the views of ddl.sql.
CREATE TABLE nexmark_q21 (
  auction BIGINT, bidder BIGINT, price BIGINT, channel VARCHAR, channel_id VARCHAR
) WITH ('connector' = 'blackhole');

INSERT INTO nexmark_q21
SELECT auction, bidder, price, channel,
    CASE
        WHEN lower(channel) = 'apple' THEN '0'
        WHEN lower(channel) = 'google' THEN '1'
        WHEN lower(channel) = 'facebook' THEN '2'
        WHEN lower(channel) = 'baidu' THEN '3'
        ELSE REGEXP_EXTRACT(url, '(&|^)channel_id=([^&]*)', 2)
    END AS channel_id
FROM bid
WHERE REGEXP_EXTRACT(url, '(&|^)channel_id=([^&]*)', 2) IS NOT NULL
   OR lower(channel) IN ('apple', 'google', 'facebook', 'baidu');
