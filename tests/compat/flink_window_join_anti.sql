-- origin: https://nightlies.apache.org/flink/flink-docs-release-1.20/docs/dev/table/sql/queries/window-join/ (ANTI: NOT IN)
-- expected: the result table printed on the origin page (an anti join: an updating query, its changelog replayed; the left rows of the semi join's complement)

CREATE TABLE LeftTable (row_time TIMESTAMP(3), num INT, id STRING,
  WATERMARK FOR row_time AS row_time - INTERVAL '1' SECOND) WITH (connector = 'file', path = '${DATA}/left.ndjson');
CREATE TABLE RightTable (row_time TIMESTAMP(3), num INT, id STRING,
  WATERMARK FOR row_time AS row_time - INTERVAL '1' SECOND) WITH (connector = 'file', path = '${DATA}/right.ndjson');

SELECT *
           FROM (
               SELECT * FROM TABLE(TUMBLE(TABLE LeftTable, DESCRIPTOR(row_time), INTERVAL '5' MINUTES))
           ) L WHERE L.num NOT IN (
             SELECT num FROM (
               SELECT * FROM TABLE(TUMBLE(TABLE RightTable, DESCRIPTOR(row_time), INTERVAL '5' MINUTES))
             ) R WHERE L.window_start = R.window_start AND L.window_end = R.window_end);
