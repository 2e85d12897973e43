-- Nexmark q16 (channel statistics per day), in the Nexmark suite's Flink form
-- (github.com/nexmark/nexmark, nexmark-flink/src/main/resources/queries/q16.sql);
-- reads the views of ddl.sql.
CREATE TABLE nexmark_q16 (
  channel VARCHAR, `day` VARCHAR, `minute` VARCHAR,
  total_bids BIGINT, rank1_bids BIGINT, rank2_bids BIGINT, rank3_bids BIGINT,
  total_bidders BIGINT, rank1_bidders BIGINT, rank2_bidders BIGINT, rank3_bidders BIGINT,
  total_auctions BIGINT, rank1_auctions BIGINT, rank2_auctions BIGINT, rank3_auctions BIGINT
) WITH ('connector' = 'blackhole');

INSERT INTO nexmark_q16
SELECT
    channel,
    DATE_FORMAT(`dateTime`, 'yyyy-MM-dd') AS `day`,
    max(DATE_FORMAT(`dateTime`, 'HH:mm')) AS `minute`,
    count(*) AS total_bids,
    count(*) FILTER (WHERE price < 10000) AS rank1_bids,
    count(*) FILTER (WHERE price >= 10000 AND price < 1000000) AS rank2_bids,
    count(*) FILTER (WHERE price >= 1000000) AS rank3_bids,
    count(DISTINCT bidder) AS total_bidders,
    count(DISTINCT bidder) FILTER (WHERE price < 10000) AS rank1_bidders,
    count(DISTINCT bidder) FILTER (WHERE price >= 10000 AND price < 1000000) AS rank2_bidders,
    count(DISTINCT bidder) FILTER (WHERE price >= 1000000) AS rank3_bidders,
    count(DISTINCT auction) AS total_auctions,
    count(DISTINCT auction) FILTER (WHERE price < 10000) AS rank1_auctions,
    count(DISTINCT auction) FILTER (WHERE price >= 10000 AND price < 1000000) AS rank2_auctions,
    count(DISTINCT auction) FILTER (WHERE price >= 1000000) AS rank3_auctions
FROM bid
GROUP BY channel, DATE_FORMAT(`dateTime`, 'yyyy-MM-dd');
