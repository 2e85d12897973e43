-- origin: https://github.com/ArroyoSystems/arroyo/blob/master/crates/arroyo-planner/src/test/queries/error_mismatched_nested_windows.sql (an error in Arroyo; eddy runs the cascade)
-- expected: worked out from the input by check_expected.py

CREATE TABLE nexmark (
  bid STRUCT<auction BIGINT, bidder BIGINT, price BIGINT, channel VARCHAR, url VARCHAR, datetime TIMESTAMP(3), extra VARCHAR>,
  event_time TIMESTAMP(3),
  WATERMARK FOR event_time AS event_time - INTERVAL '1' SECOND
) WITH (connector = 'file', path = '${DATA}/arroyo_nexmark.ndjson');

SELECT
    count(*) as auctions,
    tumble(interval '2 minute') as second_window
FROM
    (
        SELECT
            bid.auction as auction,
            tumble(interval '1 minute') as window,
            count(*) as count
        FROM
            nexmark
        where
            bid is not null
        GROUP BY
            1,
            2
    )
GROUP BY
    2;
