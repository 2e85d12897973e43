-- fail: fail_identifier_case.sql:6:8: column 'eventtime' not found; possible column clicks.eventTime; unquoted names are folded to lower case: write "eventTime" (quoted), or SET 'sql.case-sensitive' = 'true'
CREATE TABLE clicks (
  user_id VARCHAR NOT NULL,
  `eventTime` TIMESTAMP(3)
) WITH (connector = 'file', path = '${DATA}/clicks.ndjson');
SELECT eventTime FROM clicks;
