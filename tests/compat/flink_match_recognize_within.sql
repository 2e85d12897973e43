-- origin: https://nightlies.apache.org/flink/flink-docs-release-1.20/docs/dev/table/sql/queries/match_recognize/ (Time constraint; the page's DEFINE lacks the comma between B and C, added here)
-- expected: the result table printed on the origin page (a match of exactly the WITHIN interval counts: 12:00 to 13:00)

CREATE TABLE Ticker (
  symbol STRING,
  rowtime TIMESTAMP(3),
  price BIGINT,
  tax BIGINT,
  WATERMARK FOR rowtime AS rowtime - INTERVAL '1' SECOND
) WITH (connector = 'file', path = '${DATA}/ticker_hourly.ndjson');

SELECT *
FROM Ticker
    MATCH_RECOGNIZE(
        PARTITION BY symbol
        ORDER BY rowtime
        MEASURES
            C.rowtime AS dropTime,
            A.price - C.price AS dropDiff
        ONE ROW PER MATCH
        AFTER MATCH SKIP PAST LAST ROW
        PATTERN (A B* C) WITHIN INTERVAL '1' HOUR
        DEFINE
            B AS B.price > A.price - 10,
            C AS C.price < A.price - 10
    );
