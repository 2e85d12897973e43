-- origin: https://nightlies.apache.org/flink/flink-docs-release-1.20/docs/dev/table/sql/queries/match_recognize/ (After Match Strategy, SKIP PAST LAST ROW)
-- expected: the result table printed on the origin page

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
        AFTER MATCH SKIP PAST LAST ROW
        PATTERN (A+ C)
        DEFINE
            A AS SUM(A.price) < 30
    );
