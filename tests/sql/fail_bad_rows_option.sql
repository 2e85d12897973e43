-- fail: fail_bad_rows_option.sql:2:1: bad_rows: 'skip' is not one of 'dead_letter', 'drop', 'fail'
CREATE TABLE clicks (
  user_id VARCHAR NOT NULL,
  page    VARCHAR NOT NULL,
  amount  DOUBLE,
  ts      BIGINT
) WITH (connector = 'file', path = '${DATA}/clicks.ndjson', bad_rows = 'skip');

SELECT user_id FROM clicks;
