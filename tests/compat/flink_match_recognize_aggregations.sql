-- origin: https://nightlies.apache.org/flink/flink-docs-release-1.20/docs/dev/table/sql/queries/match_recognize/ (Aggregations)
-- expected: the result table printed on the origin page (AVG of a BIGINT is a DOUBLE in eddy, as the page prints 14.5)

CREATE TABLE Ticker (
  symbol STRING,
  rowtime TIMESTAMP(3),
  price BIGINT,
  tax BIGINT,
  WATERMARK FOR rowtime AS rowtime - INTERVAL '1' SECOND
) WITH (connector = 'file', path = '${DATA}/ticker_average.ndjson');

SELECT *
FROM Ticker
    MATCH_RECOGNIZE (
        PARTITION BY symbol
        ORDER BY rowtime
        MEASURES
            FIRST(A.rowtime) AS start_tstamp,
            LAST(A.rowtime) AS end_tstamp,
            AVG(A.price) AS avgPrice
        ONE ROW PER MATCH
        AFTER MATCH SKIP PAST LAST ROW
        PATTERN (A+ B)
        DEFINE
            A AS AVG(A.price) < 15
    ) MR;
