-- origin: https://github.com/ArroyoSystems/arroyo/blob/addb390a7ac9efd52097a6b73167c481ce9b82c0/crates/arroyo-sql-testing/src/test/queries/debezium_agg.sql
--pk=id
CREATE TABLE debezium_source (
    id INT PRIMARY KEY,
    customer_name TEXT,
    product_name TEXT,
    quantity INTEGER,
    price FLOAT,
    order_date TIMESTAMP,
    status TEXT
) WITH (
    connector = 'single_file',
    path = '$input_dir/aggregate_updates.json',
    format = 'debezium_json',
    type = 'source'
);

CREATE TABLE output (
    id TEXT PRIMARY KEY,
    c INT,
    d INT,
    q INT
) WITH (
    connector = 'single_file',
    path = '$output_path',
    format = 'debezium_json',
    type = 'sink'
);

INSERT INTO output
SELECT concat('p_', product_name), count(*), count(distinct customer_name), sum(quantity + 5) + 10
FROM debezium_source
group by concat('p_', product_name);