-- Whether retention may empty the next finished part and make it current
-- (SPEC §24, docs/decisions/0030): the current part has taken completions
-- for a seventh of the retention, and the next part's era, which ended when
-- the part after it began, is older than the retention. One row, the next
-- part, or none. With eight parts, a completed job is kept at least the
-- retention and at most 8/7 of it.
SELECT n.slot
FROM awc.done_parts AS c
JOIN awc.done_parts AS n ON n.slot = (c.slot + 1) %% 8
JOIN awc.done_parts AS a ON a.slot = (c.slot + 2) %% 8
WHERE c.current
  AND coalesce(c.began, '-infinity') <= now() - make_interval(secs => %(after_secs)s::float8 / 7)
  AND coalesce(a.began, '-infinity') <= now() - make_interval(secs => %(after_secs)s::float8)
