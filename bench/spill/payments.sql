-- bench/spill_flink.sh's payments (bench/spill_input.py join): each on an
-- order drawn uniformly.
CREATE TABLE payments (id STRING, paid BIGINT)
WITH ('connector' = 'filesystem', 'path' = '${PAYMENTS_PATH}', 'format' = 'json');
