-- Nexmark q10 (log to file system), in the Nexmark suite's Flink form
-- (github.com/nexmark/nexmark, nexmark-flink/src/main/resources/queries/q10.sql);
-- reads the views of ddl.sql. Bids go to CSV files under
-- ${NEXMARK_DIR}/data/output/${SUBMIT_TIME}/bid/, one directory per day
-- and minute (dt=.../hm=...), rolled every minute.
--
-- The suite's partition-commit options ('sink.partition-commit.trigger',
-- '.delay', '.policy.kind' = 'success-file' and
-- 'partition.time-extractor.timestamp-pattern') are left out: eddy
-- publishes a partition's files at every checkpoint and writes no
-- _SUCCESS marker, and refuses options it would not honour.
CREATE TABLE nexmark_q10 (
  auction BIGINT,
  bidder BIGINT,
  price BIGINT,
  `dateTime` TIMESTAMP(3),
  extra VARCHAR,
  dt STRING,
  hm STRING
) PARTITIONED BY (dt, hm) WITH (
  'connector' = 'filesystem',
  'path' = 'file://${NEXMARK_DIR}/data/output/${SUBMIT_TIME}/bid/',
  'format' = 'csv',
  'sink.rolling-policy.rollover-interval' = '1min',
  'sink.rolling-policy.check-interval' = '1min'
);

INSERT INTO nexmark_q10
SELECT auction, bidder, price, `dateTime`, extra,
       DATE_FORMAT(`dateTime`, 'yyyy-MM-dd'), DATE_FORMAT(`dateTime`, 'HH:mm')
FROM bid;
