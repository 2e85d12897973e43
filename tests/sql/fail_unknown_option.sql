-- fail: fail_unknown_option.sql:3:1: table 'clicks': unknown option 'idel_timeout' for a file source; did you mean 'idle_timeout'?
-- A misspelt option is an error naming it, the closest valid one and the list.
CREATE TABLE clicks (
  user_id VARCHAR NOT NULL,
  page    VARCHAR NOT NULL,
  amount  DOUBLE,
  ts      BIGINT
) WITH (connector = 'file', path = '${DATA}/clicks.ndjson', idel_timeout = '1s');

SELECT user_id FROM clicks;
