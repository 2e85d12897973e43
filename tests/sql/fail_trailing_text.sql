-- fail: fail_trailing_text.sql:7:45: unexpected 'EMIT' after the end of the statement
-- Text after a complete statement is an error, never dropped.
CREATE TABLE clicks (
  user_id VARCHAR NOT NULL,
  amount  DOUBLE
) WITH (connector = 'file', path = '${DATA}/clicks.ndjson');
SELECT user_id FROM clicks WHERE amount > 3 EMIT SOMETHING ELSE;
