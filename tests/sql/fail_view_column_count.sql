-- fail: fail_view_column_count.sql:8:1: view 'spend' names 2 columns but its query has 3
CREATE TABLE clicks (
  user_id VARCHAR NOT NULL,
  page    VARCHAR NOT NULL,
  amount  DOUBLE
) WITH (connector = 'file', path = '${DATA}/clicks.ndjson');

CREATE VIEW spend (who, what) AS SELECT user_id, page, amount FROM clicks;
SELECT who FROM spend;
