-- origin: https://github.com/ArroyoSystems/arroyo/blob/addb390a7ac9efd52097a6b73167c481ce9b82c0/crates/arroyo-sql-testing/src/test/queries/json_operators.sql
CREATE TABLE cars (
    value JSON
) WITH (
    connector = 'single_file',
    path = '$input_dir/cars.json',
    format = 'json',
    type = 'source',
    'json.unstructured' = 'true'
);

CREATE TABLE sink WITH (
      connector = 'single_file',
      path = '$output_path',
      format = 'json',
      type = 'sink'
);


insert into sink
select 'test' as a, value->'driver_id' as b, value->'event_type' as c, value->'not_a_field' as d
from cars;