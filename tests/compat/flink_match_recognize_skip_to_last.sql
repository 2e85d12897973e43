-- origin: https://nightlies.apache.org/flink/flink-docs-release-1.20/docs/dev/table/sql/queries/match_recognize/ (After Match Strategy, SKIP TO LAST A)
-- expected: the result table printed on the origin page, and one row more: (7, 10:00:06, 10:00:07), for the reason given in flink_match_recognize_skip_to_next_row.sql

CREATE TABLE Ticker (
  symbol STRING,
  rowtime TIMESTAMP(3),
  price BIGINT,
  tax BIGINT,
  WATERMARK FOR rowtime AS rowtime - INTERVAL '1' SECOND
) WITH (connector = 'file', path = '${DATA}/ticker_skip.ndjson');

SELECT *
FROM Ticker
    MATCH_RECOGNIZE(
        PARTITION BY symbol
        ORDER BY rowtime
        MEASURES
            SUM(A.price) AS sumPrice,
            FIRST(rowtime) AS startTime,
            LAST(rowtime) AS endTime
        ONE ROW PER MATCH
        AFTER MATCH SKIP TO LAST A
        PATTERN (A+ C)
        DEFINE
            A AS SUM(A.price) < 30
    );
