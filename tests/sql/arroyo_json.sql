-- JSON as Arroyo's users query it: `->` (a JSON value, written as its JSON
-- text), `->>` (text), the json_get family, and the JSONPath functions
-- extract_json (every match), extract_json_string (the first string) and
-- get_first_json_object. `->>` binds tighter than `=`, as in PostgreSQL.
CREATE TABLE docs (id BIGINT, payload JSON, ts BIGINT)
  WITH (connector = 'file', path = '${DATA}/json_payloads.ndjson');

CREATE TABLE fields WITH (connector = 'stdout', tag = 'FIELDS');

INSERT INTO fields
SELECT id,
       payload->'user' AS user_json,
       payload->'user'->>'name' AS name,
       json_get_str(payload, 'user', 'name') AS name_again,
       json_get_int(payload, 'items', 1) AS second_item,
       extract_json(payload, '$.items[*]') AS items,
       extract_json_string(payload, '$.user.name') AS first_name,
       get_first_json_object(payload, '$.items') AS items_json
FROM docs;

SELECT id FROM docs WHERE payload->'user'->>'name' = 'bob';
