-- Flink's mini-batch settings are accepted (eddy always moves rows in
-- batches): the results are those without them.
SET 'table.exec.mini-batch.enabled' = 'true';
SET 'table.exec.mini-batch.allow-latency' = '2 s';
SET 'table.exec.mini-batch.size' = '5000';
CREATE TABLE clicks (
  key     VARCHAR NOT NULL,
  index   VARCHAR NOT NULL,
  amount  DOUBLE,
  ts      BIGINT
) WITH (connector = 'file', path = '${DATA}/keyed_rows.ndjson');

SELECT key, amount FROM clicks WHERE amount > 10;
