-- fail: fail_option_twice.sql:2:1: option 'path' is given twice in the WITH clause of table 'clicks'
CREATE TABLE clicks (
  user_id VARCHAR NOT NULL
) WITH (connector = 'file', path = '${DATA}/clicks.ndjson', path = '${DATA}/signups.ndjson');
SELECT user_id FROM clicks;
