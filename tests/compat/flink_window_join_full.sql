-- origin: https://nightlies.apache.org/flink/flink-docs-release-1.20/docs/dev/table/sql/queries/window-join/ (FULL OUTER JOIN)
-- expected: the result table printed on the origin page

CREATE TABLE LeftTable (row_time TIMESTAMP(3), num INT, id STRING,
  WATERMARK FOR row_time AS row_time - INTERVAL '1' SECOND) WITH (connector = 'file', path = '${DATA}/left.ndjson');
CREATE TABLE RightTable (row_time TIMESTAMP(3), num INT, id STRING,
  WATERMARK FOR row_time AS row_time - INTERVAL '1' SECOND) WITH (connector = 'file', path = '${DATA}/right.ndjson');

SELECT L.num as L_Num, L.id as L_Id, R.num as R_Num, R.id as R_Id,
        COALESCE(L.window_start, R.window_start) as window_start,
        COALESCE(L.window_end, R.window_end) as window_end
        FROM (
            SELECT * FROM TABLE(TUMBLE(TABLE LeftTable, DESCRIPTOR(row_time), INTERVAL '5' MINUTES))
        ) L
        FULL JOIN (
            SELECT * FROM TABLE(TUMBLE(TABLE RightTable, DESCRIPTOR(row_time), INTERVAL '5' MINUTES))
        ) R
        ON L.num = R.num AND L.window_start = R.window_start AND L.window_end = R.window_end;
