-- Functions and statements Flink users write: TO_TIMESTAMP_LTZ for event
-- time, MOD, DATE_FORMAT with a Java pattern, TIMESTAMPDIFF/TIMESTAMPADD
-- with unit keywords, VARIANCE (= VAR_SAMP), JSON_VALUE (who = user_id,
-- second = "7"), BEGIN STATEMENT SET ... END.
-- First row by hand: ts 1699999999130 -> 2023-11-14 22:13:19.130,
-- ms 130, 0 s since 22:13:20 (-0.87 s truncates to 0), +90 min 23:43:19.130.
CREATE TABLE clicks (
  user_id VARCHAR NOT NULL,
  page    VARCHAR NOT NULL,
  amount  DOUBLE,
  ts      BIGINT,
  event_time TIMESTAMP(3) GENERATED ALWAYS AS (TO_TIMESTAMP_LTZ(ts, 3)) STORED,
  WATERMARK FOR event_time AS event_time - INTERVAL '2' SECOND
) WITH (connector = 'file', path = '${DATA}/clicks.ndjson');

CREATE TABLE times (user_id VARCHAR, ms BIGINT, at VARCHAR, since BIGINT, later TIMESTAMP(3), months BIGINT)
  WITH (connector = 'stdout', tag = 'TIMES');
CREATE TABLE spread (window_start TIMESTAMP(3), v DOUBLE, same BOOLEAN)
  WITH (connector = 'stdout', tag = 'SPREAD');

CREATE TABLE json (user_id VARCHAR, who VARCHAR, second VARCHAR)
  WITH (connector = 'stdout', tag = 'JSON');

BEGIN STATEMENT SET;
INSERT INTO json
SELECT user_id, JSON_VALUE(CONCAT('{"user": {"id": "', user_id, '"}, "pages": ["', page, '", 7]}'), '$.user.id'),
       JSON_VALUE(CONCAT('{"pages": ["', page, '", 7]}'), '$.pages[1]')
FROM clicks WHERE amount > 30;
INSERT INTO times
SELECT user_id, MOD(ts, 1000), DATE_FORMAT(event_time, 'yyyy-MM-dd HH:mm:ss.SSS'),
       TIMESTAMPDIFF(SECOND, TO_TIMESTAMP_LTZ(1700000000, 0), event_time),
       TIMESTAMPADD(MINUTE, 90, event_time),
       TIMESTAMPDIFF(MONTH, event_time, TIMESTAMPADD(YEAR, 1, event_time))
FROM clicks;
INSERT INTO spread
SELECT w.start, round(v, 6), same FROM (
  SELECT tumble(INTERVAL '5' SECOND) AS w, variance(amount) AS v,
         variance(amount) IS NOT DISTINCT FROM var_samp(amount) AS same
  FROM clicks GROUP BY w);
END;
