-- A view shared by two outputs; a parameter with a default.
CREATE TABLE clicks (
  user_id VARCHAR,
  page    VARCHAR,
  amount  DOUBLE,
  ts      BIGINT,
  event_time TIMESTAMP GENERATED ALWAYS AS (to_timestamp_millis(ts)) STORED,
  WATERMARK FOR event_time AS event_time - INTERVAL '2' SECOND
) WITH (connector = 'file', path = '${DATA}/clicks.ndjson', format = 'json');

CREATE VIEW checkout AS SELECT user_id, amount, event_time FROM clicks WHERE page <> '${SKIP_PAGE:home}';

CREATE TABLE per_user (window_start TIMESTAMP, user_id VARCHAR, n BIGINT) WITH (connector = 'stdout', tag = 'PER_USER');
CREATE TABLE overall (window_start TIMESTAMP, n BIGINT, biggest DOUBLE) WITH (connector = 'stdout', tag = 'OVERALL');

INSERT INTO per_user
SELECT w.start, user_id, n FROM (SELECT tumble(INTERVAL '10' SECOND) AS w, user_id, count(*) AS n FROM checkout GROUP BY w, user_id);

INSERT INTO overall
SELECT w.start, n, biggest FROM (SELECT tumble(INTERVAL '10' SECOND) AS w, count(*) AS n, max(amount) AS biggest FROM checkout GROUP BY w);
