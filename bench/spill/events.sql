-- bench/spill_flink.sh's events (bench/spill_input.py group): a key drawn
-- uniformly and a value, as Flink SQL declares an NDJSON file (or a
-- directory of them). eddy and Apache Flink run these files as they are.
CREATE TABLE events (k STRING, v BIGINT)
WITH ('connector' = 'filesystem', 'path' = '${EVENTS_PATH}', 'format' = 'json');
