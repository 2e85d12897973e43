-- fail: fail_mini_batch_size.sql:2:1: SET table.exec.mini-batch.size: 'lots' is not a number of rows
SET 'table.exec.mini-batch.size' = 'lots';
CREATE TABLE clicks (
  user_id VARCHAR NOT NULL
) WITH (connector = 'file', path = '${DATA}/clicks.ndjson');
SELECT user_id FROM clicks;
