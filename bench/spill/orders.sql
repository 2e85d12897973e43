-- bench/spill_flink.sh's orders (bench/spill_input.py join): distinct ids.
CREATE TABLE orders (id STRING, amount BIGINT)
WITH ('connector' = 'filesystem', 'path' = '${ORDERS_PATH}', 'format' = 'json');
