-- origin: https://github.com/ArroyoSystems/arroyo/blob/master/crates/arroyo-planner/src/test/queries/hop_to_tumble.sql
-- expected: worked out from the input by check_expected.py

CREATE TABLE impulse (
  counter BIGINT, subtask_index BIGINT, ts BIGINT,
  event_time AS TO_TIMESTAMP_LTZ(ts, 3),
  WATERMARK FOR event_time AS event_time - INTERVAL '1' SECOND
) WITH (connector = 'file', path = '${DATA}/impulse.ndjson');

select count(*) from impulse
group by hop(interval '10 seconds', interval '10 seconds');
