-- Names read as written (Flink's rule) once 'sql.case-sensitive' is set:
-- an unquoted camel-case column reads the JSON key of that case, and a
-- struct field keeps its case through a view; an UNNEST join keeps its
-- table's mixed-case name.
SET 'sql.case-sensitive' = 'true';
CREATE TABLE events (
  userId VARCHAR,
  info ROW<deviceId BIGINT, osName VARCHAR>
) WITH (connector = 'values', rows = '{"userId": "a", "info": {"deviceId": 7, "osName": "linux"}}
{"userId": "b", "info": {"deviceId": 8, "osName": "mac"}}');
CREATE VIEW flat AS SELECT userId, info.deviceId, `info`.osName FROM events;
SELECT userId, deviceId, osName FROM flat;
CREATE TABLE Orders (id BIGINT, tagList VARCHAR) WITH (connector = 'values', rows = '{"id": 1, "tagList": "a,b"}');
SELECT O.id, u.tag FROM Orders AS O CROSS JOIN UNNEST(string_to_array(O.tagList, ',')) AS u(tag);
